"""Benchmark: fused ``dropout(act(x + bias), p)`` forward and backward.

Providers:
  numba        numba_fused.dropout_bias_act_forward / _backward (Philox mask regenerated)
  numba_mask   the uint8-mask variant (forward writes the mask, backward reads it)
  numba_torch  interop.torch.dropout_bias_act through autograd (seed drawn from torch)
  eager        torch: F.dropout(act(x + b), p) and its autograd backward
  compile      the same function under torch.compile

Method (bench/common.py): CUDA events, warm-up, median of ``--reps`` runs over input
sets rotated to overflow the L2, random normal data. Backward timings are of the
backward alone: torch providers replay ``autograd.grad(..., retain_graph=True)`` on a
graph built once per input set (torch.compile falls back to fwd+bwd minus fwd if its
graph cannot be replayed; the row says so). GB/s counts the bytes a fused kernel must
move (fwd: x in, y out [+ mask out]; bwd: grad in [+ x in unless activation is
'none'] [+ mask in], grad_x out; bias and the bias-grad partials are ignored), the same
for every provider.

  python bench/dropout.py --shapes 16384x4096 --dtypes float16 --activations none,gelu
"""

import argparse
import json
import math
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (  # noqa: E402
    copy_bandwidth, gpu_info, host_overhead_us, rotations, time_cuda)

PROVIDERS = ("numba", "numba_mask", "numba_torch", "eager", "compile")
DEFAULT_PROVIDERS = ("numba", "numba_mask", "eager", "compile")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="16384x4096",
                    help="comma-separated MxN (x is [M, N], bias [N]), e.g. 16384x4096,4096x1000")
    ap.add_argument("--dtypes", default="float16", help="comma-separated: float32,float16,bfloat16")
    ap.add_argument("--activations", default="none,gelu",
                    help="comma-separated: none,relu,gelu,gelu_tanh,squared_relu,leaky_relu")
    ap.add_argument("--directions", default="fwd,bwd", help="fwd, bwd or both")
    ap.add_argument("--providers", default=",".join(DEFAULT_PROVIDERS),
                    help=f"comma-separated from {','.join(PROVIDERS)}")
    ap.add_argument("--p", type=float, default=0.1, help="dropout probability")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--configs", default="",
                    help="extra numba launch configurations to time, ';'-separated "
                         "'threads=256,unroll=2,rows_per_block=128' entries")
    ap.add_argument("--json", default=None, help="write the results to this JSON file")
    ap.add_argument("--no-host-overhead", action="store_true",
                    help="skip the host launch-overhead measurement")
    args = ap.parse_args(argv)
    args.shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
    for s in args.shapes:
        if len(s) != 2 or min(s) <= 0:
            ap.error(f"--shapes: expected MxN with positive M, N, got {'x'.join(map(str, s))}")
    args.dtypes = _choices(ap, "--dtypes", args.dtypes, ITEMSIZE)
    from numba_fused.activations import ACTIVATIONS

    args.activations = _choices(ap, "--activations", args.activations, ACTIVATIONS)
    args.directions = _choices(ap, "--directions", args.directions, ("fwd", "bwd"))
    args.providers = _choices(ap, "--providers", args.providers, PROVIDERS)
    if not 0.0 <= args.p <= 1.0:
        ap.error("--p must be in [0, 1]")
    args.configs = [_parse_config(ap, c) for c in args.configs.split(";") if c.strip()]
    return args


def _choices(ap, flag, value, allowed):
    out = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in out if v not in allowed]
    if bad or not out:
        ap.error(f"{flag}: {bad or value!r} not in {tuple(allowed)}")
    return out


def _parse_config(ap, text):
    from numba_fused.dropout import LaunchConfig

    fields = {}
    for item in text.split(","):
        key, _, val = item.partition("=")
        key = key.strip()
        if key not in LaunchConfig._fields or not val.strip().isdigit():
            ap.error(f"--configs: bad entry {item!r} (fields: {LaunchConfig._fields})")
        fields[key] = int(val)
    return LaunchConfig(**fields)


def _torch_act(activation):
    import torch
    import torch.nn.functional as F

    from numba_fused.activations import LEAKY_SLOPE

    return {
        "none": lambda z: z,
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
        "squared_relu": lambda z: torch.square(F.relu(z)),
        "leaky_relu": lambda z: F.leaky_relu(z, LEAKY_SLOPE),
    }[activation]


def _op_name(activation):
    return "dropout(x+b)" if activation == "none" else f"dropout({activation}(x+b))"


