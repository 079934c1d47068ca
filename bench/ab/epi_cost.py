"""v7 (``WgmmaConfig.epi`` 1: the wgmma epilogue's activations and derivatives in
fast_act's branch-free forms, a chunk's 8 (gated: 4) under one switch) and v7b (epi
2: v7 with the epilogue's shared-memory indices unsigned 32-bit) against the
libdevice epilogue (epi 0), by activation (eighty-fifth session); v9 (epi 3, eighty-sixth:
the forward's whole tiles finished from the accumulators' registers, no C tile) and v10
(epi 4, eighty-seventh: v9 with each quad's words transposed into 16-byte stores). ncu of v4's gated
pair GEMM (4096 x 4096 -> 2 x 11008 bf16, silu) put about a third of the consumer
warps' samples in the epilogue, two thirds of those in the activation: a
latency-bound chain an element (the activation switch, libdevice's expf, the IEEE
division's check and branch).

    python bench/ab/epi_cost.py [--reps 30] [--epi 2 3 4] [--rounds 3] [--kinds ...]

Kinds (bf16; each on its role's tiling from ``WG_ROLE``, pinned through
``linear_act.WG_LARGE`` with the arm's ``epi``): ``pair`` the gated pair forward
4096 x 4096 -> 2 x 11008 (v4; with and without the saved pre-activations), ``plain``
the forward 8192 x 4096 -> 16384 with bias (v4), ``short`` the forward 8192 x 768 ->
3072 with bias (v3b, two blocks an SM), ``dgrad`` grad_x of 8192 x 16384 -> 4096
times act'(preact) (v4). Each case's arms alternate ``--rounds`` times
(``bench.common.time_cuda``, median us each); the first activation of each kind is
held against a float64 reference (relative error, as the tests measure it) and each
arm's output compared with the first arm's (max abs difference). cuBLAS's GEMMs of
the same shapes come first.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

KINDS = {"pair": ("fwd_long_k", ("silu", "none")),
         "plain": ("fwd_long_k", ("silu", "gelu_tanh", "none")),
         "short": ("fwd", ("gelu_tanh", "none")), "dgrad": ("dgrad", ("gelu_tanh", "silu", "none"))}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--epi", nargs="+", type=int, default=[2, 3, 4])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.common import rel_err, time_cuda
    from numba_fused import gated_linear as gl
    from numba_fused import linear_act as la
    from numba_fused.activations import act_grad_ref, act_ref

    def timed(call):
        return time_cuda(call, [()], reps=args.reps, warmup=3)["median_ms"] * 1e3

    def on_device(fn, name, z):
        return torch.from_numpy(fn(name, z.cpu().numpy())).to(z.device)

    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.bfloat16

    def rand(*shape, scale=1.0):
        return torch.randn(*shape, device="cuda", dtype=dt, generator=gen) * scale

    data, runs, refs = {}, {}, {}
    if "pair" in args.kinds:
        x, wg, wu = rand(4096, 4096), rand(11008, 4096, scale=1 / 64), rand(11008, 4096, scale=1 / 64)
        print(f"pair: cublas gate, up {timed(lambda: (F.linear(x, wg), F.linear(x, wu))):.1f} us",
              flush=True)
        runs["pair"] = lambda act, save: gl.gated_linear_forward_pair(x, wg, wu, None, act, save)
        refs["pair"] = lambda a0=KINDS["pair"][1][0]: (
            on_device(act_ref, a0, x.double() @ wg.double().T) * (x.double() @ wu.double().T))
    for kind, (M, K, N) in (("plain", (8192, 4096, 16384)), ("short", (8192, 768, 3072))):
        if kind not in args.kinds:
            continue
        xk, wk, bk = rand(M, K), rand(N, K, scale=K ** -0.5), rand(N)
        data[kind] = (xk, wk, bk)
        print(f"{kind}: cublas F.linear(bias) {timed(lambda: F.linear(xk, wk, bk)):.1f} us",
              flush=True)
        runs[kind] = lambda act, save, d=data[kind]: la.linear_act_forward(*d, act)
        refs[kind] = lambda d=data[kind], a0=KINDS[kind][1][0]: on_device(
            act_ref, a0, torch.addmm(d[2].double(), d[0].double(), d[1].double().T))
    if "dgrad" in args.kinds:
        gy, wd, pre = rand(8192, 16384), rand(16384, 4096, scale=1 / 128), rand(8192, 4096)
        print(f"dgrad: cublas grad @ w {timed(lambda: gy @ wd):.1f} us", flush=True)
        runs["dgrad"] = lambda act, save: la.linear_act_dgrad(gy, wd, act, pre)
        refs["dgrad"] = lambda a0=KINDS["dgrad"][1][0]: (
            (gy.double() @ wd.double()) * on_device(act_grad_ref, a0, pre.double()))
    cases = []
    for kind in args.kinds:
        saves = (False, True) if kind == "pair" else (False,)
        cases += [(kind, act, save) for act in KINDS[kind][1] for save in saves]
    first, times = {}, {}
    for rnd in range(args.rounds):
        for kind, act, save in cases:
            for epi in args.epi:
                saved = la.WG_LARGE
                la.WG_LARGE = la.WG_ROLE[KINDS[kind][0]]._replace(epi=epi)
                la._gemm_prepared.cache_clear()
                try:
                    with la.use_wgmma(True):
                        t = timed(lambda: runs[kind](act, save))
                        times.setdefault((kind, act, save, epi), []).append(t)
                        line = f"round {rnd} epi {epi} {kind} {act} save_preact={save}: {t:.1f} us"
                        if rnd == 0 and not save and act == KINDS[kind][1][0]:
                            y = runs[kind](act, save)
                            if not isinstance(refs[kind], torch.Tensor):
                                refs[kind] = refs[kind]()
                            line += f", err {rel_err(y, refs[kind]):.3e}"
                            if kind in first:
                                diff = (y.float() - first[kind]).abs().max().item()
                                line += f", max |diff| to the first arm {diff:.3e}"
                            else:
                                first[kind] = y.float()
                        print(line, flush=True)
                finally:
                    la.WG_LARGE = saved
                    la._gemm_prepared.cache_clear()
    print("median over rounds (min-max), us:")
    for kind, act, save in cases:
        cells = []
        for epi in sorted(set(args.epi)):
            ts = sorted(times[(kind, act, save, epi)])
            cells.append(f"epi {epi} {ts[len(ts) // 2]:.1f} ({ts[0]:.1f}-{ts[-1]:.1f})")
        print(f"  {kind} {act} save_preact={save}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
