"""Whether the L1 / shared carveout preference moves the norms forwards' gap to
torch.compile (issue #16, sixty-second session).

    python3 bench/ab/carveout_ab.py [--cells f32-rms-4096,...|all] [--carveouts -1,5,7|ship]
        [--tunes '{"base": {}, "rows": {"fwd_plain_reload_rows": true}}']
        [--passes 3] [--reps 30] [--no-compile]

Why. ``bench/ab/cubin_ab.py`` (sixty-second session, H200, float32 RMSNorm 16384 x 4096)
loaded inductor's kernel shape (``rms_mimic.py``) five ways: the driver's JIT and
offline ptxas (toolkit 13.0, Triton's 12.8; sm_90 and sm_90a) all timed within 0.2 us of
each other (131.9-132.1), so how the binary is assembled is not the gap. The same cubins
with the preferred shared-memory carveout set to 7 % ran **0.85 us faster** in every
pass (131.1-131.2). (Meant as 16 KB of 228, the configuration ncu had read for
inductor's kernel against 8 KB for ours; ``bench/ab/carveout_cfg.py`` then found the
driver gives 164 KB of shared memory at 7, 132 KB at 5, and all 228 KB from 10 up, so
the gain is a smaller L1, not a larger shared memory.) Here our shipped forward kernels
are timed at each carveout preference (percent; -1: none, the driver's default) beside
torch.compile, alternating, at the cells the sixtieth session's sweep had behind (and
controls ahead), each under each ``--tunes`` entry (layer_norm.tuning overrides; by
default the plain kernel as shipped; the sixty-second session also ran it with
fwd_plain_hints, since removed: x's loads ``.L1::no_allocate`` or ``.L1::evict_first``,
w / b's ``.L1::evict_last``). The kernels
the launcher picks are recorded on a first call; each provider sets its preference on
them before it is timed. Every output is checked against float64 first; each kernel's
resident blocks an SM under each preference are printed (occupancy must not change).
torch.compile is recompiled a cell (``torch._dynamo.reset``: its recompile limit of 8
otherwise sends later cells to eager). A first run (all of ``base``) found preferences
14 and 28 (both 228 KB of shared memory, ~28 KB of L1) 2-38 us slower than the default
(8 KB) at every float32 cell. Predicted, if x's lines push w / b out of a small L1: with
x not allocated in L1 (``xn``) that penalty shrinks. (It did not, and both hints cost
2-8 us at the default carveout: sixty-second session, bench/NOTES.md.)"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.ab.placement import _compiled, _ref  # noqa: E402
from bench.ab.tail_scan import _ours  # noqa: E402
from bench.common import time_cuda  # noqa: E402
from numba_fused import launch  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# The sixtieth session's sweep: behind compile (all forwards), then two controls.
CELLS = ("f32-ln-4096", "f32-rms-2048", "f32-rms-4096", "f32-rms-5120", "f32-rms-8192",
         "f32-rms-12288", "f32-rms-16384", "f16-rms-8192", "bf16-rms-8192",
         "f16-rms-512", "bf16-rms-1024", "f16-rms-12288", "f16-ln-16384", "f32-ln-8192",
         "f16-ln-4096", "f32-ln-1024")


ALL_CELLS = tuple(f"{dt}-{op}-{n}" for dt in DTYPES for op in ("ln", "rms")
                  for n in (512, 768, 1024, 2048, 4096, 5120, 8192, 12288, 16384))
# Our variants: label -> layer_norm.tuning overrides. (The sixty-second session's
# "xn" / "xf", x's loads .L1::no_allocate / .L1::evict_first and w / b's
# .L1::evict_last through fwd_plain_hints, were refuted; the knob was removed in the
# sixty-fifth session and exists at commit 5035c28 and before.)
TUNES = {"base": {}}


def _picked(fn, args):
    """[(Kernel, threads a block, dynamic shared bytes)] of the launches ``fn(*args)``
    makes through :meth:`launch.Kernel.launch`."""
    got, saved = [], launch.Kernel.launch

    def spy(self, grid, block, stream, args, shared=0):
        threads = block if isinstance(block, int) else math.prod(block)
        got.append((self, threads, int(shared)))
        return saved(self, grid, block, stream, args, shared)

    launch.Kernel.launch = spy
    try:
        fn(*args)
    finally:
        launch.Kernel.launch = saved
    return got


def _tensors(out):
    """The tensors of an op's output (one, or a tuple with Nones)."""
    return [t for t in (out if isinstance(out, tuple) else (out,)) if t is not None]


