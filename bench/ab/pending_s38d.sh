#!/usr/bin/env bash
# Thirty-eighth session, H200: v13 as the default (the 16-bit backward without a bias
# grad, Philox draws: a 3-slot cp.async ring at three waves; pending_s38b.sh c).
#   v: tune_dropout at 16384 x 4096, fp16 and bf16, the backward without a bias grad for
#      all seven activations, shipped (v13) against stages=0 (v10's register batches);
#      the GPU tests of test_dropout.py; memcheck / racecheck of the dropout workload
#      (its 16-bit backward without the bias grad now takes the ring).
#      Prediction: every activation 1-5 us faster (none 1-2.5, gelu 3-4.7, measured).
#   bash bench/ab/pending_s38d.sh "$OUT" v
set -uo pipefail
OUT=${1:?usage: pending_s38d.sh OUTDIR v}
PART=${2:?usage: pending_s38d.sh OUTDIR v}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
v)
  acts=none,relu,gelu,gelu_tanh,squared_relu,leaky_relu,silu
  for dt in float16 bfloat16; do
    timeout -k 5 110 python3 bench/tune_dropout.py --out "$OUT/tdv_$dt" --reps 30 --dtype "$dt" \
      --configs "shipped,stages=0,shipped" --acts "$acts" --cases "bwd nobias" \
      > "$OUT/tdv_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/tdv_$dt.log"
  done
  timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
    -m "not ptx" --timeout 150 > "$OUT/v_tests.log" 2>&1
  echo "tests rc $?"; tail -2 "$OUT/v_tests.log"; grep -E "^FAILED" "$OUT/v_tests.log" | head
  SAN_OPS="dropout:float16 dropout:bfloat16" SAN_TOOLS="memcheck racecheck" \
    SAN_TIMEOUT=70 timeout -k 10 160 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
    > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  ;;
*) echo "PART must be v" >&2; exit 2 ;;
esac
