#!/usr/bin/env bash
# Seventeenth session, second GPU call (one H100, about 4 minutes):
#  1. the streaming forward's threads and launch bounds (tuning fwd_stream_tpr,
#     fwd_stream_blocks) at float32 N = 65536, LayerNorm (v14, 1024 threads of 48
#     registers, one block an SM: 298.0 us; over 256 threads 291.4; inductor 278, 4
#     blocks of 512 an SM) and RMSNorm (56 registers at 1024 threads; 32 registers
#     at (256, 8) without spills); forced streaming at float32 N = 16384 (lean 199.3,
#     inductor 181.2, streaming over 512 threads 213.9) with the same caps;
#  2. v15 (bwd_lean_f32, now the default) on RMSNorm, float32 N = 5120 / 8192, and
#     against it off;
#  3. the tests of both (-k "stream_threads or lean_backward or wide_backward"),
#     memcheck and racecheck on the float32 layer_norm workload.
#   bash bench/ab/s17_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s17_b.sh OUTDIR}
. bench/ab/tl.sh
T="fwd_stream_tpr"
B="fwd_stream_blocks"
K65=("{}" "{\"$T\": 512, \"$B\": 3}" "{\"$T\": 256}" "{\"$T\": 256, \"$B\": 6}"
     "{\"$T\": 256, \"$B\": 8}" "{\"$T\": 128, \"$B\": 12}" "{\"$T\": 512, \"$B\": 4}" "{}")
tl ln65k 120 --reps 30 --ns 65536 --dtypes float32 --tunes "${K65[@]}"
tl rms65k 120 --reps 30 --op rms --ns 65536 --dtypes float32 --tunes "${K65[@]}"
S='"fwd_stream": true'
tl ln16k 120 --reps 30 --ns 16384 --dtypes float32 --tunes '{}' \
  "{$S, \"$T\": 512, \"$B\": 3}" "{$S, \"$T\": 256, \"$B\": 6}" "{$S, \"$T\": 256, \"$B\": 8}" \
  "{$S, \"$T\": 512, \"$B\": 4}" '{}'
tl rmslean 120 --reps 30 --op rms --ns 5120,8192 --dtypes float32 \
  --tunes '{}' '{"bwd_lean_f32": false}' '{}'
ab_verify s17_b 260 "stream_threads or lean_backward or wide_backward" "layer_norm:float32"
