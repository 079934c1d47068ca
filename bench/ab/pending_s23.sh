#!/usr/bin/env bash
# (fwd_serial was removed in the twenty-fourth session, after this script refuted it:
# run this at commit 7918cea or earlier.)
# Written in the twenty-second session for the next: two lean-forward candidates
# against the v26 default, fp16, M x N = 2^26, alternating twice:
# - fwd_serial: the row sums finish with a serial sum of the warps' shared partials
#   instead of a second five-shuffle warp sum (ptxas, fp16 LayerNorm N = 2048 with
#   v26's early / once: 48 registers either way, SHFL 30 -> 15, LDS 3 -> 18);
# - fwd_plain: make_plain_forward_kernel, bench/ab/copy_ceiling.py's plain LayerNorm
#   (a row a slot, no loop, two-pass statistics, serial sums, w / b early at up to
#   two groups or 512 threads; ptxas 48 registers at two groups, 72 at four), which
#   read 0.8-1.9 us faster than the lean kernel at N = 2048-8192 in that script.
# Predicted: 0.3-1 us for either at rows of 2-8 warps (N = 1024-8192), nothing for
# RMSNorm where v26 already loads w early. Then the plain kernel's GPU test and
# memcheck / racecheck with it forced (bench/sanitize.py). About 5 minutes.
#   bash bench/ab/pending_s23.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s23.sh OUTDIR}
. bench/ab/tl.sh
SER='{"fwd_serial": true}'
PLAIN='{"fwd_plain": true}'
for op in ln rms; do
  tl "s23_$op" 200 --reps 50 --op "$op" --ns 1024,2048,4096,8192,16384 \
    --dtypes float16 --tunes '{}' "$SER" "$PLAIN" '{}' "$SER" "$PLAIN"
done
ab_verify s23_verify 300 "plain_kernel or serial_sums" \
  "layer_norm:float16 layer_norm:float32"
