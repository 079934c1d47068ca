"""Benchmark: fused ``dropout(act(x + bias), p)`` forward and backward.

Providers:
  numba        numba_fused.dropout_bias_act_forward / _backward (Philox mask regenerated)
  numba_mask   the uint8-mask variant (forward writes the mask, backward reads it)
  numba_torch  interop.torch.dropout_bias_act through autograd (seed drawn from torch)
  numba_cupy   interop.cupy.dropout_bias_act_forward / _backward on CuPy arrays made from
               the same tensors by DLPack (no copy), on torch's stream (no bfloat16 in CuPy;
               a note row where CuPy is not importable)
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

Before timing, each provider's outputs are checked against float64 (``check_outputs``:
the mask read off the outputs, kept values against ``act(x + b) / (1 - p)``, the kept
fraction against ``1 - p``); the row's ``check`` says ok or FAIL with the errors, and
a failing provider is still timed. ``peak_MB``: memory one call allocates beyond its
inputs (for bwd: beyond the saved forward).

  python bench/dropout.py --shapes 16384x4096 --dtypes float16 --activations none,gelu
  python bench/dropout.py --from-json out.json --plot bench/results   # plots, no GPU
"""

import argparse
import json
import math
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.common import (  # noqa: E402
    check_status, copy_bandwidth, cupy_on_torch_stream, cupy_or_none, gpu_info, host_overhead_us,
    note_row, peak_mb, rel_err, rotations, time_cuda, to_cupy, to_torch)

PROVIDERS = ("numba", "numba_mask", "numba_torch", "numba_cupy", "eager", "compile")
DEFAULT_PROVIDERS = ("numba", "numba_mask", "numba_torch", "numba_cupy", "eager", "compile")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="16384x4096",
                    help="comma-separated MxN (x is [M, N], bias [N]), e.g. 16384x4096,4096x1000")
    ap.add_argument("--dtypes", default="float16", help="comma-separated: float32,float16,bfloat16")
    ap.add_argument("--activations", default="none,gelu",
                    help="comma-separated: none,relu,gelu,gelu_tanh,squared_relu,leaky_relu,silu")
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
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    ap.add_argument("--plot", metavar="DIR",
                    help="write dropout_<activation>_sweep.png here: GB/s against N per "
                         "provider (needs matplotlib)")
    ap.add_argument("--from-json", metavar="FILE",
                    help="no GPU run: read the results of an earlier --json (for --plot / "
                         "the table)")
    args = ap.parse_args(argv)
    args.copy_gbps = None
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
        "silu": F.silu,
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
    dev = common.DEVICE
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device=dev, dtype=tdt)
        b = torch.randn(n, device=dev, dtype=tdt)
        g = torch.randn(m, n, device=dev, dtype=tdt)
        sets.append((x, b, g))
    return sets


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


SEED, OFFSET = 1234, 0


def _case(provider, direction, activation, p, sets, config, cupy_sets):
    """``(fn, arg_sets, y0)`` for one provider and direction: ``fn(*args)`` returns the
    outputs (fwd: y, or (y, mask); bwd: (grad_x, grad_bias)); ``y0`` is, for bwd, the
    forward output that goes with ``arg_sets[0]`` (same mask), for the check."""
    if provider in ("numba", "numba_mask"):
        from numba_fused.dropout import dropout_bias_act_backward, dropout_bias_act_forward

        mask = provider == "numba_mask"

        def fwd(x, b, g):
            return dropout_bias_act_forward(x, b, p, SEED, OFFSET, activation, return_mask=mask,
                                            config=config)
        if direction == "fwd":
            return fwd, sets, None
        prepared, y0 = [], None
        for x, b, g in sets:
            out = fwd(x, b, g)
            y, m = out if mask else (out, None)
            y0 = y if y0 is None else y0
            prepared.append((g, x, b, m))

        def bwd(g, x, b, m):
            return dropout_bias_act_backward(g, x, b, p, SEED, OFFSET, activation, mask=m,
                                             config=config)
        return bwd, prepared, y0
    if provider == "numba_cupy":
        import interop.cupy as cf

        def cfwd(x, b, g):
            return cf.dropout_bias_act_forward(x, b, p, SEED, OFFSET, activation)
        if direction == "fwd":
            return cfwd, cupy_sets, None

        def cbwd(g, x, b):
            return cf.dropout_bias_act_backward(g, x, b, p, SEED, OFFSET, activation)
        return cbwd, [(g, x, b) for x, b, g in cupy_sets], cfwd(*cupy_sets[0])
    import torch

    fn = _torch_fn(provider, activation, p)
    if direction == "fwd":
        return (lambda x, b, g: fn(x, b)), sets, None
    graphs = []
    for x, b, g in sets:
        xr = x.detach().requires_grad_(True)
        br = b.detach().requires_grad_(True)
        graphs.append((fn(xr, br), xr, br, g))

    def bwd_t(y, xr, br, g):
        return torch.autograd.grad(y, (xr, br), g, retain_graph=True)
    return bwd_t, graphs, graphs[0][0]


