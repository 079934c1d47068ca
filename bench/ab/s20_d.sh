#!/usr/bin/env bash
# Twentieth session: v21 (16-bit RMSNorm N = 1024-4096, two groups at 48 registers)
# and v22 (fewer groups a thread for 16-bit batches one wave holds) as defaults:
# their GPU tests and memcheck / racecheck on the layer_norm workloads (every dtype),
# then each against itself switched off (fwd_lean_regs None / fwd_wave False), two
# passes. Predicted: v21 0.8-1.5 us faster at 2^26 (fp16 and bf16); v22 0.4-1.3 us
# at M = 256 / 1024, nothing at M = 4096. About 7 minutes.
#   bash bench/ab/s20_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s20_d.sh OUTDIR}
. bench/ab/tl.sh
ab_verify s20_verify 300 "wave or rms_lean_caps or lean_tpsm or lean_regs or block_per_row" \
  "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
OFF21='{"fwd_lean_regs": null}'
OFF22='{"fwd_wave": false}'
for dt in float16 bfloat16; do
  tl "v21_$dt" 100 --reps 50 --op rms --ns 1024,2048,4096 --dtypes "$dt" \
    --tunes '{}' "$OFF21" '{}' "$OFF21"
done
for m in 256 1024 4096; do
  for op in ln rms; do
    tl "v22_${op}_$m" 80 --reps 100 --m "$m" --op "$op" --ns 1024,2048,4096 \
      --dtypes float16,bfloat16 --tunes '{}' "$OFF22" '{}' "$OFF22"
  done
done
tar czf "$OUT/s20_d.tgz" -C "$TL_DIR" .
