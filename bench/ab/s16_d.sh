#!/usr/bin/env bash
# Sixteenth session, fourth GPU call: s16_c.sh's test stage stopped at 99% when its
# 400 s ran out (three tests left). Again, with a per-test watchdog (pytest-timeout,
# 200 s, which dumps the stuck test's stack), then the sanitizers.
#   bash bench/ab/s16_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s16_d.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
W=$(mktemp -d)
TESTS="tests/test_layer_norm.py tests/test_torch_frontend.py tests/test_fast_path.py" \
  SAN_OPS="layer_norm:float16 layer_norm:bfloat16 layer_norm:float32" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=150 \
  timeout -k 10 560 bash bench/gpu_harness.sh "$W/verify" --stages tests,sanitize --workers 14 \
  --timeout 200 > "$W/harness.out" 2>&1
echo "harness rc $?"
cat "$W/verify/summary.md"
grep -E "^(FAILED|ERROR)|passed|failed|Timeout|^[0-9.]+s (call|setup)" "$W/verify/pytest.log" | head -50
tar czf "$OUT/s16_d.tgz" -C "$W" .
