"""Benchmark LayerNorm / RMSNorm forward and backward against torch eager and
torch.compile (bench/common.py: CUDA events, warm-up, median of >= 50 runs,
inputs rotated beyond L2, random data).

    python bench/layer_norm.py                       # the default sweep
    python bench/layer_norm.py --shapes 16384x4096 --dtypes float16 --dirs fwd bwd
    python bench/layer_norm.py --providers numba numba_det torch --json out.json
    python bench/layer_norm.py --from-json out.json --plot bench/results   # plots, no GPU

Providers:
    numba        our kernels as users get them (deterministic=False: per-block partials,
                 the faster scheme, since 2026-11-25)
    numba_det    our kernels, deterministic=True (per-block partials)
    numba_lock   the seed's GROUP_SIZE_M lock scheme (tuning(bwd_scheme="lock"))
    numba_seed   lock scheme with one block per row: the seed's per-row locking
    numba_infer  our forward with stats=False (y alone, no statistics: inference, what
                 torch.compile's forward writes under no_grad); forward only
    numba_torch  interop.torch.layer_norm / rms_norm through autograd (the forward
                 timed under no_grad, as every torch provider's, so y alone)
    numba_cupy   interop.cupy.layer_norm_* / rms_norm_* on CuPy arrays made from the same
                 tensors by DLPack (no copy), on torch's stream (no bfloat16 in CuPy)
    torch        torch.nn.functional.layer_norm / rms_norm, eager
    compile      the same under torch.compile
    liger        Liger-Kernel's LigerLayerNormFunction / LigerRMSNormFunction, where
                 liger_kernel is installed (a note row says so where it is not)
Memory-bound: GB/s counts x, y (forward) or x, dy, dx (backward), weights and the
float32 statistics once each (not the statistics for the forwards that write y alone:
numba_infer, and numba_torch and compile, timed under no_grad); %copy is against the
copy bandwidth measured here.
Before timing, every provider's outputs (y; dx, dw, db) are compared with float64
(torch on the GPU): ``check`` is ok or FAIL with the relative errors (a failing
provider is still timed). ``peak_MB``: memory one call allocates beyond its inputs
(for bwd: beyond the saved forward).
"""

import argparse
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.common import (  # noqa: E402
    check_status, copy_bandwidth, cupy_on_torch_stream, cupy_or_none, gpu_info, host_overhead_us,
    liger_or_none, note_row, peak_mb, rel_err, rotations, time_cuda, to_cupy)

DEFAULT_SHAPES = ["16384x768", "16384x1024", "16384x4096", "8192x8192", "4096x16384"]
PROVIDERS = ("numba", "numba_infer", "numba_det", "numba_lock", "numba_seed", "numba_torch",
             "numba_cupy", "torch", "compile", "liger")
DEFAULT_PROVIDERS = ["numba", "numba_lock", "numba_torch", "numba_cupy", "torch", "compile", "liger"]
DTYPES = ("float16", "bfloat16", "float32")


def _parse_shape(text):
    try:
        m, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 16384x4096, got {text!r}") from None
    if m < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"shape dims must be >= 1, got {text!r}")
    return m, n


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="+", default=["layer_norm", "rms_norm"],
                   choices=["layer_norm", "rms_norm"])
    p.add_argument("--shapes", nargs="+", type=_parse_shape,
                   default=[_parse_shape(s) for s in DEFAULT_SHAPES], help="MxN, e.g. 16384x4096")
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    p.add_argument("--dirs", nargs="+", default=["fwd", "bwd"], choices=["fwd", "bwd"])
    p.add_argument("--providers", nargs="+", default=list(DEFAULT_PROVIDERS), choices=PROVIDERS)
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--check", action="store_true",
                   help="check every provider against float64 (the default; see --no-check)")
    p.add_argument("--no-check", action="store_true", help="skip the correctness check")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    p.add_argument("--no-overhead", action="store_true", help="skip the host launch-cost probe")
    p.add_argument("--json", help="write the result dicts here")
    p.add_argument("--plot", metavar="DIR",
                   help="write <op>_sweep.png here: GB/s against N per provider (needs matplotlib)")
    p.add_argument("--from-json", metavar="FILE",
                   help="no GPU run: read the results of an earlier --json (for --plot / the table)")
    return p


