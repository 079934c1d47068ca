#!/usr/bin/env bash
# Sixty-fourth session, v61 (the plain forward at widths off issue #16's sweep,
# layer_norm._PLAIN_OFFGRID) on the GPU in one call:
#   GPU tests of the plain kernel (test_layer_norm.py -k "v61 or plain or carveout"),
#   the norms sweep's forwards at the off-grid widths (both ops, every dtype; compare
#   bench/results/s64/offgrid.json, taken before v61), then memcheck / racecheck /
#   initcheck of bench/sanitize.py layer_norm_offgrid (every dtype). ~8 min.
#   bash bench/ab/pending_s64b.sh "$OUT"
set -uo pipefail
OUT=${1:?"usage: pending_s64b.sh OUTDIR"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
  tests/test_layer_norm.py -k "v61 or plain or carveout" > "$OUT/tests_v61.log" 2>&1
echo "tests rc $?"; tail -3 "$OUT/tests_v61.log"
. bench/ab/liger_env.sh || echo "liger wheel not installed"
timeout -k 10 250 python3 bench/layer_norm.py --ops layer_norm rms_norm \
  --dtypes float16 bfloat16 float32 --dirs fwd --providers numba torch compile liger \
  --shapes 74898x896 43690x1536 29127x2304 26214x2560 21845x3072 18724x3584 10922x6144 \
  9362x7168 6553x10240 4681x14336 --reps 30 --warmup 5 --no-memory --no-overhead \
  --json "$OUT/offgrid_v61.json" > "$OUT/offgrid_v61.log" 2>&1
echo "sweep rc $?"; python3 bench/sweep_table.py norms "$OUT/offgrid_v61.json"
SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-140} \
  bash bench/ab/san_pair.sh "$OUT" layer_norm_offgrid san_offgrid