def _fwd_bwd_minus_fwd(provider, activation, p, sets, reps, warmup, exc):
    """Backward time of a graph that frees its buffers after one backward: fwd+bwd
    minus fwd."""
    fn = _torch_fn(provider, activation, p)
    note = f"fwd+bwd minus fwd ({str(exc).splitlines()[0][:60]})"

    def fwd_bwd(x, b, g):
        import torch

        xr = x.detach().requires_grad_(True)
        br = b.detach().requires_grad_(True)
        torch.autograd.grad(fn(xr, br), (xr, br), g)

    def fwd_only(x, b, g):
        xr = x.detach().requires_grad_(True)
        br = b.detach().requires_grad_(True)
        fn(xr, br)
    both = time_cuda(fwd_bwd, sets, reps, warmup)
    only = time_cuda(fwd_only, sets, reps, warmup)
    for k in ("median_ms", "p20_ms", "p80_ms"):
        both[k] -= only[k]
    return both, note


def check_outputs(activation, p, dtype, x, b, g, y, grads=None):
    """Check one provider's outputs against float64 (torch on the GPU).

    Providers draw different masks, so the mask is read off the outputs: an element
    is kept iff y or grad_x is nonzero there (a dropped element gives exact zeros).
    Then y must equal ``act(x + b) / (1 - p)`` on kept elements and 0 elsewhere,
    grad_x ``g * act'(x + b) / (1 - p)`` likewise, grad_bias the column sums of that
    (relative errors, ``common.CHECK_TOL``), and the kept fraction of the elements
    where ``|act(x + b)| > 1e-3`` must be within 5 sigma of ``1 - p``.
    Returns ``(status, errors, keep_rate)``."""
    import torch

    act = _torch_act(activation)
    z = (x.double() + b.double()).requires_grad_(grads is not None)
    with torch.enable_grad():
        a = act(z)
        da = torch.autograd.grad(a, z, g.double())[0] if grads is not None else None
    a = a.detach()
    y = to_torch(y[0] if isinstance(y, tuple) else y)
    keep = y != 0
    gx = None
    if grads is not None:
        gx = to_torch(grads[0])
        keep = keep | (gx != 0)
    scale = 1.0 / (1.0 - p) if p < 1.0 else 0.0
    keep64 = keep.double() * scale
    errors = {"y": rel_err(y, a * keep64)}
    if grads is not None:
        ref_gx = da * keep64
        errors["grad_x"] = rel_err(gx, ref_gx)
        if grads[1] is not None:
            errors["grad_bias"] = rel_err(grads[1], ref_gx.reshape(-1, ref_gx.shape[-1]).sum(0))
    status = check_status(errors, dtype)
    informative = a.abs() > 1e-3
    n = int(informative.sum())
    rate = float(keep[informative].double().mean()) if n else None
    if n and abs(rate - (1.0 - p)) > 5.0 * math.sqrt(p * (1.0 - p) / n) + 1e-6:
        bad = f"keep rate {rate:.5f} vs {1.0 - p:.5f}"
        status = f"FAIL ({bad})" if status == "ok" else f"{status[:-1]}, {bad})"
    return status, errors, rate


