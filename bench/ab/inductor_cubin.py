"""Inductor's own float32 RMSNorm 4096 cubin launched outside torch.compile (issue #16,
sixty-third session).

    python3 bench/ab/inductor_cubin.py [--rows 16384] [--passes 5] [--reps 30] [--out DIR]

Why. ``bench/ab/rms_mimic.py`` (a numba kernel with inductor's instruction list) ran
2.8 us behind torch.compile, and ``bench/ab/cubin_ab.py`` found the mimic's binary
equally slow however it is assembled (driver JIT, ptxas 13.0, Triton's ptxas 12.8) and
however it is launched (numba's dispatcher or CuPy's module API). Never timed: Triton's
own cubin, the one torch.compile runs, launched the way the mimic is. That splits the
remaining gap in two: if inductor's cubin launched through CuPy times with compile, the
difference is in the binary (something the mimic's source does not reproduce); if it
times with the mimic, it is in how torch.compile's call launches it (Triton's launcher,
its arguments, its allocations), not in any kernel.

How. torch.compile is run once on ``F.rms_norm``; every Triton cache entry whose name
holds ``rms_norm`` is loaded with its metadata (``num_warps``, ``shared``) and its PTX's
parameter list (pointers x, w, y; the two 32-bit sizes; any further 64-bit scratch
pointers get 0), launched on a grid of one block a row, checked against float64, and
timed beside the mimic (numba), ours and torch.compile in alternating passes, each
also with the carveout preference 7 (the sixty-second session's lever on the mimic)
and once more from its PTX through the driver's JIT (``ptxjit``: numba's route).
"""

import argparse
import glob
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from rms_mimic import N, check, setup, time_providers  # noqa: E402

CARVEOUT_ATTR = 9  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT


def cache_entries():
    """(cubin path, metadata dict, PTX text) of every cached Triton kernel whose name
    holds rms_norm, from Triton's cache and inductor's."""
    roots = [os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))]
    roots += glob.glob("/tmp/torchinductor_*")
    seen, out = set(), []
    for root in roots:
        for cubin in glob.glob(os.path.join(root, "**", "*.cubin"), recursive=True):
            if "rms_norm" not in os.path.basename(cubin):
                continue
            stem = cubin[:-len(".cubin")]
            meta_path, ptx_path = stem + ".json", stem + ".ptx"
            if not (os.path.exists(meta_path) and os.path.exists(ptx_path)):
                continue
            blob = open(cubin, "rb").read()
            if blob in seen:
                continue
            seen.add(blob)
            out.append((cubin, json.load(open(meta_path)), open(ptx_path).read()))
    return out


def param_kinds(ptx):
    """The entry's name and its parameters' PTX types, in order."""
    m = re.search(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, flags=re.S)
    kinds = re.findall(r"\.param\s+\.(\w+)", m.group(2))
    return m.group(1), kinds


def kernel_args(kinds, x, w, y, m):
    """x, w, y's pointers, then the 32-bit sizes (rows, N), then null 64-bit pointers
    (Triton's global / profile scratch)."""
    ptrs = [np.uint64(t.data_ptr()) for t in (x, w, y)]
    ints = [np.int32(m), np.int32(N)]
    args = []
    for kind in kinds:
        if kind in ("u64", "b64", "s64"):
            args.append(ptrs.pop(0) if ptrs else np.uint64(0))
        elif kind in ("u32", "b32", "s32"):
            args.append(ints.pop(0) if ints else np.int32(0))
        else:
            raise RuntimeError(f"unexpected parameter type .{kind}")
    if ptrs:
        raise RuntimeError(f"fewer pointer parameters than x, w, y: {kinds}")
    return tuple(args)


def one_row_a_block(launch, x, w):
    """Whether ``launch(x, w, y)`` (grid: a block a row of x) stays within x's rows:
    run on x's rows at the top of buffers of twice as many, y's rows beyond must stay
    NaN (an autotuning config of several rows a program would write past them)."""
    import torch

    m = x.shape[0]
    xx = torch.zeros((2 * m, N), device=x.device, dtype=x.dtype)
    xx[:m] = x
    yy = torch.full_like(xx, float("nan"))
    launch(xx, w, yy)
    torch.cuda.synchronize()
    return bool(torch.isnan(yy[m:]).all())


def main(argv=None):
    import cupy
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--carveout", type=int, default=7)
    ap.add_argument("--out", default=None, help="copy each cubin and its PTX here")
    args = ap.parse_args(argv)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    m = args.rows
    x, w, provs = setup(m, compile_now=True)
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    keep = []
    for k, (cubin, meta, ptx) in enumerate(cache_entries()):
        entry, kinds = param_kinds(ptx)
        threads = 32 * int(meta["num_warps"])
        shared = int(meta.get("shared", 0))
        print(f"| cubin {k} | {cubin.replace(os.path.expanduser('~'), '~')} | {entry} | "
              f"warps {meta['num_warps']} shared {shared} | params {kinds} |", flush=True)
        if args.out:
            shutil.copy(cubin, os.path.join(args.out, f"inductor{k}.cubin"))
            with open(os.path.join(args.out, f"inductor{k}.ptx"), "w") as f:
                f.write(ptx)
        # The cubin as Triton's ptxas made it, twice, then its PTX through the driver's
        # JIT (numba's route to a binary).
        for carve, source in ((None, "cubin"), (args.carveout, "cubin"), (None, "ptxjit")):
            mod = cupy.cuda.function.Module()
            if source == "cubin":
                mod.load_file(cubin)
            else:
                mod.load(ptx.encode() + b"\0")
            fn = mod.get_function(entry)
            if carve is not None:
                cupy.cuda.driver.funcSetAttribute(fn.ptr, CARVEOUT_ATTR, carve)
            keep.append(mod)

            def launch(x, w, y, fn=fn, kinds=kinds, threads=threads, shared=shared):
                fn((m,), (threads,), kernel_args(kinds, x, w, y, m), shared_mem=shared,
                   stream=stream)
                return y

            if carve is None and not one_row_a_block(launch, x, w):
                print(f"| cubin {k} | writes past row {m}: more than one row a block, "
                      "skipped |", flush=True)
                break
            provs[f"{source}{k}" + ("" if carve is None else f"_c{carve}")] = (
                lambda x, w, launch=launch: launch(x, w, torch.empty_like(x)))
    if not keep:
        print("| no rms_norm cubin found in the Triton / inductor caches |")
    good = check(provs, x, w, slice(-512, None))
    time_providers({k: v for k, v in provs.items() if k in good}, x, w, args.passes,
                   args.reps)


if __name__ == "__main__":
    main()
