"""Which forward kernel is fastest at row widths outside issue #16's sweep (sixty-fourth
session).

    python3 bench/ab/offgrid_plain.py [--cells f32-ln-896,...|all] [--passes 3]
        [--reps 30] [--compile] [--rl2] [--stats] [--checked]

Why. A sweep at the widths of models' hidden sizes off the issue's ten (896, 1536,
2304, 2560, 3072, 3584, 6144, 7168, 10240, 14336; M x N ~ 2^26, this session's call 4,
``bench/results/s64/offgrid.json``) had our forward behind torch.compile at 29 of its
60 forward cells, by up to 1.7x (float32 LayerNorm 896: 0.227 ms against 0.132). The
launcher runs the plain kernel only at the widths its tables name (and float32
RMSNorm 512-1024, 16-bit LayerNorm 2048-16384 where the rule splits the row into
whole warps); elsewhere the lean, staged or streaming kernel. Here each cell's
default forward is timed beside the plain kernel at every layout that splits the row
(``fwd_plain_layout`` (words, rows a block): words 1-8 a thread, whole warps or
8 / 16-thread rows, blocks of at least 128 threads), alternating, every output
checked against float64 first. ``--rl2``: each layout also with ``fwd_plain_reload
"l2"`` (v60's candidate). ``--compile``: torch.compile too (a fresh compile a cell).
``--stats``: the forward writing its statistics (training; by default y alone).
``--checked`` (sixty-sixth session, v63 candidate): rows no exact layout splits (16-bit
LayerNorm 1152 / 1600 / 4544 / 6656, GPT-2 XL's, Gemma 3 1B's, Falcon's, LLaMA 33B's
widths): ``chk`` is the launcher under tuning ``fwd_plain_checked`` (its rule's pick;
the default since the sixty-eighth session, so ``base`` runs it too and ``lean`` is
the launcher without it; ``no_v64``, at 16-bit RMSNorm, the launcher without v64's
``fwd_plain_checked_only``, on since the sixty-ninth session),
``cW x R`` each checked layout of two to eight words (``_plain_checked_splits``, at
most 512 threads a row). Predicted there: ``chk`` within 1 us of the plain kernel's
time at the nearest exact width (16-bit ~69-71 us, float32 ~131-136), where ``base``
(the lean kernel) reads 77-90 / 133-170 as at v61's widths before v61.
Predicted: the plain kernel at four words a thread (or the nearest count that splits
the row) within 1 us of compile wherever the default is behind it by more."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.ab.carveout_ab import DTYPES, _picked  # noqa: E402
from bench.ab.placement import _compiled, _ref  # noqa: E402
from bench.ab.tail_scan import _ours  # noqa: E402
from bench.common import time_cuda  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402

ALL_CELLS = tuple(f"{dt}-{op}-{n}" for dt in ("f32", "f16") for op in ("ln", "rms")
                  for n in ln._PLAIN_OFFGRID_SHIPPED_N)


def layouts(n, itemsize):
    """Every (words, rows a block) the plain kernel takes for rows of ``n`` values:
    words 1-8 a thread splitting the row's 16-byte groups into whole warps (or 8 / 16
    threads a row), rows a block up to 128 threads (whole warps)."""
    vec = 16 // itemsize
    if n % vec:
        return []
    return [(words, rpb) for words, _, rpb in ln._plain_splits(n // vec)]


def alternating_medians(fns, args, passes, reps):
    """{label: median us} of each of ``fns`` (label -> callable) on ``args`` over
    ``passes`` passes, the order reversed every other pass (each pass's time the
    median of ``reps`` back-to-back calls)."""
    times = {p: [] for p in fns}
    order = list(fns)
    for k in range(passes):
        for p in (order if k % 2 == 0 else order[::-1]):
            times[p].append(time_cuda(fns[p], [args], reps=reps, warmup=5)["median_ms"] * 1e3)
    return {p: sorted(v)[passes // 2] for p, v in times.items()}


def report_kernels(cell, names):
    """A table row of the kernels each provider of ``cell`` launched (label ->
    names), then the cell's GPU memory back to the allocator."""
    print(f"| {cell} | kernels | " + " | ".join(f"{p}: {k}" for p, k in names.items())
          + " |", flush=True)
    torch.cuda.empty_cache()


