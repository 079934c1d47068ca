# Sourced by tests/run.sh and bench/run.sh: picks the Python to run with ($PY).
#   GPU machine whose python3 already has numba-cuda, torch and pytest (the lent
#   GPU's image, which cannot install anything): use it as is, from the source tree.
#   Otherwise: a virtual environment in $VENV with the package installed editable;
#   on CPU-only machines torch is the CPU build that lies on the machine's disk.
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

setup_python() {  # $1: extras for pip, e.g. "test,ci,torch"
  if have_gpu && "$PYTHON" -c "import numba.cuda, numpy, torch, pytest" >/dev/null 2>&1; then
    PY="$PYTHON"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    return
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  PY="$VENV/bin/python"
  "$PY" -m pip install -q --upgrade pip
  if ! have_gpu; then
    # Asking for the on-disk CPU build first keeps pip from resolving a multi-GB
    # CUDA build for the [torch] extra.
    "$PY" -m pip install -q "torch==2.13.0"
  fi
  "$PY" -m pip install -q -e ".[$1]"
}
