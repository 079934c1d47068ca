#!/usr/bin/env bash
# Twenty-first session, after v24 (two groups in one-row blocks at 48 registers for
# 16-bit LayerNorm N = 1024 / 2048): the same idea at the other 16-bit cells still
# behind, two passes each, M x N = 2^26:
# - N = 512 (LayerNorm fp16 / bf16, RMSNorm fp16): the default sub-warp rows (16
#   threads of four groups, 64 registers) against two groups a thread, a warp a row,
#   blocks of 256 at 1280 threads an SM (48 registers; no barrier in a warp's row);
# - LayerNorm fp16 N = 768 (a warp of three groups): two groups (64 threads, 16 idle)
#   at 1280, one group in one-row blocks of 96 at 1536 (40 registers);
# - LayerNorm fp16 N = 1024 / 2048: v24 against one group in one-row blocks at 1536
#   (the twentieth session's one group at 1536 ran 112 us in blocks of 256);
# - LayerNorm fp16 N = 8192: four groups of 256 against two of 512 at 1536 (40
#   registers, spills 8 bytes).
# Predicted: N = 512 0.5-1 us faster with two groups (as v21 for RMSNorm); the rest
# within noise or slower. About 2.5 minutes.
#   bash bench/ab/s21_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s21_e.sh OUTDIR}
. bench/ab/tl.sh
W2='{"fwd_words": 2, "fwd_lean_tpsm": 1280}'
W1='{"fwd_words": 1, "fwd_block": 1, "fwd_lean_tpsm": 1536}'
for dt in float16 bfloat16; do
  tl "n512_$dt" 60 --reps 50 --ns 512 --dtypes "$dt" --tunes '{}' "$W2" '{}' "$W2"
done
tl n512_rms 60 --reps 50 --op rms --ns 512 --dtypes float16 --tunes '{}' "$W2" '{}' "$W2"
tl n768 60 --reps 50 --ns 768 --dtypes float16 --tunes '{}' "$W2" "$W1" '{}' "$W2" "$W1"
tl n1k2k 80 --reps 50 --ns 1024,2048 --dtypes float16 --tunes '{}' "$W1" '{}' "$W1"
tl n8k 60 --reps 50 --ns 8192 --dtypes float16 \
  --tunes '{}' '{"fwd_words": 2, "fwd_lean_tpsm": 1536}' '{}' '{"fwd_words": 2, "fwd_lean_tpsm": 1536}'
tar czf "$OUT/s21_e.tgz" -C "$TL_DIR" .
