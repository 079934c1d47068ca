#!/usr/bin/env bash
# (fwd_serial was removed in the twenty-fourth session, after this script refuted it:
# run this at commit 7918cea or earlier.)
# Twenty-third session, first call: the two candidates built in the twenty-second
# (fwd_serial, fwd_plain; see pending_s23.sh for what each changes and the prediction:
# 0.3-1 us at N = 1024-8192 for LayerNorm, nothing for RMSNorm) against the v26
# default, fp16, M x N = 2^26, alternating twice; then v26 at small batches (M = 256
# and 1024 rows, a wave or less on 132 SMs), which the twenty-second session did not
# time: default against fwd_early / fwd_once off, 16-bit, alternating. Predicted: v26
# no slower there (its rows take one slot each either way). About 6 minutes.
#   bash bench/ab/s23_a.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s23_a.sh OUTDIR}
. bench/ab/tl.sh
SER='{"fwd_serial": true}'
PLAIN='{"fwd_plain": true}'
OFF='{"fwd_early": false, "fwd_once": false}'
for op in ln rms; do
  tl "s23_$op" 170 --reps 50 --op "$op" --ns 1024,2048,4096,8192,16384 \
    --dtypes float16 --tunes '{}' "$SER" "$PLAIN" '{}' "$SER" "$PLAIN"
done
for m in 256 1024; do
  tl "s23_wave_rms_$m" 80 --reps 100 --op rms --m "$m" --ns 768,4096,8192,16384 \
    --dtypes float16,bfloat16 --tunes '{}' "$OFF" '{}' "$OFF"
  tl "s23_wave_ln_$m" 50 --reps 100 --op ln --m "$m" --ns 1024 \
    --dtypes float16,bfloat16 --tunes '{}' "$OFF" '{}' "$OFF"
done
tar czf "$OUT/s23_a.tgz" -C "$TL_DIR" .
