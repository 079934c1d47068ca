#!/usr/bin/env bash
# Issue #16's LayerNorm / RMSNorm sweep: both ops, both passes, fp16 / bf16 / fp32, M x N
# = 2^26 for N in {512 .. 65536}, ours (array level) against torch eager,
# torch.compile and Liger-Kernel 0.8.5, one call (about 8 minutes on an H200).
# Liger travels as a wheel: here, once, `python3 -m pip download --no-deps
# --only-binary=:all: --python-version 3.12 --implementation cp --platform
# manylinux2014_x86_64 -d .whl liger-kernel==0.8.5`, then name `.whl` in the call's
# carry. On the GPU machine:  bash bench/ab/norms_sweep.sh "$OUT" TAG
# Writes $OUT/norms_sweep_TAG.json (rewritten after every shape) and .log; the table
# and plots come from the JSON on any machine:
#   python3 bench/layer_norm.py --from-json FILE --plot bench/results
set -uo pipefail
OUT=${1:?usage: norms_sweep.sh OUTDIR TAG}
TAG=${2:?usage: norms_sweep.sh OUTDIR TAG}
. bench/ab/liger_env.sh || exit 1
nvidia-smi -L
timeout -k 10 570 python3 bench/layer_norm.py --ops layer_norm rms_norm \
  --dtypes float16 bfloat16 float32 --providers numba torch compile liger \
  --shapes 131072x512 87381x768 65536x1024 32768x2048 16384x4096 13107x5120 8192x8192 \
  5461x12288 4096x16384 1024x65536 --reps 30 --warmup 5 --no-memory --no-overhead \
  --json "$OUT/norms_sweep_$TAG.json" > "$OUT/norms_sweep_$TAG.log" 2>&1
echo "norms sweep rc $?"
