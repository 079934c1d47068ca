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
#   bash bench/ab/pending_s31.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s31.sh OUTDIR a|b|c}
PART=${2:?usage: pending_s31.sh OUTDIR a|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a) bash bench/ab/norms_sweep.sh "$OUT" h200_s31_v33 | tail -5 ;;
b) bash bench/ab/full_suite.sh "$OUT" 2 ;;
c) bash bench/ab/full_suite.sh "$OUT" 1 ;;
*) echo "PART must be a, b or c" >&2; exit 2 ;;
esac
