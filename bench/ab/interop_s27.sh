#!/usr/bin/env bash
# Issue #16's "through interop.torch as well as at the array level" on the H200, at
# dropout v10 / LayerNorm v31 (twenty-seventh session; the fifteenth session's
# interop_s15.sh on the H100 was the last such run): dropout at 16384 x 4096, then the
# norms at 16384 x 4096, 8192 x 8192 and 65536 x 1024, fp16 / bf16 / fp32, median of
# 30, our array-level entry beside interop.torch's custom ops (numba_torch), torch
# eager and torch.compile. About 4-5 minutes; the norms JSON is rewritten after every
# shape, so a cut-short run still leaves the shapes done.
#   bash bench/ab/interop_s27.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: interop_s27.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 10 100 python3 bench/dropout.py --shapes 16384x4096 \
  --dtypes float16,bfloat16,float32 --activations none,gelu \
  --providers numba,numba_torch,eager,compile --reps 30 --warmup 5 --no-memory \
  --json "$OUT/dropout_interop.json" > "$OUT/dropout_interop.log" 2>&1
echo "dropout rc $?"
timeout -k 10 220 python3 bench/layer_norm.py --ops layer_norm rms_norm \
  --dtypes float16 bfloat16 float32 --providers numba numba_torch torch compile \
  --shapes 16384x4096 8192x8192 65536x1024 --reps 30 --warmup 5 --no-memory \
  --json "$OUT/norms_interop.json" > "$OUT/norms_interop.log" 2>&1
echo "norms rc $?"
