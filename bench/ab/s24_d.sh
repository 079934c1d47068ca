#!/usr/bin/env bash
# Twenty-fourth session, fourth call: v28 (_PLAIN_V28, the plain kernel at the rows
# pending_s24.sh a / b and s24_c.sh measured it faster) as the default, against the
# forward without the plain kernel (tuning fwd_plain false), alternating twice, at
# every changed row: 16-bit LayerNorm N = 768 and RMSNorm 2048; float32 LayerNorm
# N = 512 / 1024 / 4096 / 12288, RMSNorm 2048-16384. Predicted from those runs: 0.5-4
# us faster each. Then the picks' GPU tests and memcheck / racecheck of the
# layer_norm workloads (bench/sanitize.py, now with v28's layouts and sub-warp rows)
# at float16 and float32. About 9 minutes.
#   bash bench/ab/s24_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s24_d.sh OUTDIR}
. bench/ab/tl.sh
OFF='{"fwd_plain": false}'
tl d_16 60 --reps 30 --op ln --ns 768 --dtypes float16,bfloat16 --tunes '{}' "$OFF" '{}' "$OFF"
tl d_16r 50 --reps 30 --op rms --ns 2048 --dtypes float16,bfloat16 --tunes '{}' "$OFF" '{}' "$OFF"
tl d_32 60 --reps 30 --op ln --ns 512,1024,4096,12288 --dtypes float32 \
  --tunes '{}' "$OFF" '{}' "$OFF"
tl d_32r 80 --reps 30 --op rms --ns 2048,4096,5120,8192,12288,16384 --dtypes float32 \
  --tunes '{}' "$OFF" '{}' "$OFF"
ab_verify s24_d 430 "plain_kernel or wave_and_rms_caps" "layer_norm:float16 layer_norm:float32"
