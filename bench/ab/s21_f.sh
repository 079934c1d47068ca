#!/usr/bin/env bash
# Twenty-first session: v25 (16-bit N = 512: two groups a thread, a warp a row, eight
# rows a block at 48 registers, in place of sub-warp rows of four groups at 64) as the
# default, after the cap table was re-keyed by threads a row (_LEAN_CAPS). On / off
# (fwd_lean_regs None) for LayerNorm and RMSNorm at fp16 / bf16, two passes, M x N =
# 2^26; then the GPU tests that pick or check forward layouts and memcheck / racecheck
# over the layer_norm workloads (now with v25's kernels). Predicted: 0.4-1.2 us as
# s21_e.sh. About 6 minutes.
#   bash bench/ab/s21_f.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s21_f.sh OUTDIR}
. bench/ab/tl.sh
OFF='{"fwd_lean_regs": null}'
for op in ln rms; do
  tl "v25_$op" 100 --reps 50 --op "$op" --ns 512 --dtypes float16,bfloat16 \
    --tunes '{}' "$OFF" '{}' "$OFF"
done
ab_verify s21_f_verify 420 \
  "lean_caps or wave or lean_regs or lean_tpsm or default_lean or default_forward or vs_float64 or within_2x or subwarp or row_slots" \
  "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
