#!/usr/bin/env bash
# Written CPU-only in the fourteenth session, for the next GPU session (one call of
# about 5 minutes on an H100):
#  1. LayerNorm v12 candidate (tuning bwd_one_row: exact-layout backward row kernels of
#     one-row blocks with the row slot a compile-time constant; SASS fp16 N = 8192 353
#     -> 325 instructions a row) against the shipped kernels, the shipped run first
#     and last, N = 2304 (one group a thread) / 4096 / 5120 / 8192, fp16, bf16, float32;
#  2. its GPU tests (bit-identical to the general kernel at 4099 x 4096, 1000 x 8192,
#     333 x 5120), then memcheck and racecheck on the layer_norm workloads
#     (bench/sanitize.py runs bwd_one_row at N = 4096).
#   bash bench/ab/pending_s15.sh "$OUT"
# Then, on a two-GPU kind: python3 -m pytest -q tests/test_multi_gpu.py tests/test_ddp.py
set -uo pipefail
OUT=${1:?usage: pending_s15.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 5 200 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 30 \
  --ns 2304,4096,5120,8192 --dtypes float16,bfloat16,float32 \
  --tunes '{}' '{"bwd_one_row": true}' '{}' > "$OUT/ln_one_row_ab.log" 2>&1
echo "ln one_row rc $?"; tail -40 "$OUT/ln_one_row_ab.log"
TESTS="tests/test_layer_norm.py" SAN_OPS="layer_norm:float16 layer_norm:float32" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=170 \
  timeout -k 10 280 bash bench/gpu_harness.sh "$OUT/verify" --stages tests,sanitize --workers 14 \
  -k "one_row or layouts or wide or deterministic or schemes"
