#!/usr/bin/env bash
# Twentieth session: v21's idea past N = 4096. 16-bit RMSNorm forwards at N = 5120 /
# 8192 / 12288 at two groups a thread with launch bounds for 1536 threads an SM (N =
# 5120: 4 blocks of 320, 48 registers; 8192: 3 of 512, 40; 12288: 2 of 768, 40; bf16
# with w spills 4 bytes at 40) and 1280 (5120 the same; 8192 / 12288 uncapped),
# against the default (four groups, 62 registers). s20_c.sh had fp16 N = 8192 at 1536
# 95.6 / 95.3 -> 93.9 / 93.9. Predicted: 1-1.5 us at 5120 / 8192 / 12288 with the cap.
# About 3 minutes.
#   bash bench/ab/s20_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s20_e.sh OUTDIR}
. bench/ab/tl.sh
A='{"fwd_words": 2, "fwd_lean_tpsm": 1536}'
B='{"fwd_words": 2, "fwd_lean_tpsm": 1280}'
for dt in float16 bfloat16; do
  tl "rms_$dt" 150 --reps 50 --op rms --ns 5120,8192,12288 --dtypes "$dt" \
    --tunes '{}' "$A" "$B" '{}' "$A" "$B"
done
tar czf "$OUT/s20_e.tgz" -C "$TL_DIR" .
