#!/usr/bin/env bash
# Nineteenth session, fourth A/B call (about 3 minutes on an H100). The third
# (pending_s19c.sh) found the float32 RMSNorm backward at N = 512 / 1024 held back by
# residency: its row kernel (two groups a thread, 64 / 128 threads a row, next-row
# prefetch) takes 94 registers, two blocks of 256 threads an SM; without the prefetch
# 64 registers, four blocks: 297.8 -> 282.4 us at N = 512, 298.1 -> 281.4 at 1024
# (bwd_block 128, five blocks of 128: 282.6 / 285.5). Here, where the backward row
# kernels run (N = 512-4096, both ops, float32 and fp16): the default, the prefetch
# off, 128-thread blocks, both. Predicted: the prefetch off wins wherever it lifts
# residency (float32 two groups a thread), loses or ties where the registers did not
# bind.
#   bash bench/ab/pending_s19d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19d.sh OUTDIR}
. bench/ab/tl.sh
for op in rms ln; do
  tl "${op}bwd" 280 --reps 30 --op "$op" --ns 512,768,1024,2048,4096 --dtypes float32,float16 \
    --tunes '{}' '{"prefetch": false}' '{"prefetch": false, "bwd_block": 128}' \
    '{"bwd_block": 128}' '{}'
done
tar czf "$OUT/pending_s19d.tgz" -C "$TL_DIR" .