def time_preferences(fn, args, kernels, carveouts, passes, reps):
    """``fn(*args)`` with each preference of ``carveouts`` set on every kernel of
    ``kernels`` (``_picked``'s list): its outputs compared with those at the driver's
    choice (-1), then timed in alternating order over ``passes``; the kernels are left
    at -1. Returns ({preference: median us}, [preferences whose outputs differ])."""
    dev = torch.cuda.current_device()

    def prefer(c):
        for kern, _, _ in kernels:
            kern._set_carveout(dev, c)

    prefer(-1)
    want = [t.clone() for t in _tensors(fn(*args))]
    bad = []
    for c in carveouts:
        prefer(c)
        got = _tensors(fn(*args))
        if len(got) != len(want) or not all(torch.equal(a, e) for a, e in zip(got, want)):
            bad.append(c)
    times = {c: [] for c in carveouts}
    for k in range(passes):
        for c in (carveouts if k % 2 == 0 else carveouts[::-1]):
            prefer(c)
            times[c].append(time_cuda(fn, [args], reps=reps, warmup=5)["median_ms"] * 1e3)
    prefer(-1)
    return {c: sorted(v)[passes // 2] for c, v in times.items()}, bad


def _prefer(kern, dev, carve):
    """Set ``kern``'s preference ``carve`` on device ``dev``; "ship": the one the
    launcher asked for (launch.Kernel.prefer_carveout's record; -1 where none)."""
    kern._set_carveout(dev, kern._carveout.get(dev, -1) if carve == "ship" else carve)


def run_cell(cell, tunes, carveouts, passes, reps, compiled=True):
    dt, op, n = cell.split("-")
    n = int(n)
    dtype = DTYPES[dt]
    m = 2**26 // n
    torch._dynamo.reset()  # a fresh compile a cell (the recompile limit is 8)
    g = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    w = (torch.rand(n, device="cuda", generator=g) + 0.5).to(dtype)
    b = torch.randn(n, device="cuda", generator=g).to(dtype)
    fns = {"compile": _compiled(op, n, dynamic=False)} if compiled else {}
    kernels = {}
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    dev = x.device.index
    with torch.no_grad():
        for label, tune in tunes.items():
            fns[label] = _ours(op, tune)
            kernels[label] = _picked(fns[label], (x, w, b))
            if not kernels[label]:
                raise RuntimeError(f"{cell} {label}: no launch through launch.Kernel.launch")
        want = _ref(op, n, x[-256:], w, b)
        for name, fn in fns.items():
            got = fn(x, w, b)[-256:].double()
            err = ((got - want).norm() / want.norm()).item()
            print(f"| {cell} | {name} | check {err:.2e} {'ok' if err < tol else 'FAIL'} |",
                  flush=True)
        provs = ([("compile", None)] if compiled else []) + [(t, c) for t in tunes
                                                               for c in carveouts]
        times = {p: [] for p in provs}
        for k in range(passes):
            for prov in (provs if k % 2 == 0 else provs[::-1]):
                label, carve = prov
                for kern, _, _ in kernels.get(label, ()):
                    _prefer(kern, dev, carve)
                t = time_cuda(fns[label], [(x, w, b)], reps=reps, warmup=5)
                times[prov].append(t["median_ms"] * 1e3)
        occ = []
        for label in tunes:
            for c in carveouts:
                for kern, _, _ in kernels[label]:
                    _prefer(kern, dev, c)
                occ.append(f"{label}@c{c}:" + "/".join(
                    str(kern._max_active(t, sh, dev)) for kern, t, sh in kernels[label]))
            for kern, _, _ in kernels[label]:
                kern._set_carveout(dev, -1)
    med = {p: sorted(v)[passes // 2] for p, v in times.items()}
    # The gaps are to compile, else to the first of ours.
    ref = provs[0]
    base = med[ref]
    print(f"| {cell} | {ref[0]}@c{ref[1]} {base:.2f} | " + " | ".join(
        f"{lab}@c{c} {med[(lab, c)]:.2f} ({med[(lab, c)] - base:+.2f})"
        for lab, c in provs[1:]) + " |", flush=True)
    print(f"| {cell} | kernels | " + " | ".join(
        f"{lab}: {','.join(k.name for k, _, _ in kernels[lab])}" for lab in tunes)
        + f" | blocks/SM {' '.join(occ)} |", flush=True)
    del x
    torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS),
                    help="comma-separated dtype-op-N cells, or 'all': every dtype, op and "
                         "issue #16 N from 512 to 16384")
    ap.add_argument("--no-compile", action="store_true",
                    help="ours alone (gaps to the first variant)")
    ap.add_argument("--carveouts", default="-1,5,7",
                    help="percents, -1 (none) or ship (the launcher's own preference)")
    ap.add_argument("--tunes", default=json.dumps(TUNES),
                    help="JSON: label -> layer_norm.tuning overrides (lists for tuples)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    carveouts = [c if c == "ship" else int(c) for c in args.carveouts.split(",")]
    tunes = {label: {k: tuple(v) if isinstance(v, list) else v for k, v in tune.items()}
             for label, tune in json.loads(args.tunes).items()}
    print(f"GPU: {torch.cuda.get_device_name(0)}; carveouts {carveouts} (percent of the "
          f"SM's shared memory; -1 none); tunes {tunes}")
    cells = (ALL_CELLS if args.cells == "all" else args.cells.split(","))
    for cell in cells:
        run_cell(cell, tunes, carveouts, args.passes, args.reps, not args.no_compile)


if __name__ == "__main__":
    main()
