#!/usr/bin/env bash
# Thirteenth session's third GPU call: dropout v6 (the backward with grad_bias as one
# round of resident blocks) against v5's half-wave plans, fp16 and fp32 16384 x 4096;
# then the backward sweep (every N, three dtypes, ours against eager and compile).
#   bash bench/ab/ab_s13c.sh "$OUT"     (about 7 minutes on an H100)
set -uo pipefail
OUT=${1:?usage: ab_s13c.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/dr16" --reps 30 --dtype float16 \
  --configs "shipped,rows=504,rows=512,shipped" > "$OUT/dropout_ab16.log" 2>&1
echo "dropout fp16 rc $?"
timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/dr32" --reps 30 --dtype float32 \
  --configs "shipped,rows=992,shipped" > "$OUT/dropout_ab32.log" 2>&1
echo "dropout fp32 rc $?"
SHAPES=131072x512,87381x768,65536x1024,32768x2048,16384x4096,13107x5120,8192x8192
SHAPES=$SHAPES,5461x12288,4096x16384,1024x65536
timeout -k 10 330 python3 bench/dropout.py --shapes "$SHAPES" --dtypes float16,bfloat16,float32 \
  --activations none,gelu --directions bwd --providers numba,eager,compile --reps 30 \
  --warmup 5 --no-host-overhead --no-memory --json "$OUT/dropout_bwd_sweep_v6.json" \
  > "$OUT/dropout_bwd_sweep_v6.log" 2>&1
echo "dropout bwd sweep rc $?"
rm -f "$OUT"/dr16/*.md "$OUT"/dr32/*.md
for f in "$OUT"/dropout_ab16.log "$OUT"/dropout_ab32.log; do grep "bwd\|registers" "$f"; done
