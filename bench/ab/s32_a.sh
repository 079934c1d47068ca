#!/usr/bin/env bash
# Thirty-second session: tuning bwd_pdl (the dW / dB kernel as a programmatic
# dependent launch of the backward row kernels) on the GPU: the A/B (default /
# bwd_pdl, two alternating passes) at the LayerNorm backwards the issue names, its
# tests, then memcheck / racecheck of sanitize.py's layer_norm_pdl workload.
#   bash bench/ab/s32_a.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: s32_a.sh OUTDIR}
. bench/ab/tl.sh
P='{"bwd_pdl": true}'
tl ln16 85 --reps 30 --op ln --ns 4096,8192 --dtypes float16 --tunes '{}' "$P" '{}' "$P"
tl ln32 50 --reps 30 --op ln --ns 4096 --dtypes float32 --tunes '{}' "$P" '{}' "$P"
cp "$TL_DIR"/*.log "$OUT/"
timeout -k 5 140 python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_layer_norm.py \
  -k "bwd_pdl" > "$OUT/pdl_tests.log" 2>&1
echo "tests rc $?"; tail -4 "$OUT/pdl_tests.log"
for tool in memcheck racecheck; do
  timeout -k 5 60 compute-sanitizer --tool "$tool" --report-api-errors no python3 bench/sanitize.py \
    layer_norm_pdl:float16 layer_norm_pdl:float32 > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc $?"; grep -E "ran|FAILED|SUMMARY" "$OUT/san_$tool.log"
done
