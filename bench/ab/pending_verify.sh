#!/usr/bin/env bash
# The GPU verification waiting since the tenth session (its commits after d6d69fd ran
# only their own A/Bs and test subsets there): the dropout, LayerNorm and model-patch
# test files for real, then memcheck and racecheck on the dropout and layer_norm
# workloads (bench/sanitize.py). One call, under 10 minutes on an H200:
#   bash bench/ab/pending_verify.sh "$OUT"
# Logs: $OUT/pytest.log, $OUT/memcheck.log, $OUT/racecheck.log, $OUT/summary.md.
set -uo pipefail
OUT=${1:?usage: pending_verify.sh OUTDIR}
TESTS="tests/test_dropout.py tests/test_layer_norm.py tests/test_patch.py tests/test_fast_path.py" \
  SAN_OPS="dropout layer_norm" SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=270 \
  timeout -k 10 560 bash bench/gpu_harness.sh "$OUT" --stages tests,sanitize --workers 12
