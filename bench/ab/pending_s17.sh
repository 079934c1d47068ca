#!/usr/bin/env bash
# Written in the sixteenth session for the next GPU session (one call of about 7
# minutes on an H100): the candidate tuning(fwd_stream=True), every forward through the
# streaming kernel (LayerNorm's with v14's one-pass statistics), the shape of
# inductor's kernels (two loops over the row, a program per row, 32-48 registers),
# which beat our register-resident forwards by 1-10% (inductor CUPTI: float32 N = 4096
# 179.0 us, 16384 181.2; fp16 16384 91.9):
#  1. float32 N = 4096 / 16384 and fp16 N = 4096 / 16384: shipped, streaming at
#     max_tpr 1024 (inductor's 1024-thread rows at N = 16384), at 512, shipped again;
#  2. float32 N = 65536 (v14) over 512 and 256 threads a row (inductor: 512, 4 an SM);
#  3. bwd_lean_f32 (v13's lean backward on float32 rows, N = 5120 / 8192; predicted
#     0.344 / 0.314 -> ~0.29 / ~0.28 ms, the prefetch in flight across the reductions);
#  4. the tests of both knobs (-k "stream_forced or welford or lean_backward"), memcheck
#     and racecheck on the float32 layer_norm workload.
# Logs come back as one archive.
#   bash bench/ab/pending_s17.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s17.sh OUTDIR}
. bench/ab/tl.sh
S1='{"fwd_stream": true}'
S5='{"fwd_stream": true, "max_tpr": 512}'
tl stream32 150 --reps 30 --ns 4096,16384 --dtypes float32 --tunes '{}' "$S1" "$S5" '{}'
tl stream16 150 --reps 30 --ns 4096,16384 --dtypes float16 --tunes '{}' "$S1" "$S5" '{}'
# v14 at float32 N = 65536 runs 1024 threads of 48 registers, one block an SM (50%
# occupancy); inductor's 512 threads of 32 registers, four (100%): v14 over 512 and
# 256 threads.
tl stream65k 90 --reps 30 --ns 65536 --dtypes float32 \
  --tunes '{}' '{"max_tpr": 512}' '{"max_tpr": 256}' '{}'
# bwd_lean_f32: v13's lean backward on float32 rows of 1025-2048 groups (N = 5120:
# streaming today, 0.344 ms, 0.91x Liger; 8192: wide2 without a prefetch, 0.314, 0.98x).
LF='{"bwd_lean_f32": true}'
LFN='{"bwd_lean_f32": true, "bwd_lean_prefetch": false}'
tl lean32 150 --reps 30 --ns 5120,8192 --dtypes float32 --tunes '{}' "$LF" "$LFN" '{}' "$LF"
ab_verify pending_s17 230 "stream_forced or welford or lean_backward" "layer_norm:float32"
