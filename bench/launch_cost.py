"""Host-side cost of one call, in microseconds (first seen on the lent H200: numba's
default path with torch tensors ~35 us; a native torch op ~10 us).

Rows, each timed on tiny tensors with no synchronisation inside the loop:
- torch: ``torch.add(x, y, out=o)``, the native yardstick;
- numba dispatcher, torch tensors passed straight to a kernel compiled with an
  explicit signature (numba's own path, typed through __cuda_array_interface__);
- numba_fused direct path: the array-level entry as the ops use it (view the
  inputs, allocate the output through torch, fetch torch's current stream, launch
  through cuda.core with flattened arguments);
- numba_fused dispatcher path: the same entry with NUMBA_FUSED_LAUNCH=dispatcher;
- each public op present, called on a tiny input: forward under no_grad, then
  forward + backward (inputs requiring grad, ``y.backward(g)``), each beside the torch
  call a user would otherwise make;
- with CuPy installed, each CuPy front end (``interop.cupy``: per-signature plans after
  a signature's first call) beside the array-level call on the same CuPy arrays, and
  ``cupy.add(x, y, out=o)`` as CuPy's own yardstick of one launch.

Usage: python bench/launch_cost.py [--calls N] [--json FILE]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _axpy_kernel():
    from numba import cuda, types

    from numba_fused.launch import Kernel

    arr = types.Array(types.float32, 1, "C")

    def axpy(x, y, out, a, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    return Kernel("bench_axpy", axpy, (arr, arr, arr, types.float32, types.int64))


def measure(calls=2000):
    import torch
    from numba import cuda

    from bench.common import host_overhead_us
    from interop.dlpack import as_kernel_array, empty_like_lib, stream_handle

    k = _axpy_kernel().compile()
    n = 256
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    o = torch.empty_like(x)

    def entry():
        X = as_kernel_array(x, "x")
        Y = as_kernel_array(y, "y")
        out = empty_like_lib(X, X.shape, X.dtype)
        k.launch(1, 256, stream_handle(X), [X, Y, out, 2.0, n])
        return out.owner

    disp = k.dispatcher
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)

    rows = [
        ("torch.add(out=)", host_overhead_us(lambda: torch.add(x, y, out=o), calls)),
        ("numba dispatcher, torch tensors", host_overhead_us(
            lambda: disp[1, 256, stream](x, y, o, 2.0, n), calls)),
        ("numba_fused entry, direct launch", host_overhead_us(entry, calls)),
    ]
    from numba_fused.launch import set_launch_mode

    for mode in ("core", "dispatcher"):
        old = set_launch_mode(mode)
        try:
            rows.append((f"numba_fused entry, {mode} launch", host_overhead_us(entry, calls)))
        finally:
            set_launch_mode(old)
    # Where the entry's time goes.
    X = as_kernel_array(x, "x")
    Y = as_kernel_array(y, "y")
    O = as_kernel_array(o, "o")
    rows += [
        ("  piece: as_kernel_array(torch tensor)", host_overhead_us(lambda: as_kernel_array(x, "x"), calls)),
        ("  piece: empty_like_lib (torch.empty + view)", host_overhead_us(
            lambda: empty_like_lib(X, X.shape, X.dtype), calls)),
        ("  piece: stream_handle (torch current stream)", host_overhead_us(lambda: stream_handle(X), calls)),
        ("  piece: Kernel.launch, views prebuilt", host_overhead_us(
            lambda: k.launch(1, 256, 0, [X, Y, O, 2.0, n]), calls)),
    ]
    prepared = k.prepare(1, 256, 0, [X, Y, O, 2.0, n])
    ptrs = (x.data_ptr(), y.data_ptr(), o.data_ptr())
    raw = stream_handle(X)
    rows += [
        ("  piece: PreparedLaunch.launch (numba_fused.launch)", host_overhead_us(
            lambda: prepared.launch(raw, ptrs), calls)),
        ("  piece: torch.empty(4x64)", host_overhead_us(
            lambda: torch.empty((4, 64), dtype=torch.float16, device=x.device), calls)),
    ]
    rows.extend(_op_rows(calls))
    rows.extend(_train_rows(max(1, calls // 4)))
    rows.extend(_cupy_rows(calls))
    return [{"what": w, "us_per_call": round(us, 2)} for w, us in rows]


def _op_rows(calls):
    """Each public op beside the native torch call a user would otherwise make, on tiny
    inputs: torch's own, ours through ``interop.torch`` (per-signature plans after the
    first call), ours at array level (validation, views and planning on every call)."""
    import importlib

    import torch
    import torch.nn.functional as F

    nf = importlib.import_module("numba_fused")
    nt = importlib.import_module("interop.torch")
    h = torch.float16
    x = torch.randn(4, 64, device="cuda", dtype=h)
    w = torch.randn(64, device="cuda", dtype=h)
    W = torch.randn(64, 64, device="cuda", dtype=h)
    q = torch.randn(1, 2, 16, 64, device="cuda", dtype=h)
    Wg, Wu = torch.randn(96, 64, device="cuda", dtype=h), torch.randn(96, 64, device="cuda", dtype=h)
    Wd = torch.randn(64, 96, device="cuda", dtype=h)
    cases = [
        ("torch F.layer_norm", lambda: F.layer_norm(x, (64,), w, w)),
        ("ours interop.torch.layer_norm", lambda: nt.layer_norm(x, (64,), w, w)),
        ("ours numba_fused.layer_norm_forward", lambda: nf.layer_norm_forward(x, w, w)),
        ("torch F.rms_norm", lambda: F.rms_norm(x, (64,), w)),
        ("ours interop.torch.rms_norm", lambda: nt.rms_norm(x, (64,), w)),
        ("torch F.dropout(x + b, 0.1)", lambda: F.dropout(x + w, 0.1)),
        ("ours interop.torch.dropout_bias_act(p=0.1)", lambda: nt.dropout_bias_act(x, w, 0.1)),
        ("ours numba_fused.dropout_bias_act_forward",
         lambda: nf.dropout_bias_act_forward(x, w, p=0.1, seed=1, offset=0)),
        ("torch F.gelu(F.linear(x, W, b), 'tanh')",
         lambda: F.gelu(F.linear(x, W, w), approximate="tanh")),
        ("torch F.linear(x, W, b)", lambda: F.linear(x, W, w)),
        ("ours interop.torch.linear_act(gelu_tanh)", lambda: nt.linear_act(x, W, w, "gelu_tanh")),
        ("ours numba_fused.linear_act_forward(gelu_tanh)",
         lambda: nf.linear_act_forward(x, W, w, "gelu_tanh")),
        ("torch F.scaled_dot_product_attention", lambda: F.scaled_dot_product_attention(q, q, q)),
        ("ours interop.torch.scaled_dot_product_attention",
         lambda: nt.scaled_dot_product_attention(q, q, q)),
        ("torch SwiGLU MLP (three F.linear, F.silu, a product)",
         lambda: F.linear(F.silu(F.linear(x, Wg)) * F.linear(x, Wu), Wd)),
        ("ours interop.torch.gated_mlp(silu)", lambda: nt.gated_mlp(x, Wg, Wu, Wd)),
    ]
    with torch.no_grad():
        return _time_cases(cases, calls, " (no grad)")


def _time_cases(cases, calls, suffix):
    """(label + suffix, host us per call) of each (label, call); a call that raises gets
    a 'failed' row (an op under development must not hide the rest)."""
    from bench.common import host_overhead_us

    rows = []
    for label, call in cases:
        try:
            call()
        except Exception as exc:
            rows.append((f"{label}{suffix}: failed ({type(exc).__name__})", float("nan")))
            continue
        rows.append((label + suffix, host_overhead_us(call, calls)))
    return rows


def _train_rows(calls):
    """Forward + backward per call (host cost of the autograd round trip), torch's own
    beside ours through ``interop.torch``; tiny fp16 inputs requiring grad."""
    import importlib

    import torch
    import torch.nn.functional as F

    nt = importlib.import_module("interop.torch")
    fast = importlib.import_module("interop.torch._fast")
    h = torch.float16

    def leaf(*shape):
        return torch.randn(*shape, device="cuda", dtype=h).requires_grad_()

    x, w, b, W = leaf(4, 64), leaf(64), leaf(64), leaf(64, 64)
    Wg, Wu, Wd = leaf(96, 64), leaf(96, 64), leaf(64, 96)
    q, k, v = leaf(1, 2, 16, 64), leaf(1, 2, 16, 64), leaf(1, 2, 16, 64)
    g = torch.randn(4, 64, device="cuda", dtype=h)
    gq = torch.randn(1, 2, 16, 64, device="cuda", dtype=h)
    class Identity(torch.autograd.Function):
        """The floor of any op written as a Python autograd Function."""

        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):
            return grad

    identity_c = fast.function_apply(Identity)

    def python_apply(call):
        """``call`` with the front ends on torch's Python Function.apply."""
        def run():
            fast.FAST_APPLY[0] = False
            try:
                call()
            finally:
                fast.FAST_APPLY[0] = True
        return run

    cases = [
        ("floor: empty autograd.Function (identity view)", lambda: Identity.apply(x).backward(g)),
        ("floor: the same through the C _FunctionBase.apply (function_apply)",
         lambda: identity_c(x).backward(g)),
        ("torch F.layer_norm", lambda: F.layer_norm(x, (64,), w, b).backward(g)),
        ("ours interop.torch.layer_norm", lambda: nt.layer_norm(x, (64,), w, b).backward(g)),
        ("ours interop.torch.layer_norm, Python Function.apply",
         python_apply(lambda: nt.layer_norm(x, (64,), w, b).backward(g))),
        ("torch F.rms_norm", lambda: F.rms_norm(x, (64,), w).backward(g)),
        ("ours interop.torch.rms_norm", lambda: nt.rms_norm(x, (64,), w).backward(g)),
        ("torch F.dropout(x + b, 0.1)", lambda: F.dropout(x + b, 0.1).backward(g)),
        ("ours interop.torch.dropout_bias_act(p=0.1)",
         lambda: nt.dropout_bias_act(x, b, 0.1).backward(g)),
        ("torch F.gelu(F.linear(x, W, b), 'tanh')",
         lambda: F.gelu(F.linear(x, W, b), approximate="tanh").backward(g)),
        ("ours interop.torch.linear_act(gelu_tanh)",
         lambda: nt.linear_act(x, W, b, "gelu_tanh").backward(g)),
        ("torch F.scaled_dot_product_attention",
         lambda: F.scaled_dot_product_attention(q, k, v).backward(gq)),
        ("ours interop.torch.scaled_dot_product_attention",
         lambda: nt.scaled_dot_product_attention(q, k, v).backward(gq)),
        ("torch SwiGLU MLP (three F.linear, F.silu, a product)",
         lambda: F.linear(F.silu(F.linear(x, Wg)) * F.linear(x, Wu), Wd).backward(g)),
        ("ours interop.torch.gated_mlp(silu)", lambda: nt.gated_mlp(x, Wg, Wu, Wd).backward(g)),
    ]
    return _time_cases(cases, calls, " fwd+bwd")


