#!/usr/bin/env bash
# Twenty-fourth session, third call (after pending_s24.sh a / b): the plain kernel's
# new sub-warp rows (8 / 16 threads a row, tuning fwd_plain_layout; compiled on the
# CPU at 48-65 registers, no spills) where inductor's one warp for two rows leads
# (16-bit N = 512 / 768 by 1-2 us, float32 N = 512), and the float32 plain kernel's
# words a thread at N = 2048-16384 (LayerNorm now corrected for mu's rounding; b
# found RMSNorm 2048 at two words 1 us faster than the default), each against the
# default, alternating twice. Predicted: sub-warp rows of four words (64 bytes a
# thread in flight, as inductor's) 0.5-1.5 us faster at 16-bit N = 512; float32
# two / four words a thread at or below the default. Then the plain kernel's GPU
# tests. About 6 minutes.
#   bash bench/ab/s24_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s24_c.sh OUTDIR}
. bench/ab/tl.sh
P() { echo "{\"fwd_plain\": true, \"fwd_plain_layout\": [$1, $2]}"; }
for op in ln rms; do
  tl "c_${op}_512" 70 --reps 30 --op "$op" --ns 512 --dtypes float16,bfloat16 \
    --tunes '{}' "$(P 4 8)" "$(P 4 4)" "$(P 8 16)" '{}' "$(P 4 8)" "$(P 4 4)" "$(P 8 16)"
  tl "c_${op}_768" 60 --reps 30 --op "$op" --ns 768 --dtypes float16,bfloat16 \
    --tunes '{}' "$(P 3 1)" "$(P 6 8)" '{}' "$(P 3 1)" "$(P 6 8)"
  tl "c_${op}_1024" 50 --reps 30 --op "$op" --ns 1024 --dtypes float16,bfloat16 \
    --tunes '{}' "$(P 8 8)" '{}' "$(P 8 8)"
  tl "c_f32_${op}_512" 40 --reps 30 --op "$op" --ns 512 --dtypes float32 \
    --tunes '{}' '{"fwd_plain": true}' "$(P 8 8)" '{}' '{"fwd_plain": true}' "$(P 8 8)"
  for nl in 2048:"2 4 8" 4096:"2 4 8" 5120:"2 4 8" 8192:"4 8" 12288:"4 8" 16384:"4 8"; do
    n=${nl%%:*}
    tunes=('{}')
    for wd in ${nl#*:}; do tunes+=("$(P "$wd" 1)"); done
    tl "c_f32_${op}_$n" 45 --reps 30 --op "$op" --ns "$n" --dtypes float32 \
      --tunes "${tunes[@]}" "${tunes[@]}"
  done
done
timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider tests/test_layer_norm.py \
  -k "plain_kernel" > "$TL_DIR/gpu_tests.log" 2>&1
echo "gpu tests rc $?"; tail -3 "$TL_DIR/gpu_tests.log"
tar czf "$OUT/s24_c.tgz" -C "$TL_DIR" .
