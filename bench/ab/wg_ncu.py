"""The workload for ncu behind the wgmma forward's gap to cuBLAS (eighty-fourth
session: v6's TMA producer measured even with v4's cp.async one, so the consumers
hold v4 at 85-90% of cuBLAS). Llama-7B's gated forward at 4096 tokens, bf16: our
pair GEMM on v4 (WG_LARGE_WS_HB, silu gate in the epilogue) and on v6p
(WG_LARGE_WS_TMA), and cuBLAS's two GEMMs of the same shape (F.linear of x by the
gate and the up weight).

    ncu --nvtx --nvtx-include "prof/" --clock-control none --set full \\
        python3 bench/ab/wg_ncu.py [--shape 4096x4096x11008]

``--arms epi`` (eighty-seventh session: v9, epi 3, lost to v7b, epi 2, by 10-14% on
the plain forward and 13-25% on the pair forward keeping the pairs, not on the pair
forward without them): the plain forward 8192 x 4096 -> 16384 with bias (act none)
and the pair forward keeping the pairs (silu), each on v4 (WG_LARGE_WS_HB) at epi 2,
3 and 4 (v10: v9's stores transposed over each quad into 16-byte chunks); the memory
tables show the store requests and sectors of each epilogue.

Each arm runs three times unprofiled, then once inside the range ``prof`` (the
report lists the kernels in the order of the "profiled next" lines). Nothing is
checked here (tma_pair_ab.py and the tests check these launches).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="4096x4096x11008")
    p.add_argument("--arms", choices=("tma", "epi"), default="tma")
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.common import profile_once
    from numba_fused import gated_linear as gl
    from numba_fused import linear_act as la

    M, K, inter = (int(v) for v in args.shape.lower().split("x"))
    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.bfloat16
    x = torch.randn(M, K, device="cuda", dtype=dt, generator=gen)
    wg = torch.randn(inter, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5
    wu = torch.randn(inter, K, device="cuda", dtype=dt, generator=gen) / K ** 0.5

    def pinned(cfg, fn):
        def call():
            saved = la.WG_LARGE
            la.WG_LARGE = cfg
            try:
                with la.use_wgmma(True):
                    return fn()
            finally:
                la.WG_LARGE = saved
        return call

    def ours(cfg, save=False):
        return pinned(cfg, lambda: gl.gated_linear_forward_pair(x, wg, wu, None, "silu",
                                                                save_preact=save))

    if args.arms == "tma":
        arms = (("v4 ws_hb", ours(la.WG_LARGE_WS_HB)),
                ("v6p ws_tma", ours(la.WG_LARGE_WS_TMA)),
                ("cublas gate, up", lambda: (F.linear(x, wg), F.linear(x, wu))))
    else:
        from numba_fused import linear_act_forward

        xp = torch.randn(8192, 4096, device="cuda", dtype=dt, generator=gen)
        wp = torch.randn(16384, 4096, device="cuda", dtype=dt, generator=gen) / 64
        bp = torch.randn(16384, device="cuda", dtype=dt, generator=gen)
        arms = []
        for epi in (2, 3, 4):
            cfg = la.WG_LARGE_WS_HB._replace(epi=epi)
            arms.append((f"plain none epi {epi}",
                         pinned(cfg, lambda: linear_act_forward(xp, wp, bp, "none"))))
            arms.append((f"pair silu preact epi {epi}", ours(cfg, save=True)))
    for label, call in arms:
        profile_once(label, call)


if __name__ == "__main__":
    main()
