#!/usr/bin/env bash
# Written in the seventeenth session for the next GPU session (one call of about 5
# minutes on an H100): the candidate tuning(fwd_staged_pipe=True), the staged forward
# with two row buffers (the next row's cp.async copies in flight while a block works
# on this one), for the forwards still behind inductor: float32 N = 12288 / 16384
# (0.92-0.94x; the lean kernels keep one 1024-thread row an SM in flight and prefetch
# nothing) and 16-bit N = 16384 (0.99x). Floor at M x N = 2^26, H100: 178 us float32,
# 89 us 16-bit; today 192-199 / 95.6; inductor ~181 / ~92. Predicted: float32 toward
# ~185 if one row in flight per SM is what holds the lean kernel back.
#  1. float32 N = 16384 and 12288, LayerNorm and RMSNorm: shipped; staged at 1024
#     threads (4 / 3 groups) and 512 (8 / 6), each single- and double-buffered;
#     shipped again;
#  2. fp16 N = 16384: shipped; staged 2 groups (1024 threads) and 4 (512), pipelined;
#  3. the tests (-k "pipelined or staged"), memcheck and racecheck on the layer_norm
#     workloads (the pipelined kernel over two looping blocks).
# Then, in a second call, the whole norms sweep: bash bench/ab/norms_sweep.sh "$OUT"
# h100_s18 (carry .whl), and redraw RESULTS.md's tables and plots from it.
#   bash bench/ab/pending_s18.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s18.sh OUTDIR}
. bench/ab/tl.sh
st() { echo "{\"fwd_staged\": true, \"fwd_words\": $1, \"fwd_staged_pipe\": $2}"; }
for op in ln rms; do
  tl "${op}16k" 120 --reps 30 --op "$op" --ns 16384 --dtypes float32 --tunes '{}' \
    "$(st 4 false)" "$(st 4 true)" "$(st 8 false)" "$(st 8 true)" '{}'
  tl "${op}12k" 120 --reps 30 --op "$op" --ns 12288 --dtypes float32 --tunes '{}' \
    "$(st 3 false)" "$(st 3 true)" "$(st 6 false)" "$(st 6 true)" '{}'
done
tl h16k 120 --reps 30 --ns 16384 --dtypes float16 --tunes '{}' \
  "$(st 2 false)" "$(st 2 true)" "$(st 4 false)" "$(st 4 true)" '{}'
ab_verify pending_s18 300 "pipelined or staged" "layer_norm"
