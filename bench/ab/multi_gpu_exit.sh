#!/usr/bin/env bash
# Where does tests/test_multi_gpu.py's pytest process crash at exit? (found in the
# fortieth session on nvidia-h200-x2: 19 passed, then a segmentation fault, rc 139;
# with test_ddp.py beside it "double free or corruption (!prev)", rc 134.) Needs two
# GPUs. Each line runs one group of the file's tests in its own process with Python's
# faulthandler on, and prints the exit code and the last lines (the crashing thread's
# Python stack, if the crash is under a Python frame):
#   torch   the torch ops on the other device (interop.torch)
#   mask    the dropout mask on the other device
#   cupy    interop.cupy on the other device
#   numba   numba device arrays on the other device
#   raise   inputs on two devices (raises before any launch)
# then, if gdb is there, the whole file under gdb for the native stack of the crash.
#   bash bench/ab/multi_gpu_exit.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: multi_gpu_exit.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONFAULTHANDLER=1
run() {
  timeout -k 5 150 python3 -X faulthandler -m pytest -q -p no:cacheprovider \
    tests/test_multi_gpu.py -k "$2" > "$OUT/exit_$1.log" 2>&1
  echo "$1: rc $?"; tail -4 "$OUT/exit_$1.log"
}
run torch "test_torch_op_on_other_device"
run mask "test_dropout_mask_same_on_other_device"
run cupy "test_cupy_on_other_device"
run numba "test_numba_arrays_on_other_device"
run raise "test_inputs_on_two_devices_raise_before_launch"
if command -v gdb > /dev/null; then
  timeout -k 5 200 gdb -q -batch -ex run -ex bt --args python3 -m pytest -q \
    -p no:cacheprovider tests/test_multi_gpu.py > "$OUT/exit_gdb.log" 2>&1
  echo "gdb rc $?"; grep -A25 "received signal" "$OUT/exit_gdb.log" | head -40
else
  echo "no gdb"
fi
