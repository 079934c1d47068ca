"""A/B: FusedGatedMLP's training step with the gate and up weights used in place
(the pair GEMMs, the default for 16-bit weights in 16-byte rows) against the
interleaved copy (built each forward, kept for the backward, its gradient split),
and torch's nn.Linear MLP: median ms of forward + backward into ``.grad`` (x and the
three weights) and the peak memory one step allocates above what it starts with;
then the forward alone under no_grad (the pair arm reads the weights in place on
wgmma too).

    python bench/ab/pair_train_ab.py [--shapes 4096x4096x11008] [--dtypes bfloat16]
        [--reps 20] [--json FILE] [--profile N]

Shapes ``MxKxI`` as bench/gated_linear.py's. The pair arm turns
``linear_act.GATED_PAIRS_EVERYWHERE`` on, the copy arm leaves it off (the default
until verified: the copy in training); plans are cleared between arms. ``--profile N``
prints, for the pair and torch arms, each kernel's total GPU time over N training
steps (torch.profiler), to find which GEMM of the step loses. The pair and
copy arms' gradients are compared bit for bit, and both against torch.
``--fwd-long-k NAME`` runs the long-K forwards (K >= WG_FWD_LONG_K: both of this
MLP's) on tiling ``linear_act.NAME``; ``--epi E`` sets every WG_ROLE tiling's
``epi`` (v7: 1, the epilogue's activations in fast_act's forms; v7b: 2; v9: 3); ``--arms`` picks
the arms (the comparisons need the ones they name).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _shape(text):
    m, k, i = (int(v) for v in text.lower().split("x"))
    return m, k, i


def main(argv=None):
    import torch
    import torch.nn.functional as F

    import interop.torch.gated_linear as tgl
    from bench import common
    from interop.torch import FusedGatedMLP
    from numba_fused import linear_act as la

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", type=_shape, default=[(4096, 4096, 11008)])
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    p.add_argument("--profile", type=int, default=0)
    p.add_argument("--fwd-long-k", help="a linear_act WgmmaConfig name (e.g. "
                   "WG_LARGE_WS_TMA) for WG_ROLE['fwd_long_k'] in this run")
    p.add_argument("--epi", type=int, choices=(0, 1, 2, 3))
    p.add_argument("--arms", nargs="+", default=["pair", "copy", "torch"],
                   choices=["pair", "copy", "torch"])
    args = p.parse_args(argv)
    if args.epi is not None:
        la.WG_ROLE.update({role: cfg._replace(epi=args.epi) for role, cfg in la.WG_ROLE.items()})
        print(f"epi {args.epi}: {la.WG_ROLE}", flush=True)
    if args.fwd_long_k:
        la.WG_ROLE["fwd_long_k"] = getattr(la, args.fwd_long_k)
        print(f"fwd_long_k: {args.fwd_long_k} = {la.WG_ROLE['fwd_long_k']}", flush=True)
    saved = la.GATED_PAIRS_EVERYWHERE
    rows = []
    for m, k, hid in args.shapes:
        for dt in args.dtypes:
            tdt = getattr(torch, dt)
            torch.manual_seed(0)
            mod = FusedGatedMLP(k, hid, device="cuda", dtype=tdt)
            params = list(mod.parameters())
            x = torch.randn(m, k, device="cuda", dtype=tdt).requires_grad_()
            gy = torch.randn(m, k, device="cuda", dtype=tdt)

            def torch_mlp(x):
                return mod.down_proj(F.silu(mod.gate_proj(x)) * mod.up_proj(x))

            def step(f):
                # backward() into .grad, as a training step does: a gradient that is a
                # strided view (the copy arm's split) is copied there by autograd.
                def call(x):
                    for t in [x] + params:
                        t.grad = None
                    f(x).backward(gy)
                    return [t.grad for t in [x] + params]
                return call

            outs = {}
            for arm in args.arms:
                la.GATED_PAIRS_EVERYWHERE = arm == "pair"
                for cache in (tgl._PAIR_PLANS, tgl._FWD_PLANS, tgl._BWD_PLANS,
                              tgl._BWD_PAIR_PLANS):
                    cache.clear()
                f = step(torch_mlp if arm == "torch" else mod)
                outs[arm] = f(x)
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                f(x)
                torch.cuda.synchronize()
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
                t = common.time_cuda(f, [(x,)], reps=args.reps, warmup=3)
                if args.profile and arm != "copy":
                    _profile(f, x, args.profile, f"{arm} {m}x{k}x{hid} {dt}")
                rows.append({"shape": f"{m}x{k}x{hid}", "dtype": dt, "arm": arm,
                             "pass": "train step", "median_ms": t["median_ms"],
                             "p20_ms": t["p20_ms"], "p80_ms": t["p80_ms"],
                             "peak_step_MiB": round(peak, 1)})
                # Inference at this size (wgmma-sized GEMMs on Hopper): the pair arm's
                # forward reads the weights in place on wgmma, the copy arm's
                # interleaves them.
                g = torch_mlp if arm == "torch" else mod

                def infer(x, g=g):
                    with torch.no_grad():
                        return g(x)
                t = common.time_cuda(infer, [(x,)], reps=args.reps, warmup=3)
                rows.append({"shape": f"{m}x{k}x{hid}", "dtype": dt, "arm": arm,
                             "pass": "fwd no_grad", "median_ms": t["median_ms"],
                             "p20_ms": t["p20_ms"], "p80_ms": t["p80_ms"]})
            la.GATED_PAIRS_EVERYWHERE = saved
            if "pair" in outs and "copy" in outs:
                same = all(torch.equal(a, b) for a, b in zip(outs["pair"], outs["copy"]))
                rows.append({"shape": f"{m}x{k}x{hid}", "dtype": dt, "pair_equals_copy": same})
            if "pair" in outs and "torch" in outs:
                err = max(common.rel_err(a.float(), b.float())
                          for a, b in zip(outs["pair"], outs["torch"]))
                rows.append({"shape": f"{m}x{k}x{hid}", "dtype": dt,
                             "max_rel_err_vs_torch": err})
    for r in rows:
        print(r, flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


def _profile(f, x, steps, title):
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            f(x)
        torch.cuda.synchronize()
    print(f"--- {title}: GPU time per step by kernel", flush=True)
    per = {}
    for ev in prof.key_averages():
        us = getattr(ev, "device_time_total", None)
        if us is None:
            us = ev.cuda_time_total
        if us > 0:
            per[ev.key] = (us / steps, ev.count / steps)
    total = sum(u for u, _ in per.values())
    for key, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:20]:
        print(f"{us:9.1f} us  x{n:4.1f}  {key[:110]}", flush=True)
    print(f"{total:9.1f} us  total", flush=True)


if __name__ == "__main__":
    main()
