"""End-to-end example 1: a transformer MLP block on CuPy arrays, forward and
backward, with no torch anywhere.

The block (pre-LN MLP with a residual; ``x`` is ``[tokens, d]``, hidden width ``h``)::

    u, mean, rstd = layer_norm_forward(x, gamma, beta)              LayerNorm
    a, z1         = linear_act_forward(u, W1, b1, "gelu", True)     fc1 + gelu, z1 saved
    v             = linear_act_forward(a, W2, None, "none")         fc2, no bias here:
    y             = x + dropout_bias_act_forward(v, b2, p, seed)    fc2's bias b2 is folded
                                                                    into the dropout kernel

Backward, chained by hand from ``dy`` through our backward functions::

    dv, db2  = dropout_bias_act_backward(dy, None, b2, p, seed)     mask regenerated
    dW2, _   = linear_weight_grad(dv, a, need_bias_grad=False)
    dz1      = linear_act_dgrad(dv, W2, "gelu", preact=z1)          (dv @ W2) * gelu'(z1)
    dW1, db1 = linear_weight_grad(dz1, u)
    du       = linear_act_dgrad(dz1, W1, "none")
    dx       = dy + layer_norm_backward(du, x, gamma, beta, mean, rstd)[0]  (+ dgamma, dbeta)

Gradient check (float32, tiny size): for ``L = sum(y * R)`` (R fixed, random, so
``dy = R``) and each tensor ``P`` (x and every parameter, then all of them together)
``L(P + s) - L(P - s)`` is compared with ``<dL/dP, (P + s) - (P - s)>`` for a random
step ``s`` of 1% of P's RMS (``--step``); the perturbed tensors are rounded to
float32 first and the inner product uses the rounded difference, so only the
forward's rounding and the third-order terms separate the two. The error is
relative to ``|<dL/dP, ...>|`` (for all tensors together: to the sum of the
per-tensor terms' magnitudes, which may cancel). Run with dropout off
(p = 0) and on (p = 0.1): with a fixed (seed, offset) the mask is fixed, dropout is
then a linear map and the check applies to it as well. Tolerance 1e-2 relative:
each loss is a float32 computation whose rounding (~1e-6 of |L|-sized partial sums)
enters the difference divided by the step, giving ~1e-5..1e-4 relative; the
central difference's truncation error is O(step^2) ~ 1e-4; a wrong gradient (a
missing term, a wrong activation derivative, a mask that differs between forward and
backward) is off by O(1). Exit status 1 if any check fails.

Timing (GPU): the block forward + backward at a realistic size (default tokens 8192,
d 1024, hidden 4096, float16, p = 0.1), per stage by CUDA events on CuPy's stream,
median of ``--reps``; beside it the same six GEMMs through ``cupy.matmul`` (cuBLAS).

Arrays are CuPy arrays and the ops come from ``interop.cupy`` on a GPU; under the CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``, no GPU) they are NumPy arrays and the ops the
array-level ``numba_fused`` functions, and only the check runs. Run as a script, it
first makes ``import torch`` fail, so the run itself shows that neither it nor
``numba_fused`` / ``interop.cupy`` needs torch.

  python -m bench.example_cupy_mlp [--check-only] [--tokens 8192 --d 1024 --hidden 4096]
      [--dtype float16] [--p 0.1] [--reps 30] [--json FILE]
"""

import argparse
import json
import os
import statistics
import sys

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK_TOL = 1e-2
PARAMS = ("gamma", "beta", "w1", "b1", "w2", "b2")
SEED, OFFSET = 1234, 0


