#!/usr/bin/env bash
# Fifty-fourth session: dropout v22 (the 16-bit vector forward's gelu as
# z sigmoid(z f(z^2)), bench/NOTES.md) on the H200.
#   t: the dropout GPU tests (tests/test_dropout.py, tests/test_nonfinite.py), then
#      tune_dropout's forward at 16384 x 4096, fp16 and bf16, gelu and 'none', on the
#      shipped plan and its neighbours (one row a batch against two; fill 4 against 0,
#      2, 8).
#   s: the four sanitizers at once on the dropout kernels (bench/sanitize.py's workload).
#   bash bench/ab/pending_s54.sh "$OUT" {t|s}
set -uo pipefail
OUT=${1:?"usage: pending_s54.sh OUTDIR t|s"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?t or s}" in
  t)
    timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
      tests/test_nonfinite.py > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests.log"
    for dt in float16 bfloat16; do
      timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/tune_$dt" --dtype "$dt" \
        --cases fwd --acts gelu,none --configs "shipped,unroll=2,fill=0,fill=2,fill=8" \
        > "$OUT/tune_$dt.log" 2>&1
      echo "tune $dt rc $?"; grep -E "^\|" "$OUT/tune_$dt/tune_dropout.md" | head -30
    done
    ;;
  s)
    SAN_TOOLS="memcheck racecheck synccheck initcheck" SAN_OPS=dropout SAN_TIMEOUT=420 \
      timeout -k 10 450 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
      > "$OUT/san.log" 2>&1
    cat "$OUT/san/summary.md"
    ;;
  *) echo "t or s" >&2; exit 2 ;;
esac
