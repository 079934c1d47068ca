#!/usr/bin/env bash
# Twenty-sixth session, H200, verification of dropout v8 (16-bit: the 'none'
# backward at four rows a batch, the gelu forward and silu at one) and LayerNorm v30
# (backward row kernels without the next row's prefetch at float32 N = 512 and 16-bit
# RMSNorm N = 512): the whole dropout sweep (issue #16's table and plots, one run),
# then test_dropout.py and the v30 test on the GPU, memcheck / racecheck of
# bench/sanitize.py's dropout (16-bit) and layer_norm_bwd (all dtypes) workloads.
# Predicted: dropout 'none' bwd fp16 / bf16 16384 x 4096 81 -> 78 us, gelu fwd 88-90
# -> 86-87, no sweep cell slower than torch. About 6 minutes.
#   bash bench/ab/s26_f.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s26_f.sh OUTDIR}
bash bench/ab/pending_sweep.sh "$OUT" float16,bfloat16,float32 | tail -60
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
V=$(mktemp -d)
TESTS="tests/test_dropout.py tests/test_layer_norm.py" \
  SAN_OPS="dropout:float16 dropout:bfloat16 layer_norm_bwd" SAN_TOOLS="memcheck racecheck" \
  SAN_TIMEOUT=150 timeout -k 10 300 bash bench/gpu_harness.sh "$V" --stages tests,sanitize \
  --workers 14 -k "test_dropout or prefetch" --timeout 150 > "$V/harness.out" 2>&1
echo "harness rc $?"
cat "$V/summary.md"
tar czf "$OUT/s26_f.tgz" -C "$V" .
