#!/usr/bin/env bash
# Twenty-second session: v26 (_fwd_early_once: the lean forward's w / b loaded with
# the row, statistics before y, one row a slot; 16-bit RMSNorm, 16-bit LayerNorm N =
# 1024, and once alone at 16-bit LayerNorm rows of three or four groups) as the
# default, against it off (fwd_early / fwd_once False), fp16 and bf16 at M x N = 2^26;
# then the GPU tests that pick or check forward layouts and memcheck / racecheck over
# the layer_norm workloads (with v26's kernels, forced on every dtype and on a
# persistent grid). About 7 minutes.
#   bash bench/ab/s22_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s22_c.sh OUTDIR}
. bench/ab/tl.sh
OFF='{"fwd_early": false, "fwd_once": false}'
tl v26_ln 100 --reps 50 --op ln --ns 1024,8192,16384 --dtypes float16,bfloat16 \
  --tunes '{}' "$OFF" '{}'
tl v26_rms 100 --reps 50 --op rms --ns 768,8192,16384 --dtypes float16,bfloat16 \
  --tunes '{}' "$OFF" '{}'
ab_verify s22_c_verify 400 \
  "early or lean_caps or wave or lean_regs or lean_tpsm or default_lean or default_forward or vs_float64 or within_2x or subwarp or row_slots or evict" \
  "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
