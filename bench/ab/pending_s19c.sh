#!/usr/bin/env bash
# Nineteenth session, third A/B call (about 3 minutes on an H100): the float32 RMSNorm
# backward at N = 512 / 1024, the sweep's last backward cells behind torch.compile
# (0.298 / 0.297 ms, 0.98x / 0.99x; LayerNorm's, with db too, 0.295 / 0.295 at
# 1.03x / 1.06x). Row kernels of one group a thread (128 / 256 threads a row), rows
# per block bwd_block // tpr, a persistent grid of bwd_threads_per_sm threads an SM.
# Variants: rows a block (bwd_block 128 / 512 / 1024), threads an SM (2048), the
# next-row prefetch off, the lock scheme. Predicted: within 1-2% of each other
# unless residency binds (then bwd_threads_per_sm 2048, if the registers allow it).
#   bash bench/ab/pending_s19c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19c.sh OUTDIR}
. bench/ab/tl.sh
tl rmsbwd 240 --reps 30 --op rms --ns 512,1024 --dtypes float32 --tunes '{}' \
  '{"bwd_block": 128}' '{"bwd_block": 512}' '{"bwd_block": 1024}' \
  '{"bwd_threads_per_sm": 2048}' '{"prefetch": false}' '{"bwd_scheme": "lock"}' '{}'
tar czf "$OUT/pending_s19c.tgz" -C "$TL_DIR" .
