#!/usr/bin/env bash
# Sixteenth session, third GPU call: the GPU tests and sanitizers of the new defaults
# (v13, two capped float32 groups), which s16_b.sh's output did not bring back, and
# inductor's generated norm forwards (bench/ab/inductor_ln_code.py). Logs are packed
# into one archive (the device returns few files).
#   bash bench/ab/s16_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s16_c.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
W=$(mktemp -d)
nvidia-smi -L
timeout -k 5 120 python3 bench/ab/inductor_ln_code.py --out "$W/inductor" 2>&1 | grep -v Warning | tail -30
TESTS="tests/test_layer_norm.py tests/test_torch_frontend.py tests/test_fast_path.py" \
  SAN_OPS="layer_norm:float16 layer_norm:bfloat16 layer_norm:float32" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=200 \
  timeout -k 10 400 bash bench/gpu_harness.sh "$W/verify" --stages tests,sanitize --workers 14 > "$W/harness.out" 2>&1
echo "harness rc $?"
cat "$W/verify/summary.md"
grep -E "^(FAILED|ERROR)|passed|failed" "$W/verify/pytest.log" | tail -15
tar czf "$OUT/s16_c.tgz" -C "$W" .
