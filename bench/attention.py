"""Benchmark: memory-efficient attention forward and backward.

Providers:
  numba        numba_fused.attention_forward / attention_backward on [B, S, H, D] views of
               torch's [B, H, S, D] tensors (the backward alone, from saved out / lse)
  numba_torch  interop.torch.scaled_dot_product_attention through autograd
  numba_cupy   interop.cupy.attention_forward / attention_backward on CuPy arrays made from
               the same tensors by DLPack (no copy; [B, S, H, D] views), on torch's stream
               (no bfloat16 in CuPy; a note where CuPy is not importable)
  flash        torch SDPA, FLASH_ATTENTION backend
  efficient    torch SDPA, EFFICIENT_ATTENTION backend (the seed kernel)
  math         torch SDPA, MATH backend
  eager        softmax(q k^T * scale [+ causal mask]) v written in torch ops
  compile      the eager function under torch.compile

Method (bench/common.py): CUDA events, warm-up, median of ``--reps`` runs over input
sets rotated to overflow the L2, random normal data. Backward rows time the backward
alone: torch providers replay ``autograd.grad(..., retain_graph=True)`` on a graph built
once per input set. TFLOP/s counts the matmul work of the visible part of the score
matrix: forward 4 * B * H * pairs * D, backward 2.5x that (5 matmuls against 2),
pairs = Sq * Sk (causal: the pairs the mask lets through). peak_MB: memory allocated
during one forward + backward beyond the inputs. Before timing, every provider's
output (fwd) or dq, dk, dv (bwd) is compared with float64 math on the GPU: ``check`` is
ok or FAIL with the relative errors (a failing provider is still timed).

  python bench/attention.py --shapes 4x16x2048x64,2x16x4096x128 --dtypes float16 \\
      --causal both --passes fwd,bwd --providers numba,flash,efficient,math
"""

import argparse
import contextlib
import json
import math
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.common import (  # noqa: E402
    check_status, cupy_on_torch_stream, cupy_or_none, cupy_torch_allocator, gpu_info,
    host_overhead_us, note_row, rel_err, rotations, time_cuda, to_cupy, to_torch)

PROVIDERS = ("numba", "numba_torch", "numba_cupy", "flash", "efficient", "math", "eager",
             "compile")
DEFAULT_PROVIDERS = ("numba", "numba_torch", "numba_cupy", "flash", "efficient", "math", "eager", "compile")
DEFAULT_SHAPES = "4x16x2048x64,2x16x4096x128,2x16x2048x256"
QUICK_SHAPES = "4x16x2048x64"
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help="comma-separated BxHxSxD (Sq = Sk = S), or BxHxSqxSkxD")
    ap.add_argument("--dtypes", default="float16", help="comma-separated: float32,float16,bfloat16")
    ap.add_argument("--causal", default="both", choices=("no", "yes", "both"),
                    help="full attention, causal (top-left), or both")
    ap.add_argument("--passes", default="fwd,bwd", help="fwd, bwd or both")
    ap.add_argument("--providers", default=",".join(DEFAULT_PROVIDERS),
                    help=f"comma-separated from {','.join(PROVIDERS)}")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--num-splits", type=int, default=None,
                    help="numba backward: key splits (default: the launcher's heuristic)")
    ap.add_argument("--deterministic", action="store_true", help="numba backward: deterministic dQ")
    ap.add_argument("--dq-scheme", default=None, choices=("lock", "atomic"),
                    help="numba backward (array level): dQ accumulation across splits "
                         "(default: the launcher's)")
    ap.add_argument("--blocks", default="",
                    help="extra numba tile shapes to time, ';'-separated 'blk,rows_per_thread,chunk' "
                         "(e.g. '64,4,32;32,4,16'); the default shape is always timed")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    ap.add_argument("--no-host-overhead", action="store_true",
                    help="skip the host launch-overhead measurement")
    ap.add_argument("--json", default=None, help="write the results to this JSON file")
    return ap


def parse_args(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    return _finish(ap, args)


def _finish(ap, args):
    shapes = []
    for s in args.shapes.split(","):
        if not s.strip():
            continue
        dims = tuple(int(v) for v in s.lower().split("x"))
        if len(dims) == 4:
            dims = (dims[0], dims[1], dims[2], dims[2], dims[3])
        if len(dims) != 5 or min(dims) <= 0:
            ap.error(f"--shapes: expected BxHxSxD or BxHxSqxSkxD, got {s!r}")
        shapes.append(dims)
    args.shapes = shapes
    args.dtypes = _choices(ap, "--dtypes", args.dtypes, ITEMSIZE)
    args.passes = _choices(ap, "--passes", args.passes, ("fwd", "bwd"))
    args.providers = _choices(ap, "--providers", args.providers, PROVIDERS)
    args.causal_modes = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    blocks = []
    for text in args.blocks.split(";"):
        if not text.strip():
            continue
        try:
            from numba_fused.attention_fwd import TileConfig

            blocks.append(tuple(TileConfig(*(int(v) for v in text.split(","))).validate()))
        except (TypeError, ValueError):
            ap.error(f"--blocks: bad tile shape {text!r} (blk,rows_per_thread,chunk)")
    args.blocks = blocks
    return args


def _choices(ap, flag, value, allowed):
    out = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in out if v not in allowed]
    if bad or not out:
        ap.error(f"{flag}: {bad or value!r} not in {tuple(allowed)}")
    return out


