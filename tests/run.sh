#!/usr/bin/env bash
# Set up Python and run the test-suite.
#   CPU-only machine (CI): the whole suite under numba's CUDA simulator, then every
#     shipped kernel compiled to PTX for sm_90 with real NVVM (ptxas: zero spills).
#   Machine with a GPU: the whole suite for real.
# Usage: bash tests/run.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh

if have_gpu; then
  setup_python "test,torch"
  exec "$PY" -m pytest -q "$@"
fi
setup_python "test,ci,torch"
echo "== simulator suite =="
# --durations: the slowest tests of each stage in CI's log (where its time goes);
# worksteal: idle workers take queued tests from busy ones (durations vary 100x).
NUMBA_ENABLE_CUDASIM=1 "$PY" -m pytest -q -n 2 --dist worksteal -p no:cacheprovider --durations=20 "$@"
echo "== PTX compile for sm_90 =="
"$PY" -m pytest -q -n 2 --dist worksteal -m ptx -p no:cacheprovider --durations=20 "$@"
