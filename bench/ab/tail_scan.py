"""Whether the float32 norms forwards' gap to torch.compile is the grid's last
partial wave (issue #16, sixty-first session).

    python3 bench/ab/tail_scan.py [--cells rms4096,ln4096,rms2048] [--passes 3] [--reps 30]
        [--rows 16384] [--tune '{"fwd_plain_reload": true}']

``--rows`` times that row count alone (at each cell); ``--tune`` runs ours under
those layer_norm.tuning overrides (JSON; lists for tuples).

Why. ncu of float32 RMSNorm 16384 x 4096 (sixty-first session): ours and inductor's
kernels both take a row a block of 512 threads, but ours holds 40 registers (three
blocks an SM, 396 slots on 132 SMs: 16384 / 396 = 41.37 waves) and inductor's 28
(four, 528 slots: 31.03 waves). The last wave of ours is 37 % full, inductor's 3 %,
and a wave lasts ~3 us: a tail of up to ~2 us with the machine part idle, the size
of the gap. Inductor's own two-loop shape at our layout (fwd_plain_reload) lost 1-2
us, so occupancy alone is not it. Here both are timed at row counts M around 2^26 /
N, at whole and fractional waves of each; per-row time in ps (us / M * 1e6) shows
which. Predicted, if the tail: ours' gap to compile shrinks at M a multiple of our
slots (and grows where compile's waves are whole and ours are not). torch.compile
is compiled per M (dynamic=False). Outputs are checked against float64 once per M.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.ab.placement import _compiled, _ref  # noqa: E402
from bench.common import time_cuda  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402

# cell -> (op, N, row counts); float32. 396 = 132 SMs x 3 blocks (ours at RMSNorm
# 4096), 528 = x 4 (inductor's), 660 = x 5 (ours at LayerNorm 4096).
CELLS = {
    "rms4096": ("rms", 4096, (15840, 16038, 16236, 16384, 16500, 16632, 16896)),
    "ln4096": ("ln", 4096, (15840, 16236, 16384, 16500, 16632, 16896)),
    "rms2048": ("rms", 2048, (31680, 32472, 32768, 33000, 33264)),
}


def _ours(op, tune, stats=False):
    """Our forward of ``op`` under tuning ``tune``, returning y (``stats``: the
    forward that also writes the statistics, as training runs it)."""
    def fwd(x, w, b):
        with ln.tuning(**tune):
            if op == "rms":
                return ln.rms_norm_forward(x, w, 1e-6, stats=stats)[0]
            return ln.layer_norm_forward(x, w, b, 1e-5, stats=stats)[0]
    return fwd


def run_cell(name, passes, reps, rows=None, tune=None):
    op, n, ms = CELLS[name]
    if rows:
        ms = (rows,)
    g = torch.Generator(device="cuda").manual_seed(n)
    w = torch.rand(n, device="cuda", generator=g) + 0.5
    b = torch.randn(n, device="cuda", generator=g)
    for m in ms:
        torch._dynamo.reset()
        x = torch.randn(m, n, device="cuda", generator=g)
        provs = {"ours": _ours(op, tune or {}), "compile": _compiled(op, n, dynamic=False)}
        times = {p: [] for p in provs}
        with torch.no_grad():
            want = _ref(op, n, x[-256:], w, b)
            for prov, fn in provs.items():
                got = fn(x, w, b)[-256:].double()
                err = ((got - want).norm() / want.norm()).item()
                if not err < 1e-5:
                    print(f"| {name} | M {m} | {prov} | check {err:.2e} FAIL |", flush=True)
            for k in range(passes):
                for prov in (provs if k % 2 == 0 else list(provs)[::-1]):
                    t = time_cuda(provs[prov], [(x, w, b)], reps=reps, warmup=5)
                    times[prov].append(t["median_ms"] * 1e3)
        med = {p: sorted(v)[passes // 2] for p, v in times.items()}
        print(f"| {name} | M {m} | waves 396 {m / 396:.2f} 528 {m / 528:.2f} 660 "
              f"{m / 660:.2f} | ours {', '.join(f'{v:.1f}' for v in times['ours'])} "
              f"({med['ours'] / m * 1e6:.1f} ps/row) | compile "
              f"{', '.join(f'{v:.1f}' for v in times['compile'])} "
              f"({med['compile'] / m * 1e6:.1f} ps/row) | gap {med['ours'] - med['compile']:+.2f} |",
              flush=True)
        del x
        torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--tune", default="{}")
    args = ap.parse_args(argv)
    tune = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(args.tune).items()}
    print(f"GPU: {torch.cuda.get_device_name(0)}; ours under tuning {tune}")
    for name in args.cells.split(","):
        run_cell(name, args.passes, args.reps, args.rows, tune)


if __name__ == "__main__":
    main()
