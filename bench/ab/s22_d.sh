#!/usr/bin/env bash
# Twenty-second session: after v26 went in as the default (once only with early),
# the picks test with its new kernel names, the early / once same-bits test, and
# memcheck / racecheck over the layer_norm workloads (v26's kernels by default at
# 16-bit and forced on every dtype and a persistent grid). About 6 minutes.
#   bash bench/ab/s22_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s22_d.sh OUTDIR}
. bench/ab/tl.sh
ab_verify s22_d_verify 540 "wave_and_rms_caps or early or block_per_row" \
  "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
