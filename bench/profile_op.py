"""One call of one op inside an NVTX range named ``prof``: the workload for ncu.

    ncu --nvtx --nvtx-include "prof/" --clock-control none --set full \\
        python3 bench/profile_op.py dropout_bwd --shape 16384x4096 --dtype float16 \\
        [--activation gelu] [--config '{"bias_reduce": "kernel"}']
    ncu ... python3 bench/profile_op.py ln_bwd --shape 16384x4096 --dtype float32 \\
        [--tuning '{"bwd_red_direct": false}'] [--affine none]

Ops: dropout_fwd, dropout_bwd (with grad_bias; --no-bias-grad without), ln_fwd,
ln_bwd, rms_fwd, rms_bwd (``--no-stats``: our norm forwards without their
statistics); ``--provider compile`` profiles torch.compile's kernels for
the same norm pass instead of ours, ``--provider liger`` Liger-Kernel's (where
liger_kernel is importable); a backward's forward runs outside the range, so only the
backward's kernels are profiled. ``--affine`` (our norms only) picks which of w and b
the norm takes: wb (default), w, b (LayerNorm), none. The op runs three times first
(compiles, caches), then once inside the range, on random normal inputs (never
zeros). Nothing is checked here: the tests and bench/tune_*.py check the same
launches.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OPS = ("dropout_fwd", "dropout_bwd", "ln_fwd", "ln_bwd", "rms_fwd", "rms_bwd")
AFFINE = ("wb", "w", "b", "none")


def build(args, torch, device="cuda"):
    """A callable running the chosen op once on fresh random inputs on ``device``
    ("cpu" under the CUDA simulator, whose kernels take host data)."""
    import numba_fused as nf
    from numba_fused import dropout as D

    m, n = (int(v) for v in args.shape.lower().split("x"))
    dt = getattr(torch, args.dtype)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn((m, n), device=device, generator=gen).to(dt)
    g = torch.randn((m, n), device=device, generator=gen).to(dt)
    w = (torch.randn(n, device=device, generator=gen) * 0.5 + 1.0).to(dt)
    b = torch.randn(n, device=device, generator=gen).to(dt)
    if args.op.startswith("dropout"):
        cfg = D.LaunchConfig(**json.loads(args.config))
        if args.op == "dropout_fwd":
            return lambda: D.dropout_bias_act_forward(x, b, args.p, 1, 2, args.activation,
                                                      config=cfg)
        return lambda: D.dropout_bias_act_backward(
            g, x, b, args.p, 1, 2, args.activation,
            need_bias_grad=not args.no_bias_grad, config=cfg)
    if args.provider != "numba":
        return _baseline(args, torch, x, w, b, g, n)
    if "w" not in args.affine:
        w = None
    if "b" not in args.affine:
        b = None
    if args.op == "ln_fwd":
        return lambda: nf.layer_norm_forward(x, w, b, stats=not args.no_stats)
    if args.op == "rms_fwd":
        return lambda: nf.rms_norm_forward(x, w, stats=not args.no_stats)
    if args.op == "ln_bwd":
        _, mean, rstd = nf.layer_norm_forward(x, w, b)
        return lambda: nf.layer_norm_backward(g, x, w, b, mean, rstd)
    _, rstd = nf.rms_norm_forward(x, w)
    return lambda: nf.rms_norm_backward(g, x, w, rstd)


def _baseline(args, torch, x, w, b, g, n):
    """torch.compile's or Liger's kernels for the same norm pass (ncu beside ours).
    Liger's backward is called as a function, not through autograd: autograd runs
    CUDA backward passes on a thread of its own, outside this thread's NVTX range."""
    import torch.nn.functional as F

    layer = args.op.startswith("ln")
    if args.provider == "liger":
        return _liger(args, x, w, b, g, layer)
    if layer:
        fn = torch.compile(lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5))
    else:
        fn = torch.compile(lambda x, w, b: F.rms_norm(x, (n,), w, 1e-6))
    if args.op.endswith("fwd"):
        return lambda: fn(x, w, b)
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    y = fn(*leaves)
    return lambda: torch.autograd.grad(y, leaves if layer else leaves[:2], g,
                                       retain_graph=True)


def _liger(args, x, w, b, g, layer):
    if layer:
        from liger_kernel.ops import layer_norm as lig

        if args.op.endswith("fwd"):
            return lambda: lig.layer_norm_forward(x, w, b, 1e-5)[0]
        _, _, mean, rstd, _, _ = lig.layer_norm_forward(x, w, b, 1e-5)
        return lambda: lig.layer_norm_backward(g, x, w, b, mean, rstd)
    from liger_kernel.ops import rms_norm as lig

    def fwd():
        return lig.rms_norm_forward(x, w, 1e-6, 0.0, "llama", None)

    if args.op.endswith("fwd"):
        return lambda: fwd()[0]
    _, xs, rstd, block, warps, mode = fwd()
    return lambda: lig.rms_norm_backward(g, xs, w, rstd, 0.0, mode, block, warps, False, None)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("op", choices=OPS)
    ap.add_argument("--shape", default="16384x4096")
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    ap.add_argument("--activation", default="none")
    ap.add_argument("--p", type=float, default=0.1)
    ap.add_argument("--no-bias-grad", action="store_true")
    ap.add_argument("--no-stats", action="store_true",
                    help="our norm forwards: y alone (stats=False), as inference runs them")
    ap.add_argument("--config", default="{}", help="dropout LaunchConfig fields, JSON")
    ap.add_argument("--tuning", default="{}", help="layer_norm.tuning overrides, JSON")
    ap.add_argument("--provider", default="numba", choices=("numba", "compile", "liger"),
                    help="compile / liger: torch.compile's or Liger-Kernel's kernels for "
                         "the norm ops")
    ap.add_argument("--affine", default="wb", choices=AFFINE,
                    help="our norms: with w and b (wb), w, b (LayerNorm) or none")
    args = ap.parse_args(argv)
    if args.provider != "numba" and args.op.startswith("dropout"):
        ap.error(f"--provider {args.provider} profiles the norm ops only")
    if args.affine != "wb" and (args.provider != "numba" or args.op.startswith("dropout")):
        ap.error("--affine is for our norm ops")
    if args.no_stats and (args.provider != "numba" or not args.op.endswith("_fwd")
                          or args.op.startswith("dropout")):
        ap.error("--no-stats is for our norm forwards")
    if args.affine == "b" and args.op.startswith("rms"):
        ap.error("RMSNorm has no b: --affine wb, w or none")
    return args


def main(argv=None):
    args = parse_args(argv)

    import torch

    from numba_fused import layer_norm as ln

    with ln.tuning(**json.loads(args.tuning)):
        fn = build(args, torch)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof")
        fn()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
