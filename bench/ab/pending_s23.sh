#!/usr/bin/env bash
# Written in the twenty-second session for the next: the lean forward's row sums
# finishing with a serial sum of the warps' shared partials (tuning fwd_serial,
# candidate) instead of a second five-shuffle warp sum. ptxas (fp16 LayerNorm N =
# 2048, v26's early / once kernel): 48 registers either way, SHFL 30 -> 15, LDS 3 ->
# 18. The plain LayerNorm of bench/ab/copy_ceiling.py (ten shuffle steps a row against
# the lean kernel's twenty) read 0.8-1.9 us faster than ours at N = 2048-8192; this
# tests whether the reductions' latency is that gap. Predicted: 0.3-1 us at rows of
# 2-8 warps (N = 1024-8192 at 16-bit), nothing at a warp a row (N = 512). fp16, M x N
# = 2^26, default / serial alternating twice. About 3 minutes.
#   bash bench/ab/pending_s23.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s23.sh OUTDIR}
. bench/ab/tl.sh
SER='{"fwd_serial": true}'
for op in ln rms; do
  tl "serial_$op" 150 --reps 50 --op "$op" --ns 1024,2048,4096,8192,16384 \
    --dtypes float16 --tunes '{}' "$SER" '{}' "$SER"
done
tar czf "$OUT/pending_s23.tgz" -C "$TL_DIR" .
