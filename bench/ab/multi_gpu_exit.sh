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
# Before those: the library versions and the smallest processes (mini_*).
#   bash bench/ab/multi_gpu_exit.sh "$OUT"
# Answered in the forty-first session: only the torch group aborted, in numba's
# module_unload at exit (one library unloaded once per device that ran the kernel);
# fixed by launch._unload_each_library_once (bench/NOTES.md).
set -uo pipefail
OUT=${1:?usage: multi_gpu_exit.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONFAULTHANDLER=1
run() {
  timeout -k 5 150 python3 -X faulthandler -m pytest -q -p no:cacheprovider \
    tests/test_multi_gpu.py -k "$2" > "$OUT/exit_$1.log" 2>&1
  echo "$1: rc $?"; tail -4 "$OUT/exit_$1.log"
}
pip list 2> /dev/null | grep -iE "cuda|numba|cupy|torch" > "$OUT/versions.txt"
# The smallest processes: which library's use of device 1 is enough for the crash?
mini() {
  timeout -k 5 120 python3 -X faulthandler -c "$2" > "$OUT/mini_$1.log" 2>&1
  echo "mini $1: rc $?"; tail -3 "$OUT/mini_$1.log"
}
NB="from numba import cuda; import numpy as np"
mini numba1 "$NB
with cuda.gpus[1]:
    a = cuda.to_device(np.ones(4)); cuda.synchronize()"
mini numba01 "$NB
for d in (0, 1):
    with cuda.gpus[d]:
        a = cuda.to_device(np.ones(4)); cuda.synchronize()"
mini torch1 "import torch; x = torch.ones(4, device='cuda:1'); torch.cuda.synchronize(1)"
mini torch_numba1 "import torch; $NB
x = torch.ones(4, device='cuda:1')
with cuda.gpus[1]:
    a = cuda.to_device(np.ones(4)); cuda.synchronize()"
mini torch0_numba1 "import torch; $NB
x = torch.ones(4, device='cuda:0')
with cuda.gpus[1]:
    a = cuda.to_device(np.ones(4)); cuda.synchronize()"
mini op1 "import torch; from interop.torch import layer_norm
x = torch.randn(8, 256, device='cuda:1', dtype=torch.float16)
y = layer_norm(x, (256,)); torch.cuda.synchronize(1)"
mini cupy_numba1 "import cupy; $NB
with cupy.cuda.Device(1):
    c = cupy.ones(4)
with cuda.gpus[1]:
    a = cuda.to_device(np.ones(4)); cuda.synchronize()"
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
