#!/usr/bin/env bash
# Written in the twenty-fourth session for the next. Part a: the whole norms sweep at
# v28's defaults (the plain kernel at _PLAIN_V28's rows), for RESULTS.md's table and
# plots; carry .whl (Liger's wheel); about 5 minutes on an H100. Part b (about two
# minutes): at 16-bit N = 512, where inductor leads by 1-2 us, the plain kernel in
# inductor's exact block shape (32 threads, two rows of 16 threads, four words a
# thread: 64 bytes in flight, as its XBLOCK 2 / num_warps 1) against the default;
# s24_c timed four and eight such rows a block (64 / 128 threads) within noise. Then
# float32 LayerNorm's corrected plain kernel, behind the lean default at N = 2048,
# 8192, 16384 (and level at 4096) with 68-79 registers (one to three blocks an SM),
# compiled with launch bounds for more blocks an SM (tuning fwd_plain_min_blocks; on
# the CPU: 16384 68 -> 62 registers for two 512-thread blocks, 8192 72 -> 64 for four
# of 256, both no spills; 2048 / 4096 75 / 79 -> 64 with 8 bytes of stack).
# Predicted: 1-4 us faster where it lifts the blocks an SM, so level with inductor.
#   bash bench/ab/pending_s25.sh "$OUT" a;  bash bench/ab/pending_s25.sh "$OUT" b
set -uo pipefail
OUT=${1:?usage: pending_s25.sh OUTDIR a|b}
PART=${2:?usage: pending_s25.sh OUTDIR a|b}
if [ "$PART" = a ]; then
  bash bench/ab/norms_sweep.sh "$OUT" h100_s25
  exit
fi
. bench/ab/tl.sh
P='{"fwd_plain": true, "fwd_plain_layout": [4, 2]}'
for op in ln rms; do
  tl "s25_${op}_512" 60 --reps 30 --op "$op" --ns 512 --dtypes float16,bfloat16 \
    --tunes '{}' "$P" '{}' "$P"
done
M() { echo "{\"fwd_plain\": true, \"fwd_plain_min_blocks\": $1}"; }
for nb in 2048:8 4096:4 8192:4 16384:2; do
  n=${nb%%:*}
  tl "s25_f32_ln_$n" 45 --reps 30 --op ln --ns "$n" --dtypes float32 \
    --tunes '{}' '{"fwd_plain": true}' "$(M "${nb#*:}")" '{}' "$(M "${nb#*:}")"
done
tar czf "$OUT/pending_s25_b.tgz" -C "$TL_DIR" .
