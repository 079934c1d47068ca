#!/usr/bin/env bash
# Twenty-first session: v24 (16-bit LayerNorm N = 1024 / 2048: two groups a thread in
# one-row blocks of 64 / 128 threads capped at 48 registers) as the default. On / off
# (fwd_lean_regs None: four groups uncapped) at M x N = 2^26, two passes each, and at
# M = 1024, N = 2048 (a wave, where v22 picks two groups: now in v24's blocks, before
# in blocks of 256 uncapped). Then the GPU tests that pick or check forward layouts
# and memcheck / racecheck over the layer_norm workloads (now with v24's kernels).
# Predicted: 2^26 as s21_c (-0.5 to -1.5 us); M = 1024 within 0.5 us. About 7 minutes.
#   bash bench/ab/s21_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s21_d.sh OUTDIR}
. bench/ab/tl.sh
OFF='{"fwd_lean_regs": null}'
for dt in float16 bfloat16; do
  tl "v24_$dt" 90 --reps 50 --ns 1024,2048 --dtypes "$dt" --tunes '{}' "$OFF" '{}' "$OFF"
  tl "v24_wave_$dt" 60 --reps 100 --m 1024 --ns 2048 --dtypes "$dt" \
    --tunes '{}' "$OFF" '{}' "$OFF"
done
ab_verify s21_d_verify 400 \
  "lean_caps or wave or lean_regs or lean_tpsm or default_lean or default_forward or vs_float64 or within_2x or subwarp or row_slots" \
  "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
