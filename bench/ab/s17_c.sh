#!/usr/bin/env bash
# Seventeenth session, third GPU call (one H100, about 4 minutes): the staged forward
# with register groups (tuning fwd_staged_regs), the row read from global memory once
# where today it streams and reads it twice. Floor (H100 copy ~3.0 TB/s, 2 x 256 MiB
# at float32 1024 x 65536): 178 us; the 16-bit staged kernel runs at 75% of copy at
# N = 65536, so predicted ~235 us against v14's 298 (LayerNorm) and 279 (RMSNorm),
# inductor 278-281.
#  1. float32 N = 65536, LayerNorm and RMSNorm, shipped / staged_regs 2, twice, and
#     LayerNorm without the compensated centre;
#  2. fp16 and bf16 N = 131072 (512 rows), shipped (streaming) / staged_regs 2;
#  3. the tests (-k "register_groups or stream_threads"), memcheck and racecheck on
#     the float32 layer_norm workload.
#   bash bench/ab/s17_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s17_c.sh OUTDIR}
. bench/ab/tl.sh
R='{"fwd_staged_regs": 2}'
tl ln65k 120 --reps 30 --ns 65536 --dtypes float32 --tunes '{}' "$R" '{}' "$R" \
  '{"fwd_staged_regs": 2, "fwd_compensated": false}'
tl rms65k 120 --reps 30 --op rms --ns 65536 --dtypes float32 --tunes '{}' "$R" '{}' "$R"
tl h131k 120 --reps 30 --ns 131072 --dtypes float16,bfloat16 --tunes '{}' "$R"
ab_verify s17_c 260 "register_groups or stream_threads" "layer_norm:float32"
