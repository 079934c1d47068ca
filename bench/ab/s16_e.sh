#!/usr/bin/env bash
# Sixteenth session, last GPU call (about 4 minutes on an H100): the v14 candidate
# (tuning fwd_welford: the streaming LayerNorm forward's statistics in one pass, two
# reads of the row instead of three).
#  1. float32 N = 65536 (streaming by default; 0.315 ms against inductor's 0.280):
#     shipped, welford, welford persistent at 1 block an SM, shipped again;
#  2. streaming forced at N = 16384 (float32 512 threads a row, fp16 256), with and
#     without welford, against the lean default (inductor's looped kernels beat it
#     there: 181 / 92 us against 199 / 96);
#  3. its GPU test, memcheck and racecheck on the layer_norm float32 / fp16 workloads.
#   bash bench/ab/s16_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s16_e.sh OUTDIR}
. bench/ab/tl.sh
WF='{"fwd_welford": true}'
tl wf65536 90 --reps 30 --ns 65536 --dtypes float32 \
  --tunes '{}' "$WF" '{"fwd_welford": true, "fwd_blocks_per_sm": 1}' '{}'
S32='{"fwd_lean": false, "fwd_staged": false, "max_tpr": 512}'
W32='{"fwd_lean": false, "fwd_staged": false, "max_tpr": 512, "fwd_welford": true}'
tl wf16k32 90 --reps 30 --ns 16384 --dtypes float32 --tunes '{}' "$S32" "$W32" '{}'
S16='{"fwd_lean": false, "fwd_staged": false, "max_tpr": 256}'
W16='{"fwd_lean": false, "fwd_staged": false, "max_tpr": 256, "fwd_welford": true}'
tl wf16k16 90 --reps 30 --ns 16384 --dtypes float16 --tunes '{}' "$S16" "$W16" '{}'
ab_verify s16_e 260 "welford or mean_has_no" "layer_norm:float16 layer_norm:float32"
