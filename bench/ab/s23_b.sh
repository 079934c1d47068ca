#!/usr/bin/env bash
# Twenty-third session, second call: v27 candidate, the plain forward kernel rebuilt
# as copy_ceiling.py's ladder (layout compiled in, _plain_layout: two words a thread
# up to 256 groups a row, four up to 1536, else eight; w / b early up to four words;
# no launch bounds up to 512 threads, so ptxas takes the ladder's 48 / 72 registers
# at 16-bit LayerNorm), tuning fwd_plain, against the default, M x N = 2^26,
# alternating twice: 16-bit LayerNorm and RMSNorm at N = 512-16384, float32 LayerNorm
# and RMSNorm at N = 512-8192. Predicted from the ladder: LayerNorm 16-bit 0.5-1.9 us
# faster at N = 2048-8192, about even at 1024 (v26), slower at 512; RMSNorm even or
# worse (v26 already loads w early). Then the plain kernel's GPU tests and memcheck /
# racecheck over the layer_norm workloads with it forced. About 8 minutes.
#   bash bench/ab/s23_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s23_b.sh OUTDIR}
. bench/ab/tl.sh
PLAIN='{"fwd_plain": true}'
for op in ln rms; do
  tl "v27_$op" 140 --reps 40 --op "$op" --ns 512,768,1024,2048,4096,5120,8192,12288,16384 \
    --dtypes float16,bfloat16 --tunes '{}' "$PLAIN" '{}' "$PLAIN"
  tl "v27_${op}_f32" 60 --reps 30 --op "$op" --ns 512,1024,2048,4096,8192 \
    --dtypes float32 --tunes '{}' "$PLAIN" '{}' "$PLAIN"
done
ab_verify s23_b_verify 185 "plain_kernel or early or block_per_row" \
  "layer_norm:float16 layer_norm:float32"
