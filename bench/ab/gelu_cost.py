"""Does the 16-bit gelu forward's time follow its instruction count? (fortieth session)

    python3 bench/ab/gelu_cost.py VARIANT [--dtype float16] [--reps 30]

One process a variant (the kernel factories cache by dtype and activation, not by the
gelu's coefficients). Every variant runs the forward at 16384 x 4096, p = 0.1, one row
a batch (unroll 1, 32 registers, 8 blocks an SM) on v15's grid (fill 4), so only the
instruction stream differs:

  deg5       the shipped gelu (degree-5 fit, 223 SASS instructions per 8 elements)
  deg3       the same with the fit cut to degree 3 (2 FFMA an element fewer: 207)
  deg1       cut to degree 1 (4 fewer: 191)
  tanh1      gelu_tanh at unroll 1 (174; its shipped plan is unroll 2 at 64 registers)
  none1      'none' at unroll 1 (113)
  estrin     v18: deg5 with its polynomial in Estrin's order (three dependent steps
             after the reciprocal instead of six; 222 instructions against v17's 213,
             40 registers against 32). Refuted and removed: apply
             bench/ab/dropout_v18_estrin.patch first (it adds dropout._GELU_ESTRIN).

Counts: ptxas 13.0 sm_90 on the CPU, 31-32 registers, at 5990276 (before v17, whose
folded scale and addressing take 10 from each gelu variant: deg5 213). deg3 / deg1
compute a wrong gelu: they exist to time an instruction stream, and only deg5's and
estrin's outputs are checked (against float64, as tune_dropout checks). Prints one
line: variant, dtype, registers, median us (CUDA events with the stream held, as
tune_dropout's ``gpu`` column).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

VARIANTS = ("deg5", "deg3", "deg1", "tanh1", "none1", "estrin")


def input_sets(dtype, m=16384, n=4096, grad=False):
    """Three rotated (x, bias, x) sets of random normals on the GPU (x about 400 MB a
    set at 16 bits, beyond the L2), the forward's arguments for tune_dropout's timer;
    with ``grad``, (x, bias, grad_out) with grad_out drawn after the bias (the
    backward's)."""
    import torch

    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(3):
        x = torch.randn((m, n), device="cuda", generator=gen).to(tdtype)
        b = torch.randn((n,), device="cuda", generator=gen).to(tdtype)
        g = torch.randn((m, n), device="cuda", generator=gen).to(tdtype) if grad else x
        sets.append((x, b, g))
    return sets


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)

    from bench import tune_dropout as T
    from numba_fused import dropout as D

    v = args.variant
    if v.startswith("deg"):
        keep = int(v[3:]) + 1
        D._GELU16_FOLDED = D._GELU16_FOLDED[:keep]
    if v == "estrin":
        if not hasattr(D, "_GELU_ESTRIN"):
            raise SystemExit("estrin: apply bench/ab/dropout_v18_estrin.patch first")
        D._GELU_ESTRIN = True
    act = {"tanh1": "gelu_tanh", "none1": "none"}.get(v, "gelu")
    cfg = D.LaunchConfig(unroll=1, fill=4)
    sets = input_sets(args.dtype)
    if v in ("deg5", "estrin"):
        T._check(D, "fwd", act, cfg, *sets[0])

    def fn(x, b, g):
        return D.dropout_bias_act_forward(x, b, T.P, T.SEED, T.OFFSET, act, config=cfg)

    _, gpu = T._time(fn, sets, args.reps, 5)
    k = D.make_forward_kernel(args.dtype, act, True, D._default_threads(args.dtype, True), 1,
                              False, 1)
    print(f"{v} {args.dtype} regs {k.regs_per_thread} gpu_us {gpu:.1f}", flush=True)


if __name__ == "__main__":
    main()
