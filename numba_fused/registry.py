"""Every kernel specialisation the package ships, for the PTX compile check.

Each op module defines ``shipped_kernels()`` yielding the :class:`~numba_fused.launch.Kernel`
objects its launchers can pick (every dtype x flag x block combination). CI
compiles all of them to PTX for sm_90 with real NVVM and runs ptxas on the result
(registers, spills), so typing errors the simulator cannot see fail the build.
"""

import contextlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

__all__ = ["OP_MODULES", "all_kernels", "find_ptxas", "ptxas_report", "offline_compile"]

OP_MODULES = ("dropout", "layer_norm", "attention", "linear_act")


def all_kernels(ops=OP_MODULES):
    """All shipped kernels of the op modules (of ``ops``) present in this checkout."""
    for name in ops:
        try:
            mod = importlib.import_module(f"numba_fused.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"numba_fused.{name}":
                continue
            raise
        yield from mod.shipped_kernels()


@contextlib.contextmanager
def offline_compile(cc=(9, 0)):
    """Let kernels that call ``cuda.jit(device=True)`` functions compile to PTX on a
    machine without a GPU.

    numba-cuda compiles a device function for the *current device's* compute
    capability (``CUDADispatcher.compile_device``), which needs a driver even when
    the caller only wants PTX. While this context is active and no GPU is present,
    that lookup answers ``cc``. With a GPU present nothing is changed.
    """
    from numba import cuda

    if cuda.is_available():
        yield
        return
    probe = cuda.jit(device=True)(lambda: None)
    mod = sys.modules[type(probe).__module__]
    original = mod.get_current_device

    class _Device:
        compute_capability = cc

    mod.get_current_device = lambda: _Device
    try:
        yield
    finally:
        mod.get_current_device = original


def _find_tool(name):
    """Path of CUDA tool ``name``: $NAME (upper case), the PATH, the CUDA toolkit, or
    an NVIDIA wheel's ``nvidia/<package>/bin``; None if there is none."""
    env = os.environ.get(name.upper())
    if env:
        return env
    found = shutil.which(name)
    if found:
        return found
    cand = os.path.join("/usr/local/cuda/bin", name)
    if os.path.exists(cand):
        return cand
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        for sub in sorted(os.listdir(base)):
            cand = os.path.join(base, sub, "bin", name)
            if os.path.exists(cand):
                return cand
    return None


def find_ptxas():
    """Path of a ptxas: $PTXAS, the CUDA toolkit, or the nvidia-cuda-nvcc wheel."""
    return _find_tool("ptxas")


def find_nvdisasm():
    """Path of an nvdisasm: $NVDISASM, the CUDA toolkit, or the nvidia-cuda-nvdisasm
    wheel (the [ci] extra); None if there is none."""
    return _find_tool("nvdisasm")


def sass(ptx, arch="sm_90", ptxas=None, nvdisasm=None):
    """SASS text of ``ptx`` assembled for ``arch`` (ptxas, then nvdisasm); no GPU
    needed. Raises RuntimeError when a tool is missing or fails."""
    ptxas = ptxas or find_ptxas()
    nvdisasm = nvdisasm or find_nvdisasm()
    if ptxas is None or nvdisasm is None:
        raise RuntimeError("sass needs ptxas and nvdisasm (install numba-fused[ci])")
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        for cmd in ([ptxas, f"-arch={arch}", src, "-o", obj], [nvdisasm, obj]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"{os.path.basename(cmd[0])} failed:\n{proc.stderr}")
    return proc.stdout


_REGS = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")
_SMEM = re.compile(r"(\d+) bytes smem")


def ptxas_report(ptx, arch="sm_90", ptxas=None):
    """Assemble ``ptx`` and return {'registers', 'spill_stores', 'spill_loads',
    'stack', 'smem'} for its (single) kernel."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise RuntimeError("no ptxas found (install numba-cuda[cu12] or set $PTXAS)")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                              capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"ptxas failed:\n{proc.stderr}")
    text = proc.stderr + proc.stdout
    regs = _REGS.search(text)
    spill = _SPILL.search(text)
    stack = _STACK.search(text)
    smem = _SMEM.search(text)
    return {
        "registers": int(regs.group(1)) if regs else 0,
        "spill_stores": int(spill.group(1)) if spill else 0,
        "spill_loads": int(spill.group(2)) if spill else 0,
        "stack": int(stack.group(1)) if stack else 0,
        "smem": int(smem.group(1)) if smem else 0,
    }