def _provider_row(provider, direction, activation, args, sets, config, cupy_sets, dtype):
    """Check, time and measure one provider: the row's fields (or a note)."""
    import contextlib

    import torch

    fn, arg_sets, y0 = _case(provider, direction, activation, args.p, sets, config, cupy_sets)
    grad_ctx = torch.no_grad() if direction == "fwd" else contextlib.nullcontext()
    with grad_ctx:
        out = fn(*arg_sets[0])
        if direction == "fwd":
            status, errors, rate = check_outputs(activation, args.p, dtype, *sets[0], out)
        else:
            status, errors, rate = check_outputs(activation, args.p, dtype, *sets[0], y0, out)
        del out
        note = None
        try:
            t = time_cuda(fn, arg_sets, args.reps, args.warmup)
        except RuntimeError as exc:
            if direction != "bwd" or provider not in ("eager", "compile", "numba_torch"):
                raise
            fn = arg_sets = y0 = None  # frees the graphs before timing again
            t, note = _fwd_bwd_minus_fwd(provider, activation, args.p, sets, args.reps,
                                         args.warmup, exc)
        peak = None
        if fn is not None and not args.no_memory:
            peak = peak_mb(fn, arg_sets[0], cupy_alloc=provider == "numba_cupy")
    return {**t, "check": status, "errors": errors, "keep_rate": rate, "peak_MB": peak,
            "note": note}


