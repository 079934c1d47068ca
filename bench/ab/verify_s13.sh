#!/usr/bin/env bash
# Thirteenth session's last GPU call: the GPU tests of this session's changes and of
# the test-trimming helper's commits (eight workers), then memcheck and racecheck on
# the dropout workload (now with final_step 1 and 4 over 37 partial rows).
#   bash bench/ab/verify_s13.sh "$OUT"     (about 8 minutes on an H100)
set -uo pipefail
OUT=${1:?usage: verify_s13.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 5 400 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 \
  --durations=12 tests/test_wgmma.py \
  "tests/test_dropout.py::test_bias_grad_last_block_reduction" \
  "tests/test_dropout.py::test_bad_launch_config" \
  "tests/test_bench_examples.py::test_profile_op_builds_every_op" \
  tests/test_layer_norm.py -k "wgmma or last_block_reduction or bad_launch_config or profile_op or row_slots or streaming_backward_accumulators or wide_backward" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $?"; tail -18 "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout -k 5 70 compute-sanitizer --tool $tool --report-api-errors no \
    python3 bench/sanitize.py dropout:float16 > "$OUT/$tool.log" 2>&1
  echo "$tool rc $?"; tail -3 "$OUT/$tool.log"
done
