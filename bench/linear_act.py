"""Benchmark: fused linear + activation (numba_fused.linear_act) against torch.

    python bench/linear_act.py [--shapes 8192x4096x16384] [--dtypes float16,bfloat16]
        [--activation gelu_tanh] [--passes fwd,bwd]
        [--providers numba_fused,numba_torch,numba_cupy,torch,torch.compile]
        [--tc-config BM,BN,BK,WM,WN,STAGES,GROUP_M ...] [--reps 50] [--json FILE]

Shapes are ``MxKxN``: x ``[M, K]``, weight ``[N, K]``, y ``[M, N]``. Providers:
``numba_fused`` (ours at array level, torch tensors: on sm_90, wgmma for GEMMs of
at least one wave of 128x128 tiles, mma.sync below; ``--tc-config`` pins mma.sync),
``numba_wgmma`` (the same with every GEMM forced onto Hopper's wgmma kernels at the
roles' tilings, ``linear_act.use_wgmma``; not in the default list;
``numba_wgmma_inflight``: the same keeping one k-tile of MMAs in flight;
``numba_wgmma_sw128``: the same on 128-byte swizzled operand tiles;
``numba_wgmma_ws``: warp specialised, 128x256 tiles; ``numba_wgmma_ws_pf``: the same
with the producer fencing its copies; ``numba_wgmma_sw128_hb`` / ``numba_wgmma_ws_hb``:
v3b / v4 with the forward epilogue's bias loaded once per thread and tile;
``numba_wgmma_ws_tma``: v6, v4 (hb) with its forward's producer filling the ring by
TMA, the backward as v4), ``numba_torch`` (ours through
``interop.torch.linear_act`` and autograd: what PyTorch users call), ``numba_cupy`` (ours through ``interop.cupy`` on
CuPy arrays made from the same tensors by DLPack, on torch's stream; no bfloat16 in
CuPy; a note row where CuPy is not importable), ``torch``, ``torch.compile``.

- fwd: ours ``linear_act_forward(x, w, b, act, save_preact=True)`` (the training
  forward: y and the saved pre-activation); torch ``act(F.linear(x, w, b))`` (cuBLAS
  + a separate activation kernel), eager and ``torch.compile``.
- bwd: ours ``linear_act_backward(g, x, w, preact, act)`` (act' pass, dgrad GEMM,
  wgrad GEMM with the bias gradient fused); torch's autograd backward of the same
  forward, eager and compiled (grad_x, grad_weight, grad_bias).

FLOPs counted: 2MNK forward, 4MNK backward. ``--tc-config`` (repeatable) times our
kernels under other tilings; each row records the tiling, registers per thread and
dynamic shared memory. Method (bench/common.py): CUDA events, warm-up, median of
``--reps`` runs, input sets rotated past the L2, random data. Before timing, each
provider's y (fwd) or grad_x, grad_weight, grad_bias (bwd) is compared with float64
(torch on the GPU): ``check`` is ok or FAIL with the relative errors (a failing
provider is still timed). ``peak_MB``: memory one call allocates beyond its inputs
(for bwd: beyond the saved forward).
"""

import argparse
import contextlib
import functools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEFAULT_SHAPES = ("8192x4096x16384",)
QUICK_SHAPES = ("4096x4096x4096",)
PROVIDERS = ("numba_fused", "numba_wgmma", "numba_wgmma_inflight", "numba_wgmma_sw128",
             "numba_wgmma_ws", "numba_wgmma_ws_pf", "numba_wgmma_sw128_hb", "numba_wgmma_ws_hb",
             "numba_wgmma_ws_tma", "numba_torch", "numba_cupy", "torch", "torch.compile")


def _shape(text):
    try:
        m, k, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be MxKxN, got {text!r}") from None
    return m, k, n


def _tc_config(text):
    from numba_fused.linear_act import GemmConfig

    try:
        return GemmConfig(*(int(v) for v in text.split(","))).validate()
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(
            f"--tc-config must be BM,BN,BK,WM,WN,STAGES,GROUP_M: {exc}") from None


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", type=_shape, nargs="+",
                   default=[_shape(s) for s in DEFAULT_SHAPES], help="MxKxN (default %(default)s)")
    p.add_argument("--dtypes", default="float16,bfloat16", help="comma-separated")
    p.add_argument("--activation", default="gelu_tanh")
    p.add_argument("--passes", default="fwd,bwd", help="fwd, bwd or both")
    p.add_argument("--providers", type=_provider_list,
                   default=",".join(q for q in PROVIDERS if not q.startswith("numba_wgmma")),
                   help=f"comma-separated from {','.join(PROVIDERS)}")
    p.add_argument("--tc-config", type=_tc_config, action="append", default=None,
                   help="tensor-core tiling to time (repeatable); default: the launcher's")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--no-check", action="store_true", help="skip the correctness check")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    p.add_argument("--json", default=None, help="write the rows here")
    return p