def visible_pairs(sq, sk, causal):
    """Score entries a top-left causal mask lets through (all of them otherwise)."""
    if not causal:
        return sq * sk
    n = min(sq, sk)
    return n * (n + 1) // 2 + (sq - n) * sk


def flops(shape, causal, direction):
    b, h, sq, sk, d = shape
    fwd = 4 * b * h * visible_pairs(sq, sk, causal) * d
    return fwd if direction == "fwd" else 2.5 * fwd


def _make_sets(shape, dtype, count):
    import torch

    b, h, sq, sk, d = shape
    tdt = getattr(torch, dtype)
    dev = common.DEVICE
    sets = []
    for _ in range(count):
        q = torch.randn(b, h, sq, d, device=dev, dtype=tdt)
        k = torch.randn(b, h, sk, d, device=dev, dtype=tdt)
        v = torch.randn(b, h, sk, d, device=dev, dtype=tdt)
        go = torch.randn(b, h, sq, d, device=dev, dtype=tdt)
        sets.append((q, k, v, go))
    return sets


def _eager(q, k, v, causal):
    import torch

    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        sq, sk = s.shape[-2:]
        keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def _torch_fn(provider, causal):
    import torch
    import torch.nn.functional as F

    if provider in _BACKENDS:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, _BACKENDS[provider])

        def f(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return f
    if provider == "numba_torch":
        from interop.torch.attention import scaled_dot_product_attention

        return lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=causal)
    if provider == "compile":
        torch._dynamo.reset()
        return torch.compile(lambda q, k, v: _eager(q, k, v, causal), dynamic=False)
    return lambda q, k, v: _eager(q, k, v, causal)


def _numba_opts(causal):
    return dict(causal="top_left" if causal else None)


def _numba_views(provider, sets):
    """Our kernels' inputs: [B, S, H, D] views of torch's [B, H, S, D] tensors (CuPy
    arrays over them for numba_cupy)."""
    if provider == "numba_cupy":
        return [tuple(to_cupy(t.transpose(1, 2)) for t in s) for s in sets]
    return [tuple(t.transpose(1, 2) for t in s) for s in sets]


def _numba_case(provider, direction, causal, views, args, block=None):
    """``(fn, arg_sets)``: fn returns (out, lse) (fwd) or (dq, dk, dv, dbias) (bwd)."""
    if provider == "numba_cupy":
        import interop.cupy as api

        fwd_opts, bwd_opts = {}, dict(deterministic=args.deterministic)
    else:
        import numba_fused.attention as api

        fwd_opts = dict(block=block)
        bwd_opts = dict(num_splits=args.num_splits, deterministic=args.deterministic, block=block,
                        dq_scheme=args.dq_scheme)
    opts = _numba_opts(causal)
    if direction == "fwd":
        return (lambda q, k, v, go: api.attention_forward(q, k, v, **opts, **fwd_opts)), views
    prepared = []
    for q, k, v, go in views:
        out, lse = api.attention_forward(q, k, v, **opts, **fwd_opts)
        prepared.append((go, q, k, v, out, lse))

    def bwd(go, q, k, v, out, lse):
        return api.attention_backward(go, q, k, v, out, lse, **opts, **bwd_opts)
    return bwd, prepared


def _torch_case(provider, direction, causal, sets):
    """``(fn, arg_sets)``: fn returns out (fwd) or (dq, dk, dv) (bwd), [B, H, S, D]."""
    import torch

    fn = _torch_fn(provider, causal)
    if direction == "fwd":
        def fwd(q, k, v, go):
            with torch.no_grad():
                return fn(q, k, v)
        return fwd, sets
    graphs = []
    for q, k, v, go in sets:
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        graphs.append((fn(*leaves), leaves, go))

    def bwd(out, leaves, go):
        return torch.autograd.grad(out, leaves, go, retain_graph=True)
    return bwd, graphs


def _reference(causal, q, k, v, go):
    """float64 {'out', 'dq', 'dk', 'dv'} ([B, H, S, D]) of softmax(q k^T / sqrt(D)) v."""
    import torch

    leaves = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    with torch.enable_grad():
        out = _eager(*leaves, causal)
        grads = torch.autograd.grad(out, leaves, go.double())
    return dict(zip(("out", "dq", "dk", "dv"), (out.detach(), *grads)))


