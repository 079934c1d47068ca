"""A/B of the gated forward's pair GEMM (gate and up weights in place) on v4
(WG_LARGE_WS_HB: warp specialised, cp.async producer) against v6p
(WG_LARGE_WS_TMA: the same tiling, a one-thread TMA producer, B's halves as two
boxes), and torch's two F.linear + silu(gate) * up, at the array level.

    python bench/ab/tma_pair_ab.py [--shapes 4096x4096x11008] [--dtypes bfloat16]
        [--reps 30] [--order ab ba]

Shapes ``MxKxI``: x ``[M, K]``, gate and up weights ``[I, K]`` each, h ``[M, I]``
(silu, no bias). Each tiling is pinned through ``linear_act.WG_LARGE`` (prepared
launches cleared) and timed with ``bench.common.time_cuda``; ``--order`` repeats the
A/B (``ab``: v4 then v6p; ``ba`` the reverse) so drift shows. v6p's h must equal v4's
bit for bit (the same MMAs on the same tiles), and both are held to torch's error
against a float64 reference. Prints median us and TF/s (2 M K 2I flops) per arm.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=["4096x4096x11008"])
    p.add_argument("--dtypes", default="bfloat16")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--order", nargs="+", default=["ab", "ba"])
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.common import rel_err, time_cuda
    from numba_fused import gated_linear as gl
    from numba_fused import linear_act as la

    arms = {"a": ("v4 ws_hb", la.WG_LARGE_WS_HB), "b": ("v6p ws_tma", la.WG_LARGE_WS_TMA)}
    for shape in args.shapes:
        M, K, inter = (int(v) for v in shape.lower().split("x"))
        flops = 2 * M * K * 2 * inter
        for dtype in args.dtypes.split(","):
            dt = getattr(torch, dtype)
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(M, K, device="cuda", dtype=dt, generator=gen)
            wg = torch.randn(inter, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5
            wu = torch.randn(inter, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5
            ref = F.silu(x.double() @ wg.double().T) * (x.double() @ wu.double().T)

            def torch_fwd():
                return F.silu(F.linear(x, wg)) * F.linear(x, wu)

            t = time_cuda(torch_fwd, [()], reps=args.reps, warmup=3)["median_ms"]
            print(f"{shape} {dtype} torch: {t * 1e3:.1f} us {flops / t / 1e9:.0f} TF/s "
                  f"err {rel_err(torch_fwd(), ref):.2e}", flush=True)
            outs = {}
            for order in args.order:
                for arm in order:
                    name, cfg = arms[arm]
                    saved = la.WG_LARGE
                    la.WG_LARGE = cfg
                    la._gemm_prepared.cache_clear()
                    try:
                        with la.use_wgmma(True):
                            def call():
                                return gl.gated_linear_forward_pair(x, wg, wu, None, "silu")

                            outs[arm] = call()
                            t = time_cuda(call, [()], reps=args.reps, warmup=3)["median_ms"]
                    finally:
                        la.WG_LARGE = saved
                        la._gemm_prepared.cache_clear()
                    print(f"{shape} {dtype} {name}: {t * 1e3:.1f} us {flops / t / 1e9:.0f} TF/s "
                          f"err {rel_err(outs[arm], ref):.2e}", flush=True)
            print(f"{shape} {dtype} v6p == v4 bit for bit: {torch.equal(outs['a'], outs['b'])}",
                  flush=True)


if __name__ == "__main__":
    main()
