#!/usr/bin/env bash
# Sixteenth session: v14 (fwd_welford) made the default on 16-byte streaming rows; its
# tests and the float64 checks at every GPU shape (N = 65536 among them) again.
#   bash bench/ab/s16_f.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s16_f.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
W=$(mktemp -d)
TESTS="tests/test_layer_norm.py" timeout -k 10 200 bash bench/gpu_harness.sh "$W/verify" \
  --stages tests --workers 14 -k "welford or mean_has_no or vs_float64 or within_2x" \
  --timeout 120 > "$W/harness.out" 2>&1
echo "harness rc $?"
cat "$W/verify/summary.md"
grep -E "^(FAILED|ERROR)|passed|failed" "$W/verify/pytest.log" | tail -8
tar czf "$OUT/s16_f.tgz" -C "$W" .
