"""Whether the carveout's gain is a cost per launch or a rate (issue #16, written in the
sixty-third session for the next; not yet run).

    python3 bench/ab/carveout_scale.py [--cells f32-rms-4096,f32-ln-4096,...]
        [--rows 264,1056,4224,16384] [--carveouts -1,5,9] [--passes 5] [--reps 50]

Why. Back to back (CUDA events, nothing between launches) the plain forward kernels
run 0.3-2.7 us faster at carveout preferences 5-9 (~124-60 KB of L1) than at the
driver's default (~248 KB): v56 and v58. Under ncu (each launch serialized, caches
flushed before it) the same kernel at preference 7 is 0.6 us *slower* than at the
default, with a lower L1 hit rate and 8 % more L2 reads (sixty-third session,
``results/s63/ncu_l1.txt``). So the gain is in what happens between launches, or in
steady state across them. If it is a cost per launch (e.g. L1 invalidated at each
kernel boundary, proportional to its size), it is the same number of us at any row
count; if it is a rate, it scales with the rows. Here each cell's kernel (recorded
on a first call, ``carveout_ab._picked``, for each row count: the launcher may pick
another layout for few rows) is timed at each preference over row counts from two
waves of blocks to the sweep's 2^26 / N elements, alternating order over passes;
outputs are checked equal to the default preference's (same kernels, same bits).
Predicted: a fixed 0.3-1 us at every row count if it is a cost per launch.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.ab.carveout_ab import DTYPES, _picked, time_preferences  # noqa: E402
from bench.ab.tail_scan import _ours  # noqa: E402

CELLS = ("f32-rms-4096", "f32-rms-8192", "f32-ln-4096", "f16-rms-8192")
ROWS = (264, 1056, 4224, 16384)


def run_cell(cell, rows, carveouts, passes, reps):
    dt, op, n = cell.split("-")
    n = int(n)
    g = torch.Generator(device="cuda").manual_seed(n)
    w = (torch.rand(n, device="cuda", generator=g) + 0.5).to(DTYPES[dt])
    b = torch.randn(n, device="cuda", generator=g).to(DTYPES[dt])
    fn = _ours(op, {})
    for m in rows:
        m = min(m, 2**26 // n)
        x = torch.randn(m, n, device="cuda", generator=g).to(DTYPES[dt])
        kernels = _picked(fn, (x, w, b))
        med, bad = time_preferences(fn, (x, w, b), kernels, carveouts, passes, reps)
        base = med[carveouts[0]]
        cols = " | ".join(f"c{c} {med[c]:.2f} ({med[c] - base:+.2f})" for c in carveouts)
        print(f"| {cell} | rows {m} | {','.join(k.name for k, _, _ in kernels)} | {cols} | "
              f"{'outputs equal' if not bad else f'DIFFER at {bad}'} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--rows", default=",".join(map(str, ROWS)))
    ap.add_argument("--carveouts", default="-1,5,9")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args(argv)
    carveouts = [int(c) for c in args.carveouts.split(",")]
    rows = [int(r) for r in args.rows.split(",")]
    print(f"GPU: {torch.cuda.get_device_name()}; carveouts {carveouts} (first: the base)")
    with torch.no_grad():
        for cell in args.cells.split(","):
            run_cell(cell, rows, carveouts, args.passes, args.reps)


if __name__ == "__main__":
    main()
