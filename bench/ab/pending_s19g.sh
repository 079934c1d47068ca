#!/usr/bin/env bash
# Nineteenth session: the forward at one wave, rows per block. At 512 x 1024 fp16 the
# lean forward runs a warp a row, eight rows a block (fwd_block 256): 64 blocks, half
# the SMs idle, where inductor spreads the rows over every SM (ours 6.66 us against
# 5.18, bench/ab/fixed_cost_s19.sh). Fewer rows a block (fwd_block 64 / 128) spread
# them. Predicted: at one wave (M = 512) faster by up to ~1 us where the blocks would
# be fewer than the SMs; no change at M = 2048 x N = 8192 (enough blocks either way).
# (About 2 minutes.)
#   bash bench/ab/pending_s19g.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19g.sh OUTDIR}
. bench/ab/tl.sh
for m in 512 2048; do
  tl "lnm$m" 150 --reps 200 --m "$m" --op ln --ns 1024,4096,8192 --dtypes float16,float32 \
    --tunes '{}' '{"fwd_block": 64}' '{"fwd_block": 128}' '{}' '{"fwd_block": 64}'
done
tar czf "$OUT/pending_s19g.tgz" -C "$TL_DIR" .
