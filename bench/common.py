"""Timing method shared by the benchmark scripts.

- CUDA events around the timed call, warm-up first, median (and p20/p80) of
  ``reps`` runs, queued behind a GPU sleep so that the events time device work, not
  the host's enqueue rate (:func:`time_cuda`);
- inputs rotated among enough copies that together they exceed the L2 (so a run
  does not read what the previous one left in cache);
- random data, never zeros;
- the device copy bandwidth measured in the same process, to express memory-bound
  ops as a fraction of what the card really moves;
- host launch cost: wall time per call of a tiny problem, no synchronisation;
- a correctness check of every provider's output before it is timed
  (:func:`rel_err`, :func:`check_status`; float64 references computed with torch on
  the GPU);
- peak memory of one call (:func:`peak_mb`);
- CuPy as a provider (:func:`cupy_or_none`, :func:`cupy_on_torch_stream`,
  :func:`to_cupy`): CuPy arrays made from the same torch tensors by DLPack (zero
  copy), CuPy's current stream set to torch's so torch's CUDA events time its work.
"""

import contextlib
import statistics
import time

__all__ = ["Timing", "time_cuda", "copy_bandwidth", "host_overhead_us", "rotations", "gpu_info",
           "CHECK_TOL", "rel_err", "check_status", "peak_mb", "cupy_or_none",
           "cupy_on_torch_stream", "cupy_torch_allocator", "to_cupy", "to_torch", "liger_or_none",
           "note_row"]

# Correctness check before timing: ||out - ref|| / ||ref|| against float64. Looser
# than the tests' tolerances (fp32 1e-5, fp16 2e-3, bf16 1e-2) by 5-10x: the check is
# there to catch a provider computing something else (a wrong mask, garbage, NaN: errors
# of order 1), not to rank accuracy, and baselines round intermediates that our kernels
# keep in float32 (flash attention's P in fp16, an activation applied to a rounded
# GEMM output). The error itself is recorded in the row.
CHECK_TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}

L2_BYTES = 60 * 2**20
# Where the benchmark scripts put their tensors (a test runs them on the CPU under the
# CUDA simulator with the timing stubbed out).
DEVICE = "cuda"


class Timing(dict):
    """{'median_ms', 'p20_ms', 'p80_ms', 'reps'}"""


