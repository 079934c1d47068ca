#!/usr/bin/env bash
# Twenty-ninth session, second call: s29_verify.sh's test stage ran past its 290 s
# (7 failures, no summary: the tests take ~300 s on 14 workers) and the layer_norm
# sanitizer workloads past 150 s. Here: the whole test_layer_norm.py with -rf under
# 420 s, then memcheck and racecheck of the short layer_norm_staged workload (the
# staged forward the retirement changed) at every dtype.
#   bash bench/ab/s29_verify2.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s29_verify2.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
V=$(mktemp -d)
TESTS="tests/test_layer_norm.py" timeout -k 10 420 bash bench/gpu_harness.sh "$V" \
  --stages tests --workers 15 --timeout 200 -rf > "$V/harness_tests.out" 2>&1
echo "tests rc $?"
SAN_OPS="layer_norm_staged" SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=100 \
  timeout -k 10 120 bash bench/gpu_harness.sh "$V" --stages sanitize \
  > "$V/harness_san.out" 2>&1
echo "sanitize rc $?"
cat "$V/summary.md"
grep -E "^(FAILED|ERROR)" "$V/pytest.log" | head -30
tar czf "$OUT/s29_verify2.tgz" -C "$V" .
