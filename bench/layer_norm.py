"""Benchmark LayerNorm / RMSNorm forward and backward against torch eager and
torch.compile (SPEC "Benchmarks": CUDA events, warm-up, median of >= 50 runs,
inputs rotated beyond L2, random data).

    python bench/layer_norm.py                       # the default sweep
    python bench/layer_norm.py --shapes 16384x4096 --dtypes float16 --dirs fwd bwd
    python bench/layer_norm.py --providers numba numba_det torch --json out.json

Providers:
    numba       our kernels, backward with the lock scheme (deterministic=False)
    numba_det   our kernels, backward with per-block partials (deterministic=True)
    numba_seed  lock scheme with one block per row: the seed's per-row locking
    torch       torch.nn.functional.layer_norm / rms_norm, eager
    compile     the same under torch.compile
Memory-bound: GB/s counts x, y (forward) or x, dy, dx (backward), weights and the
float32 statistics once each; %copy is against the copy bandwidth measured here.
"""

import argparse
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import copy_bandwidth, gpu_info, host_overhead_us, rotations, time_cuda  # noqa: E402

DEFAULT_SHAPES = ["16384x768", "16384x1024", "16384x4096", "8192x8192", "4096x16384"]
PROVIDERS = ("numba", "numba_det", "numba_seed", "torch", "compile")
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
    p.add_argument("--providers", nargs="+", default=["numba", "numba_det", "torch", "compile"],
                   choices=PROVIDERS)
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--check", action="store_true",
                   help="also report each provider's relative error against float64")
    p.add_argument("--no-overhead", action="store_true", help="skip the host launch-cost probe")
    p.add_argument("--json", help="write the result dicts here")
    return p


def _torch_dtype(name):
    import torch

    return getattr(torch, name)


def _make_sets(op, m, n, dtype, count, seed=0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = _torch_dtype(dtype)
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device="cuda", generator=g).to(dt)
        dy = torch.randn(m, n, device="cuda", generator=g).to(dt)
        w = (torch.rand(n, device="cuda", generator=g) + 0.5).to(dt)
        b = torch.randn(n, device="cuda", generator=g).to(dt) if op == "layer_norm" else None
        sets.append((x, w, b, dy))
    return sets


def _bytes(op, direction, m, n, itemsize):
    rows = m * n * itemsize
    params = n * itemsize * (2 if op == "layer_norm" else 1)
    stats = m * 4 * (2 if op == "layer_norm" else 1)
    if direction == "fwd":
        return 2 * rows + params + stats
    return 3 * rows + params + stats + params  # x, dy, dx; w read; dw/db written


def _numba_fns(op, deterministic, seed_grid):
    from numba_fused import layer_norm as ln

    def fwd(x, w, b, dy):
        if op == "layer_norm":
            return ln.layer_norm_forward(x, w, b)
        return ln.rms_norm_forward(x, w)

    def call_bwd(x, w, b, dy, saved):
        if op == "layer_norm":
            return ln.layer_norm_backward(dy, x, w, b, saved[1], saved[2],
                                          deterministic=deterministic)
        return ln.rms_norm_backward(dy, x, w, saved[1], deterministic=deterministic)

    def make_bwd(x, w, b, dy):
        saved = fwd(x, w, b, dy)
        if not seed_grid:
            return lambda: call_bwd(x, w, b, dy, saved)

        def bwd():
            with ln.tuning(bwd_grid=x.shape[0]):
                return call_bwd(x, w, b, dy, saved)

        return bwd

    return fwd, make_bwd


def _torch_fns(op, compiled):
    import torch
    import torch.nn.functional as F

    def f(x, w, b):
        if op == "layer_norm":
            return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        return F.rms_norm(x, (x.shape[-1],), w, 1e-6)

    if compiled:
        # Each (shape, dtype) is a new graph; a fresh dynamo state keeps the
        # recompile limit from silently sending later cases to eager.
        torch._dynamo.reset()
        f = torch.compile(f, dynamic=False)

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
    if provider == "numba_det":
        return _numba_fns(op, True, False)
    if provider == "numba_seed":
        return _numba_fns(op, False, True)
    return _torch_fns(op, provider == "compile")


def _rel_err(out, ref):
    import torch

    out = out.detach().double().cpu()
    return float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))


def _errors(provider, op, direction, fwd, make_bwd, sets):
    """Relative errors of the provider's outputs against float64."""
    from numba_fused import layer_norm as ln

    x, w, b, dy = sets[0]
    if op == "layer_norm":
        ref = ln.layer_norm_ref(x, w, b, 1e-5, grad_out=dy)
        ref = {"y": ref[0], "dx": ref[3], "dw": ref[4], "db": ref[5]}
    else:
        ref = ln.rms_norm_ref(x, w, 1e-6, grad_out=dy)
        ref = {"y": ref[0], "dx": ref[2], "dw": ref[3]}
    import torch

    ref = {k: torch.from_numpy(v) for k, v in ref.items()}
    if direction == "fwd":
        y = fwd(x, w, b, dy)
        y = y[0] if isinstance(y, tuple) else y
        return {"y": _rel_err(y, ref["y"])}
    grads = make_bwd(x, w, b, dy)()
    names = ["dx", "dw", "db"][:len(grads)]
    return {k: _rel_err(g, ref[k]) for k, g in zip(names, grads) if g is not None}


