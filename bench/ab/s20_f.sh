#!/usr/bin/env bash
# Twentieth session: v23 (16-bit RMSNorm N = 5120 at two groups, 48 registers; fp16
# N = 8192 / 12288 at 40) as the default: its GPU tests, memcheck / racecheck on the
# layer_norm workloads (now with RMSNorm rows of 5120 and 8192), then on / off
# (fwd_lean_regs None) at N = 5120 / 8192 / 12288, two passes. Predicted: as
# s20_e.sh, 1-1.7 us where capped, nothing at bf16 8192 / 12288. About 5 minutes.
#   bash bench/ab/s20_f.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s20_f.sh OUTDIR}
. bench/ab/tl.sh
ab_verify s20_f_verify 300 "wave or rms_lean_caps or lean_regs or lean_tpsm" \
  "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
OFF='{"fwd_lean_regs": null}'
for dt in float16 bfloat16; do
  tl "v23_$dt" 100 --reps 50 --op rms --ns 5120,8192,12288 --dtypes "$dt" \
    --tunes '{}' "$OFF" '{}' "$OFF"
done
tar czf "$OUT/s20_f.tgz" -C "$TL_DIR" .