def _torch_act(torch, name):
    F = torch.nn.functional
    return {
        "none": lambda z: z,
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
        "squared_relu": lambda z: F.relu(z) ** 2,
        "leaky_relu": lambda z: F.leaky_relu(z, 0.01),
        "silu": F.silu,
    }[name]


def _kernel_info(la, cfg, dtype, M, N, K):
    """Tiling, registers and shared memory of the forward GEMM that runs: the pinned
    mma.sync tiling ``cfg``, else the launcher's choice (wgmma on sm_90 where its rule
    takes it, named ``wgmma:`` and its fields)."""
    # Rows not 16-byte aligned are copied to aligned ones from RESTRIDE_MIN_MACS on
    # (every call; a pinned tiling runs on mma.sync).
    vec = K % 8 == 0 or M * N * K >= la.RESTRIDE_MIN_MACS
    if cfg is None:
        wg = la._wgmma_for("fwd", dtype, vec, None, M, N, K)
        if wg is not None:
            k = la.make_wgmma_kernel("fwd", dtype, wg).compile()
            return {"tiling": "wgmma:" + "x".join(str(v) for v in wg),
                    "regs": k.regs_per_thread, "smem_KB": round(wg.smem_bytes / 1024, 1)}
        cfg = la._pick_config(M, N)
    k = la.make_tc_kernel("fwd", dtype, vec, cfg).compile()
    return {"tiling": "x".join(str(v) for v in cfg), "regs": k.regs_per_thread,
            "smem_KB": round(cfg.smem_bytes / 1024, 1)}


def _provider_list(text):
    """--providers: comma-separated names from PROVIDERS (returned as given)."""
    bad = [p for p in text.split(",") if p and p not in PROVIDERS]
    if bad or not text.strip(","):
        raise argparse.ArgumentTypeError(f"providers must be from {PROVIDERS}, got {text!r}")
    return text


def _reference(act_t, x, w, b, g):
    """float64 {'y', 'gx', 'gw', 'gb'} of ``act(x @ w^T + b)`` (torch, on x's device)."""
    import torch

    leaves = [t.detach().double().requires_grad_(True) for t in (x, w, b)]
    with torch.enable_grad():
        y = act_t(torch.nn.functional.linear(*leaves))
        grads = torch.autograd.grad(y, leaves, g.double())
    return dict(zip(("y", "gx", "gw", "gb"), (y.detach(), *grads)))


def _errors(pas, outputs, ref):
    """Relative errors of one call's outputs (fwd: y or (y, preact); bwd: grads)."""
    from bench.common import rel_err

    if pas == "fwd":
        return {"y": rel_err(outputs[0] if isinstance(outputs, tuple) else outputs, ref["y"])}
    return {k: rel_err(o, ref[k]) for k, o in zip(("gx", "gw", "gb"), outputs)}