def backend():
    """``(xp, ops, label)``: CuPy and ``interop.cupy`` on a GPU; NumPy and the
    array-level ``numba_fused`` functions under the CUDA simulator."""
    from numba import config

    if config.ENABLE_CUDASIM:
        import numba_fused

        return np, numba_fused, "numpy arrays, numba_fused under the CUDA simulator"
    import cupy

    import interop.cupy as ops

    return cupy, ops, f"cupy {cupy.__version__}, interop.cupy"


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def init_params(xp, d, hidden, dtype, rng):
    """Random parameters (LayerNorm affine near (1, 0), linear weights ~ 1/sqrt(fan_in))."""
    host = {
        "gamma": 1.0 + 0.1 * rng.standard_normal(d),
        "beta": 0.1 * rng.standard_normal(d),
        "w1": rng.standard_normal((hidden, d)) / np.sqrt(d),
        "b1": 0.1 * rng.standard_normal(hidden),
        "w2": rng.standard_normal((d, hidden)) / np.sqrt(hidden),
        "b2": 0.1 * rng.standard_normal(d),
    }
    return {k: xp.asarray(v.astype(dtype)) for k, v in host.items()}


def forward(ops, x, P, p, mark=None):
    """``(y, saved)`` of the block (module docstring); ``mark(name)``, if given, is
    called after each stage (the timing loop records an event there)."""
    u, mean, rstd = ops.layer_norm_forward(x, P["gamma"], P["beta"], 1e-5)
    if mark:
        mark("LayerNorm fwd")
    a, z1 = ops.linear_act_forward(u, P["w1"], P["b1"], "gelu", True)
    if mark:
        mark("fc1 + gelu fwd")
    v = ops.linear_act_forward(a, P["w2"], None, "none")
    if mark:
        mark("fc2 fwd")
    y = x + ops.dropout_bias_act_forward(v, P["b2"], p, SEED, OFFSET, "none")
    if mark:
        mark("dropout(+b2) + residual fwd")
    return y, (x, u, mean, rstd, a, z1)


def backward(ops, dy, P, saved, p, mark=None):
    """Gradients ``{"x": dx, "gamma": ..., "b2": ...}`` of the block for ``dy``."""
    x, u, mean, rstd, a, z1 = saved
    dv, db2 = ops.dropout_bias_act_backward(dy, None, P["b2"], p, SEED, OFFSET, "none")
    if mark:
        mark("dropout(+b2) bwd")
    dw2, _ = ops.linear_weight_grad(dv, a, False)
    if mark:
        mark("fc2 weight grad")
    dz1 = ops.linear_act_dgrad(dv, P["w2"], "gelu", z1)
    if mark:
        mark("fc2 dgrad * gelu'(z1)")
    dw1, db1 = ops.linear_weight_grad(dz1, u)
    if mark:
        mark("fc1 weight + bias grad")
    du = ops.linear_act_dgrad(dz1, P["w1"], "none")
    if mark:
        mark("fc1 dgrad")
    dx_ln, dgamma, dbeta = ops.layer_norm_backward(du, x, P["gamma"], P["beta"], mean, rstd)
    dx = dy + dx_ln
    if mark:
        mark("LayerNorm bwd + residual")
    return {"x": dx, "gamma": dgamma, "beta": dbeta, "w1": dw1, "b1": db1, "w2": dw2, "b2": db2}


