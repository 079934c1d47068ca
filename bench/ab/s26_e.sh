#!/usr/bin/env bash
# Twenty-sixth session, H200, one call (~2 min), after s26_d.sh:
#   1. tune_dropout at 16-bit for the activations not yet timed (relu, gelu_tanh,
#      silu): do they follow 'none' (bwd unroll 4) or gelu (fwd unroll 1)?
#   2. the backward without the next row's prefetch (s26_d: float32 N = 512
#      LayerNorm 225.6 -> 215.5 us, RMSNorm 216.5 -> 212.0) at the neighbouring rows:
#      float32 LayerNorm N = 768 / 1024, 16-bit N = 512 / 768.
#   bash bench/ab/s26_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s26_e.sh OUTDIR}
. bench/ab/tl.sh
P='{"prefetch": false}'
tl e_ln32 60 --reps 30 --op ln --ns 768,1024 --dtypes float32 --tunes '{}' "$P" '{}' "$P"
tl e_ln16 90 --reps 30 --op ln --ns 512,768 --dtypes float16,bfloat16 \
  --tunes '{}' "$P" '{}' "$P"
tl e_rms16 90 --reps 30 --op rms --ns 512,768 --dtypes float16,bfloat16 \
  --tunes '{}' "$P" '{}' "$P"
tar czf "$OUT/s26_e.tgz" -C "$TL_DIR" .
for dt in float16 bfloat16; do
  mkdir -p "$OUT/td_$dt"
  timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/td_$dt" --reps 30 --dtype "$dt" \
    --configs "shipped,unroll=1,unroll=4,shipped" --acts relu,gelu_tanh,silu \
    > "$OUT/td_$dt/log.txt" 2>&1
  echo "tune_dropout $dt rc $?"
done
