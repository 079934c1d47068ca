#!/usr/bin/env bash
# Twenty-seventh session, H200, verification of LayerNorm v31 (the dW / dB reduction
# under launch bounds for two 1024-thread blocks an SM: 32 registers, one wave): the
# whole norms sweep (one run; carry .whl for Liger), the dW / dB tests on the GPU,
# memcheck / racecheck of bench/sanitize.py's layer_norm_bwd workload. Predicted:
# LayerNorm bwd 1-2.5 us faster at 16-bit N = 4096 / 8192 and float32 4096 / 8192,
# nothing else moves. About 6 minutes.
#   bash bench/ab/s27_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s27_e.sh OUTDIR}
bash bench/ab/norms_sweep.sh "$OUT" h200_s27_v31 | tail -5
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
V=$(mktemp -d)
TESTS="tests/test_layer_norm.py" SAN_OPS="layer_norm_bwd" SAN_TOOLS="memcheck racecheck" \
  SAN_TIMEOUT=150 timeout -k 10 200 bash bench/gpu_harness.sh "$V" --stages tests,sanitize \
  --workers 14 -k "dwdb or deterministic" --timeout 150 > "$V/harness.out" 2>&1
echo "harness rc $?"
cat "$V/summary.md"
tar czf "$OUT/s27_e.tgz" -C "$V" .
