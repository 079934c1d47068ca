#!/usr/bin/env bash
# Twenty-fifth session, second tuning call (H200). s25_a.sh found the plain kernel at
# other layouts 2-25 us faster than the H100-tuned defaults in most forward cells, but
# float32 still 1.5-4 us behind inductor (~130 us) at LayerNorm N = 512 / 768 / 4096 /
# 8192 and RMSNorm N = 2048-16384, and 16-bit LayerNorm N = 512 0.5-1.2 us behind.
# There, s25_a's fastest float32 layouts held 40-79 registers at 1-4 blocks an SM,
# and launch bounds for more blocks (tuning fwd_plain_min_blocks) gained 2.5-14 us at
# LayerNorm N = 4096 / 16384. Predicted: more resident threads through launch bounds
# (where ptxas fits the row without spilling) gain 1-3 us at the remaining float32
# rows. Two alternating passes. About 4 minutes.
#   bash bench/ab/s25_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s25_b.sh OUTDIR}
. bench/ab/tl.sh
P() { local mb=""; [ $# -ge 3 ] && mb=", \"fwd_plain_min_blocks\": $3"
      echo "{\"fwd_plain\": true, \"fwd_plain_layout\": [$1, $2]$mb}"; }
two() { local tag=$1 t=$2 op=$3 ns=$4 dts=$5; shift 5
  tl "$tag" "$t" --reps 30 --op "$op" --ns "$ns" --dtypes "$dts" --tunes "$@" "$@"; }
two ln16_512 40 ln 512 float16 "$(P 4 2)" "$(P 4 4)" "$(P 4 8)" "$(P 4 4 24)"
two ln16_1024 40 ln 1024 float16 "$(P 4 1)" "$(P 4 2)" "$(P 4 1 32)"
two ln16_12k 40 ln 12288,16384 float16 '{}' "$(P 8 1)"
two ln32_512 40 ln 512 float32 "$(P 2 1)" "$(P 2 1 24)" "$(P 4 1)"
two ln32_768 40 ln 768 float32 "$(P 6 1)" "$(P 3 1)" "$(P 3 2)" "$(P 3 1 24)"
two ln32_4096 50 ln 4096 float32 "$(P 4 1 4)" "$(P 4 1 5)" "$(P 4 1 6)" "$(P 8 1 8)"
two ln32_8192 50 ln 8192 float32 "$(P 8 1 4)" "$(P 8 1 5)" "$(P 4 1 2)"
two rms32_2048 40 rms 2048 float32 '{"fwd_plain": false}' "$(P 2 1 8)" "$(P 4 1 12)"
two rms32_4096 40 rms 4096 float32 "$(P 2 1)" "$(P 2 1 4)" "$(P 4 1 6)"
two rms32_5120 40 rms 5120 float32 "$(P 4 1)" "$(P 4 1 5)" "$(P 5 1 8)"
two rms32_8192 40 rms 8192 float32 "$(P 4 1)" "$(P 4 1 3)" "$(P 4 1 4)"
two rms32_12288 40 rms 12288 float32 "$(P 6 1)" "$(P 6 1 3)" "$(P 8 1 4)"
two rms32_16384 40 rms 16384 float32 "$(P 8 1)" "$(P 8 1 3)" "$(P 8 1 4)"
tar czf "$OUT/s25_b.tgz" -C "$TL_DIR" .
