#!/usr/bin/env bash
# The main job: set up Python and run the benchmark CLI (python -m bench).
# With no GPU the CLI says so and runs the simulator correctness demo instead.
# Usage: bash bench/run.sh [CLI args, see python -m bench --help]
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
if have_gpu; then
  setup_python "torch,bench"
  exec "$PY" -m bench "$@"
fi
setup_python "torch,bench,ci"
exec "$PY" -m bench "$@"
