#!/usr/bin/env bash
# Nineteenth session, second A/B call (about 4 minutes on an H100). The first
# (pending_s19.sh) found at float32 N = 12288 the lean forward with a block per row
# faster for RMSNorm (185.0 against the row kernel's 192.3 / 191.4 us) but slower for
# LayerNorm (194.1 against 188.5 / 189.7). Here:
#  1. float32 N = 9216, 10240, 11264, 12288, both ops: the default (the row kernel,
#     persistent, prefetching) against the lean kernel (fwd_lean: four groups a
#     thread, a block per row), to find where each op's crossover lies;
#  2. 16-bit N = 32768, both ops, under v18 (four groups of 1024 threads: a block per
#     row by default) against the persistent grid (fwd_lean_persistent).
# Predicted: 1. RMSNorm lean 3-4% faster at 12288 and toward 8192 (where lean is the
# default already); LayerNorm row kernel ahead at 12288, the two within 1% below;
# 2. a block per row ~4% faster (101.9 against 105.9 with fwd_grid = M).
#   bash bench/ab/pending_s19b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19b.sh OUTDIR}
. bench/ab/tl.sh
for op in rms ln; do
  tl "${op}f32" 150 --reps 30 --op "$op" --ns 9216,10240,11264,12288 --dtypes float32 \
    --tunes '{}' '{"fwd_lean": true}' '{}'
  tl "${op}h32k" 60 --reps 30 --op "$op" --ns 32768 --dtypes float16,bfloat16 \
    --tunes '{}' '{"fwd_lean_persistent": true}' '{}'
done
tar czf "$OUT/pending_s19b.tgz" -C "$TL_DIR" .
