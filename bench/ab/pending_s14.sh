#!/usr/bin/env bash
# Written CPU-only at the end of the thirteenth session, for the next GPU session:
#  1. dropout v7 candidate (LaunchConfig(tile_reduce="direct"): the bias-grad epilogue's
#     tiles summed by one thread a column, no shuffles) against the shipped path, fp16
#     and fp32 16384 x 4096, the shipped configuration first and last;
#  2. its GPU tests and memcheck/racecheck on the dropout workload (which runs it);
#  3. LayerNorm fwd_evict candidate (the lean forward's L1 eviction hints) A/B, its
#     tests, memcheck on the layer_norm workload;
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
timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 \
  tests/test_dropout.py -k "last_block_reduction or bad_launch_config" > "$OUT/tests.log" 2>&1
echo "tests rc $?"; tail -1 "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout -k 5 70 compute-sanitizer --tool $tool --report-api-errors no \
    python3 bench/sanitize.py dropout:float16 > "$OUT/$tool.log" 2>&1
  echo "$tool rc $?"; tail -1 "$OUT/$tool.log"
done
timeout -k 5 150 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 30 \
  --ns 1024,4096,8192 --dtypes float16,float32 --tunes '{}' '{"fwd_evict": true}' '{}' \
  > "$OUT/ln_evict_ab.log" 2>&1
echo "ln evict rc $?"; tail -9 "$OUT/ln_evict_ab.log"
timeout -k 5 100 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 \
  tests/test_layer_norm.py -k "evict_hints or dwdb_unroll" > "$OUT/ln_tests.log" 2>&1
echo "ln tests rc $?"; tail -1 "$OUT/ln_tests.log"
timeout -k 5 150 compute-sanitizer --tool memcheck --report-api-errors no \
  python3 bench/sanitize.py layer_norm:float16 > "$OUT/memcheck_ln.log" 2>&1
echo "memcheck ln rc $?"; tail -1 "$OUT/memcheck_ln.log"
bash bench/ab/liger_sass.sh "$OUT"
rm -f "$OUT"/dr_*/*.md
