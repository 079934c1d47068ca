"""The same mimic kernel built four ways, timed against each other, ours and
torch.compile (issue #16; written in the sixty-first session for the next one).

    python3 bench/ab/cubin_ab.py [--out DIR] [--rows 16384] [--passes 5] [--reps 30]

Why. ``bench/ab/rms_mimic.py`` (sixty-first session, H200) is a numba kernel whose
SASS instruction list is inductor's float32 RMSNorm 4096 forward nearly line for line
(26 registers against 28, ~100 instructions, the same loads with the same eviction
hints, the same two-barrier reduction): it ran **+2.8 us** behind torch.compile
(131.3 against 128.5), behind our own kernel (129.3). So the gap is not in the
instruction list. What differs is how the binary is made and launched: numba hands
PTX to the driver (``compute_90a`` on a Hopper device), which assembles it with its
own ptxas at load time; Triton assembles for ``sm_90a`` with the ptxas it ships,
offline. Scheduling control
bits (stall counts, yields, barriers on the scoreboard), which mnemonic lists do not
show, come from that step. Here the mimic's PTX is loaded four ways through CuPy's
module API and launched with the same arguments:

- ``jit`` / ``jit90a``: the PTX for sm_90 / retargeted to sm_90a, assembled by the
  driver (the latter what numba does on the device);
- ``ptxas90``: assembled offline for sm_90 by the toolkit's ptxas;
- ``ptxas90a``: the PTX retargeted to sm_90a, then the same;
- ``triton``: Triton's bundled ptxas for sm_90a (where the image has it).

each also as ``<name>_c<P>``: the same cubin with the preferred shared-memory carveout
set to P % (``--carveout``, default 7: ncu read our kernels' shared-memory
configuration as 8 KB and inductor's as 16 KB); plus ``numba`` (the mimic through
numba's dispatcher), ``ours`` and ``compile``. Every
output is checked against float64 first. ``--out``: each cubin's ``cuobjdump -sass``
and inductor's own kernel's (from its cache), with the ptxas versions, so the control
bits can be compared line by line. Predicted: if the binary's origin is the gap,
``ptxas90a`` / ``triton`` time with compile and ``jit`` with ``numba``.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from inductor_cubin import CARVEOUT_ATTR  # noqa: E402
from rms_mimic import (N, THREADS, baseline_providers, check, mimic_source,  # noqa: E402
                       numba_provider, time_providers)


def mimic_ptx():
    """The mimic's PTX for sm_90 and its entry name."""
    from numba import cuda

    fn, sig = mimic_source()
    ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0))
    return ptx, re.search(r"\.entry\s+(\S+)\(", ptx).group(1)


def triton_ptxas():
    """Triton's bundled ptxas, or None."""
    try:
        import triton
    except ImportError:
        return None
    root = os.path.dirname(triton.__file__)
    hits = glob.glob(os.path.join(root, "backends", "nvidia", "bin", "ptxas*"))
    return next((h for h in hits if os.path.basename(h) == "ptxas"), None)


def toolkit_ptxas():
    from numba_fused.registry import find_ptxas

    return find_ptxas() or shutil.which("ptxas")


def assemble(ptx, arch, ptxas, tmp):
    """cubin bytes of ``ptx`` for ``arch`` by ``ptxas`` (retargeted to ``arch``). An
    older ptxas (Triton's 12.8 reads PTX ISA 8.7, numba writes 9.0) gets the PTX with
    its ``.version`` lowered to the one it names in its refusal: the mimic uses nothing
    newer."""
    src = os.path.join(tmp, f"{arch}_{abs(hash(ptxas))}.ptx")
    obj = src[:-4] + ".cubin"
    text = re.sub(r"^\.target\s+\S+", f".target {arch}", ptx, flags=re.M)
    for _ in range(2):
        with open(src, "w") as f:
            f.write(text)
        done = subprocess.run([ptxas, f"-arch={arch}", src, "-o", obj], capture_output=True,
                              text=True)
        known = re.search(r"current version is '([0-9.]+)'", done.stderr)
        if done.returncode == 0 or known is None:
            break
        text = re.sub(r"^\.version\s+\S+", f".version {known.group(1)}", text, flags=re.M)
    if done.returncode:
        raise RuntimeError(f"{ptxas} -arch={arch}: {done.stderr.strip()}")
    with open(obj, "rb") as f:
        return f.read(), obj


def array_args(t):
    """numba's flattened 1-D array argument for tensor ``t``: meminfo, parent, nitems,
    itemsize, data, shape, stride (bytes)."""
    n = t.numel()
    return (np.uint64(0), np.uint64(0), np.int64(n), np.int64(4), np.uint64(t.data_ptr()),
            np.int64(n), np.int64(4))


def version(tool):
    try:
        return subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError as exc:
        return f"unavailable: {exc}"


def dump_sass(obj, dest):
    tool = shutil.which("cuobjdump")
    if tool is None:
        return
    with open(dest, "w") as f:
        subprocess.run([tool, "-sass", obj], stdout=f, stderr=subprocess.STDOUT)


def main(argv=None):
    import cupy
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--carveout", type=int, default=7)
    args = ap.parse_args(argv)
    out = args.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    m = args.rows
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, N, device="cuda", generator=g)
    w = torch.rand(N, device="cuda", generator=g) + 0.5
    ptx, entry = mimic_ptx()
    with open(os.path.join(out, "mimic.ptx"), "w") as f:
        f.write(ptx)

    # cuModuleLoadData takes NUL-terminated PTX.
    images = {"jit": ptx.encode() + b"\0",
              "jit90a": re.sub(r"^\.target\s+\S+", ".target sm_90a", ptx, flags=re.M).encode()
              + b"\0"}
    tk, tr = toolkit_ptxas(), triton_ptxas()
    print(f"toolkit ptxas {tk}: {version(tk) if tk else '-'}")
    print(f"triton ptxas {tr}: {version(tr) if tr else '-'}")
    for name, arch, tool in (("ptxas90", "sm_90", tk), ("ptxas90a", "sm_90a", tk),
                             ("triton", "sm_90a", tr)):
        if tool is None:
            print(f"| {name} | skipped: no ptxas |")
            continue
        try:
            images[name], obj = assemble(ptx, arch, tool, out)
        except RuntimeError as exc:
            print(f"| {name} | skipped: {exc} |")
            continue
        dump_sass(obj, os.path.join(out, f"{name}.sass"))

    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    funcs = {}
    for name, image in images.items():
        for carve in (None, args.carveout):
            mod = cupy.cuda.function.Module()
            mod.load(image)
            fn = mod.get_function(entry)
            key = name
            if carve is not None:
                cupy.cuda.driver.funcSetAttribute(fn.ptr, CARVEOUT_ATTR, carve)
                key = f"{name}_c{carve}"
            funcs[key] = (mod, fn)

    def launcher(fn):
        def run(x, w):
            y = torch.empty_like(x)
            fn((m,), (THREADS,), array_args(x.view(-1)) + array_args(w) + array_args(y.view(-1)),
               stream=stream)
            return y
        return run

    provs = {name: launcher(fn) for name, (_, fn) in funcs.items()}
    provs.update(numba=numba_provider(m), **baseline_providers())
    good = check(provs, x, w, slice(-512, None))
    for path in glob.glob("/tmp/torchinductor_*/**/*.cubin", recursive=True):
        if "rms_norm" in path:
            dump_sass(path, os.path.join(out, "inductor_" + os.path.basename(path) + ".sass"))
    time_providers({k: v for k, v in provs.items() if k in good}, x, w, args.passes,
                   args.reps)


if __name__ == "__main__":
    main()
