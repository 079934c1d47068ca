#!/usr/bin/env bash
# Written in the thirtieth session for the next (an H200). Each part fits one call:
#   a: the norms sweep at v33 (float32 LayerNorm N = 4096 and RMSNorm N = 16384 on the
#      plain kernel with w / b late under launch bounds), carry .whl for Liger: ~5-8
#      minutes. Then on the CPU:
#      python3 bench/layer_norm.py --from-json FILE --plot bench/results
#      Predicted against v32 (bench/RESULTS.md): those two forwards 0.5-1.2 us faster,
#      still behind inductor; nothing else moves.
#   b: GPU suite part 2 (attention, linear_act, wgmma, gated, tensor cores, mbarrier),
#      not run since the fourteenth session (its code has not changed since).
#   c: GPU suite part 1 (dropout, LayerNorm, patch, fast path) at v33 (the thirtieth
#      session ran it at v32, and v33's own tests after).
#   d: the v34 candidate (tuning bwd_fused_dwdb: one-row backward kernels sum dW / dB by
#      their last arrivals, no dW / dB kernel): its tests and memcheck / racecheck of
#      sanitize.py layer_norm_bwd, then its A/B against the default at 16-bit N = 4096
#      / 8192 (LayerNorm, RMSNorm) and float32 N = 2048 / 4096 LayerNorm, two passes.
#      Predicted: 1-3 us off each backward (the dW / dB kernel's launch gap and ramp;
#      its own 4-5 us against 2-3 for the fused sums); a loss would point at the
#      reducers' L2 round trips (FUSED_UNROLL) or their count (half the grid).
#   bash bench/ab/pending_s31.sh "$OUT" a|b|c|d
set -uo pipefail
OUT=${1:?usage: pending_s31.sh OUTDIR a|b|c|d}
PART=${2:?usage: pending_s31.sh OUTDIR a|b|c|d}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a) bash bench/ab/norms_sweep.sh "$OUT" h200_s31_v33 | tail -5 ;;
b) bash bench/ab/full_suite.sh "$OUT" 2 ;;
c) bash bench/ab/full_suite.sh "$OUT" 1 ;;
d)
  TL_DIR="$OUT/tl"
  mkdir -p "$TL_DIR"
  . bench/ab/tl.sh
  ab_verify v34_verify 200 "fused_dwdb or one_row_backward" \
    "layer_norm_bwd:float16 layer_norm_bwd:bfloat16 layer_norm_bwd:float32"
  F='{"bwd_fused_dwdb": true}'
  tl ln16 90 --reps 30 --op ln --ns 4096,8192 --dtypes float16,bfloat16 --tunes '{}' "$F" '{}' "$F"
  tl rms16 60 --reps 30 --op rms --ns 4096,8192 --dtypes float16 --tunes '{}' "$F" '{}' "$F"
  tl ln32 60 --reps 30 --op ln --ns 2048,4096 --dtypes float32 --tunes '{}' "$F" '{}' "$F"
  ;;
*) echo "PART must be a, b, c or d" >&2; exit 2 ;;
esac
