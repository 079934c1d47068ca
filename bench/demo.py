"""Correctness demo of every op on tiny inputs, for machines with no GPU.

Run by ``python -m bench`` when no GPU is found (it sets NUMBA_ENABLE_CUDASIM=1):
each op's forward and backward run through the real kernels under numba's CUDA
simulator and are compared with the op's float64 reference by relative error
(docs/API.md's tolerances). No timings. With ``--example``, also end-to-end example 1's
gradient check (``bench/example_cupy_mlp.py``: the MLP block's backward chained by
hand, against finite differences) at a tiny size, on NumPy arrays.

Usage: python -m bench.demo [--example] [op ...]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _rel(out, ref):
    import numpy as np

    out = np.asarray(out.detach().double().cpu().numpy() if hasattr(out, "detach") else out,
                     dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(out - ref) / den) if den else float(np.linalg.norm(out))


def _dropout(nf, torch, dt):
    x = torch.randn(3, 40, dtype=dt)
    b = torch.randn(40, dtype=dt)
    g = torch.randn(3, 40, dtype=dt)
    kw = dict(p=0.2, seed=7, offset=4, activation="gelu")
    y = nf.dropout_bias_act_forward(x, b, **kw)
    gx, gb = nf.dropout_bias_act_backward(g, x, b, **kw)
    ry, rgx, rgb = nf.dropout_bias_act_ref(x, b, grad_out=g, **kw)
    return [("y", _rel(y, ry)), ("grad_x", _rel(gx, rgx)), ("grad_bias", _rel(gb, rgb))]


def _layer_norm(nf, torch, dt):
    x = torch.randn(5, 72, dtype=dt)
    w = torch.randn(72, dtype=dt)
    b = torch.randn(72, dtype=dt)
    g = torch.randn(5, 72, dtype=dt)
    y, mean, rstd = nf.layer_norm_forward(x, w, b)
    gx, gw, gb = nf.layer_norm_backward(g, x, w, b, mean, rstd)
    ry, rmean, rrstd, rgx, rgw, rgb = nf.layer_norm_ref(x, w, b, grad_out=g)
    ys, rs = nf.rms_norm_forward(x, w)
    sgx, sgw = nf.rms_norm_backward(g, x, w, rs)
    sy, srs, srgx, srgw = nf.rms_norm_ref(x, w, grad_out=g)
    return [("ln y", _rel(y, ry)), ("ln grad_x", _rel(gx, rgx)), ("ln grad_w", _rel(gw, rgw)),
            ("ln grad_b", _rel(gb, rgb)), ("rms y", _rel(ys, sy)), ("rms grad_x", _rel(sgx, srgx)),
            ("rms grad_w", _rel(sgw, srgw))]


def _attention(nf, torch, dt):
    q = torch.randn(1, 9, 2, 16, dtype=dt)
    k = torch.randn(1, 11, 2, 16, dtype=dt)
    v = torch.randn(1, 11, 2, 16, dtype=dt)
    kw = dict(causal="bottom_right")
    out, lse = nf.attention_forward(q, k, v, **kw)
    g = torch.randn_like(out)
    dq, dk, dv, _ = nf.attention_backward(g, q, k, v, out, lse, **kw)
    ro, rl, rdq, rdk, rdv, _ = nf.attention_ref(q, k, v, grad_out=g, **kw)
    return [("out", _rel(out, ro)), ("grad_q", _rel(dq, rdq)), ("grad_k", _rel(dk, rdk)),
            ("grad_v", _rel(dv, rdv))]


def _linear_act(nf, torch, dt):
    import numba_fused.linear_act as la

    x = torch.randn(17, 24, dtype=dt)
    w = torch.randn(20, 24, dtype=dt) * 0.2
    b = torch.randn(20, dtype=dt)
    y, pre = nf.linear_act_forward(x, w, b, activation="gelu_tanh", save_preact=True)
    ry, rpre = nf.linear_act_ref(x, w, b, activation="gelu_tanh", save_preact=True)
    g = torch.randn_like(y)
    # dgrad's preact is the previous layer's pre-activation, shaped like x.
    prev = torch.randn(17, 24, dtype=dt)
    gx = nf.linear_act_dgrad(g, w, activation="gelu_tanh", preact=prev)
    rgx = la.linear_act_dgrad_ref(g, w, activation="gelu_tanh", preact=prev)
    return [("y", _rel(y, ry)), ("dgrad", _rel(gx, rgx))]


DEMOS = {"dropout": _dropout, "layer_norm": _layer_norm, "attention": _attention,
         "linear_act": _linear_act}


EXAMPLE_SIZE = "4x16x32"


def example_check():
    """Example 1's gradient check (dropout on, fixed mask) at EXAMPLE_SIZE; the
    number of failed rows, after printing them."""
    from bench import example_cupy_mlp as ex

    args = ex.parse_args(["--check-only", "--check-size", EXAMPLE_SIZE, "--check-p", "0.1"])
    result = ex.run(args)
    print(ex.markdown(result), flush=True)
    return sum(not r["ok"] for r in result["checks"])


def main(argv):
    import importlib

    import torch

    import numba_fused as nf

    argv = list(argv)
    with_example = "--example" in argv
    ops = [a for a in argv if a != "--example"] or list(DEMOS)
    failures = 0
    print("| op | dtype | output | rel. error vs float64 | tolerance | ok |")
    print("|---|---|---|---|---|---|")
    for op in ops:
        try:
            importlib.import_module(f"numba_fused.{op}")
        except ModuleNotFoundError:
            print(f"| {op} | - | not in this checkout | | | |")
            continue
        for name, dt in (("float32", torch.float32), ("float16", torch.float16),
                         ("bfloat16", torch.bfloat16)):
            t0 = time.perf_counter()
            try:
                results = DEMOS[op](nf, torch, dt)
            except Exception as exc:
                failures += 1
                print(f"| {op} | {name} | raised {type(exc).__name__}: {exc} | | | no |")
                continue
            for what, err in results:
                ok = err < TOL[name]
                failures += not ok
                print(f"| {op} | {name} | {what} | {err:.2e} | {TOL[name]:.0e} | "
                      f"{'yes' if ok else 'NO'} |", flush=True)
            print(f"<!-- {op} {name}: {time.perf_counter() - t0:.1f} s -->", flush=True)
    if with_example:
        print("\nEnd-to-end example 1 (CuPy MLP block), gradient check:\n")
        try:
            failures += example_check()
        except Exception as exc:
            failures += 1
            print(f"example 1 raised {type(exc).__name__}: {exc}")
    print(f"\n{'all checks passed' if not failures else f'{failures} checks FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
