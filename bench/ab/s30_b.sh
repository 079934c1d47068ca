#!/usr/bin/env bash
# Thirtieth session: the float32 forwards behind inductor (v32 sweep: RMSNorm N =
# 2048-16384 +2.7-5.2 us, LayerNorm N = 4096 +6.5) at full occupancy. Inductor's
# kernels there run 28-32 registers, four 512-thread programs an SM (ncu, twenty-sixth
# session); ours 38-79 registers, two to three blocks. Candidates are the plain
# kernel's own layouts under launch bounds that ptxas meets at 30-46 registers without
# spills or stack (checked on the CPU), w / b with the row (early) or after the
# reductions (late):
#   RMSNorm 2048 (2 words, 256 threads): 8 blocks an SM early / late; 4096 (2, 512): 4
#   early / late; 8192 (4, 512): 4 late; 16384 (4 words, 1024 threads): 2 late.
#   LayerNorm 2048 (2, 256): 8 late; 4096 (2, 512): 4 late, (4, 256): 5 late.
# Predicted: 1-3 us where occupancy is what keeps the plain kernel from inductor's
# 4.2 TB/s; nothing where the twenty-sixth session's fwd_early False (5 blocks, no
# gain at LayerNorm 4096) is the better guide. Two alternating passes each; the tune
# script checks every output against float64 first. About 4 minutes.
#   bash bench/ab/s30_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s30_b.sh OUTDIR}
TL_DIR="$OUT/tl"
mkdir -p "$TL_DIR"
. bench/ab/tl.sh
C() {  # words, rows a block, early, min blocks
  echo "{\"fwd_plain\": true, \"fwd_plain_layout\": [$1, $2], \"fwd_early\": $3, \"fwd_plain_min_blocks\": $4}"
}
two() { local tag=$1 t=$2 op=$3 n=$4; shift 4
  tl "$tag" "$t" --reps 30 --op "$op" --ns "$n" --dtypes float32 --tunes "$@" "$@"; }
two rms2048 45 rms 2048 '{}' "$(C 2 1 true 8)" "$(C 2 1 false 8)"
two rms4096 45 rms 4096 '{}' "$(C 2 1 true 4)" "$(C 2 1 false 4)"
two rms8192 35 rms 8192 '{}' "$(C 4 1 false 4)"
two rms16384 35 rms 16384 '{}' "$(C 4 1 false 2)"
two ln2048 35 ln 2048 '{}' "$(C 2 1 false 8)"
two ln4096 45 ln 4096 '{}' "$(C 2 1 false 4)" "$(C 4 1 false 5)"