def plot_sweep(results, out_dir):
    """One PNG per op (``<op>_sweep.png``, :func:`bench.common.plot_bandwidth_sweep`):
    GB/s against N per provider, a panel per (direction, dtype). Returns the paths
    written ([] without matplotlib)."""
    timed = [r for r in results if "GB/s" in r]
    paths = []
    for op in sorted({r["op"] for r in timed}):
        rows = [r for r in timed if r["op"] == op]
        paths += common.plot_bandwidth_sweep(rows, out_dir, f"{op}_sweep.png",
                                             f"{op}: bandwidth against row length",
                                             PROVIDERS, DTYPES)
    return paths


def _torch_dtype(name):
    import torch

    return getattr(torch, name)


def _make_sets(op, m, n, dtype, count, seed=0):
    import torch

    dev = common.DEVICE
    g = torch.Generator(device=dev).manual_seed(seed)
    dt = _torch_dtype(dtype)
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device=dev, generator=g).to(dt)
        dy = torch.randn(m, n, device=dev, generator=g).to(dt)
        w = (torch.rand(n, device=dev, generator=g) + 0.5).to(dt)
        b = torch.randn(n, device=dev, generator=g).to(dt) if op == "layer_norm" else None
        sets.append((x, w, b, dy))
    return sets


# Forwards that write y alone: ours without statistics, and the torch-side ones
# inductor compiles under no_grad (eager and Liger write their statistics there too).
_Y_ALONE = ("numba_infer", "numba_torch", "compile")


def _bytes(op, direction, m, n, itemsize, provider=None):
    rows = m * n * itemsize
    params = n * itemsize * (2 if op == "layer_norm" else 1)
    stats = m * 4 * (2 if op == "layer_norm" else 1)
    if direction == "fwd":
        return 2 * rows + params + (0 if provider in _Y_ALONE else stats)
    return 3 * rows + params + stats + params  # x, dy, dx; w read; dw/db written


def _numba_fns(op, deterministic, seed_grid, lock=False, stats=True):
    from numba_fused import layer_norm as ln

    def fwd(x, w, b, dy):
        if op == "layer_norm":
            return ln.layer_norm_forward(x, w, b, stats=stats)
        return ln.rms_norm_forward(x, w, stats=stats)

    def call_bwd(x, w, b, dy, saved):
        if op == "layer_norm":
            return ln.layer_norm_backward(dy, x, w, b, saved[1], saved[2],
                                          deterministic=deterministic)
        return ln.rms_norm_backward(dy, x, w, saved[1], deterministic=deterministic)

    def make_bwd(x, w, b, dy):
        saved = fwd(x, w, b, dy)
        if not (seed_grid or lock):
            return lambda: call_bwd(x, w, b, dy, saved)
        tune = {"bwd_scheme": "lock"}
        if seed_grid:
            tune["bwd_grid"] = x.shape[0]

        def bwd():
            with ln.tuning(**tune):
                return call_bwd(x, w, b, dy, saved)

        return bwd

    return fwd, make_bwd


def _cupy_fns(op):
    """Our kernels through ``interop.cupy`` (inputs: CuPy arrays)."""
    import interop.cupy as cln

    def fwd(x, w, b, dy):
        if op == "layer_norm":
            return cln.layer_norm_forward(x, w, b)
        return cln.rms_norm_forward(x, w)

    def make_bwd(x, w, b, dy):
        saved = fwd(x, w, b, dy)
        if op == "layer_norm":
            return lambda: cln.layer_norm_backward(dy, x, w, b, saved[1], saved[2])
        return lambda: cln.rms_norm_backward(dy, x, w, saved[1])

    return fwd, make_bwd


