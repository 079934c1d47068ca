#!/usr/bin/env bash
# For the next session's device time (H200), four calls:
# a1, a2: every sanitizer on every op at this tree (gpu_harness.sh's sanitize stage:
#    dropout, layer_norm (a process per dtype), attention, linear_act, linear_act_wgmma,
#    one process each, all at once; a1 memcheck and racecheck, a2 synccheck and
#    initcheck: fourteen processes a call). Since the last run of all four
#    tools on the norms and dropout, their kernels gained the cp.async rings (dropout
#    v13, LayerNorm bwd_stages), programmatic dependent launches (LayerNorm v35, dropout
#    v14) and v36-v37 / v15-v17; those had memcheck and racecheck only, never synccheck
#    or initcheck.
# b: GPU suite part 1 (dropout, patch, fast path): the forty-second session's run of the
#    old part 1 stopped 1-3 tests short of its end (parts 2-4 ran whole).
# c: through interop.torch at dropout v17 / LayerNorm v37 (bench/ab/interop_s27.sh; the
#    last such run was at v10 / v31): issue #16 asks for the targets there too.
# Order if the device time runs short: a1, a2, c, b.
#   bash bench/ab/pending_s43.sh "$OUT" a1|a2|b|c
set -uo pipefail
OUT=${1:?usage: pending_s43.sh OUTDIR a1|a2|b|c}
# layer_norm one dtype a process: its racecheck took 238 s for float16 alone
# (thirty-second session), over the limit for all three in one process.
OPS="dropout layer_norm:float32 layer_norm:float16 layer_norm:bfloat16 attention linear_act"
OPS="$OPS linear_act_wgmma"
san() { SAN_TOOLS="$1" SAN_OPS="$OPS" SAN_TIMEOUT=540 timeout -k 10 580 \
          bash bench/gpu_harness.sh "$OUT/san" --stages sanitize; }
case "${2:?a1, a2, b or c}" in
  a1) san "memcheck racecheck" ;;
  a2) san "synccheck initcheck" ;;
  b) bash bench/ab/full_suite.sh "$OUT" 1 ;;
  c) bash bench/ab/interop_s27.sh "$OUT" ;;
  *) echo "a1, a2, b or c" >&2; exit 2 ;;
esac