def run(args):
    """Check and time every (shape, dtype, activation, direction, provider); returns
    result dicts (``kind`` 'timing', 'note' for providers not run, 'host_overhead')."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("bench/dropout.py needs a CUDA GPU")
    info = gpu_info()
    bw = args.copy_gbps or copy_bandwidth()
    cp, cupy_note = cupy_or_none() if "numba_cupy" in args.providers else (None, None)
    results = []
    if cupy_note:
        results.append(note_row("dropout", "numba_cupy", cupy_note, kind="note"))
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
                        name = provider if cfg is None else f"numba[{_cfg_label(cfg)}]"
                        if provider == "numba_cupy" and (cp is None or dtype == "bfloat16"):
                            if cp is not None:
                                results.append({**row_base, "kind": "note", "provider": name,
                                                "note": "CuPy has no bfloat16"})
                            continue
                        try:
                            if provider == "numba_cupy":
                                with cupy_on_torch_stream():
                                    cupy_sets = [tuple(to_cupy(t) for t in s) for s in sets]
                                    fields = _provider_row(provider, direction, activation, args,
                                                           sets, cfg, cupy_sets, dtype)
                                    del cupy_sets
                                cp.get_default_memory_pool().free_all_blocks()
                            else:
                                fields = _provider_row(provider, direction, activation, args,
                                                       sets, cfg, None, dtype)
                        except Exception as exc:  # a provider that cannot run here
                            results.append({**row_base, "kind": "note", "provider": name,
                                            "note": f"failed: {type(exc).__name__}: {exc}"[:300]})
                            torch.cuda.empty_cache()
                            continue
                        mask = provider == "numba_mask"
                        nbytes = _model_bytes(m, n, dtype, direction, activation, mask)
                        gbps = nbytes / (fields["median_ms"] * 1e-3) / 1e9
                        timed.append({**row_base, "provider": name, **fields, "bytes": nbytes,
                                      "gbps": gbps, "pct_copy_bw": 100.0 * gbps / bw})
                        torch.cuda.synchronize()
                    _speedups(timed)
                    results.extend(timed)
            del sets
            torch.cuda.empty_cache()
            if args.json:  # after every (shape, dtype): a run cut short keeps its rows
                _write_json(args.json, results)
    if not args.no_host_overhead:
        for dtype in args.dtypes[:1]:
            for activation in args.activations[:1]:
                results.extend(_host_overheads(dtype, activation, args.p))
    return results


def cli_rows(quick=False, copy_gbps=None):
    """Rows for ``python -m bench`` (its column names): fp16 16384x4096, p = 0.1,
    dropout(x+b) and dropout(gelu(x+b)), forward and backward; fp32 and bf16 too
    unless quick. Providers not run come back as rows with a ``note`` only."""
    argv = ["--dtypes", "float16" if quick else "float16,bfloat16,float32",
            "--activations", "none,gelu", "--no-host-overhead"]
    if quick:
        argv += ["--reps", "50"]
    args = parse_args(argv)
    args.copy_gbps = copy_gbps
    out = []
    for r in run(args):
        case = f"{r['op']} {r['shape']} p={r['p']}" if "shape" in r else None
        if r["kind"] == "note":
            out.append({"op": "dropout", "case": case, "dtype": r.get("dtype"),
                        "pass": r.get("direction"), "provider": r["provider"], "note": r["note"]})
        elif r["kind"] == "timing":
            out.append({"op": "dropout", "case": case, "dtype": r["dtype"],
                        "pass": r["direction"], "provider": r["provider"],
                        "median_ms": r["median_ms"], "p20_ms": r["p20_ms"], "p80_ms": r["p80_ms"],
                        "GB/s": r["gbps"], "%copy": r["pct_copy_bw"],
                        "speedup": r.get("speedup_vs_eager"), "peak_MB": r["peak_MB"],
                        "check": r["check"], "note": r["note"]})
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
                     "% copy BW | x eager | x compile | peak MB | check | note |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            sp = [f"{r[k]:.2f}" if k in r else "-"
                  for k in ("speedup_vs_eager", "speedup_vs_compile")]
            peak = "-" if r.get("peak_MB") is None else f"{r['peak_MB']:.0f}"
            lines.append(
                f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['direction']} | {r['provider']} | "
                f"{r['median_ms']:.4f} | {r['p20_ms']:.4f}-{r['p80_ms']:.4f} | {r['gbps']:.0f} | "
                f"{r['pct_copy_bw']:.1f} | {sp[0]} | {sp[1]} | {peak} | {r['check']} | "
                f"{r.get('note') or ''} |")
    notes = [r for r in results if r["kind"] == "note"]
    if notes:
        lines.append("")
        lines.extend(f"- not run: {r['provider']} {r.get('op', '')} {r.get('dtype', '')} "
                     f"{r.get('direction', '')}: {r['note']}" for r in notes)
    host = [r for r in results if r["kind"] == "host_overhead"]
    if host:
        lines.append("")
        lines.append("| host launch overhead | dtype | activation | dir | us per call |")
        lines.append("|---|---|---|---|---|")
        for r in host:
            lines.append(f"| {r['provider']} | {r['dtype']} | {r['activation']} | "
                         f"{r['direction']} | {r['host_us']:.1f} |")
    return "\n".join(lines)


def plot_sweep(results, out_dir):
    """One PNG per activation (``dropout_<activation>_sweep.png``,
    :func:`bench.common.plot_bandwidth_sweep`): GB/s against N per provider, a panel
    per (direction, dtype). Returns the paths written ([] without matplotlib)."""
    timed = [r for r in results if r["kind"] == "timing" and r["provider"] in PROVIDERS]
    paths = []
    for act in sorted({r["activation"] for r in timed}):
        rows = [{"dir": r["direction"], "dtype": r["dtype"], "provider": r["provider"],
                 "N": int(r["shape"].split("x")[-1]), "GB/s": r["gbps"],
                 "copy_GB/s": r["copy_gbps"], "gpu": r["gpu"]}
                for r in timed if r["activation"] == act]
        paths += common.plot_bandwidth_sweep(rows, out_dir, f"dropout_{act}_sweep.png",
                                             f"{_op_name(act)}: bandwidth against row length",
                                             PROVIDERS, ("float16", "bfloat16", "float32"))
    return paths


def _write_json(path, results):
    with open(path, "w") as f:
        json.dump([{k: (None if isinstance(v, float) and math.isnan(v) else v)
                    for k, v in r.items()} for r in results], f, indent=1)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
    else:
        results = run(args)
    print(markdown(results))
    if args.json and not args.from_json:
        _write_json(args.json, results)
    if args.plot:
        os.makedirs(args.plot, exist_ok=True)
        for path in plot_sweep(results, args.plot):
            print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()
