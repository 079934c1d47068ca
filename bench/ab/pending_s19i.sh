#!/usr/bin/env bash
# Nineteenth session: the M sweep behind a small-batch rule for the lean forward's
# groups a thread (pending_s19h.sh: at 512 rows fp16 fewer groups won 8-10%, at 4096
# rows they lost 20-50%). LayerNorm forward, M = 64-2048, N = 1024-8192, fp16 and
# float32: the default against fwd_words 1 and 2. Data for the rule; nothing
# predicted beyond the crossover lying between 512 and 4096 rows. (About 2 minutes.)
#   bash bench/ab/pending_s19i.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19i.sh OUTDIR}
. bench/ab/tl.sh
for m in 64 256 1024 2048; do
  tl "msweep$m" 100 --reps 100 --m "$m" --op ln --ns 1024,2048,4096,8192 \
    --dtypes float16,float32 --tunes '{}' '{"fwd_words": 1}' '{"fwd_words": 2}'
done
tar czf "$OUT/pending_s19i.tgz" -C "$TL_DIR" .