def _model_bytes(m, n, dtype, direction, activation, mask):
    elems = m * n * ITEMSIZE[dtype]
    if direction == "fwd":
        return 2 * elems + (m * n if mask else 0)
    return (3 if activation != "none" else 2) * elems + (m * n if mask else 0)


def _make_sets(m, n, dtype, count):
    import torch

    tdt = getattr(torch, dtype)
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device="cuda", dtype=tdt)
        b = torch.randn(n, device="cuda", dtype=tdt)
        g = torch.randn(m, n, device="cuda", dtype=tdt)
        sets.append((x, b, g))
    return sets


def _time_numba(direction, activation, p, sets, mask, config, reps, warmup):
    from numba_fused.dropout import dropout_bias_act_backward, dropout_bias_act_forward

    seed, offset = 1234, 0
    if direction == "fwd":
        def fn(x, b, g):
            dropout_bias_act_forward(x, b, p, seed, offset, activation, return_mask=mask,
                                     config=config)
        return time_cuda(fn, sets, reps, warmup), None
    prepared = []
    for x, b, g in sets:
        m = None
        if mask:
            _, m = dropout_bias_act_forward(x, b, p, seed, offset, activation, return_mask=True,
                                            config=config)
        prepared.append((g, x, b, m))

    def bwd(g, x, b, m):
        dropout_bias_act_backward(g, x, b, p, seed, offset, activation, mask=m, config=config)
    return time_cuda(bwd, prepared, reps, warmup), None


def _torch_fn(provider, activation, p):
    import torch
    import torch.nn.functional as F

    act = _torch_act(activation)
    if provider == "numba_torch":
        from interop.torch.dropout import dropout_bias_act

        return lambda x, b: dropout_bias_act(x, b, p, activation)

    def f(x, b):
        return F.dropout(act(x + b), p, training=True)
    if provider == "compile":
        torch._dynamo.reset()
        return torch.compile(f, dynamic=False)
    return f


def _time_torch(provider, direction, activation, p, sets, reps, warmup):
    import torch

    fn = _torch_fn(provider, activation, p)
    if direction == "fwd":
        with torch.no_grad():
            return time_cuda(lambda x, b, g: fn(x, b), sets, reps, warmup), None
    graphs = []
    for x, b, g in sets:
        xr = x.detach().requires_grad_(True)
        br = b.detach().requires_grad_(True)
        graphs.append((fn(xr, br), xr, br, g))

    def bwd(y, xr, br, g):
        torch.autograd.grad(y, (xr, br), g, retain_graph=True)
    try:
        return time_cuda(bwd, graphs, reps, warmup), None
    except RuntimeError as exc:
        # A graph that frees its buffers after one backward: time fwd+bwd, minus fwd.
        del graphs
        note = f"fwd+bwd minus fwd ({str(exc).splitlines()[0][:60]})"

    def fwd_bwd(x, b, g):
        xr = x.detach().requires_grad_(True)
        br = b.detach().requires_grad_(True)
        torch.autograd.grad(fn(xr, br), (xr, br), g)

    def fwd_only(x, b, g):
        xr = x.detach().requires_grad_(True)
        br = b.detach().requires_grad_(True)
        fn(xr, br)
    both = time_cuda(fwd_bwd, sets, reps, warmup)
    only = time_cuda(fwd_only, sets, reps, warmup)
    both["median_ms"] -= only["median_ms"]
    both["p20_ms"] -= only["p20_ms"]
    both["p80_ms"] -= only["p80_ms"]
    return both, note


def _host_overheads(dtype, activation, p):
    import torch

    from numba_fused.dropout import dropout_bias_act_backward, dropout_bias_act_forward

    tdt = getattr(torch, dtype)
    x = torch.randn(8, 64, device="cuda", dtype=tdt)
    b = torch.randn(64, device="cuda", dtype=tdt)
    g = torch.randn(8, 64, device="cuda", dtype=tdt)
    out = []
    for direction, fn in [
        ("fwd", lambda: dropout_bias_act_forward(x, b, p, 1, 0, activation)),
        ("bwd", lambda: dropout_bias_act_backward(g, x, b, p, 1, 0, activation)),
    ]:
        out.append({"kind": "host_overhead", "provider": "numba", "dtype": dtype,
                    "activation": activation, "direction": direction,
                    "host_us": host_overhead_us(fn, calls=500)})
    return out