def gradient_check(xp, ops, tokens, d, hidden, p, step=1e-2, seed=0):
    """Rows ``{"p", "tensor", "analytic", "finite_diff", "rel_err", "ok"}`` of the
    directional finite-difference check (module docstring), float32."""
    rng = np.random.default_rng(seed)
    P = init_params(xp, d, hidden, np.float32, rng)
    x = xp.asarray(rng.standard_normal((tokens, d)).astype(np.float32))
    r32 = rng.standard_normal((tokens, d)).astype(np.float32)
    r64 = xp.asarray(r32.astype(np.float64))

    def loss(inputs):
        params = {k: inputs[k] for k in PARAMS}
        y, _ = forward(ops, inputs["x"], params, p)
        return float((y.astype(xp.float64) * r64).sum())

    y, saved = forward(ops, x, P, p)
    grads = {k: _host(g).astype(np.float64) for k, g in
             backward(ops, xp.asarray(r32), P, saved, p).items()}
    inputs = {"x": x, **P}
    host = {k: _host(v).astype(np.float64) for k, v in inputs.items()}
    steps = {}
    for name, h in host.items():
        rms = float(np.sqrt(np.mean(h * h))) or 1.0
        steps[name] = step * rms * rng.standard_normal(h.shape)
    rows = []
    for target in list(inputs) + ["all"]:
        names = list(inputs) if target == "all" else [target]
        plus, minus = dict(inputs), dict(inputs)
        terms = []
        for n in names:
            hp = (host[n] + steps[n]).astype(np.float32)
            hm = (host[n] - steps[n]).astype(np.float32)
            plus[n], minus[n] = xp.asarray(hp), xp.asarray(hm)
            terms.append(float(np.sum(grads[n] * (hp.astype(np.float64) - hm))))
        analytic = sum(terms)
        fd = loss(plus) - loss(minus)
        # Relative to the size of the summed terms: the joint direction's terms may
        # cancel, and a small sum would inflate the error of each of them.
        den = max(abs(analytic), sum(abs(t) for t in terms), 1e-30)
        err = abs(fd - analytic) / den
        ok = bool(np.isfinite(err) and err < CHECK_TOL)
        rows.append({"p": p, "tensor": target, "analytic": analytic, "finite_diff": fd,
                     "rel_err": err, "ok": ok})
    return rows


def time_block(xp, ops, tokens, d, hidden, dtype, p, reps, warmup=3, seed=0):
    """Per-stage and total median milliseconds of forward + backward (CuPy events)."""
    import cupy

    rng = np.random.default_rng(seed)
    P = init_params(xp, d, hidden, dtype, rng)
    x = xp.asarray(rng.standard_normal((tokens, d)).astype(dtype))
    dy = xp.asarray(rng.standard_normal((tokens, d)).astype(dtype))
    samples = {}
    totals = []
    for i in range(warmup + reps):
        events = [("start", cupy.cuda.Event())]
        events[0][1].record()

        def mark(name):
            ev = cupy.cuda.Event()
            ev.record()
            events.append((name, ev))

        y, saved = forward(ops, x, P, p, mark)
        backward(ops, dy, P, saved, p, mark)
        events[-1][1].synchronize()
        if i < warmup:
            continue
        for (_, a), (name, b) in zip(events, events[1:]):
            samples.setdefault(name, []).append(cupy.cuda.get_elapsed_time(a, b))
        totals.append(cupy.cuda.get_elapsed_time(events[0][1], events[-1][1]))
    stages = [{"stage": k, "median_ms": statistics.median(v)} for k, v in samples.items()]
    total = statistics.median(totals)
    flops = 12.0 * tokens * d * hidden
    gemm = _time_gemms(xp, tokens, d, hidden, dtype, reps, warmup, rng)
    cupy.get_default_memory_pool().free_all_blocks()
    return {"stages": stages, "total_ms": total, "tflops": flops / (total * 1e-3) / 1e12,
            "gemm_only_ms": gemm, "gemm_tflops": flops / (gemm * 1e-3) / 1e12}


def _time_gemms(xp, tokens, d, hidden, dtype, reps, warmup, rng):
    """Median ms of the block's six GEMMs through ``cupy.matmul`` (cuBLAS)."""
    import cupy

    def r(*shape):
        return xp.asarray(rng.standard_normal(shape).astype(dtype))

    u, w1, a, w2, dv, dz1 = r(tokens, d), r(hidden, d), r(tokens, hidden), r(d, hidden), \
        r(tokens, d), r(tokens, hidden)
    times = []
    for i in range(warmup + reps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        u @ w1.T
        a @ w2.T
        dv.T @ a
        dv @ w2
        dz1.T @ u
        dz1 @ w1
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check-only", action="store_true", help="gradient check only, no timing")
    ap.add_argument("--check-size", default="16x32x64",
                    help="TOKENSxDxHIDDEN of the float32 gradient check (default %(default)s)")
    ap.add_argument("--check-p", default="0,0.1",
                    help="comma-separated dropout probabilities to check (default %(default)s)")
    ap.add_argument("--step", type=float, default=1e-2,
                    help="finite-difference step, relative to each tensor's RMS")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--dtype", default="float16", choices=("float16", "float32"),
                    help="timing dtype (CuPy has no bfloat16)")
    ap.add_argument("--p", type=float, default=0.1, help="dropout probability for the timing")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    try:
        args.check_size = tuple(int(v) for v in args.check_size.lower().split("x"))
        args.check_p = [float(v) for v in args.check_p.split(",") if v.strip()]
    except ValueError:
        ap.error("--check-size must be TOKENSxDxHIDDEN and --check-p numbers")
    if len(args.check_size) != 3 or min(args.check_size) < 1:
        ap.error("--check-size must be TOKENSxDxHIDDEN with positive sizes")
    if not args.check_p or any(not 0.0 <= v < 1.0 for v in args.check_p + [args.p]):
        ap.error("dropout probabilities must be in [0, 1)")
    if min(args.tokens, args.d, args.hidden, args.reps) < 1:
        ap.error("--tokens, --d, --hidden and --reps must be >= 1")
    return args