def _cupy_rows(calls):
    """Each op through ``interop.cupy`` (plans) and at array level, tiny fp16 CuPy
    arrays; none without CuPy."""
    import importlib

    try:
        import cupy
    except ImportError:
        return [("cupy not installed: no CuPy rows", float("nan"))]
    nf = importlib.import_module("numba_fused")
    nc = importlib.import_module("interop.cupy")
    rng = cupy.random.default_rng(0)
    h = cupy.float16

    def randn(*shape):
        return rng.standard_normal(shape, dtype=cupy.float32).astype(h)

    x, g, w = randn(4, 64), randn(4, 64), randn(64)
    o = cupy.empty_like(x)
    q, k, v, go = randn(1, 16, 2, 64), randn(1, 16, 2, 64), randn(1, 16, 2, 64), randn(1, 16, 2, 64)
    _, mean, rstd = nf.layer_norm_forward(x, w, w)
    _, rrstd = nf.rms_norm_forward(x, w)
    out, lse = nf.attention_forward(q, k, v)
    W = randn(64, 64)
    _, pre = nf.linear_act_forward(x, W, w, "gelu_tanh", save_preact=True)
    Wi, Wd = randn(192, 64), randn(64, 96)
    hg, z = nf.gated_linear_forward(x, Wi, None, "silu", save_preact=True)
    ops = {
        "layer_norm_forward": ((x, w, w), {}),
        "layer_norm_backward": ((g, x, w, w, mean, rstd), {}),
        "rms_norm_forward": ((x, w), {}),
        "rms_norm_backward": ((g, x, w, rrstd), {}),
        "dropout_bias_act_forward": ((x, w, 0.1, 1, 0), {}),
        "dropout_bias_act_backward": ((g, x, w, 0.1, 1, 0), {}),
        "attention_forward": ((q, k, v), {}),
        "attention_backward": ((go, q, k, v, out, lse), {}),
        "linear_act_forward": ((x, W, w, "gelu_tanh"), {}),
        "linear_act_backward": ((g, x, W, pre, "gelu_tanh"), {}),
        "linear_act_dgrad": ((g, W, "gelu_tanh", pre), {}),
        "linear_weight_grad": ((g, x), {}),
        "activation_backward": ((g, pre, "gelu_tanh"), {}),
        "gated_linear_forward": ((x, Wi, None, "silu"), {}),
        "gated_linear_dgrad": ((g, Wd, z, "silu"), {}),
        "gated_act_backward": ((hg, z, "silu"), {}),
        "gated_linear_backward": ((hg, x, Wi, z, "silu"), {}),
    }
    cases = [("cupy.add(out=)", lambda: cupy.add(x, g, out=o))]
    for name, (args, kwargs) in ops.items():
        cases += [(f"ours interop.cupy.{name}",
                   lambda f=getattr(nc, name), a=args, kw=kwargs: f(*a, **kw)),
                  (f"ours numba_fused.{name} (CuPy arrays)",
                   lambda f=getattr(nf, name), a=args, kw=kwargs: f(*a, **kw))]
    return _time_cases(cases, calls, " (CuPy)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = measure(args.calls)
    print("| call | host us / call |\n|---|---|")
    for r in rows:
        print(f"| {r['what']} | {r['us_per_call']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