def run(args):
    """Time every (shape, dtype, activation, direction, provider); returns result dicts."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("bench/dropout.py needs a CUDA GPU")
    info = gpu_info()
    bw = copy_bandwidth()
    results = []
    for (m, n) in args.shapes:
        for dtype in args.dtypes:
            per_set = 2 * m * n * ITEMSIZE[dtype] + n * ITEMSIZE[dtype]
            sets = _make_sets(m, n, dtype, rotations(per_set))
            for activation in args.activations:
                for direction in args.directions:
                    row_base = {"kind": "timing", "op": _op_name(activation), "shape": f"{m}x{n}",
                                "dtype": dtype, "activation": activation,
                                "direction": direction, "p": args.p, "gpu": info["name"],
                                "copy_gbps": bw}
                    runs = [(provider, None) for provider in args.providers]
                    runs += [("numba", cfg) for cfg in args.configs]
                    timed = []
                    for provider, cfg in runs:
                        mask = provider == "numba_mask"
                        if provider in ("numba", "numba_mask"):
                            t, note = _time_numba(direction, activation, args.p, sets, mask, cfg,
                                                  args.reps, args.warmup)
                        else:
                            t, note = _time_torch(provider, direction, activation, args.p, sets,
                                                  args.reps, args.warmup)
                        nbytes = _model_bytes(m, n, dtype, direction, activation, mask)
                        gbps = nbytes / (t["median_ms"] * 1e-3) / 1e9
                        name = provider if cfg is None else f"numba[{_cfg_label(cfg)}]"
                        timed.append({**row_base, "provider": name, **t, "bytes": nbytes,
                                      "gbps": gbps, "pct_copy_bw": 100.0 * gbps / bw,
                                      "note": note})
                        torch.cuda.synchronize()
                    _speedups(timed)
                    results.extend(timed)
            del sets
            torch.cuda.empty_cache()
    if not args.no_host_overhead:
        for dtype in args.dtypes[:1]:
            for activation in args.activations[:1]:
                results.extend(_host_overheads(dtype, activation, args.p))
    return results


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names): fp16 16384x4096, p = 0.1,
    dropout(x+b) and dropout(gelu(x+b)), forward and backward; fp32 and bf16 too
    unless quick."""
    argv = ["--dtypes", "float16" if quick else "float16,bfloat16,float32",
            "--activations", "none,gelu"]
    if quick:
        argv += ["--reps", "50"]
    out = []
    for r in run(parse_args(argv)):
        if r["kind"] != "timing":
            continue
        out.append({"op": "dropout", "case": f"{r['op']} {r['shape']} p={r['p']}",
                    "dtype": r["dtype"], "pass": r["direction"], "provider": r["provider"],
                    "median_ms": r["median_ms"], "p20_ms": r["p20_ms"], "p80_ms": r["p80_ms"],
                    "GB/s": r["gbps"], "%copy": r["pct_copy_bw"],
                    "speedup": r.get("speedup_vs_eager")})
    return out


def _cfg_label(cfg):
    return ",".join(f"{k}={v}" for k, v in cfg._asdict().items() if v is not None)


def _speedups(rows):
    base = {r["provider"]: r["median_ms"] for r in rows}
    for r in rows:
        for ref in ("eager", "compile"):
            if ref in base and r["median_ms"] > 0:
                r[f"speedup_vs_{ref}"] = base[ref] / r["median_ms"]


def markdown(results):
    """The timing rows as a markdown table (plus host overheads, if any)."""
    rows = [r for r in results if r["kind"] == "timing"]
    lines = []
    if rows:
        lines.append(f"GPU: {rows[0]['gpu']}; copy bandwidth {rows[0]['copy_gbps']:.0f} GB/s; "
                     f"p = {rows[0]['p']}")
        lines.append("")
        lines.append("| op | shape | dtype | dir | provider | median ms | p20-p80 ms | GB/s | "
                     "% copy BW | x eager | x compile | note |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            sp = [f"{r[k]:.2f}" if k in r else "-"
                  for k in ("speedup_vs_eager", "speedup_vs_compile")]
            lines.append(
                f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['direction']} | {r['provider']} | "
                f"{r['median_ms']:.4f} | {r['p20_ms']:.4f}-{r['p80_ms']:.4f} | {r['gbps']:.0f} | "
                f"{r['pct_copy_bw']:.1f} | {sp[0]} | {sp[1]} | {r.get('note') or ''} |")
    host = [r for r in results if r["kind"] == "host_overhead"]
    if host:
        lines.append("")
        lines.append("| host launch overhead | dtype | activation | dir | us per call |")
        lines.append("|---|---|---|---|---|")
        for r in host:
            lines.append(f"| {r['provider']} | {r['dtype']} | {r['activation']} | "
                         f"{r['direction']} | {r['host_us']:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    results = run(args)
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: (None if isinstance(v, float) and math.isnan(v) else v)
                        for k, v in r.items()} for r in results], f, indent=1)
    return results


if __name__ == "__main__":
    main()