def run(args):
    """Check (and time, on a GPU unless ``--check-only``); returns the result dict
    (``ok`` is False if a check failed)."""
    xp, ops, label = backend()
    tokens, d, hidden = args.check_size
    checks = []
    for p in args.check_p:
        checks += gradient_check(xp, ops, tokens, d, hidden, p, args.step)
    result = {"backend": label, "check_size": [tokens, d, hidden], "check_tol": CHECK_TOL,
              "checks": checks, "ok": all(r["ok"] for r in checks)}
    if xp is not np and not args.check_only:
        result["timing"] = {"tokens": args.tokens, "d": args.d, "hidden": args.hidden,
                            "dtype": args.dtype, "p": args.p, "reps": args.reps,
                            **time_block(xp, ops, args.tokens, args.d, args.hidden,
                                         np.dtype(args.dtype), args.p, args.reps)}
    return result


def markdown(result):
    """The check table and (if timed) the timing table."""
    lines = [f"Backend: {result['backend']}. Gradient check, float32, tokens x d x hidden = "
             f"{'x'.join(map(str, result['check_size']))}, tolerance {result['check_tol']:.0e}:",
             "", "| p | tensor | <grad, step> | L(+) - L(-) | rel. error | ok |",
             "|---|---|---|---|---|---|"]
    for r in result["checks"]:
        lines.append(f"| {r['p']} | {r['tensor']} | {r['analytic']:.6e} | {r['finite_diff']:.6e} "
                     f"| {r['rel_err']:.1e} | {'yes' if r['ok'] else 'NO'} |")
    t = result.get("timing")
    if t:
        lines += ["", f"Forward + backward, tokens {t['tokens']}, d {t['d']}, "
                      f"hidden {t['hidden']}, {t['dtype']}, p = {t['p']}, median of {t['reps']}:",
                  "",
                  "| stage | median ms | share |", "|---|---|---|"]
        for s in t["stages"]:
            lines.append(f"| {s['stage']} | {s['median_ms']:.3f} | "
                         f"{100 * s['median_ms'] / t['total_ms']:.0f}% |")
        lines.append(f"| **block fwd + bwd** | **{t['total_ms']:.3f}** | "
                     f"{t['tflops']:.0f} TFLOP/s |")
        lines.append(f"| the same 6 GEMMs through cupy.matmul (cuBLAS) | {t['gemm_only_ms']:.3f} | "
                     f"{t['gemm_tflops']:.0f} TFLOP/s |")
    lines += ["", "all gradient checks passed" if result["ok"] else "gradient check FAILED"]
    return "\n".join(lines)


def _forbid_torch():
    """Make ``import torch`` fail in this process (unless something imported it already)."""
    if "torch" not in sys.modules:
        sys.modules["torch"] = None


def main(argv=None):
    _forbid_torch()
    args = parse_args(argv)
    result = run(args)
    result["torch_imported"] = sys.modules.get("torch") is not None
    print(markdown(result))
    print(f"torch imported: {'yes' if result['torch_imported'] else 'no'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
