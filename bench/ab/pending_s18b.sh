#!/usr/bin/env bash
# Eighteenth session (one call of about 4 minutes on an H100): the lean forward's
# cache hints, tuning(fwd_evict=...), against the shipped kernel at the forwards
# still 1-3% behind inductor. Inductor's Triton kernels mark their loads
# evict_first / evict_last, which Triton lowers to L1 priorities *and* an L2 cache
# policy (createpolicy + .L2::cache_hint); the fourteenth session tried the L1 half
# alone (refuted, 0.4-1.8 us slower). Here: "l2" (both halves, as Triton), "cs"
# (x loaded and y stored .cs), "ldcs", "stcs"; shipped first and last. Then the
# hint tests on the GPU. Prediction: "l2" 0-2% faster back to back if the gap is
# how the previous launch's dirty lines leave L2; the others unknown.
#   bash bench/ab/pending_s18b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s18b.sh OUTDIR}
. bench/ab/tl.sh
H=('{}' '{"fwd_evict": "l2"}' '{"fwd_evict": "cs"}' '{"fwd_evict": "ldcs"}'
   '{"fwd_evict": "stcs"}' '{}')
tl h 150 --reps 30 --ns 1024,4096,8192 --dtypes float16 --tunes "${H[@]}"
tl f 150 --reps 30 --ns 4096,8192 --dtypes float32 --tunes "${H[@]}"
tl r 100 --reps 30 --op rms --ns 4096 --dtypes bfloat16 --tunes "${H[@]}"
timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider tests/test_layer_norm.py \
  -k "evict" > "$TL_DIR/pytest_evict.log" 2>&1
echo "pytest rc $?"; tail -3 "$TL_DIR/pytest_evict.log"
tar czf "$OUT/pending_s18b.tgz" -C "$TL_DIR" .
