#!/usr/bin/env bash
# Nineteenth session: the forward at one wave (latency-bound: small batches). At 512 x
# 1024 ours took 6.66 us (fp16) / 6.69 (float32) against inductor's 5.18 / 5.65
# (bench/ab/fixed_cost_s19.sh). The lean kernel's w and b loads wait on each earlier y
# store (four round trips a row at four groups); fwd_evict "nc" issues them together.
# Predicted: at one wave, up to ~1 us faster (three round trips); none at 2^26
# (pending_s19e.sh measured none). (About 1 minute.)
#   bash bench/ab/pending_s19f.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19f.sh OUTDIR}
. bench/ab/tl.sh
for m in 512 64; do
  for op in ln rms; do
    tl "${op}m$m" 100 --reps 50 --m "$m" --op "$op" --ns 1024,4096,8192 \
      --dtypes float16,float32 --tunes '{}' '{"fwd_evict": "nc"}' '{}' '{"fwd_evict": "nc"}'
  done
done
tar czf "$OUT/pending_s19f.tgz" -C "$TL_DIR" .
