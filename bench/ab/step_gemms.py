"""Each GEMM of the gated MLP's training step timed on its own (CUDA events, no
profiler), ours at the array level against torch's own calls, beside the whole step.

The eighty-fourth session found the step 5.55 ms against torch's 4.77 (Llama-7B MLP,
bf16, 4096 tokens) while torch.profiler's per-kernel sums were close (5.40 / 5.29):
the profiler changes what it measures, so this times each piece as the step runs it.

    python bench/ab/step_gemms.py [--shape 4096x4096x11008] [--dtype bfloat16]
        [--reps 20] [--rounds 2] [--epi E] [--json FILE]

Pieces (x [M, K], gate / up weights [I, K], down weight [K, I], gy [M, K]):
  fwd pair      h = silu(x wg^T) * (x wu^T), pairs z kept   (torch: two linears, silu, mul)
  fwd down      y = h wd^T
  bwd dgrad     dz from gy wd and z in the epilogue         (torch: gy wd, silu's backward)
  bwd wgrad dn  gy^T h
  bwd pair dx   dz W (both weights read in place)            (torch: dg wg + du wu)
  bwd pair dw   dz^T x into the two weights' gradients      (torch: dg^T x, du^T x)
and the step (forward and backward into .grad) of FusedGatedMLP and of torch's MLP.
Rounds alternate ours and torch's pieces so drift shows as spread, not bias.
``--epi E`` sets every WG_ROLE tiling's ``epi`` (as pair_train_ab.py).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _shape(text):
    m, k, i = (int(v) for v in text.lower().split("x"))
    return m, k, i


def pieces(m, k, hid, dtype, device="cuda"):
    """``{name: (ours, torch's)}``: zero-argument callables of each GEMM of the step
    on fixed random inputs, and the whole step's (``device``: the simulator's check
    passes "cpu")."""
    import torch
    import torch.nn.functional as F

    import numba_fused as nf
    from interop.torch import FusedGatedMLP
    from numba_fused import gated_linear as gl

    tdt = getattr(torch, dtype)
    torch.manual_seed(0)
    mod = FusedGatedMLP(k, hid, device=device, dtype=tdt)
    wg, wu, wd = mod.gate_proj.weight, mod.up_proj.weight, mod.down_proj.weight
    x = torch.randn(m, k, device=device, dtype=tdt)
    gy = torch.randn(m, k, device=device, dtype=tdt)
    with torch.no_grad():
        h, z = gl.gated_linear_forward_pair(x, wg, wu, None, "silu", save_preact=True)
        dz = nf.gated_linear_dgrad(gy, wd, z, "silu")
        g, u = F.linear(x, wg), F.linear(x, wu)
        sg = F.silu(g)
        th = sg * u
        dh = gy @ wd
        dg, du = dh * u * torch.sigmoid(g) * (1 + g * (1 - torch.sigmoid(g))), dh * sg
    params = list(mod.parameters())
    xg = x.clone().requires_grad_()

    def step(f):
        def call():
            for t in [xg] + params:
                t.grad = None
            f(xg).backward(gy)
        return call

    def torch_mlp(v):
        return mod.down_proj(F.silu(mod.gate_proj(v)) * mod.up_proj(v))

    def torch_dgrad():
        # As autograd runs it: silu(g) and u saved by the product, silu's backward.
        d = gy @ wd
        return torch.ops.aten.silu_backward(d * u, g), d * sg

    with torch.no_grad():
        out = {
            "fwd pair": (lambda: gl.gated_linear_forward_pair(x, wg, wu, None, "silu",
                                                              save_preact=True),
                         lambda: F.silu(F.linear(x, wg)) * F.linear(x, wu)),
            "fwd down": (lambda: nf.linear_act_forward(h, wd), lambda: F.linear(th, wd)),
            "bwd dgrad": (lambda: nf.gated_linear_dgrad(gy, wd, z, "silu"), torch_dgrad),
            "bwd wgrad dn": (lambda: nf.linear_weight_grad(gy, h, need_bias_grad=False),
                             lambda: gy.t() @ th),
            "bwd pair dx": (lambda: gl.pair_grads(dz, x, wg, wu, True, False, False),
                            lambda: dg @ wg + du @ wu),
            "bwd pair dw": (lambda: gl.pair_grads(dz, x, wg, wu, False, True, False),
                            lambda: (dg.t() @ x, du.t() @ x)),
        }
    out["step"] = (step(mod), step(torch_mlp))
    return out


def main(argv=None):
    import torch

    from bench import common
    from numba_fused import linear_act as la

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", type=_shape, default=(4096, 4096, 11008))
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epi", type=int, choices=(0, 1, 2, 3))
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.epi is not None:
        la.WG_ROLE.update({role: cfg._replace(epi=args.epi) for role, cfg in la.WG_ROLE.items()})
    m, k, hid = args.shape
    fns = pieces(m, k, hid, args.dtype)
    times = {name: ([], []) for name in fns}
    for _ in range(args.rounds):
        for name, pair in fns.items():
            for side, fn in enumerate(pair):
                with torch.no_grad() if name != "step" else torch.enable_grad():
                    t = common.time_cuda(fn, [()], reps=args.reps, warmup=3)
                times[name][side].append(t["median_ms"])
    print(f"{m}x{k}x{hid} {args.dtype} epi {args.epi}: median ms per round, ours | torch")
    rows = []
    sums = [0.0, 0.0]
    for name, (ours, theirs) in times.items():
        o, t = min(ours), min(theirs)
        if name != "step":
            sums[0] += o
            sums[1] += t
        print(f"{name:14s} {' '.join(f'{v:7.3f}' for v in ours)} | "
              f"{' '.join(f'{v:7.3f}' for v in theirs)}   ours/torch {o / t:5.3f}")
        rows.append({"piece": name, "ours_ms": ours, "torch_ms": theirs})
    print(f"{'sum of pieces':14s} {sums[0]:7.3f} | {sums[1]:7.3f}   (best round each)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"shape": [m, k, hid], "dtype": args.dtype, "epi": args.epi,
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
