#!/usr/bin/env bash
# Twenty-fifth session, the first tuning call on an H200 (the machine issue #16 names;
# sessions 11-24 ran on H100s). The session's sweep (norms_sweep.sh h200_s25) left 40
# of 120 cells behind, 34 of them forwards, some by far more than on the H100: 16-bit
# LayerNorm N = 512 / 1024 7.6-11.1 us behind inductor (the v24 / v25 capped lean
# kernels; the plain kernel at N = 768 and 2048-16384 is within 1.7 us), float32
# LayerNorm N = 4096 / 16384 18 us, float32 RMSNorm 2.6-8.9 us, 16-bit RMSNorm N = 512
# / 768 / 8192 / 12288 1.2-5.1 us. Floor: 2^26 elements read and written, 268 MB at
# 16 bits, 537 MB at 32, over the H200's ~4.25 TB/s copy = 63 / 126 us; inductor
# reaches 68 / 130. Predicted: the H200's higher bandwidth wants more bytes in flight
# an SM than the H100-tuned register caps leave, so the plain kernel (w / b early, no
# caps) or layouts with more words a thread close most of these gaps. Each row's
# tunings are timed in two alternating passes. About 6 minutes.
#   bash bench/ab/s25_a.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s25_a.sh OUTDIR}
. bench/ab/tl.sh
P() { if [ $# -eq 0 ]; then echo '{"fwd_plain": true}'
      else echo "{\"fwd_plain\": true, \"fwd_plain_layout\": [$1, $2]}"; fi; }
OFF='{"fwd_plain": false}'
two() { local tag=$1 t=$2 op=$3 ns=$4 dts=$5; shift 5
  tl "$tag" "$t" --reps 30 --op "$op" --ns "$ns" --dtypes "$dts" --tunes "$@" "$@"; }
two ln16_512 70 ln 512 float16,bfloat16 '{}' "$(P)" "$(P 2 1)" "$(P 2 8)" "$(P 1 2)" "$(P 4 2)"
two ln16_1024 70 ln 1024 float16,bfloat16 '{}' "$(P)" "$(P 2 1)" "$(P 4 4)" "$(P 1 1)" "$(P 4 1)"
two ln16_768 40 ln 768 float16 '{}' "$(P 3 4)" "$(P 1 1)" "$(P 3 2)"
two ln16_8192 40 ln 8192 float16 '{}' "$(P 2 1)" "$(P 8 1)"
two rms16_512 40 rms 512 float16 '{}' "$(P)" "$(P 2 1)" "$(P 4 2)"
two rms16_768 40 rms 768 float16 '{}' "$(P)" "$(P 3 1)"
two rms16_8k 50 rms 8192,12288 float16 '{}' "$(P)" "$(P 4 1)" "$(P 2 1)"
two ln32_512 40 ln 512 float32 '{}' "$OFF" "$(P 4 4)" "$(P 1 1)" "$(P 2 1)"
two ln32_768 40 ln 768 float32 '{}' "$(P)" "$(P 6 1)" "$(P 1 1)"
two ln32_1024 40 ln 1024 float32 '{}' "$OFF" "$(P 4 1)" "$(P 8 1)" "$(P 1 1)"
two ln32_2048 40 ln 2048 float32 '{}' "$(P)" "$(P 2 1)" "$(P 8 1)" "$(P 4 2)"
two ln32_4096 50 ln 4096 float32 '{}' "$(P)" "$(P 8 1)" "$(P 2 1)" \
  '{"fwd_plain": true, "fwd_plain_min_blocks": 4}'
two ln32_8192 50 ln 8192 float32 '{}' "$(P)" "$(P 4 1)" \
  '{"fwd_plain": true, "fwd_plain_min_blocks": 4}'
two ln32_16384 50 ln 16384 float32 '{}' "$(P)" "$(P 4 1)" \
  '{"fwd_plain": true, "fwd_plain_min_blocks": 2}'
two rms32_2048 40 rms 2048 float32 '{}' "$OFF" "$(P 4 1)" "$(P 8 1)" "$(P 1 1)"
two rms32_4096 40 rms 4096 float32 '{}' "$OFF" "$(P 4 1)" "$(P 8 1)"
two rms32_5120 40 rms 5120 float32 '{}' "$OFF" "$(P 5 1)" "$(P 2 1)"
two rms32_8192 40 rms 8192 float32 '{}' "$OFF" "$(P 8 1)" "$(P 2 1)"
two rms32_12288 40 rms 12288 float32 '{}' "$OFF" "$(P 4 1)" "$(P 6 1)"
two rms32_16384 40 rms 16384 float32 '{}' "$OFF" "$(P 8 1)"
tar czf "$OUT/s25_a.tgz" -C "$TL_DIR" .
