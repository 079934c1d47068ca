#!/usr/bin/env bash
# Written in the thirty-sixth session for the next (an H200), after v37 went default
# (tuning bwd_rms_sum1 None: RMSNorm's backward reduces its one row sum but at blocks of
# several rows of several warps; bench/NOTES.md).
#   t: the RMSNorm GPU tests under v37's default (test_layer_norm.py -k rms, not the
#      PTX ones; 14 workers, ~3.5 minutes). In the thirty-sixth session 161 passed and
#      15 failed, all on kernel-name assertions that did not expect the _s1 suffix
#      (results/s36_ab/rms_gpu_tests_before_name_fix.log); the tests were fixed on the
#      CPU after the device time ran out. Prediction: 176 passed.
#   c: the norms sweep at v37, Liger included (carry .whl; ~8 minutes): RESULTS.md's
#      table and plots, LayerNorm's rows unchanged from v36 within the runs' spread.
#   bash bench/ab/pending_s37.sh "$OUT" t|c
set -uo pipefail
OUT=${1:?usage: pending_s37.sh OUTDIR t|c}
PART=${2:?usage: pending_s37.sh OUTDIR t|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
t)
  timeout -k 5 280 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_layer_norm.py \
    -m "not ptx" -k rms --timeout 200 > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -4 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head -20
  ;;
c)
  bash bench/ab/norms_sweep.sh "$OUT" h200_s37_v37
  ;;
*) echo "PART must be t or c" >&2; exit 2 ;;
esac