def run(args):
    """Check and time every (shape, dtype, pass, provider[, tiling]); returns a list of
    row dicts (rows of providers that could not run carry a ``note`` and no timing)."""
    import contextlib

    import torch

    import numba_fused as nf
    from bench import common
    from bench.common import (check_status, cupy_on_torch_stream, cupy_or_none, peak_mb,
                              rotations, time_cuda, to_cupy)
    from numba_fused import linear_act as la

    F = torch.nn.functional
    act = args.activation
    act_t = _torch_act(torch, act)
    providers = [p for p in args.providers.split(",") if p]
    passes = [p for p in args.passes.split(",") if p]
    configs = args.tc_config or [None]
    rows = []
    cp = None
    if "numba_cupy" in providers:
        cp, note = cupy_or_none()
        if note:
            providers.remove("numba_cupy")
            rows.append({"provider": "numba_cupy", "activation": act, "note": note})
    for M, K, N in args.shapes:
        for dtype in [d for d in args.dtypes.split(",") if d]:
            tdt = getattr(torch, dtype)
            per_set = (M * K + N * K + N + 3 * M * N) * torch.finfo(tdt).bits // 8
            n_sets = rotations(per_set)
            gen = torch.Generator(device=common.DEVICE).manual_seed(0)
            sets = []
            for _ in range(n_sets):
                x = torch.randn(M, K, device=common.DEVICE, dtype=tdt, generator=gen)
                w = torch.randn(N, K, device=common.DEVICE, dtype=tdt, generator=gen) / K**0.5
                b = torch.randn(N, device=common.DEVICE, dtype=tdt, generator=gen)
                g = torch.randn(M, N, device=common.DEVICE, dtype=tdt, generator=gen)
                sets.append((x, w, b, g))
            ref = None if args.no_check else _reference(act_t, *sets[0])
            base = {"shape": f"{M}x{K}x{N}", "M": M, "K": K, "N": N, "dtype": dtype,
                    "activation": act}
            for pas in passes:
                flops = (2 if pas == "fwd" else 4) * M * N * K
                for prov in providers:
                    for cfg in (configs if prov == "numba_fused" else [None]):
                        row = dict(base, **{"pass": pas, "provider": prov})
                        if prov == "numba_cupy" and dtype == "bfloat16":
                            rows.append(dict(row, note="CuPy has no bfloat16"))
                            continue
                        cupy = prov == "numba_cupy"
                        try:
                            with cupy_on_torch_stream() if cupy else contextlib.nullcontext():
                                src = [tuple(to_cupy(t) for t in s) for s in sets] if cupy \
                                    else sets
                                fn, arg_sets = _case(torch, nf, la, F, act, act_t, prov, pas, src,
                                                     dtype, cfg)
                                if ref is not None:
                                    row["rel_err"] = _errors(pas, fn(*arg_sets[0]), ref)
                                    row["check"] = check_status(row["rel_err"], dtype)
                                t = time_cuda(fn, arg_sets, reps=args.reps, warmup=args.warmup)
                                if not args.no_memory:
                                    row["peak_MB"] = peak_mb(fn, arg_sets[0], cupy_alloc=cupy)
                                del fn, arg_sets, src
                        except Exception as exc:  # a provider that cannot run here
                            msg = f"failed: {type(exc).__name__}: {exc}"[:300]
                            rows.append(dict(row, note=msg))
                            torch.cuda.empty_cache()
                            continue
                        row.update(t)
                        row["TFLOP/s"] = flops / (t["median_ms"] * 1e-3) / 1e12
                        if prov == "numba_fused" and dtype != "float32":
                            row.update(_kernel_info(la, cfg, dtype, M, N, K))
                        rows.append(row)
                        if cp is not None:
                            cp.get_default_memory_pool().free_all_blocks()
                        torch.cuda.empty_cache()
            del sets, ref
    for r in rows:
        if "median_ms" not in r:
            continue
        ref_row = [q for q in rows if q["provider"] == "torch" and q.get("shape") == r["shape"]
                   and q["dtype"] == r["dtype"] and q["pass"] == r["pass"] and "median_ms" in q]
        if ref_row:
            r["speedup"] = ref_row[0]["median_ms"] / r["median_ms"]
    return rows


def _patched(module, name, value, f, ctx=contextlib.nullcontext):
    """``f`` calling with ``module.name`` set to ``value`` (and inside ``ctx()``)."""
    def call(*a):
        saved = getattr(module, name)
        setattr(module, name, value)
        try:
            with ctx():
                return f(*a)
        finally:
            setattr(module, name, saved)
    return call


