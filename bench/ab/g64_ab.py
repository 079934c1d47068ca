"""dropout v23 against v22 in one process: the vector-path kernels with and without
the launch's first Philox group ``g_base`` (fifty-fifth session), not a shipped kernel.

    python3 bench/ab/g64_ab.py [--reps 30] [--passes 3] [--dtypes float16,bfloat16]
                               [--acts gelu,none] [--shape 16384x4096]

Why. v23 compiles ``g_base`` out of the kernels of a tensor's first (usually only) row
piece (``dropout._group_of``). Its A/B partner is the same launcher with every kernel
made with ``g64=True``, as v22 launched them (the first piece's g_base is 0, so both
give the same bits; checked here): forward, backward with the bias grad and backward
without it, p = 0.1. Each row prints tune_dropout's ``gpu`` column (us, the stream held
so host time is hidden), one pass after another, the two alternating.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

P_DROP = 0.1


def _forcing_g64(D):
    """A context in which the launchers make every kernel with g64=True (v22)."""
    import contextlib

    def forced(make):
        # Not functools.partial: the launchers pass g64 themselves, and a call's
        # keyword overrides a partial's.
        @functools.wraps(make)
        def wrapper(*args, **kwargs):
            kwargs["g64"] = True
            return make(*args, **kwargs)

        return wrapper

    @contextlib.contextmanager
    def ctx():
        saved = D.make_forward_kernel, D.make_backward_kernel
        D.make_forward_kernel = forced(saved[0])
        D.make_backward_kernel = forced(saved[1])
        try:
            yield
        finally:
            D.make_forward_kernel, D.make_backward_kernel = saved

    return ctx


def _names(D, fn, args, ctx=None):
    """The names of the kernels one call launches (under ``ctx``), last tags only."""
    import contextlib

    made = []
    saved = D.make_forward_kernel, D.make_backward_kernel
    with ctx() if ctx else contextlib.nullcontext():
        inner = D.make_forward_kernel, D.make_backward_kernel

        def spy(make):
            def wrapper(*a, **kw):
                k = make(*a, **kw)
                made.append(k.name.rsplit("_", 1)[-1])
                return k

            return wrapper

        D.make_forward_kernel, D.make_backward_kernel = (spy(m) for m in inner)
        try:
            fn(*args)
        finally:
            D.make_forward_kernel, D.make_backward_kernel = inner
    assert (D.make_forward_kernel, D.make_backward_kernel) == saved
    return ",".join(made)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--acts", default="gelu,none")
    ap.add_argument("--shape", default="16384x4096")
    args = ap.parse_args(argv)
    import torch

    from bench import tune_dropout as T
    from numba_fused import dropout as D

    forcing = _forcing_g64(D)
    m, n = (int(v) for v in args.shape.split("x"))
    for dt in args.dtypes.split(","):
        tdt = getattr(torch, dt)
        sets = [tuple(torch.randn(*s, device="cuda").to(tdt) for s in ((m, n), (n,), (m, n)))
                for _ in range(3)]
        for act in args.acts.split(","):
            cases = {
                "fwd": lambda x, b, g, act=act: D.dropout_bias_act_forward(
                    x, b, P_DROP, T.SEED, T.OFFSET, act),
                "bwd": lambda x, b, g, act=act: D.dropout_bias_act_backward(
                    g, x, b, P_DROP, T.SEED, T.OFFSET, act),
                "bwd nobias": lambda x, b, g, act=act: D.dropout_bias_act_backward(
                    g, x, b, P_DROP, T.SEED, T.OFFSET, act, need_bias_grad=False),
            }
            for case, fn in cases.items():
                new = fn(*sets[0])
                with forcing():
                    old = fn(*sets[0])
                new = new if isinstance(new, tuple) else (new,)
                old = old if isinstance(old, tuple) else (old,)
                same = all((a is None and b is None) or torch.equal(a.view(torch.int16),
                                                                    b.view(torch.int16))
                           for a, b in zip(new, old))
                line = [f"{dt} {act} {case}: same bits {same}, kernels "
                        f"{_names(D, fn, sets[0])} / {_names(D, fn, sets[0], forcing)}"]
                for _ in range(args.passes):
                    _, v23 = T._time(fn, sets, args.reps, 5)
                    with forcing():
                        _, v22 = T._time(fn, sets, args.reps, 5)
                    line.append(f"v23 {v23:.2f} v22 {v22:.2f}")
                print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
