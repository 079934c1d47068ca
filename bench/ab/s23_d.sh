#!/usr/bin/env bash
# Twenty-third session: v27's float32 LayerNorm with mu's rounding corrected (dmu, as
# the lean kernel; without it rows like 1000 + 0.01 noise read 1e-3 off) against the
# lean kernel (fwd_plain False), N = 512 / 1024, alternating twice. About 1.5 minutes.
#   bash bench/ab/s23_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s23_d.sh OUTDIR}
. bench/ab/tl.sh
tl v27_dmu 100 --reps 30 --op ln --ns 512,1024 --dtypes float32 \
  --tunes '{}' '{"fwd_plain": false}' '{}' '{"fwd_plain": false}'
