#!/usr/bin/env bash
# Written in the eighteenth session for the next GPU session (one call of about 4
# minutes on an H100), after v17 (the float32 lean forward at 1024 threads and four
# groups launches a block per row; shipped from an A/B, not yet through the GPU tests):
#  1. float32 N = 16384, both ops: v17 (the default) against the persistent grid
#     (fwd_lean_persistent), shipped again;
#  2. float32 N = 12288, both ops (0.94-0.98x, the row kernel: three groups of 1024
#     threads prefetching its next row, persistent): the lean kernel with a block per
#     row as four groups of 768 threads (fwd_lean) and as three of 1024 (fwd_words 3,
#     fwd_grid = M), and persistent (fwd_words 3);
#  3. 16-bit N = 32768 (lean rows of 1024 threads at four groups too, persistent):
#     a block per row (fwd_grid = M);
#  4. N = 65536, float32 and fp16: the staged forward (one 1024-thread row a block,
#     cp.async into shared memory, no prefetch, persistent) with a block per row.
# Predicted: 1. as the eighteenth session measured (LayerNorm 199 -> ~187, RMSNorm
# 198 -> ~184); 2. the lean kernel with a block per row toward inductor's ~181 if
# what held N = 16384 back was the persistent grid, and no better than the row
# kernel (189-193) if it was the row kernel's geometry; 3. and 4. a few per cent.
# Then the GPU tests and sanitizers under the defaults:
#   bash bench/ab/s17_verify.sh "$OUT" tests ; bash bench/ab/s17_verify.sh "$OUT" sanitize
#   bash bench/ab/pending_s19.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19.sh OUTDIR}
. bench/ab/tl.sh
for op in ln rms; do
  tl "${op}16k" 60 --reps 30 --op "$op" --ns 16384 --dtypes float32 --tunes '{}' \
    '{"fwd_lean_persistent": true}' '{}'
  tl "${op}12k" 90 --reps 30 --op "$op" --ns 12288 --dtypes float32 --tunes '{}' \
    '{"fwd_lean": true}' '{"fwd_lean": true, "fwd_words": 3, "fwd_grid": 5461}' \
    '{"fwd_lean": true, "fwd_words": 3}' '{}'
done
tl h32k 60 --reps 30 --ns 32768 --dtypes float16,bfloat16 --tunes '{}' '{"fwd_grid": 2048}' '{}'
tl s64k 60 --reps 30 --ns 65536 --dtypes float32,float16 --tunes '{}' '{"fwd_grid": 1024}' '{}'
tar czf "$OUT/pending_s19.tgz" -C "$TL_DIR" .
