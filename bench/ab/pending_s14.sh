#!/usr/bin/env bash
# Written CPU-only at the end of the thirteenth session, for the next GPU session:
#  1. dropout v7 candidate (LaunchConfig(tile_reduce="direct"): the bias-grad epilogue's
#     tiles summed by one thread a column, no shuffles) against the shipped path, fp16
#     and fp32 16384 x 4096, the shipped configuration first and last;
#  2. LayerNorm fwd_evict candidate (the lean forward's L1 eviction hints) A/B;
#  3. both candidates' GPU tests, memcheck and racecheck (bench/gpu_harness.sh);
#  4. Liger's LayerNorm backward SASS beside ours (bench/ab/liger_sass.sh).
#   bash bench/ab/pending_s14.sh "$OUT"     (about 8 minutes on an H100; carry .whl)
set -uo pipefail
OUT=${1:?usage: pending_s14.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
for dt in float16 float32; do
  timeout -k 5 100 python3 bench/tune_dropout.py --out "$OUT/dr_$dt" --reps 30 --dtype $dt \
    --configs "shipped,tile=direct,shipped" > "$OUT/dropout_ab_$dt.log" 2>&1
  echo "dropout $dt rc $?"; grep "^| .* | bwd" "$OUT/dropout_ab_$dt.log"
done
timeout -k 5 150 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 30 \
  --ns 1024,4096,8192 --dtypes float16,float32 --tunes '{}' '{"fwd_evict": true}' '{}' \
  > "$OUT/ln_evict_ab.log" 2>&1
echo "ln evict rc $?"; tail -9 "$OUT/ln_evict_ab.log"
# Both candidates' GPU tests, then memcheck and racecheck on the dropout and layer_norm
# workloads (bench/sanitize.py runs tile_reduce="direct", fwd_evict and dwdb_unroll).
TESTS="tests/test_dropout.py tests/test_layer_norm.py" SAN_OPS="dropout:float16 layer_norm:float16" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=170 \
  timeout -k 10 260 bash bench/gpu_harness.sh "$OUT/verify" --stages tests,sanitize --workers 8 \
  -k "last_block_reduction or bad_launch_config or evict_hints or dwdb_unroll"
bash bench/ab/liger_sass.sh "$OUT"
rm -f "$OUT"/dr_*/*.md
