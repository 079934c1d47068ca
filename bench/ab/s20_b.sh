#!/usr/bin/env bash
# Twentieth session: the lean forward at one and two groups a thread with launch
# bounds for more threads an SM (tuning fwd_lean_tpsm; 1536: 40 registers, 2048: 32),
# against the default (four groups, 64 / 56 registers, 1024 threads an SM).
# Inductor's forwards run 2048 threads an SM of 23-32 registers.
# Part A, M x N = 2^26, N = 1024 / 2048 / 4096, LayerNorm and RMSNorm, fp16 and float32
# (16-bit LayerNorm spills 20 bytes at 32 registers, so 2048 is there for the
# record). Predicted: w1 at 1536-2048 threads 0-2% faster than the default, w2 at
# 1536 within 1%. Part B, one wave (M = 256 / 1024): the same variants beside plain
# fwd_words 1 / 2, for the small-batch rule. About 7 minutes.
#   bash bench/ab/s20_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s20_b.sh OUTDIR}
. bench/ab/tl.sh
W1A='{"fwd_words": 1, "fwd_lean_tpsm": 1536}'
W1B='{"fwd_words": 1, "fwd_lean_tpsm": 2048}'
W2A='{"fwd_words": 2, "fwd_lean_tpsm": 1536}'
for op in ln rms; do
  tl "${op}_f16" 170 --reps 50 --op "$op" --ns 1024,2048,4096 --dtypes float16 \
    --tunes '{}' "$W1A" "$W1B" "$W2A" '{}'
  tl "${op}_f32" 150 --reps 50 --op "$op" --ns 1024,2048,4096 --dtypes float32 \
    --tunes '{}' "$W1B" "$W1A" '{}'
done
for m in 256 1024; do
  tl "wave${m}_f16" 90 --reps 100 --m "$m" --op ln --ns 1024,2048,4096 --dtypes float16 \
    --tunes '{}' '{"fwd_words": 1}' "$W1A" '{"fwd_words": 2}' "$W2A" '{}'
  tl "wave${m}_f32" 90 --reps 100 --m "$m" --op ln --ns 1024,2048,4096 --dtypes float32 \
    --tunes '{}' '{"fwd_words": 1}' "$W1B" '{}'
done
tar czf "$OUT/s20_b.tgz" -C "$TL_DIR" .
