#!/usr/bin/env bash
# Written in the twenty-third session for the next: where the sweep (h100_s23) still
# has ours behind, the plain kernel's layouts swept by tuning fwd_plain_layout
# (words, rows a block), M x N = 2^26, each against the default, alternating twice:
# - float32 LayerNorm with the dmu correction (opt-in since the sweep; predicted as
#   v27 measured it uncorrected: 182.2-182.5 against 183-185 at N = 512 / 1024);
# - 16-bit N = 512 / 768 / 1024 (behind inductor's one warp a row by 1.5-2 us):
#   one-warp blocks (rpb 1) to eight rows, one to four words;
# - float32 N = 512 / 1024 at inductor's one warp a row (four / eight words), and
#   N = 2048-8192 (behind by 0.3-2.5%): two, four and eight words;
# - 16-bit RMSNorm N = 1024-5120 (behind by 0.3-0.6 us): two and four words.
# Take a layout into _plain_layout / _fwd_plain only where both passes beat the
# default. Two calls of about 5 minutes each: part a (the dmu kernel, 16-bit N =
# 512-1024), part b (float32, 16-bit RMSNorm).
#   bash bench/ab/pending_s24.sh "$OUT" a;  bash bench/ab/pending_s24.sh "$OUT" b
set -uo pipefail
OUT=${1:?usage: pending_s24.sh OUTDIR a|b}
PART=${2:?usage: pending_s24.sh OUTDIR a|b}
. bench/ab/tl.sh
P() { echo "{\"fwd_plain\": true, \"fwd_plain_layout\": [$1, $2]}"; }
if [ "$PART" = a ]; then
tl s24_f32_dmu 60 --reps 30 --op ln --ns 512,768,1024 --dtypes float32 \
  --tunes '{}' '{"fwd_plain": true}' '{}' '{"fwd_plain": true}'
for op in ln rms; do
  tl "s24_${op}_512" 60 --reps 30 --op "$op" --ns 512 --dtypes float16,bfloat16 \
    --tunes '{}' "$(P 2 1)" "$(P 2 2)" "$(P 2 8)" "$(P 1 2)" '{}' "$(P 2 1)" "$(P 2 2)"
  tl "s24_${op}_768" 50 --reps 30 --op "$op" --ns 768 --dtypes float16,bfloat16 \
    --tunes '{}' "$(P 3 1)" "$(P 3 2)" "$(P 1 1)" '{}' "$(P 3 1)"
  tl "s24_${op}_1024" 60 --reps 30 --op "$op" --ns 1024 --dtypes float16,bfloat16 \
    --tunes '{}' "$(P 2 1)" "$(P 4 4)" "$(P 4 1)" "$(P 1 1)" '{}' "$(P 2 1)"
done
fi
if [ "$PART" = b ]; then
for op in ln rms; do
  tl "s24_f32_${op}_512" 50 --reps 30 --op "$op" --ns 512 --dtypes float32 \
    --tunes '{}' '{"fwd_plain": true}' "$(P 4 1)" "$(P 4 4)" '{}' "$(P 4 1)"
  tl "s24_f32_${op}_1024" 50 --reps 30 --op "$op" --ns 1024 --dtypes float32 \
    --tunes '{}' '{"fwd_plain": true}' "$(P 8 1)" "$(P 8 4)" "$(P 4 2)" '{}' "$(P 8 1)"
done
tl s24_f32_2048 50 --reps 30 --op rms --ns 2048 --dtypes float32 \
  --tunes '{}' "$(P 2 1)" "$(P 8 1)" '{}' "$(P 2 1)"
tl s24_f32_4096 50 --reps 30 --op rms --ns 4096 --dtypes float32 \
  --tunes '{}' "$(P 2 1)" "$(P 4 1)" "$(P 8 1)" '{}'
tl s24_f32_8192 50 --reps 30 --op rms --ns 8192 --dtypes float32 \
  --tunes '{}' "$(P 4 1)" "$(P 8 1)" '{}' "$(P 8 1)"
tl s24_rms16 80 --reps 30 --op rms --ns 2048,4096,5120 --dtypes float16 \
  --tunes '{}' '{"fwd_plain": true}' '{}' '{"fwd_plain": true}'
fi
tar czf "$OUT/pending_s24_$PART.tgz" -C "$TL_DIR" .
