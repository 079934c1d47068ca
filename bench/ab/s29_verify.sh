#!/usr/bin/env bash
# Twenty-ninth session, H200: verification of LayerNorm v32 as the default (16-bit
# one-row backward kernels of 8 / 16 warps sum across warps from shared memory) and of
# the retired candidates (lean compensated forward, uncompensated / pipelined staged
# forward, bwd_wide): the whole test_layer_norm.py on the GPU, then memcheck of
# bench/sanitize.py's layer_norm (fp16, float32: the staged and lean forwards it forces)
# and layer_norm_bwd (every dtype), racecheck of layer_norm float32 and layer_norm_bwd
# fp16. About 8 minutes.
#   bash bench/ab/s29_verify.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s29_verify.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
V=$(mktemp -d)
TESTS="tests/test_layer_norm.py" timeout -k 10 290 bash bench/gpu_harness.sh "$V" \
  --stages tests --workers 14 --timeout 200 > "$V/harness_tests.out" 2>&1
echo "tests rc $?"
SAN_OPS="layer_norm:float16 layer_norm:float32 layer_norm_bwd" SAN_TOOLS="memcheck" \
  SAN_TIMEOUT=150 timeout -k 10 170 bash bench/gpu_harness.sh "$V" --stages sanitize \
  > "$V/harness_memcheck.out" 2>&1
echo "memcheck rc $?"
SAN_OPS="layer_norm:float32 layer_norm_bwd:float16" SAN_TOOLS="racecheck" \
  SAN_TIMEOUT=90 timeout -k 10 110 bash bench/gpu_harness.sh "$V" --stages sanitize \
  > "$V/harness_racecheck.out" 2>&1
echo "racecheck rc $?"
cat "$V/summary.md"
grep -E "^(FAILED|ERROR)" "$V/pytest.log" | head -30
tar czf "$OUT/s29_verify.tgz" -C "$V" .