def _functional(provider, op):
    """``f(x, w, b)`` with autograd for the torch-side providers."""
    import torch
    import torch.nn.functional as F

    if provider == "numba_torch":
        from interop.torch.layer_norm import layer_norm, rms_norm

        if op == "layer_norm":
            return lambda x, w, b: layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        return lambda x, w, b: rms_norm(x, (x.shape[-1],), w, 1e-6)
    if provider == "liger":
        if op == "layer_norm":
            from liger_kernel.ops.layer_norm import LigerLayerNormFunction

            return lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, 1e-5)
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        # offset 0, Llama casting, in_place=False: in place, its backward would
        # overwrite dy, which the timing loop reuses.
        return lambda x, w, b: LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False)

    def f(x, w, b):
        if op == "layer_norm":
            return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        return F.rms_norm(x, (x.shape[-1],), w, 1e-6)

    if provider == "compile":
        # Each (shape, dtype) is a new graph; a fresh dynamo state keeps the
        # recompile limit from silently sending later cases to eager.
        torch._dynamo.reset()
        return torch.compile(f, dynamic=False)
    return f


def _autograd_fns(f):
    import torch

    def fwd(x, w, b, dy):
        with torch.no_grad():
            return f(x, w, b)

    def make_bwd(x, w, b, dy):
        xr = x.detach().requires_grad_()
        wr = w.detach().requires_grad_()
        br = None if b is None else b.detach().requires_grad_()
        y = f(xr, wr, br)
        inputs = [t for t in (xr, wr, br) if t is not None]

        def bwd():
            return torch.autograd.grad(y, inputs, dy, retain_graph=True)

        return bwd

    return fwd, make_bwd


def _provider_fns(provider, op):
    if provider == "numba":
        return _numba_fns(op, False, False)
    if provider == "numba_infer":
        return _numba_fns(op, False, False, stats=False)
    if provider == "numba_det":
        return _numba_fns(op, True, False)
    if provider == "numba_lock":
        return _numba_fns(op, False, False, lock=True)
    if provider == "numba_seed":
        return _numba_fns(op, False, True)
    if provider == "numba_cupy":
        return _cupy_fns(op)
    return _autograd_fns(_functional(provider, op))


def _reference(op, x, w, b, dy):
    """float64 outputs {'y', 'dx', 'dw'[, 'db']} (torch on the inputs' device)."""
    import torch
    import torch.nn.functional as F

    leaves = [t.detach().double().requires_grad_() for t in (x, w, b) if t is not None]
    with torch.enable_grad():
        if op == "layer_norm":
            y = F.layer_norm(leaves[0], (x.shape[-1],), leaves[1], leaves[2], 1e-5)
        else:
            y = F.rms_norm(leaves[0], (x.shape[-1],), leaves[1], 1e-6)
        grads = torch.autograd.grad(y, leaves, dy.double())
    return dict(zip(["y", "dx", "dw", "db"], [y.detach(), *grads]))


def _errors(direction, ref, outputs):
    """Relative errors of a provider's outputs (fwd: y or (y, stats...); bwd: grads)."""
    if direction == "fwd":
        y = outputs[0] if isinstance(outputs, tuple) else outputs
        return {"y": rel_err(y, ref["y"])}
    names = ["dx", "dw", "db"][:len(outputs)]
    return {k: rel_err(g, ref[k]) for k, g in zip(names, outputs) if g is not None}


def _measure(provider, op, direction, args, sets, ref, dtype):
    """Check, time and measure one provider on ``sets`` (its own array type); the
    row's fields."""
    fwd, make_bwd = _provider_fns(provider, op)
    if direction == "fwd":
        fn, arg_sets = fwd, sets
    else:
        fn, arg_sets = (lambda c: c()), [(make_bwd(*s),) for s in sets]
    out = {}
    if ref is not None:
        out["rel_err"] = _errors(direction, ref, fn(*arg_sets[0]))
        out["check"] = check_status(out["rel_err"], dtype)
    out.update(time_cuda(fn, arg_sets, reps=args.reps, warmup=args.warmup))
    if not args.no_memory:
        out["peak_MB"] = peak_mb(fn, arg_sets[0], cupy_alloc=provider == "numba_cupy")
    if not args.no_overhead and provider in ("numba", "numba_infer", "numba_det", "numba_lock",
                                             "numba_seed"):
        tiny = _make_sets(op, 8, 1024, dtype, 1)[0]
        if direction == "fwd":
            out["host_us"] = host_overhead_us(lambda: fwd(*tiny), calls=500)
        else:
            out["host_us"] = host_overhead_us(make_bwd(*tiny), calls=500)
    return out


