#!/usr/bin/env bash
# Nineteenth session: the forward at one wave, groups a thread. ncu (ncu_s19.sh) at
# fp16 512 x 1024: ours 4.96 us (a warp a row, four groups a thread: 64 blocks x 256,
# 6.4 cycles per issued instruction) against inductor's 3.71 (a row per 256-thread
# block, 4 elements a thread). At one wave a thread's serial work, not bandwidth,
# sets the time; fewer groups a thread (fwd_words 1 / 2) spread a row over more
# threads. Predicted: at M = 512, N = 1024 toward inductor's ~1 us less; none at M =
# 2048 x N = 8192. (About 2 minutes.)
#   bash bench/ab/pending_s19h.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19h.sh OUTDIR}
. bench/ab/tl.sh
for m in 512 4096; do
  tl "words$m" 200 --reps 200 --m "$m" --op ln --ns 1024,4096 --dtypes float16,float32 \
    --tunes '{}' '{"fwd_words": 1}' '{"fwd_words": 2}' '{"fwd_words": 1, "fwd_evict": "nc"}' \
    '{}' '{"fwd_words": 1}'
done
tar czf "$OUT/pending_s19h.tgz" -C "$TL_DIR" .