def rotations(bytes_per_set, budget=L2_BYTES * 3):
    """How many input sets to rotate so that they overflow the L2 several times."""
    return max(2, min(32, int(budget // max(1, bytes_per_set)) + 1))


def _quantile(sorted_vals, q):
    idx = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[idx]


_SLEEP_CYCLES_PER_MS = []


def _sleep_cycles_per_ms():
    """GPU clock cycles of ``torch.cuda._sleep`` per millisecond (measured once)."""
    import torch

    if not _SLEEP_CYCLES_PER_MS:
        cycles = 10_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles // 10)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _SLEEP_CYCLES_PER_MS.append(cycles / max(start.elapsed_time(end), 1e-3))
    return _SLEEP_CYCLES_PER_MS[0]


def time_cuda(fn, arg_sets, reps=100, warmup=10, hold=True):
    """Median time of ``fn(*args)`` over ``reps`` runs, cycling through ``arg_sets``.

    hold: queue a GPU sleep before the timed runs, long enough (twice the host time
    the runs take to enqueue) that the GPU is still busy when the last one is queued.
    The events then time the device work only: without it an op whose Python costs
    more than its kernels is timed at its host cost (what ``host_overhead_us``
    reports separately), and the host's speed, which varies 1.5x run to run on the
    lent machines, shows up as kernel time.
    """
    import torch

    for i in range(warmup):
        fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    if hold:
        probe = min(reps, 5)
        t0 = time.perf_counter()
        for i in range(probe):
            fn(*arg_sets[i % len(arg_sets)])
        host_ms = (time.perf_counter() - t0) * 1e3 / probe
        torch.cuda.synchronize()
        torch.cuda._sleep(int(2 * host_ms * reps * _sleep_cycles_per_ms()))
    for i in range(reps):
        args = arg_sets[i % len(arg_sets)]
        starts[i].record()
        fn(*args)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return Timing(median_ms=statistics.median(times), p20_ms=_quantile(times, 0.2),
                  p80_ms=_quantile(times, 0.8), reps=reps)


def copy_bandwidth(nbytes=2 * 2**30, reps=20):
    """Device-to-device copy rate in GB/s, counting bytes read plus bytes written."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    t = time_cuda(lambda: dst.copy_(src), [()], reps=reps, warmup=3)
    return 2 * nbytes / (t["median_ms"] * 1e-3) / 1e9


def host_overhead_us(fn, calls=2000):
    """Host-side microseconds per call of ``fn()`` (a tiny problem): launches are
    queued without synchronisation, so this is what the Python side costs."""
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def gpu_info():
    import torch

    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "sm_count": p.multi_processor_count,
            "memory_gb": round(p.total_memory / 2**30, 1)}


def to_torch(a):
    """A torch view of ``a`` (a torch tensor as is; a CuPy array through DLPack)."""
    import torch

    return a if isinstance(a, torch.Tensor) else torch.from_dlpack(a)


def rel_err(out, ref):
    """``||out - ref|| / ||ref||`` in float64 on ``ref``'s device (``ref`` a float64
    torch tensor, ``out`` a torch tensor or CuPy array); inf if ``out`` has a
    non-finite value, ``||out||`` if ``ref`` is all zeros."""
    import torch

    out = to_torch(out).detach().to(ref.device, torch.float64).reshape(ref.shape)
    if not bool(torch.isfinite(out).all()):
        return float("inf")
    num = float(torch.linalg.vector_norm(out - ref))
    den = float(torch.linalg.vector_norm(ref))
    return num / den if den else num


def check_status(errors, dtype, tol=None):
    """'ok' if every relative error in ``errors`` ({name: err}) is below the dtype's
    tolerance, else 'FAIL (name err, ...)' naming the ones that are not."""
    tol = CHECK_TOL[dtype] if tol is None else tol
    bad = [f"{k} {v:.1e}" for k, v in errors.items() if not v < tol]
    return "ok" if not bad else f"FAIL ({', '.join(bad)} >= {tol:.0e})"


def peak_mb(fn, args, cupy_alloc=False):
    """MB allocated during one ``fn(*args)`` beyond what was allocated before it (so
    inputs and anything prepared beforehand, e.g. a saved autograd graph, are not
    counted; outputs are). ``cupy_alloc``: route CuPy's allocations through torch's
    allocator for the call so that they are counted too."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with cupy_torch_allocator() if cupy_alloc else contextlib.nullcontext():
        out = fn(*args)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        del out
    return (peak - base) / 2**20


def _optional(name):
    import importlib

    try:
        return importlib.import_module(name), None
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}"


def cupy_or_none():
    """(cupy, None) if CuPy and ``interop.cupy`` import, else (None, note)."""
    cupy, err = _optional("cupy")
    if cupy is None:
        return None, f"CuPy not importable ({err})"
    _, err = _optional("interop.cupy")
    if err:
        return None, f"interop.cupy not importable ({err})"
    return cupy, None


def liger_or_none():
    """(liger_kernel, None) if importable, else (None, note)."""
    liger, _ = _optional("liger_kernel")
    return (liger, None) if liger is not None else (None, "liger_kernel not installed")


@contextlib.contextmanager
def cupy_on_torch_stream():
    """CuPy's current stream is torch's current stream inside the block, so CuPy work
    (and ours launched through ``interop.cupy``, which takes CuPy's current stream) is
    ordered with torch's and timed by torch's CUDA events."""
    import cupy
    import torch

    ts = torch.cuda.current_stream()
    try:
        stream = cupy.cuda.Stream.from_external(ts)
    except (AttributeError, TypeError):
        stream = cupy.cuda.ExternalStream(ts.cuda_stream, ts.device.index)
    with stream:
        yield stream


@contextlib.contextmanager
def cupy_torch_allocator():
    """CuPy allocates through torch's caching allocator inside the block (so
    ``torch.cuda.max_memory_allocated`` sees it); CuPy's own allocator is put back
    after. Memory allocated inside is returned to torch when CuPy frees it."""
    import cupy
    import torch

    stream = torch.cuda.current_stream()

    def malloc(size, device):
        return torch.cuda.caching_allocator_alloc(max(int(size), 1), device, stream)

    def free(ptr, device):
        torch.cuda.caching_allocator_delete(ptr)

    old = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(cupy.cuda.memory.PythonFunctionAllocator(malloc, free).malloc)
    try:
        yield
    finally:
        cupy.cuda.set_allocator(old)


def to_cupy(t):
    """The CuPy array over torch tensor ``t``'s memory (DLPack, no copy)."""
    import cupy

    return cupy.from_dlpack(t)


def note_row(op, provider, note, **fields):
    """A row for a provider that was not timed (not installed, unsupported, failed)."""
    return {"op": op, "provider": provider, "note": note, **fields}


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or None where matplotlib is
    not installed (plots are then skipped)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_bandwidth_sweep(rows, out_dir, name, title, providers, dtypes):
    """``out_dir/name``: GB/s against N (log scale) per provider, a panel per
    (direction, dtype), the copy bandwidth as a dashed line. ``rows``: dicts with
    ``dir``, ``dtype``, ``provider``, ``N``, ``GB/s``, ``copy_GB/s`` and ``gpu``;
    providers and dtypes in the orders given. A provider keeps one colour in every
    panel (a forward-only one, such as ``numba_infer``, must not shift the others'
    colours in the backward panels), and one legend names every provider drawn.
    Returns the paths written ([] without matplotlib or rows)."""
    plt = pyplot()
    if plt is None or not rows:
        return []
    drawn = [q for q in providers if any(r["provider"] == q for r in rows)]
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {q: cycle[i % len(cycle)] for i, q in enumerate(drawn)}
    panels = {(r["dir"], r["dtype"]) for r in rows}
    dts = [d for d in dtypes if any(p[1] == d for p in panels)]
    dirs = [d for d in ("fwd", "bwd") if any(p[0] == d for p in panels)]
    fig, axes = plt.subplots(len(dirs), len(dts), figsize=(4.2 * len(dts), 3.4 * len(dirs)),
                             squeeze=False, sharex=True)
    for i, direction in enumerate(dirs):
        for j, dtype in enumerate(dts):
            ax = axes[i][j]
            sub = [r for r in rows if r["dir"] == direction and r["dtype"] == dtype]
            for prov in [q for q in providers if any(r["provider"] == q for r in sub)]:
                pts = sorted((r["N"], r["GB/s"]) for r in sub if r["provider"] == prov)
                ax.plot([n for n, _ in pts], [g for _, g in pts], marker="o", ms=3, label=prov,
                        color=colour[prov])
            if sub:
                ax.axhline(sub[0]["copy_GB/s"], color="grey", ls="--", lw=0.8, label="copy")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{direction} {dtype}", fontsize=9)
            ax.set_xlabel("N (M x N = const)", fontsize=8)
            ax.set_ylabel("GB/s", fontsize=8)
            ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], color=colour[q], marker="o", ms=3, label=q) for q in drawn]
    handles.append(plt.Line2D([], [], color="grey", ls="--", lw=0.8, label="copy"))
    axes[0][0].legend(handles=handles, fontsize=7)
    fig.suptitle(f"{title} ({rows[0].get('gpu', '')})", fontsize=10)
    paths = []
    save_figure(fig, out_dir, name, paths, dpi=100)
    return paths


def save_figure(fig, out_dir, name, paths, dpi=110):
    """Lay out and write ``fig`` to ``out_dir/name``, close it, append the path to
    ``paths``."""
    import os

    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    paths.append(path)


def profile_once(label, call, warmup=3):
    """Run ``call`` ``warmup`` times unprofiled, then once inside the NVTX range
    ``prof`` (what ``ncu --nvtx --nvtx-include "prof/"`` profiles), after printing
    ``profiled next: <label>`` so a report's kernels can be matched to their call."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    print(f"profiled next: {label}", flush=True)
    torch.cuda.nvtx.range_push("prof")
    call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
