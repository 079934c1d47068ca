#!/usr/bin/env bash
# Twenty-first session, after s21_a.sh: shifted statistics (fwd_shift) at the default
# layouts were 0.5-1 us slower at 16-bit, but with two groups a thread at 1280
# threads an SM (48 registers, one row a block) fp16 N = 2048 read 94.4 us against
# 95.7-95.9. Which of the three changed it: the shift, the cap, or one-row blocks?
# fp16 / bf16 LayerNorm N = 1024 / 2048 / 4096, three passes of: the default; two
# groups at 1280 one-row blocks without the shift; the same with it. About 3 minutes.
#   bash bench/ab/s21_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s21_b.sh OUTDIR}
. bench/ab/tl.sh
CAP='{"fwd_words": 2, "fwd_lean_tpsm": 1280, "fwd_block": 1}'
SCAP='{"fwd_shift": true, "fwd_words": 2, "fwd_lean_tpsm": 1280}'
for dt in float16 bfloat16; do
  tl "cap_$dt" 170 --reps 50 --ns 1024,2048,4096 --dtypes "$dt" \
    --tunes '{}' "$CAP" "$SCAP" '{}' "$CAP" "$SCAP" '{}' "$CAP" "$SCAP"
done
tar czf "$OUT/s21_b.tgz" -C "$TL_DIR" .
