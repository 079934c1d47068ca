#!/usr/bin/env bash
# Issue #16's "through interop.torch as well as at the array level" at the target shape
# and two model widths, after LayerNorm v12 and dropout v7 (fifteenth session, about 4
# minutes on an H100):
#   bash bench/ab/interop_s15.sh "$OUT"
# Writes $OUT/norms_interop.{json,log} and $OUT/dropout_interop.{json,log}.
set -uo pipefail
OUT=${1:?usage: interop_s15.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 10 300 python3 bench/layer_norm.py --ops layer_norm rms_norm \
  --dtypes float16 bfloat16 float32 --providers numba numba_torch torch compile \
  --shapes 16384x4096 8192x8192 65536x1024 --reps 50 --warmup 5 --no-memory \
  --json "$OUT/norms_interop.json" > "$OUT/norms_interop.log" 2>&1
echo "norms rc $?"
timeout -k 10 200 python3 bench/dropout.py --shapes 16384x4096 \
  --dtypes float16,bfloat16,float32 --activations none,gelu \
  --providers numba,numba_torch,eager,compile --reps 50 --warmup 5 --no-memory \
  --json "$OUT/dropout_interop.json" > "$OUT/dropout_interop.log" 2>&1
echo "dropout rc $?"