def run(args, copy_gbps=None):
    """Run the sweep described by ``args`` (from :func:`build_parser`); returns a
    list of result dicts, one per (op, direction, dtype, shape, provider).
    copy_gbps: the copy bandwidth if already measured (else measured here)."""
    import torch

    copy_gbs = copy_gbps or copy_bandwidth()
    info = gpu_info()
    results = []
    for op in args.ops:
        for dtype in args.dtypes:
            itemsize = torch.empty((), dtype=_torch_dtype(dtype)).element_size()
            for m, n in args.shapes:
                per_set = m * n * itemsize * 2
                sets = _make_sets(op, m, n, dtype, rotations(per_set))
                for direction in args.dirs:
                    nbytes = _bytes(op, direction, m, n, itemsize)
                    for provider in args.providers:
                        if provider == "numba_seed" and direction == "fwd":
                            continue
                        fwd, make_bwd = _provider_fns(provider, op)
                        row = {"op": op, "dir": direction, "dtype": dtype, "M": m, "N": n,
                               "provider": provider, "gpu": info["name"]}
                        try:
                            if direction == "fwd":
                                t = time_cuda(fwd, sets, reps=args.reps, warmup=args.warmup)
                            else:
                                calls = [(make_bwd(*s),) for s in sets]
                                t = time_cuda(lambda c: c(), calls, reps=args.reps,
                                              warmup=args.warmup)
                        except Exception as exc:  # a baseline that cannot run here
                            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                            results.append(row)
                            continue
                        row.update(t)
                        row["GB/s"] = nbytes / (t["median_ms"] * 1e-3) / 1e9
                        row["%copy"] = 100.0 * row["GB/s"] / copy_gbs
                        row["floor_ms"] = nbytes / (copy_gbs * 1e9) * 1e3
                        if args.check:
                            row["rel_err"] = _errors(provider, op, direction, fwd, make_bwd, sets)
                        if not args.no_overhead and provider.startswith("numba"):
                            tiny = _make_sets(op, 8, 1024, dtype, 1)[0]
                            if direction == "fwd":
                                row["host_us"] = host_overhead_us(lambda: fwd(*tiny), calls=500)
                            else:
                                bwd = make_bwd(*tiny)
                                row["host_us"] = host_overhead_us(bwd, calls=500)
                        results.append(row)
                del sets
                torch.cuda.empty_cache()
    for r in results:
        r["copy_GB/s"] = copy_gbs
    _speedups(results)
    return results


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names): LayerNorm fp16 16384x4096
    forward and backward, ours (both dW/dB schemes) beside torch eager and
    torch.compile; unless quick also RMSNorm, bf16, fp32 and N = 768 / 1024 / 8192 /
    16384."""
    if quick:
        sweeps = [["--ops", "layer_norm", "--dtypes", "float16", "--shapes", "16384x4096",
                   "--reps", "50"]]
    else:
        # torch.compile only at the headline shape: each case costs a compile.
        sweeps = [["--providers", "numba", "numba_det", "torch"],
                  ["--providers", "compile", "--shapes", "16384x4096"]]
    results = []
    for argv in sweeps:
        results += run(build_parser().parse_args(argv + ["--no-overhead"]), copy_gbps=copy_gbps)
    _speedups(results)
    out = []
    for r in results:
        if "median_ms" not in r:
            continue
        out.append({"op": r["op"], "case": f"{r['M']}x{r['N']}", "dtype": r["dtype"],
                    "pass": r["dir"], "provider": r["provider"], "median_ms": r["median_ms"],
                    "p20_ms": r["p20_ms"], "p80_ms": r["p80_ms"], "GB/s": r["GB/s"],
                    "%copy": r["%copy"], "speedup": r.get("vs_torch")})
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
    """A markdown table of the results."""
    head = ("| op | dir | dtype | M x N | provider | ms | floor ms | GB/s | %copy | vs eager "
            "| vs compile | host us | rel err |")
    lines = [head, "|" + "---|" * 13]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['op']} | {r['dir']} | {r['dtype']} | {r['M']}x{r['N']} | "
                         f"{r['provider']} | failed: {r['error'][:60]} |||||||")
            continue
        errs = ", ".join(f"{k} {v:.1e}" for k, v in r.get("rel_err", {}).items())
        lines.append(
            f"| {r['op']} | {r['dir']} | {r['dtype']} | {r['M']}x{r['N']} | {r['provider']} | "
            f"{r['median_ms']:.4f} | {r['floor_ms']:.4f} | {r['GB/s']:.0f} | {r['%copy']:.0f} | "
            f"{r.get('vs_torch', float('nan')):.2f} | {r.get('vs_compile', float('nan')):.2f} | "
            f"{r.get('host_us', float('nan')):.1f} | {errs} |")
    return "\n".join(lines)


def main(argv=None):
    args = build_parser().parse_args(argv)
    results = run(args)
    if results:
        print(f"GPU: {results[0]['gpu']}, copy bandwidth {results[0]['copy_GB/s']:.0f} GB/s")
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