def checked_layouts(n, itemsize):
    """(words, rows a block) of every checked plain layout (two to eight words, at
    most 512 threads a row) of rows of ``n`` values no exact layout splits."""
    vec = 16 // itemsize
    if n % vec or ln._plain_splits(n // vec):
        return []
    return [(words, rpb) for words, _, rpb in ln._plain_checked_splits(n // vec, 2, 512)]


def run_cell(cell, passes, reps, compiled, rl2, stats=False, checked=False, rows=None):
    dt, op, n = cell.split("-")
    n = int(n)
    dtype = DTYPES[dt]
    m = rows or round(2**26 / n)
    torch._dynamo.reset()
    g = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    w = (torch.rand(n, device="cuda", generator=g) + 0.5).to(dtype)
    b = torch.randn(n, device="cuda", generator=g).to(dtype)
    tunes = {"base": {}}
    for words, rpb in layouts(n, x.element_size()):
        tunes[f"p{words}x{rpb}"] = {"fwd_plain": True, "fwd_plain_layout": (words, rpb)}
        if rl2:
            tunes[f"p{words}x{rpb}rl2"] = {"fwd_plain": True,
                                           "fwd_plain_layout": (words, rpb),
                                           "fwd_plain_reload": "l2"}
    if checked:
        tunes["chk"] = {"fwd_plain_checked": True}
        tunes["lean"] = {"fwd_plain_checked": False}
        if (ln._dtype_class(str(dtype).removeprefix("torch.")), op == "rms") in \
                ln._PLAIN_OFFGRID_CHECKED_ONLY:
            tunes["no_v64"] = {"fwd_plain_checked_only": False}
        for words, rpb in checked_layouts(n, x.element_size()):
            tunes[f"c{words}x{rpb}"] = {"fwd_plain": True, "fwd_plain_checked": True,
                                        "fwd_plain_layout": (words, rpb)}
    fns = {"compile": _compiled(op, n, dynamic=False)} if compiled else {}
    names = {}
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    with torch.no_grad():
        for label, tune in tunes.items():
            fns[label] = _ours(op, tune, stats)
            names[label] = ",".join(k.name for k, _, _ in _picked(fns[label], (x, w, b)))
        want = _ref(op, n, x[-256:], w, b)
        bad = []
        for name, fn in fns.items():
            got = fn(x, w, b)[-256:].double()
            err = ((got - want).norm() / want.norm()).item()
            if not err < tol:
                bad.append(f"{name} {err:.2e}")
        med = alternating_medians(fns, (x, w, b), passes, reps)
    base = med["base"]
    best = min((p for p in med if p[0] in "pc" and p != "compile"), key=med.get,
               default=None)
    print(f"| {cell} | m {m} | " + " | ".join(
        f"{p} {t:.2f} ({t - base:+.2f})" for p, t in med.items())
        + f" | best plain {best} | {'FAIL ' + '; '.join(bad) if bad else 'checks ok'} |",
        flush=True)
    del x
    report_kernels(cell, names)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="all")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--rl2", action="store_true")
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--checked", action="store_true")
    ap.add_argument("--rows", type=int, default=None,
                    help="rows a cell (default 2^26 / N): a quick check of the script")
    args = ap.parse_args(argv)
    print(f"GPU: {torch.cuda.get_device_name(0)}", flush=True)
    cells = ALL_CELLS if args.cells == "all" else args.cells.split(",")
    for cell in cells:
        run_cell(cell, args.passes, args.reps, args.compile, args.rl2, args.stats,
                 args.checked, args.rows)


if __name__ == "__main__":
    main()
