"""Whether the L1 / shared carveout preference moves dropout + bias + activation (issue
#16, written in the sixty-second session for the next; run in the sixty-third:
refuted, ``bench/results/s63/dropout_carveout*.log``).

    python3 bench/ab/dropout_carveout.py [--carveouts -1,3,5,7,9] [--passes 5] [--reps 30]
        [--cases fp16-none-bwd,...]

Why. The sixty-second session found the plain norm forward kernels 0.3-2.7 us faster
under the carveout preference 5 or 7 (ncu on the H200: 132 / 164 KB of shared memory,
~124 / ~92 KB of L1, against the driver's 8 KB and ~248 KB of L1; v56,
``bench/ab/carveout_ab.py``). Issue #16's one missed target is the dropout(x+b)
backward with the bias grad at fp16 / bf16 16384 x 4096: 0.0762 / 0.0768 ms against
0.0743, 2.5 %; the norms moved by up to 2 % from the carveout alone. Here each of
dropout's forward and backward (with the bias grad), ``act`` none and gelu, p = 0.1, is
called once to record the kernels it launches (``carveout_ab._picked``), then timed
with each preference set on all of them (``launch.Kernel._set_carveout``), alternating
order over ``--passes``; every output is compared with the default preference's (the same
kernels, so the same bits). Predicted: if the bias-grad backward is held up the way
the norms were, one preference takes 0.5-2 us off it; the forward (no w / b re-read)
may not move. Measured (H200): preferences 3-7 cost the bias-grad backwards 8 us
('none') and 24 us (gelu) -- their tile kernel's shared memory fits fewer blocks --
and 9-12 are within 0.35 us of the driver's choice; the forwards within 0.25.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.ab.carveout_ab import _picked, time_preferences  # noqa: E402
from numba_fused import dropout as dr  # noqa: E402

SHAPE = (16384, 4096)
P, SEED, OFFSET = 0.1, 1234, 0
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
CASES = tuple(f"{dt}-{act}-{d}" for dt in DTYPES for act in ("none", "gelu")
              for d in ("fwd", "bwd"))


def _fn(act, direction):
    if direction == "fwd":
        return lambda x, b, g: dr.dropout_bias_act_forward(x, b, P, SEED, OFFSET, act)
    return lambda x, b, g: dr.dropout_bias_act_backward(g, x, b, P, SEED, OFFSET, act)


def run_case(case, carveouts, passes, reps):
    dt, act, direction = case.split("-")
    dtype = DTYPES[dt]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(SHAPE, device="cuda", generator=g).to(dtype)
    b = torch.randn(SHAPE[1], device="cuda", generator=g).to(dtype)
    gy = torch.randn(SHAPE, device="cuda", generator=g).to(dtype)
    fn = _fn(act, direction)
    kernels = _picked(fn, (x, b, gy))
    if not kernels:
        raise RuntimeError(f"{case}: no launch through launch.Kernel.launch recorded")
    med, bad = time_preferences(fn, (x, b, gy), kernels, carveouts, passes, reps)
    base = med[carveouts[0]]
    names = ",".join(f"{k.name}({t})" for k, t, _ in kernels)
    print(f"| {case} | {names} | " + " | ".join(
        f"c{c} {med[c]:.2f} ({med[c] - base:+.2f})" for c in carveouts)
        + f" | {'outputs differ at ' + str(bad) if bad else 'outputs equal'} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--carveouts", default="-1,3,5,7,9")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    carveouts = [int(c) for c in args.carveouts.split(",")]
    print(f"GPU: {torch.cuda.get_device_name(0)}; carveouts {carveouts} (-1: none, first: "
          "the baseline of the differences)")
    for case in args.cases.split(","):
        run_case(case, carveouts, args.passes, args.reps)


if __name__ == "__main__":
    main()