def _errors(provider, direction, outputs, ref):
    """Relative errors of one call's outputs (ours come in [B, S, H, D])."""
    ours = provider in ("numba", "numba_cupy")

    def bhsd(t):
        t = to_torch(t)
        return t.transpose(1, 2) if ours else t
    if direction == "fwd":
        return {"out": rel_err(bhsd(outputs[0] if ours else outputs), ref["out"])}
    return {k: rel_err(bhsd(g), ref[k]) for k, g in zip(("dq", "dk", "dv"), outputs)}


def _time_provider(provider, direction, causal, sets, args, ref, dtype, block=None):
    """Check then time one provider; returns the Timing plus 'check' / 'rel_err'."""
    if provider in ("numba", "numba_cupy"):
        fn, arg_sets = _numba_case(provider, direction, causal, _numba_views(provider, sets),
                                   args, block)
    else:
        fn, arg_sets = _torch_case(provider, direction, causal, sets)
    extra = {}
    if ref is not None:
        extra["rel_err"] = _errors(provider, direction, fn(*arg_sets[0]), ref)
        extra["check"] = check_status(extra["rel_err"], dtype)
    t = time_cuda(fn, arg_sets, args.reps, args.warmup)
    t.update(extra)
    return t


def _peak_mb(provider, causal, inputs, args):
    """MB allocated during one forward + backward beyond what was allocated before
    (CuPy's allocations routed through torch's allocator for numba_cupy)."""
    import contextlib

    import torch

    q, k, v, go = inputs
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    if provider in ("numba", "numba_cupy"):
        with cupy_torch_allocator() if provider == "numba_cupy" else contextlib.nullcontext():
            (qs, ks, vs, gos), = _numba_views(provider, [inputs])
            fwd, _ = _numba_case(provider, "fwd", causal, [], args)
            out, lse = fwd(qs, ks, vs, gos)
            bwd, _ = _numba_case(provider, "bwd", causal, [], args)
            grads = bwd(gos, qs, ks, vs, out, lse)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            del out, lse, grads
        return (peak - base) / 2**20
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    out = _torch_fn(provider, causal)(*leaves)
    grads = torch.autograd.grad(out, leaves, go)
    del out, grads, leaves
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def _host_overheads(dtype):
    import torch

    from numba_fused.attention import attention_backward, attention_forward

    tdt = getattr(torch, dtype)
    q, k, v, go = (torch.randn(1, 16, 1, 64, device="cuda", dtype=tdt) for _ in range(4))
    out, lse = attention_forward(q, k, v)
    return [{"kind": "host_overhead", "provider": "numba", "dtype": dtype, "direction": d,
             "host_us": host_overhead_us(fn, calls=300)}
            for d, fn in (("fwd", lambda: attention_forward(q, k, v)),
                          ("bwd", lambda: attention_backward(go, q, k, v, out, lse)))]


