"""What the dW / dB partials and their reduction cost the backward (issue #16): the
LayerNorm / RMSNorm backward at M x N with w and b, with w only, with b only and with
neither (no partial rows, no dW / dB kernel), timed as tune_layer_norm.py times (CUDA
events, a GPU sleep before each call, median over rotated input sets), in A/B/B/A
order. The with-neither time bounds what any cheaper partial-row reduction (fewer rows,
a cluster reduction) could win back.

    python3 bench/ab/affine_share.py [--shape 16384x4096] [--dtypes float16,bfloat16] \
        [--tune '{"bwd_rms_sum1": false}'] [--ops ln]   # every variant under that tuning
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from numba_fused import layer_norm as ln  # noqa: E402

from tune_layer_norm import _sleep_cycles, bwd, fwd, make_sets, time_fn  # noqa: E402

VARIANTS = (("ln", True, True), ("ln", True, False), ("ln", False, True), ("ln", False, False),
            ("rms", True, False), ("rms", False, False))


def _bwd(op, has_w, has_b):
    """The backward of one variant as a function of (dy, x, w, b, mean, rstd)."""
    def run(dy, x, w, b, mean, rstd):
        return bwd(op, dy, x, w if has_w else None, b if has_b else None, mean, rstd)
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="16384x4096")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--tune", default="{}", help="layer_norm.tuning overrides (JSON)")
    ap.add_argument("--ops", default="ln,rms", help="ln, rms or both (comma-separated)")
    args = ap.parse_args(argv)
    args.ops = args.ops.split(",")
    if not set(args.ops) <= {"ln", "rms"}:
        ap.error(f"--ops takes ln and/or rms, got {args.ops!r}")
    with ln.tuning(**json.loads(args.tune)):
        _run(args)


def _run(args):
    variants = tuple(v for v in VARIANTS if v[0] in args.ops)
    m, n = (int(v) for v in args.shape.split("x"))
    sleep = _sleep_cycles()
    print("| op, dtype | w | b | backward us (A/B/B/A passes) |")
    print("|---|---|---|---|")
    for dname in args.dtypes.split(","):
        sets = make_sets(m, n, getattr(torch, dname))
        by_op = {op: [(dy, x, w, b) + fwd(op, x, w, b)[1:] for x, w, b, dy in sets]
                 for op in {v[0] for v in variants}}
        times = {v: [] for v in variants}
        for order in (variants, variants[::-1], variants[::-1], variants):
            for v in order:
                times[v].append(time_fn(_bwd(*v), by_op[v[0]], args.reps, sleep) * 1e3)
        for v in variants:
            print(f"| {v[0]} {dname} | {int(v[1])} | {int(v[2])} | "
                  + ", ".join(f"{t:.1f}" for t in times[v]) + " |")
        del sets, by_op
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
