"""What the wgmma forward's epilogue costs (eighty-fifth session). ncu of the gated
pair GEMM (v4, 4096 x 4096 -> 2 x 11008 bf16) put about a third of the consumer
warps' samples in the epilogue, most of them in the activation (a latency-bound
chain per element: the activation switch, expf, the IEEE division's check and
branch). This times the same launches with each activation, so the activation's
share shows directly: the gated pair forward (silu / none / relu / gelu_tanh, with
and without the saved pre-activations) and the plain forward 8192 x 4096 -> 16384
(none / relu / gelu_tanh / silu, bias), against cuBLAS's GEMMs of the same shapes.

    python bench/ab/epi_cost.py [--reps 30]

Prints median us per arm (``bench.common.time_cuda``). Nothing is checked here (the
tests check these launches).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--pair-acts", nargs="+", default=["silu", "none", "relu", "gelu_tanh", "silu"])
    p.add_argument("--plain-acts", nargs="+", default=["gelu_tanh", "none", "relu", "silu",
                                                       "gelu_tanh"])
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.common import time_cuda
    from numba_fused import gated_linear as gl
    from numba_fused import linear_act as la

    def timed(call):
        return time_cuda(call, [()], reps=args.reps, warmup=3)["median_ms"] * 1e3

    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.bfloat16
    M, K, inter = 4096, 4096, 11008
    x = torch.randn(M, K, device="cuda", dtype=dt, generator=gen)
    wg = torch.randn(inter, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5
    wu = torch.randn(inter, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5
    print(f"pair {M}x{K}->2x{inter} cublas gate, up: "
          f"{timed(lambda: (F.linear(x, wg), F.linear(x, wu))):.1f} us", flush=True)
    with la.use_wgmma(True):
        for act in args.pair_acts:
            for save in (False, True):
                def pair(act=act, save=save):
                    return gl.gated_linear_forward_pair(x, wg, wu, None, act, save)
                print(f"pair {act} save_preact={save}: {timed(pair):.1f} us", flush=True)
    M, K, N = 8192, 4096, 16384
    x = torch.randn(M, K, device="cuda", dtype=dt, generator=gen)
    w = torch.randn(N, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5
    b = torch.randn(N, device="cuda", dtype=dt, generator=gen)
    print(f"plain {M}x{K}->{N} cublas F.linear(bias): "
          f"{timed(lambda: F.linear(x, w, b)):.1f} us", flush=True)
    with la.use_wgmma(True):
        for act in args.plain_acts:
            def plain(act=act):
                return la.linear_act_forward(x, w, b, act)
            print(f"plain {act} bias: {timed(plain):.1f} us", flush=True)


if __name__ == "__main__":
    main()
