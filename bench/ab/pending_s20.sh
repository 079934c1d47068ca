#!/usr/bin/env bash
# Written in the nineteenth session for the next: the lean forward's groups a thread
# at one wave of rows (small batches), again with three passes. The nineteenth
# session's single pass (pending_s19i.sh) gave 0.5-1 us (8-15%) at M <= 256, N = 1024,
# from fewer groups a thread. It also had 5-20x outlier medians (M = 64 float32 4096
# default 44.7 us, M = 1024 fp16 8192 default 151.1). This call repeats M = 64 / 256 /
# 512 / 1024 at N = 1024 / 2048 / 4096, fp16 and float32, default and fwd_words 1 / 2,
# three passes each (the default first and last; tune_layer_norm reports medians
# only, so the passes are the spread). Predicted: the gains hold at M <= 256, the
# outliers do not repeat. (About 4 minutes.)
#   bash bench/ab/pending_s20.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s20.sh OUTDIR}
. bench/ab/tl.sh
for m in 64 256 512 1024; do
  tl "wave$m" 150 --reps 100 --m "$m" --op ln --ns 1024,2048,4096 --dtypes float16,float32 \
    --tunes '{}' '{"fwd_words": 1}' '{"fwd_words": 2}' '{}' '{"fwd_words": 1}' \
    '{"fwd_words": 2}' '{}'
done
tar czf "$OUT/pending_s20.tgz" -C "$TL_DIR" .