def run(args):
    """Check and time every (shape, dtype, causal, pass, provider); returns result
    dicts (``kind`` 'timing'; rows of providers that could not run carry a ``note``
    and no timing)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("bench/attention.py needs a CUDA GPU")
    info = gpu_info()
    results = []
    providers = list(args.providers)
    cp = None
    if "numba_cupy" in providers:
        cp, note = cupy_or_none()
        if note:
            providers.remove("numba_cupy")
            results.append(note_row("attention", "numba_cupy", note, kind="timing"))
    for shape in args.shapes:
        b, h, sq, sk, d = shape
        for dtype in args.dtypes:
            per_set = (2 * b * h * sq * d + 2 * b * h * sk * d) * ITEMSIZE[dtype]
            sets = _make_sets(shape, dtype, rotations(per_set))
            for causal in args.causal_modes:
                case = f"B{b} H{h} S{sq}" + (f"x{sk}" if sk != sq else "") + f" D{d}" + \
                    (" causal" if causal else "")
                ref = None if args.no_check else _reference(causal, *sets[0])
                for direction in args.passes:
                    timed = []
                    runs = [(p, None) for p in providers]
                    if "numba" in providers:
                        runs += [("numba", blk) for blk in args.blocks]
                    for provider, block in runs:
                        if provider == "flash" and dtype == "float32":
                            continue
                        name = provider if block is None else f"numba{list(block)}"
                        row = {"kind": "timing", "op": "attention", "case": case, "dtype": dtype,
                               "pass": direction, "provider": name, "gpu": info["name"]}
                        if provider == "numba_cupy" and dtype == "bfloat16":
                            row["note"] = "CuPy has no bfloat16"
                            timed.append(row)
                            continue
                        stream = cupy_on_torch_stream() if provider == "numba_cupy" else \
                            contextlib.nullcontext()
                        try:
                            with stream:
                                t = _time_provider(provider, direction, causal, sets, args, ref,
                                                   dtype, block)
                                fl = flops(shape, causal, direction)
                                row.update(t)
                                row["TFLOP/s"] = fl / (t["median_ms"] * 1e-3) / 1e12
                                if (not args.no_memory and direction == args.passes[-1]
                                        and block is None):
                                    row["peak_MB"] = _peak_mb(provider, causal, sets[0], args)
                        except Exception as exc:  # a provider that cannot run here
                            first = (str(exc).splitlines() or [""])[0]
                            row["note"] = (first if isinstance(exc, RuntimeError) else
                                           f"failed: {type(exc).__name__}: {first}")[:100]
                            timed.append(row)
                            torch.cuda.empty_cache()
                            continue
                        timed.append(row)
                        if cp is not None:
                            cp.get_default_memory_pool().free_all_blocks()
                        torch.cuda.synchronize()
                    _speedups(timed)
                    results.extend(timed)
                del ref
            del sets
            torch.cuda.empty_cache()
    if not args.no_host_overhead:
        results.extend(_host_overheads(args.dtypes[0]))
    return results


def _speedups(rows):
    base = {r["provider"]: r.get("median_ms") for r in rows}
    for r in rows:
        if not r.get("median_ms"):
            continue
        for ref in ("math", "efficient", "flash"):
            if base.get(ref):
                r[f"speedup_vs_{ref}"] = base[ref] / r["median_ms"]
        r["speedup"] = r.get("speedup_vs_math")


def markdown(results):
    """The timing rows as a markdown table (plus host overheads, if any)."""
    rows = [r for r in results if r["kind"] == "timing"]
    lines = []
    if rows:
        lines.append(f"GPU: {next((r['gpu'] for r in rows if 'gpu' in r), '?')}")
        lines.append("")
        lines.append("| case | dtype | pass | provider | median ms | p20-p80 ms | TFLOP/s | "
                     "x math | x efficient | x flash | peak MB | check | note |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if "median_ms" not in r:
                lines.append(f"| {r.get('case', '-')} | {r.get('dtype', '-')} | "
                             f"{r.get('pass', '-')} | {r['provider']} | - | - | - | - | - | - | - "
                             f"| - | {r.get('note', '')} |")
                continue
            sp = [f"{r[k]:.2f}" if k in r else "-"
                  for k in ("speedup_vs_math", "speedup_vs_efficient", "speedup_vs_flash")]
            peak = f"{r['peak_MB']:.0f}" if "peak_MB" in r else "-"
            lines.append(
                f"| {r['case']} | {r['dtype']} | {r['pass']} | {r['provider']} | "
                f"{r['median_ms']:.3f} | {r['p20_ms']:.3f}-{r['p80_ms']:.3f} | "
                f"{r['TFLOP/s']:.1f} | {sp[0]} | {sp[1]} | {sp[2]} | {peak} | "
                f"{r.get('check', '-')} | {r.get('note', '')} |")
    host = [r for r in results if r["kind"] == "host_overhead"]
    if host:
        lines.append("")
        lines.append("| host launch overhead | dtype | pass | us per call |")
        lines.append("|---|---|---|---|")
        for r in host:
            lines.append(f"| {r['provider']} | {r['dtype']} | {r['direction']} | {r['host_us']:.1f} |")
    return "\n".join(lines)


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names); providers that could not run
    come back as rows with a ``note`` and no timing."""
    ap = parser()
    argv = ["--shapes", QUICK_SHAPES, "--reps", "20"] if quick else []
    args = _finish(ap, ap.parse_args(argv))
    args.no_host_overhead = True
    out = []
    for r in run(args):
        if r["kind"] != "timing":
            continue
        if "median_ms" not in r:
            out.append({"op": "attention", "case": r.get("case"), "dtype": r.get("dtype"),
                        "pass": r.get("pass"), "provider": r["provider"], "note": r.get("note")})
            continue
        out.append({"op": "attention", "case": r["case"], "dtype": r["dtype"], "pass": r["pass"],
                    "provider": r["provider"], "median_ms": r["median_ms"], "p20_ms": r["p20_ms"],
                    "p80_ms": r["p80_ms"], "TFLOP/s": r["TFLOP/s"], "speedup": r.get("speedup"),
                    "peak_MB": r.get("peak_MB"), "check": r.get("check")})
    return out


def main(argv=None):
    args = parse_args(argv)
    from numba import cuda

    if not cuda.is_available():
        print("bench/attention.py needs a CUDA GPU", file=sys.stderr)
        return 2
    results = run(args)
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