def run(args, copy_gbps=None):
    """Run the sweep described by ``args`` (from :func:`build_parser`); returns a
    list of result dicts, one per (op, direction, dtype, shape, provider), and note
    rows (``note``, no timing) for providers that could not run.
    copy_gbps: the copy bandwidth if already measured (else measured here)."""
    import torch

    copy_gbs = copy_gbps or copy_bandwidth()
    info = gpu_info()
    results = []
    providers = list(args.providers)
    cp = None
    if "numba_cupy" in providers:
        cp, note = cupy_or_none()
        if note:
            providers.remove("numba_cupy")
            results += [note_row(op, "numba_cupy", note) for op in args.ops]
    if "liger" in providers:
        _, note = liger_or_none()
        if note:
            providers.remove("liger")
            results += [note_row(op, "liger", note) for op in args.ops]
    for op in args.ops:
        for dtype in args.dtypes:
            itemsize = torch.empty((), dtype=_torch_dtype(dtype)).element_size()
            for m, n in args.shapes:
                per_set = m * n * itemsize * 2
                sets = _make_sets(op, m, n, dtype, rotations(per_set))
                ref = {}
                for direction in args.dirs:
                    if not args.no_check and not ref:
                        ref = _reference(op, *sets[0])
                    for provider in providers:
                        if provider in ("numba_seed", "numba_lock") and direction == "fwd":
                            continue
                        if provider == "numba_infer" and direction == "bwd":
                            continue
                        row = {"op": op, "dir": direction, "dtype": dtype, "M": m, "N": n,
                               "provider": provider, "gpu": info["name"]}
                        if provider == "numba_cupy" and dtype == "bfloat16":
                            results.append({**row, "note": "CuPy has no bfloat16"})
                            continue
                        try:
                            if provider == "numba_cupy":
                                with cupy_on_torch_stream():
                                    csets = [tuple(None if t is None else to_cupy(t) for t in s)
                                             for s in sets]
                                    row.update(_measure(provider, op, direction, args, csets,
                                                        ref or None, dtype))
                                    del csets
                                cp.get_default_memory_pool().free_all_blocks()
                            else:
                                row.update(_measure(provider, op, direction, args, sets,
                                                    ref or None, dtype))
                        except Exception as exc:  # a baseline that cannot run here
                            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                            results.append(row)
                            torch.cuda.empty_cache()
                            continue
                        nbytes = _bytes(op, direction, m, n, itemsize, provider)
                        row["GB/s"] = nbytes / (row["median_ms"] * 1e-3) / 1e9
                        row["%copy"] = 100.0 * row["GB/s"] / copy_gbs
                        row["floor_ms"] = nbytes / (copy_gbs * 1e9) * 1e3
                        results.append(row)
                del sets, ref
                torch.cuda.empty_cache()
                if getattr(args, "json", None):
                    # A run cut short (a device call's time limit) keeps what it measured.
                    _finish(results, copy_gbs)
                    with open(args.json, "w") as f:
                        json.dump(results, f, indent=1)
    _finish(results, copy_gbs)
    return results


