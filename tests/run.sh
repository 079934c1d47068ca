#!/usr/bin/env bash
# Set up a virtual environment and run the test-suite.
#   CPU-only machine (CI): the whole suite under numba's CUDA simulator, then every
#     shipped kernel compiled to PTX for sm_90 with real NVVM (ptxas: zero spills).
#   Machine with a GPU: the whole suite for real.
# Usage: bash tests/run.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
if have_gpu; then
  "$PY" -m pip install -q -e ".[test,torch]"
  exec "$PY" -m pytest -q "$@"
fi
# The CPU build of torch that lies on this machine's disk: asking for it first keeps
# pip from resolving a multi-GB CUDA build for the [torch] extra.
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[test,ci,torch]"

echo "== simulator suite =="
NUMBA_ENABLE_CUDASIM=1 "$PY" -m pytest -q -n 2 -p no:cacheprovider "$@"
echo "== PTX compile for sm_90 =="
"$PY" -m pytest -q -m ptx -p no:cacheprovider "$@"
