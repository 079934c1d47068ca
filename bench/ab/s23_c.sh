#!/usr/bin/env bash
# Twenty-third session, last call: v27 (the plain forward kernel by default at 16-bit
# LayerNorm N = 2048-16384 and float32 N = 512-1024) verified: the GPU tests that pick
# or check forward layouts and kernels against float64 / torch, then memcheck and
# racecheck over bench/sanitize.py's layer_norm workloads (every dtype; the plain
# kernel by default, forced, and with w / b late). About 8 minutes.
#   bash bench/ab/s23_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s23_c.sh OUTDIR}
. bench/ab/tl.sh
ab_verify s23_c_verify 540 \
  "plain or wave_and_rms_caps or default_forward or default_lean or vs_float64 or within_2x or early or block_per_row or row_slots" \
  "layer_norm:float16 layer_norm:bfloat16 layer_norm:float32"