def _finish(results, copy_gbs):
    for r in results:
        r["copy_GB/s"] = copy_gbs
    _speedups(results)


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names): LayerNorm fp16 16384x4096
    forward and backward, ours (both dW/dB schemes, and through CuPy) beside torch
    eager, torch.compile and Liger; unless quick also RMSNorm, bf16, fp32 and N = 768
    / 1024 / 8192 / 16384. Providers not run come back as rows with a ``note``."""
    if quick:
        sweeps = [["--ops", "layer_norm", "--dtypes", "float16", "--shapes", "16384x4096",
                   "--reps", "50"]]
    else:
        # torch.compile, CuPy and Liger only at the headline shape: each compile
        # case costs a compile.
        sweeps = [["--providers", "numba", "numba_det", "torch"],
                  ["--providers", "compile", "numba_cupy", "liger", "--shapes", "16384x4096"]]
    results = []
    for argv in sweeps:
        results += run(build_parser().parse_args(argv + ["--no-overhead"]), copy_gbps=copy_gbps)
    _speedups(results)
    out = []
    seen_notes = set()
    for r in results:
        case = f"{r['M']}x{r['N']}" if "M" in r else None
        if "median_ms" not in r:
            note = r.get("note") or f"failed: {r.get('error')}"
            key = (r["op"], r["provider"], note)
            if key not in seen_notes:
                seen_notes.add(key)
                out.append({"op": r["op"], "case": case, "dtype": r.get("dtype"),
                            "pass": r.get("dir"), "provider": r["provider"], "note": note})
            continue
        out.append({"op": r["op"], "case": case, "dtype": r["dtype"],
                    "pass": r["dir"], "provider": r["provider"], "median_ms": r["median_ms"],
                    "p20_ms": r["p20_ms"], "p80_ms": r["p80_ms"], "GB/s": r["GB/s"],
                    "%copy": r["%copy"], "speedup": r.get("vs_torch"),
                    "peak_MB": r.get("peak_MB"), "check": r.get("check")})
    return out


def _speedups(results):
    base = {}
    for r in results:
        if r["provider"] in ("torch", "compile") and "median_ms" in r:
            base[(r["op"], r["dir"], r["dtype"], r["M"], r["N"], r["provider"])] = r["median_ms"]
    for r in results:
        if "median_ms" not in r:
            continue
        for b in ("torch", "compile"):
            ref = base.get((r["op"], r["dir"], r["dtype"], r["M"], r["N"], b))
            if ref:
                r[f"vs_{b}"] = ref / r["median_ms"]


def markdown(results):
    """A markdown table of the results (notes for providers not run below it)."""
    head = ("| op | dir | dtype | M x N | provider | ms | floor ms | GB/s | %copy | vs eager "
            "| vs compile | peak MB | host us | check | rel err |")
    lines = [head, "|" + "---|" * 15]
    notes = []
    for r in results:
        if "note" in r and "median_ms" not in r:
            notes.append(f"- not run: {r['provider']} ({r['op']}"
                         + (f", {r['dtype']}" if "dtype" in r else "") + f"): {r['note']}")
            continue
        if "error" in r:
            lines.append(f"| {r['op']} | {r['dir']} | {r['dtype']} | {r['M']}x{r['N']} | "
                         f"{r['provider']} | failed: {r['error'][:60]} |||||||||")
            continue
        errs = ", ".join(f"{k} {v:.1e}" for k, v in r.get("rel_err", {}).items())
        peak = f"{r['peak_MB']:.0f}" if r.get("peak_MB") is not None else "-"
        lines.append(
            f"| {r['op']} | {r['dir']} | {r['dtype']} | {r['M']}x{r['N']} | {r['provider']} | "
            f"{r['median_ms']:.4f} | {r['floor_ms']:.4f} | {r['GB/s']:.0f} | {r['%copy']:.0f} | "
            f"{r.get('vs_torch', float('nan')):.2f} | {r.get('vs_compile', float('nan')):.2f} | "
            f"{peak} | {r.get('host_us', float('nan')):.1f} | {r.get('check', '-')} | {errs} |")
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
    else:
        results = run(args)
    timed = [r for r in results if "gpu" in r]
    if timed:
        print(f"GPU: {timed[0]['gpu']}, copy bandwidth {timed[0]['copy_GB/s']:.0f} GB/s")
    print(markdown(results))
    if args.json and not args.from_json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.plot:
        os.makedirs(args.plot, exist_ok=True)
        for path in plot_sweep(results, args.plot):
            print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()
