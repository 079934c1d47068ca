#!/usr/bin/env bash
# Seventeenth session: GPU verification of the defaults v15 (bwd_lean_f32) and v16
# (fwd_staged_regs 2). Stage "tests": test_layer_norm.py, test_torch_frontend.py and
# test_fast_path.py for real (about 7 minutes with 14 workers); stage "sanitize":
# memcheck and racecheck on the layer_norm workloads, every dtype, a process per tool
# and dtype (one process a tool took racecheck past 330 s in the eighteenth session).
# One call each:
#   bash bench/ab/s17_verify.sh "$OUT" tests
#   bash bench/ab/s17_verify.sh "$OUT" sanitize
# Logs come back as one archive; the summary is printed.
set -uo pipefail
OUT=${1:?usage: s17_verify.sh OUTDIR tests|sanitize}
STAGE=${2:?usage: s17_verify.sh OUTDIR tests|sanitize}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
W=$(mktemp -d)
nvidia-smi -L
TESTS="tests/test_layer_norm.py tests/test_torch_frontend.py tests/test_fast_path.py" \
  SAN_OPS="layer_norm:float32 layer_norm:float16 layer_norm:bfloat16" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=400 \
  timeout -k 10 560 bash bench/gpu_harness.sh "$W/verify" --stages "$STAGE" --workers 14 \
  --timeout 200 > "$W/harness.out" 2>&1
echo "harness rc $?"
cat "$W/verify/summary.md"
grep -E "^(FAILED|ERROR)" "$W"/verify/*.log | head -20
tar czf "$OUT/s17_verify_$STAGE.tgz" -C "$W" .
