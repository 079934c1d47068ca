#!/usr/bin/env bash
# Twentieth session, second A/B: 16-bit lean forwards of two groups a thread with
# launch bounds for 1536 threads an SM (40 registers; LayerNorm with w and b, or with
# neither, spills 8 bytes there, so not shippable as is) and 1280 (48 registers, no
# spill), against the default (four groups, 64 registers, 1024 threads). s20_b.sh
# had two groups at 1536 0.4-1.3 us ahead at fp16 N = 1024 / 2048 / 4096, LayerNorm
# and RMSNorm, one pass. Here two passes, bf16 too, and N = 5120 / 8192 / 12288.
# Predicted: 1536 and 1280 both 0.5-1% ahead of the default at N = 1024-8192; 12288
# (768 threads, no cap at 1280) within noise. About 6 minutes.
#   bash bench/ab/s20_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s20_c.sh OUTDIR}
. bench/ab/tl.sh
A='{"fwd_words": 2, "fwd_lean_tpsm": 1536}'
B='{"fwd_words": 2, "fwd_lean_tpsm": 1280}'
tl ln_f16 170 --reps 50 --op ln --ns 1024,2048,4096,8192 --dtypes float16 \
  --tunes '{}' "$A" "$B" '{}' "$A" "$B"
tl rms_f16 150 --reps 50 --op rms --ns 1024,2048,4096,8192 --dtypes float16 \
  --tunes '{}' "$A" "$B" '{}' "$A" "$B"
tl ln_bf16 120 --reps 50 --op ln --ns 1024,2048,4096,8192 --dtypes bfloat16 \
  --tunes '{}' "$A" "$B" '{}'
tl ln_f16_odd 90 --reps 50 --op ln --ns 5120,12288 --dtypes float16 \
  --tunes '{}' "$A" "$B" '{}'
tar czf "$OUT/s20_c.tgz" -C "$TL_DIR" .
