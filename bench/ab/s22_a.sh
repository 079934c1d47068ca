#!/usr/bin/env bash
# Twenty-second session: the lean forward with w / b loaded with the row and the
# statistics stored before y (tuning fwd_early), against the default. The ladder in
# bench/ab/copy_ceiling.py (fp16, 2^26) found w / b loaded after the reductions cost
# 1-1.3 us at two groups a thread and the statistics after y up to 0.6 us. early
# needs registers (ptxas: 60 bytes spilled at the 48-register caps of v24 / v25, none
# at 64 = fwd_lean_tpsm 1024 for two groups, 128 = 512 for four), so each is tried at
# a few launch bounds. Two default passes bracket each cell. About 4 minutes.
#   bash bench/ab/s22_a.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s22_a.sh OUTDIR}
. bench/ab/tl.sh
tl ln16_small 150 --reps 50 --op ln --ns 512,1024,2048 --dtypes float16 \
  --tunes '{}' '{"fwd_early": true, "fwd_lean_tpsm": 1024}' \
  '{"fwd_early": true, "fwd_lean_tpsm": 768}' '{"fwd_early": true}' '{}'
tl ln16_big 120 --reps 50 --op ln --ns 4096,8192 --dtypes float16 \
  --tunes '{}' '{"fwd_early": true, "fwd_lean_tpsm": 512}' \
  '{"fwd_early": true, "fwd_words": 2, "fwd_lean_tpsm": 1024}' '{}'
tl rms16 120 --reps 50 --op rms --ns 1024,2048,4096,8192,16384 --dtypes float16 \
  --tunes '{}' '{"fwd_early": true}' '{}'
tl ln32 120 --reps 50 --op ln --ns 1024,4096,8192 --dtypes float32 \
  --tunes '{}' '{"fwd_early": true, "fwd_lean_tpsm": 1024}' '{}'
tar czf "$OUT/s22_a.tgz" -C "$TL_DIR" .
