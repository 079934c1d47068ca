"""How much of the 16-bit dropout backward with a bias grad is its bias-grad
reduction? (fortieth session; one pass run, bench/NOTES.md)

    python3 bench/ab/dropout_bias_bound.py [--dtype float16] [--reps 30]

At 16384 x 4096, p = 0.1, activation 'none' (the 74.3 us target's case), times:

  shipped      the backward with the bias grad (last-block reduction, v10's one wave)
  tile only    the same kernel ending in its tile and partial row only: the
               reduction as a kernel of its own (bias_reduce="kernel_pdl", fill 1,
               the plan of the shipped row) replaced by one of the same launch that
               does nothing, so no fence, no arrival count, no last block
  no bias      need_bias_grad=False on the shipped row's plan (stages 0, fill 1): the
               same rows and grid without the epilogue
  no bias dft  need_bias_grad=False as shipped (v13's ring)

"tile only" and the no-bias rows bound what a cheaper reduction (a cluster's DSMEM
sum, say) could reach, as bench/ab/ln_dwdb_bound.py did for LayerNorm. "tile only"'s
grad_bias is garbage; only its time means anything. Method: tune_dropout's ``gpu``
column (CUDA events, stream held, median).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _noop(partial, grad_bias, n_parts, n_cols, tile_stride):
    """Writes nothing: the reduction's launch without its work."""


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)

    from gelu_cost import input_sets  # this script's folder is on the path
    from noop_kernel import noop_factory

    from bench import tune_dropout as T
    from numba_fused import dropout as D

    real = D.make_bias_grad_kernel
    noop_kernel = noop_factory(real, _noop)
    sets = input_sets(args.dtype, grad=True)
    variants = [
        ("shipped", D.LaunchConfig(), True, real),
        ("tile only", D.LaunchConfig(bias_reduce="kernel_pdl", fill=1), True, noop_kernel),
        ("no bias", D.LaunchConfig(stages=0, fill=1), False, real),
        ("no bias dft", D.LaunchConfig(), False, real),
        ("shipped", D.LaunchConfig(), True, real),
    ]
    for label, cfg, nbg, factory in variants:
        D.make_bias_grad_kernel = factory

        def fn(x, b, g, cfg=cfg, nbg=nbg):
            return D.dropout_bias_act_backward(g, x, b, T.P, T.SEED, T.OFFSET, "none",
                                               need_bias_grad=nbg, config=cfg)

        _, gpu = T._time(fn, sets, args.reps, 5)
        print(f"{label:12s} {args.dtype} gpu_us {gpu:.1f}", flush=True)
    D.make_bias_grad_kernel = real


if __name__ == "__main__":
    main()
