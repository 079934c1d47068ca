"""Benchmark: the gated MLP (SwiGLU, Llama's MLP) on the gated kernels against torch.

    python bench/gated_linear.py [--shapes 8192x4096x11008] [--dtypes bfloat16 float16]
        [--activation silu] [--providers numba_torch numba_fused torch torch.compile]
        [--reps 30] [--json FILE]

Shapes are ``MxKxI``: x ``[M, K]``, gate and up ``[I, K]``, down ``[K, I]`` (y ``[M, K]``).
Providers:
- ``numba_torch``: ``interop.torch.FusedGatedMLP`` through autograd (what a patched
  Llama runs): fwd is its forward under ``no_grad``; fwd+bwd one training step's
  forward and ``torch.autograd.grad`` of x and the three weights.
- ``numba_fused``: the array-level forward only (``gated_linear_forward`` on the
  interleaved weight, then ``linear_act_forward``), fwd pass.
- ``torch``: ``down(silu(gate(x)) * up(x))`` with ``nn.Linear`` (cuBLAS and two
  elementwise kernels), eager; ``torch.compile``: the same compiled.

FLOPs counted: 6 M K I forward (three GEMMs), 18 M K I forward + backward. Method as
every bench script (bench/common.py). Each provider's y (and for fwd+bwd grad_x) is
checked against torch in float32 before timing.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEFAULT_SHAPES = ("8192x4096x11008",)
QUICK_SHAPES = ("4096x2048x5632",)
PROVIDERS = ("numba_torch", "numba_fused", "torch", "torch.compile")


def _shape(text):
    try:
        m, k, i = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be MxKxI, got {text!r}") from None
    return m, k, i


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", type=_shape,
                   default=[_shape(s) for s in DEFAULT_SHAPES])
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"],
                   choices=["float16", "bfloat16", "float32"])
    p.add_argument("--activation", default="silu")
    p.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json")
    return p


def _act_fn(act):
    import torch.nn.functional as F

    return {"silu": F.silu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
            "gelu": F.gelu, "relu": F.relu}[act]


def _torch_mlp(mod, act):
    fn = _act_fn(act)

    def f(x):
        return mod.down_proj(fn(mod.gate_proj(x)) * mod.up_proj(x))
    return f


def run(args):
    import torch

    from bench import common
    from interop.torch import FusedGatedMLP
    import numba_fused as nf
    from numba_fused.gated_linear import interleave

    rows = []
    for (m, k, hid) in args.shapes:
        for dt in args.dtypes:
            tdt = getattr(torch, dt)
            torch.manual_seed(0)
            mod = FusedGatedMLP(k, hid, activation=args.activation, device=common.DEVICE,
                                dtype=tdt)
            x = torch.randn(m, k, device=common.DEVICE, dtype=tdt)
            gy = torch.randn(m, k, device=common.DEVICE, dtype=tdt)
            params = [x] + [p for p in mod.parameters()]
            ref_fn = _torch_mlp(mod, args.activation)
            with torch.no_grad():
                x32 = x.float()
                gate = x32 @ mod.gate_proj.weight.float().t()
                up = x32 @ mod.up_proj.weight.float().t()
                y_ref = (_act_fn(args.activation)(gate) * up) @ mod.down_proj.weight.float().t()
            compiled = torch.compile(ref_fn) if "torch.compile" in args.providers else None
            w = interleave(mod.gate_proj.weight.detach(), mod.up_proj.weight.detach())
            wd = mod.down_proj.weight.detach()

            def array_fwd(x):
                h = nf.gated_linear_forward(x, w, None, args.activation)
                return nf.linear_act_forward(h, wd, None, "none")

            fwd = {"numba_torch": mod, "numba_fused": array_fwd, "torch": ref_fn,
                   "torch.compile": compiled}
            for prov in args.providers:
                f = fwd[prov]
                for pas in ("fwd", "fwd+bwd"):
                    if pas == "fwd+bwd" and prov == "numba_fused":
                        continue
                    base = {"shape": f"{m}x{k}x{hid}", "dtype": dt, "pass": pas, "provider": prov}
                    try:
                        if pas == "fwd":
                            def call(x, f=f):
                                with torch.no_grad():
                                    return f(x)
                            y = call(x)
                            check = common.rel_err(y.float(), y_ref)
                            t = common.time_cuda(call, [(x,)], reps=args.reps, warmup=3)
                            flops = 6 * m * k * hid
                        else:
                            xg = x.detach().requires_grad_()

                            def call(xg, f=f):
                                y = f(xg)
                                return torch.autograd.grad(y, [xg] + params[1:], gy)
                            y = f(xg)
                            check = common.rel_err(y.detach().float(), y_ref)
                            t = common.time_cuda(call, [(xg,)], reps=args.reps, warmup=3)
                            flops = 18 * m * k * hid
                    except Exception as e:  # noqa: BLE001 (a row says why a provider did not run)
                        rows.append(dict(base, note=f"{type(e).__name__}: {str(e)[:120]}"))
                        continue
                    rows.append(dict(base, median_ms=t["median_ms"], p20_ms=t["p20_ms"],
                                     p80_ms=t["p80_ms"],
                                     **{"TFLOP/s": flops / t["median_ms"] / 1e9},
                                     check=f"y {check:.1e}"))
    for r in rows:
        ref = [q for q in rows if q["provider"] == "torch" and q["shape"] == r["shape"]
               and q["dtype"] == r["dtype"] and q["pass"] == r["pass"] and "median_ms" in q]
        if ref and "median_ms" in r:
            r["speedup"] = ref[0]["median_ms"] / r["median_ms"]
    return rows


def markdown(rows):
    cols = ["shape", "dtype", "pass", "provider", "median_ms", "TFLOP/s", "speedup", "check"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if "median_ms" not in r:
            out.append(f"| {r['shape']} | {r['dtype']} | {r['pass']} | {r['provider']} | "
                       f"not run: {r['note']} | | | |")
            continue
        out.append("| " + " | ".join(
            f"{r[c]:.4g}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols)
            + " |")
    return "\n".join(out)


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names)."""
    args = parser().parse_args([])
    if quick:
        args.shapes = [_shape(s) for s in QUICK_SHAPES]
        args.reps = 10
    out = []
    for r in run(args):
        row = {"op": "gated_mlp", "case": f"{r['shape']} {args.activation}", "dtype": r["dtype"],
               "pass": r["pass"], "provider": r["provider"]}
        if "median_ms" not in r:
            row["note"] = r["note"]
        else:
            row.update({k: r.get(k) for k in ("median_ms", "p20_ms", "p80_ms", "TFLOP/s",
                                              "speedup", "check")})
        out.append(row)
    return out


def main(argv=None):
    args = parser().parse_args(argv)
    from numba import cuda

    if not cuda.is_available():
        print("bench/gated_linear.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = run(args)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
