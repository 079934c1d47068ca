#!/usr/bin/env bash
# For the next session's device time (H200), two calls:
# a: every sanitizer on every op at this tree (gpu_harness.sh's sanitize stage: memcheck,
#    racecheck, synccheck, initcheck x dropout, layer_norm, attention, linear_act,
#    linear_act_wgmma, one process each, all at once). Since the last run of all four
#    tools on the norms and dropout, their kernels gained the cp.async rings (dropout
#    v13, LayerNorm bwd_stages), programmatic dependent launches (LayerNorm v35, dropout
#    v14) and v36-v37 / v15-v17; those had memcheck and racecheck only, never synccheck
#    or initcheck.
# b: GPU suite part 1 (dropout, patch, fast path): the forty-second session's run of the
#    old part 1 stopped 1-3 tests short of its end (parts 2-4 ran whole).
#   bash bench/ab/pending_s43.sh "$OUT" a|b
set -uo pipefail
OUT=${1:?usage: pending_s43.sh OUTDIR a|b}
case "${2:?a or b}" in
  a) SAN_TIMEOUT=540 timeout -k 10 580 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize ;;
  b) bash bench/ab/full_suite.sh "$OUT" 1 ;;
  *) echo "a or b" >&2; exit 2 ;;
esac
