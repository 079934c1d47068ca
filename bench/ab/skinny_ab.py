"""A/B of tensor-core tilings for skinny GEMMs (few rows: a decoder's tokens at
generation time) in linear_act's forward, against cuBLAS (torch F.linear).

    python bench/ab/skinny_ab.py [--ms 1 16 64] [--reps 30] [--tilings NAME ...]
                                 [--splits 1 2 4 ...] [--skinny g1w8u2 ...] [--no-gated]

Shapes: Llama-7B's MLP GEMMs, gate+up ``[M, 4096] x [22016, 4096]^T`` and down
``[M, 11008] x [4096, 11008]^T``, bf16, no bias, no activation. Each tiling is forced
through ``linear_act._pick_config`` (mma.sync; the prepared-launch cache cleared), its
y checked against cuBLAS's (relative error), timed with ``bench.common.time_cuda``.
Each tiling runs at each forced split-K ``--splits`` (``linear_act.use_split_k``; 0:
``split_k_auto``'s choice for that tiling). Prints one line per (shape, tiling, splits): median us,
GB/s of the bytes that must move (weights + x + y), and the ratio to cuBLAS.
``--skinny``: the few-row kernel (``linear_act.make_skinny_kernel``, forced through
``use_skinny``) at each layout ``g<groups>w<warps>u<unroll>[p][k<splits>][:<policy>]``
(``p``: prefetch; ``k``: the k-chunks split over that many blocks; policy a ``tensor_core.LOAD_POLICIES`` entry or ``none``; default
no_allocate); ``--tilings``
may be empty to time only those. The gated forward then runs with the few-row kernel
at the first layout too (in place and through the copy)."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# (bm, bn, bk, wm, wn, stages, group_m)
TILINGS = {
    "default": None,
    "16x64x64_w16x16_s4": (16, 64, 64, 16, 16, 4, 8),
    "16x32x64_w16x16_s4": (16, 32, 64, 16, 16, 4, 8),
    "16x64x128_w16x16_s3": (16, 64, 128, 16, 16, 3, 8),
    "16x128x64_w16x32_s4": (16, 128, 64, 16, 32, 4, 8),
    "16x32x128_w16x16_s4": (16, 32, 128, 16, 16, 4, 8),
    "32x64x64_w16x32_s4": (32, 64, 64, 16, 32, 4, 8),
    "64x64x64_w32x32_s4": (64, 64, 64, 32, 32, 4, 8),
}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--ms", nargs="+", type=int, default=[1, 16, 64])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--tilings", nargs="*", default=list(TILINGS))
    p.add_argument("--splits", nargs="+", type=int, default=[0])
    p.add_argument("--skinny", nargs="*", default=[])
    p.add_argument("--no-gated", action="store_true")
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.common import time_cuda
    from numba_fused import linear_act as la

    real_pick = la._pick_config
    dt = torch.bfloat16
    torch.manual_seed(0)
    weights = {(22016, 4096): torch.randn(22016, 4096, device="cuda", dtype=dt) / 64,
               (4096, 11008): torch.randn(4096, 11008, device="cuda", dtype=dt) / 100}
    for m in args.ms:
        for (n, k), w in weights.items():
            x = torch.randn(m, k, device="cuda", dtype=dt)
            ref = F.linear(x, w)
            nbytes = (n * k + m * k + m * n) * 2
            t_ref = time_cuda(lambda: F.linear(x, w), [()], reps=args.reps, warmup=3)["median_ms"]
            print(f"M={m} N={n} K={k} cublas {t_ref * 1e3:.1f} us "
                  f"{nbytes / t_ref / 1e6:.0f} GB/s", flush=True)
            for name in args.tilings:
                for splits in args.splits:
                    _one(la, real_pick, name, splits, x, w, ref, nbytes, t_ref, args)
            for spec in args.skinny:
                _skinny(la, spec, x, w, ref, nbytes, t_ref, args)
        if not args.no_gated:
            _gated(m, args, weights[(22016, 4096)])
            if args.skinny:
                saved = la.SKINNY_DEFAULT
                la.SKINNY_DEFAULT = _layout(la, args.skinny[0])
                la._gemm_prepared.cache_clear()
                try:
                    with la.use_skinny(True):
                        print(f"  (few-row kernel {args.skinny[0]})", flush=True)
                        _gated(m, args, weights[(22016, 4096)])
                finally:
                    la.SKINNY_DEFAULT = saved
                    la._gemm_prepared.cache_clear()


def _layout(la, spec):
    """SkinnyConfig of ``g<groups>w<warps>u<unroll>[p][k<splits>][:<policy>]``."""
    import re

    body, _, policy = spec.partition(":")
    g, w, u, pf, k = re.fullmatch(r"g(\d+)w(\d+)u(\d+)(p?)(?:k(\d+))?", body).groups()
    cfg = la.SkinnyConfig(int(g), int(w), int(u), prefetch=int(pf == "p"), splits=int(k or 1))
    if policy:
        cfg = cfg._replace(policy=None if policy == "none" else policy)
    return cfg


def _skinny(la, spec, x, w, ref, nbytes, t_ref, args):
    """Time linear_act_forward(x, w) on the few-row kernel at layout ``spec``."""
    from bench.common import rel_err, time_cuda

    saved = la.SKINNY_DEFAULT
    try:
        la.SKINNY_DEFAULT = _layout(la, spec)
        la._gemm_prepared.cache_clear()
        with la.use_skinny(True):
            y = la.linear_act_forward(x, w)
            err = rel_err(y.float(), ref.float())
            t = time_cuda(lambda: la.linear_act_forward(x, w), [()], reps=args.reps,
                          warmup=3)["median_ms"]
    except Exception as exc:  # a layout the kernel refuses: say so, go on
        print(f"  skinny {spec}: {type(exc).__name__}: {str(exc)[:150]}", flush=True)
        return
    finally:
        la.SKINNY_DEFAULT = saved
        la._gemm_prepared.cache_clear()
    print(f"  skinny {spec}: {t * 1e3:.1f} us {nbytes / t / 1e6:.0f} GB/s "
          f"x{t_ref / t:.2f} of cublas, err {err:.1e}", flush=True)


def _one(la, real_pick, name, splits, x, w, ref, nbytes, t_ref, args):
    """Time one (tiling, forced splits) of linear_act_forward(x, w) and print its line."""
    from bench.common import rel_err, time_cuda

    cfg = TILINGS[name]
    la._pick_config = real_pick if cfg is None else (
        lambda Mg, Ng, device=None, c=la.GemmConfig(*cfg): c)
    la._gemm_prepared.cache_clear()
    M, K = x.shape
    N = w.shape[0]
    label = splits or "rule"
    try:
        if not splits:
            from numba_fused.launch import sm_count

            dev = x.device.index
            splits = la.split_k_auto(M, N, K, la._pick_config(M, N, dev), sm_count(dev))
        # The few-row kernel kept out: it is the default for these rows now.
        with la.use_wgmma(False), la.use_split_k(splits), la.use_skinny(False):
            ways = la._splits_for("fwd", "bfloat16", True, x.device.index, M, N, K, None)
            y = la.linear_act_forward(x, w)
            err = rel_err(y.float(), ref.float())
            t = time_cuda(lambda: la.linear_act_forward(x, w), [()], reps=args.reps,
                          warmup=3)["median_ms"]
    except Exception as exc:  # a tiling the kernel refuses: say so, go on
        print(f"  {name} split {label}: {type(exc).__name__}: {str(exc)[:150]}", flush=True)
        return
    finally:
        la._pick_config = real_pick
        la._gemm_prepared.cache_clear()
    print(f"  {name} split {label} ({ways} ways): {t * 1e3:.1f} us {nbytes / t / 1e6:.0f} GB/s "
          f"x{t_ref / t:.2f} of cublas, err {err:.1e}", flush=True)


def _gated(m, args, w):
    """The gated forward at M rows: in place (gated_linear_forward_pair) against the
    interleaved copy made in the call (what interop.torch.gated_mlp did) and against
    the copy made beforehand, default tilings; h compared bit for bit."""
    import torch

    from bench.common import time_cuda
    from numba_fused import gated_linear as gl

    wg, wu = w[0::2].contiguous(), w[1::2].contiguous()
    x = torch.randn(m, 4096, device="cuda", dtype=w.dtype)
    same = torch.equal(gl.gated_linear_forward_pair(x, wg, wu),
                       gl.gated_linear_forward(x, gl.interleave(wg, wu)))
    cases = {"in place": lambda: gl.gated_linear_forward_pair(x, wg, wu),
             "copy in the call": lambda: gl.gated_linear_forward(x, gl.interleave(wg, wu)),
             "copy beforehand": lambda: gl.gated_linear_forward(x, w)}
    for name, call in cases.items():
        t = time_cuda(call, [()], reps=args.reps, warmup=3)["median_ms"]
        print(f"  gated M={m} {name}: {t * 1e3:.1f} us (in place == copy: {same}, "
              f"in place taken: {gl.pair_in_place(x, wg, wu)})", flush=True)


if __name__ == "__main__":
    main()
