#!/usr/bin/env bash
# Twenty-first session, after s21_b.sh: 16-bit LayerNorm N = 1024 / 2048 gained 0.9-1.6
# us from two groups a thread in one-row blocks at 1280 threads an SM (48 registers);
# the shift added nothing. The twentieth session's two groups at 1280 in blocks of 256
# (several rows a block, whose barriers then wait on each other) gained nothing. Here,
# two passes each (us, M x N = 2^26):
# - LayerNorm 16-bit N = 1024 / 2048: default, one-row two groups at 1280 and at 1536
#   threads an SM (40 registers; ptxas spills 8 bytes with w and b);
# - LayerNorm fp16 N = 4096: default (128 x 2) against one-row blocks (128 x 1);
# - RMSNorm 16-bit N = 1024 / 2048: v21 (blocks of 256 at 48 registers) against
#   one-row blocks at 1280;
# - float32 LayerNorm / RMSNorm N = 1024: default (two groups, blocks of 256 at 40
#   registers) against one-row blocks of 128 at 1536 threads an SM.
# Predicted: one-row 1280 as s21_b (-1 to -1.5 us), 1536 no better (spills); the rest
# within 0.5 us, except where one-row blocks free rows from each other's barriers.
# About 3 minutes.
#   bash bench/ab/s21_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s21_c.sh OUTDIR}
. bench/ab/tl.sh
R1280='{"fwd_words": 2, "fwd_lean_tpsm": 1280, "fwd_block": 1}'
R1536='{"fwd_words": 2, "fwd_lean_tpsm": 1536, "fwd_block": 1}'
for dt in float16 bfloat16; do
  tl "ln_$dt" 100 --reps 50 --ns 1024,2048 --dtypes "$dt" \
    --tunes '{}' "$R1280" "$R1536" '{}' "$R1280" "$R1536"
  tl "rms_$dt" 80 --reps 50 --op rms --ns 1024,2048 --dtypes "$dt" \
    --tunes '{}' "$R1280" '{}' "$R1280"
done
tl ln_4096 60 --reps 50 --ns 4096 --dtypes float16 \
  --tunes '{}' '{"fwd_block": 1}' '{}' '{"fwd_block": 1}'
for op in ln rms; do
  tl "f32_$op" 80 --reps 50 --op "$op" --ns 1024 --dtypes float32 \
    --tunes '{}' "$R1536" '{}' "$R1536"
done
tar czf "$OUT/s21_c.tgz" -C "$TL_DIR" .
