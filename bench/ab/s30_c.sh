#!/usr/bin/env bash
# Thirtieth session: v33 (float32 LayerNorm N = 4096 and RMSNorm N = 16384 on the
# plain kernel with w / b late under launch bounds for 5 / 2 blocks an SM) verified
# as the default: its tests and the float32 forwards' against float64 / torch, then
# memcheck / racecheck of sanitize.py's layer_norm_plain (now with N = 4096) at
# float32, then the A/B again as default against v29's layouts. About 3.5 minutes.
#   bash bench/ab/s30_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s30_c.sh OUTDIR}
TL_DIR="$OUT/tl"
mkdir -p "$TL_DIR"
. bench/ab/tl.sh
ab_verify v33_verify 170 \
  "plain_kernel_matches or wave_and_rms_caps or (float32 and (vs_float64 or within_2x))" \
  "layer_norm_plain:float32"
OLD_LN='{"fwd_plain": true, "fwd_plain_layout": [4, 1], "fwd_early": true}'
OLD_RMS='{"fwd_plain": true, "fwd_plain_layout": [8, 1]}'
tl ln4096 25 --reps 30 --op ln --ns 4096 --dtypes float32 --tunes '{}' "$OLD_LN" '{}' "$OLD_LN"
tl rms16384 25 --reps 30 --op rms --ns 16384 --dtypes float32 --tunes '{}' "$OLD_RMS" '{}' "$OLD_RMS"
