#!/usr/bin/env bash
# Written in the thirty-eighth session (after its device time) for the next, an H200:
# dropout v14 candidate, LaunchConfig(bias_reduce="kernel_pdl"): the backward's
# bias-grad partial rows summed by the reduction kernel as a dependent launch (the
# backward's blocks trigger it as they start; its blocks wait in griddepcontrol.wait),
# so no block fences, counts itself in or sums at the end.
# Why (bench/notes_dropout.md, v13 measured): back to back, with its predecessor's
# dirty L2, that epilogue costs 5 us in the shipped kernel (trace: 74.2 against 69.7
# without the bias grad) and 13 in the staged one; the plain reduction kernel took
# the epilogue's cost out of the main kernel (staged: 69.7) but added 4.4 us of kernel
# and ~4 of gap (events 78.4).
#   a: tune_dropout fp16 / bf16 16384 x 4096, backward with the bias grad, configs
#      shipped, v4 reduce kernel, reduce pdl (nominal grid), its fill 1 and 2, stages=3
#      reduce pdl (fill 0 and 3), shipped; acts none, gelu. Prediction: the gap goes
#      and the reduction's ramp overlaps the main kernel's tail: 'none' 75-77 -> 73-75
#      (reduce pdl), 72-74 (stages=3 reduce pdl fill=3); gelu 109.5-110 -> 106-109.
#      ~3 minutes.
#   t: the GPU tests of the candidate and of the bias-grad reductions (`-k "pdl or
#      last_block_reduction or default_ring"`), then memcheck / racecheck of the
#      dropout workload (both reductions). ~4 minutes.
#   r: what the thirty-seventh session's run of the float64 gelu reference fix left
#      (747 passed, ~27 of linear_act's slowest cut off by its 200 s limit): the same
#      selection with 400 s. ~6 minutes.
#   If a wins: the default bias_reduce for the 16-bit backward (and the ring with it
#   where it wins), shipped_kernels entries, the dropout sweep (bench/dropout.py via
#   bench/ab/pending_sweep.sh) for RESULTS.md.
#   bash bench/ab/pending_s39.sh "$OUT" a|t|r
set -uo pipefail
OUT=${1:?usage: pending_s39.sh OUTDIR a|t|r}
PART=${2:?usage: pending_s39.sh OUTDIR a|t|r}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
a)
  for dt in float16 bfloat16; do
    cfgs="shipped,v4 reduce kernel,reduce pdl,reduce pdl fill=1,reduce pdl fill=2"
    cfgs="$cfgs,stages=3 reduce pdl,stages=3 reduce pdl fill=3,shipped"
    timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/td_$dt" --reps 30 --dtype "$dt" \
      --configs "$cfgs" --acts none,gelu --cases bwd > "$OUT/td_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/td_$dt.log"
  done
  ;;
t)
  timeout -k 5 240 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
    -m "not ptx" -k "pdl or last_block_reduction or default_ring" --timeout 200 \
    > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -2 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head
  SAN_OPS="dropout:float16 dropout:float32" SAN_TOOLS="memcheck racecheck" \
    SAN_TIMEOUT=100 timeout -k 10 230 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
    > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  ;;
r)
  timeout -k 5 420 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
    tests/test_linear_act.py -m "not ptx" -k "gelu or ref or within_twice or linear_act" \
    --timeout 300 > "$OUT/r_tests.log" 2>&1
  echo "tests rc $?"; tail -2 "$OUT/r_tests.log"; grep -E "^FAILED" "$OUT/r_tests.log" | head -20
  ;;
*) echo "PART must be a, t or r" >&2; exit 2 ;;
esac