def _case(torch, nf, la, F, act, act_t, prov, pas, sets, dtype, cfg):
    """(callable, argument sets) timing one provider and pass; the callable returns
    the outputs (fwd: y or (y, preact); bwd: (grad_x, grad_weight, grad_bias))."""
    if prov == "numba_cupy":
        import interop.cupy as cla

        if pas == "fwd":
            return (lambda x, w, b: cla.linear_act_forward(x, w, b, act, act != "none")), \
                [s[:3] for s in sets]
        prepared = [(g, x, w, cla.linear_act_forward(x, w, b, act, True)[1])
                    for x, w, b, g in sets]
        return (lambda g, x, w, pre: cla.linear_act_backward(g, x, w, pre, act)), prepared
    if prov == "numba_fused" or prov.startswith("numba_wgmma"):
        if prov == "numba_fused":
            # Our kernels under the tiling asked for (default: the launcher's).
            # A pinned mma.sync tiling (--tc-config) runs every GEMM on mma.sync.
            pick = (lambda Mg, Ng, device=None: cfg) if cfg is not None else la._pick_config
            ctx = (lambda: la.use_wgmma(False)) if cfg is not None else contextlib.nullcontext
            wrap = functools.partial(_patched, la, "_pick_config", pick, ctx=ctx)
        else:
            # Every GEMM on Hopper's warpgroup MMA (forced): the roles' tilings,
            # WG_LARGE_INFLIGHT (one k-tile of MMAs kept in flight), WG_LARGE_SW128
            # (128-byte swizzled operand tiles), WG_LARGE_WS (warp specialised) or
            # WG_LARGE_WS_PF (the same, the producer fencing its copies).
            cfg_wg = {"numba_wgmma_inflight": la.WG_LARGE_INFLIGHT,
                      "numba_wgmma_sw128": la.WG_LARGE_SW128,
                      "numba_wgmma_ws": la.WG_LARGE_WS,
                      "numba_wgmma_ws_pf": la.WG_LARGE_WS_PF,
                      "numba_wgmma_sw128_hb": la.WG_LARGE_SW128_HB,
                      "numba_wgmma_ws_hb": la.WG_LARGE_WS_HB,
                      "numba_wgmma_ws_tma": la.WG_LARGE_WS_TMA}.get(prov, la.WG_LARGE)
            wrap = functools.partial(_patched, la, "WG_LARGE", cfg_wg, ctx=la.use_wgmma)
        if pas == "fwd":
            return wrap(lambda x, w, b: nf.linear_act_forward(
                x, w, b, act, save_preact=act != "none")), [s[:3] for s in sets]
        prepared = [(g, x, w, nf.linear_act_forward(x, w, b, act, save_preact=True)[1])
                    for x, w, b, g in sets]
        return wrap(lambda g, x, w, pre: nf.linear_act_backward(g, x, w, pre, act)), prepared
    if prov not in ("torch", "torch.compile", "numba_torch"):
        raise ValueError(f"unknown provider {prov!r}")

    if prov == "numba_torch":
        from interop.torch import linear_act

        def model(x, w, b):
            return linear_act(x, w, b, act)
    else:
        def model(x, w, b):
            return act_t(F.linear(x, w, b))

    if prov == "torch.compile":
        model = torch.compile(model)
    if pas == "fwd":
        def fwd(x, w, b):
            with torch.no_grad():
                return model(x, w, b)
        return fwd, [s[:3] for s in sets]
    prepared = []
    for x, w, b, g in sets:
        xs, ws, bs = (t.detach().requires_grad_(True) for t in (x, w, b))
        prepared.append((model(xs, ws, bs), (xs, ws, bs), g))

    def bwd(y, inputs, g):
        return torch.autograd.grad(y, inputs, g, retain_graph=True)
    return bwd, prepared


def markdown(rows):
    cols = ["shape", "dtype", "pass", "provider", "tiling", "regs", "smem_KB", "median_ms",
            "TFLOP/s", "speedup", "peak_MB", "check"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    notes = []
    for r in rows:
        if "median_ms" not in r:
            notes.append(f"- not run: {r['provider']} {r.get('shape', '')} {r.get('dtype', '')} "
                         f"{r.get('pass', '')}: {r['note']}")
            continue
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out + ([""] + notes if notes else []))


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names); providers that could not run
    come back as rows with a ``note`` and no timing."""
    args = parser().parse_args([])
    if quick:
        args.shapes = [_shape(s) for s in QUICK_SHAPES]
        args.reps = 20
    out = []
    for r in run(args):
        case = f"{r['shape']} {r['activation']}" if "shape" in r else None
        if "median_ms" not in r:
            out.append({"op": "linear_act", "case": case, "dtype": r.get("dtype"),
                        "pass": r.get("pass"), "provider": r["provider"], "note": r["note"]})
            continue
        out.append({"op": "linear_act", "case": case,
                    "dtype": r["dtype"], "pass": r["pass"], "provider": r["provider"],
                    "median_ms": r["median_ms"], "p20_ms": r["p20_ms"], "p80_ms": r["p80_ms"],
                    "TFLOP/s": r["TFLOP/s"], "speedup": r.get("speedup"),
                    "peak_MB": r.get("peak_MB"), "check": r.get("check")})
    return out


def main(argv=None):
    args = parser().parse_args(argv)
    from numba import cuda

    if not cuda.is_available():
        print("bench/linear_act.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = run(args)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
