#!/usr/bin/env bash
# Twenty-sixth session, H200, one call (~3 min). What pending_s26.sh left:
#   1. the plain forward without w / b early (fwd_early false): ptxas needs 48
#      registers instead of 79 at float32 LayerNorm N = 4096 (5 blocks of 256 an SM
#      instead of 3; ncu: 35% occupancy, 69% of cycles with no eligible warp, against
#      inductor's 92% at 32 registers), 38 instead of 56 at float32 RMSNorm N = 5120 /
#      8192, 48 instead of 64 at 16-bit LayerNorm N = 512 / 1024; float32 LayerNorm N
#      = 8192 also at four words (512 threads a row, 48 registers: 2 blocks of 512).
#   2. the backward without the next row's prefetch (pending_s26 b: float32 RMSNorm
#      N = 512 218.7 -> 213.6 us) at the other float32 rows behind (RMSNorm 768 /
#      4096, LayerNorm 8192).
#   3. tune_dropout: float32 at the unrolls that won at 16-bit (bwd 'none' 4, gelu
#      fwd 1), and the other activations at 16-bit.
#   bash bench/ab/s26_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s26_d.sh OUTDIR}
. bench/ab/tl.sh
E='{"fwd_plain": true, "fwd_early": false}'
E4='{"fwd_plain": true, "fwd_early": false, "fwd_plain_layout": [4, 1]}'
P='{"prefetch": false}'
tl d_ln32 100 --reps 30 --op ln --ns 512,4096,8192 --dtypes float32 \
  --tunes '{}' "$E" "$E4" "$P" '{}' "$E" "$E4" "$P"
tl d_rms32 120 --reps 30 --op rms --ns 512,768,2048,4096,5120,8192 --dtypes float32 \
  --tunes '{}' "$E" "$P" '{}' "$E" "$P"
tl d_ln16 90 --reps 30 --op ln --ns 512,768,1024 --dtypes float16,bfloat16 \
  --tunes '{}' "$E" '{}' "$E"
tl d_rms16 90 --reps 30 --op rms --ns 512,768,1024,8192 --dtypes float16,bfloat16 \
  --tunes '{}' "$E" '{}' "$E"
tar czf "$OUT/s26_d.tgz" -C "$TL_DIR" .
C="shipped,unroll=1,unroll=4,shipped"
mkdir -p "$OUT/td32"
timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/td32" --reps 30 --dtype float32 \
  --configs "$C" > "$OUT/td32/log.txt" 2>&1
echo "tune_dropout float32 rc $?"
mkdir -p "$OUT/td16a"
timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/td16a" --reps 30 --dtype float16 \
  --configs "$C" --acts relu,gelu_tanh,silu > "$OUT/td16a/log.txt" 2>&1
echo "tune_dropout float16 acts rc $?"
