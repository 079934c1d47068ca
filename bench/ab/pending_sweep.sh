#!/usr/bin/env bash
# Issue #16's dropout sweep (never run yet): dropout(x + b) and dropout(gelu(x + b)),
# forward and backward, at M x N = 2^26 for N in {512 .. 65536}, ours against torch
# eager and torch.compile, one dtype list per call (float16 alone takes a few
# minutes, compiles included):
#   bash bench/ab/pending_sweep.sh "$OUT" float16
#   bash bench/ab/pending_sweep.sh "$OUT" bfloat16,float32
# Writes $OUT/dropout_sweep_<dtypes>.json and .log; the tables and plots then come
# from the JSON files on any machine:
#   python3 bench/dropout.py --from-json FILE --plot bench/results
set -uo pipefail
OUT=${1:?usage: pending_sweep.sh OUTDIR DTYPES}
DTYPES=${2:?usage: pending_sweep.sh OUTDIR DTYPES}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
SHAPES=131072x512,87381x768,65536x1024,32768x2048,16384x4096,13107x5120,8192x8192
SHAPES=$SHAPES,5461x12288,4096x16384,1024x65536
TAG=${DTYPES//,/_}
timeout -k 10 560 python3 bench/dropout.py --shapes "$SHAPES" --dtypes "$DTYPES" \
  --activations none,gelu --providers numba,eager,compile --reps 30 --warmup 5 \
  --no-host-overhead --no-memory --json "$OUT/dropout_sweep_$TAG.json" \
  > "$OUT/dropout_sweep_$TAG.log" 2>&1
echo "dropout sweep $DTYPES rc $?"
tail -40 "$OUT/dropout_sweep_$TAG.log"
