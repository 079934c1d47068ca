"""What the norms forwards' statistics cost, and whether storing them a block's rows
at a time takes that cost away (issue #16, sixty-fifth session: v62 candidate).

    python3 bench/ab/stats_block.py [--cells f32-ln-512,...|all] [--passes 3] [--reps 30]

Why. In the sixty-third session's sweep (``bench/results/s63/norms_s63.json``) our
forward writing the statistics (``numba``) ran 1.6-2.3 us slower than the same forward
without them (``numba_infer``) at N = 512-1024, every dtype (LayerNorm float32 512
131.9 / 129.7, fp16 69.9 / 67.7; RMSNorm float32 512 130.5 / 129.5), fading with the
row count (N = 4096: 0.1-0.4). The bytes do not explain it: LayerNorm's mean and rstd
at N = 512 float32 are 1 MiB on 512 (0.26 us at the copy's 4.25 TB/s; RMSNorm half of
that), so each 32-byte sector of statistics costs ~60-100 ps, 8-13x its share of the
bandwidth. Each row's thread 0 stores 4 bytes on its own, so every sector reaches L2
as eight partial writes from eight blocks. Hypothesis: partial-sector writes are what
costs (merged late, or read-modify-written in DRAM). Predicted: stored a block's rows
at a time through shared memory (``fwd_plain_stats_block``, ``_sb``; one coalesced
store an array a block, whole sectors at eight rows a block or more), the forward
with statistics runs within 0.5 us of the same layout without them; stored row by
row at the same layout it keeps the 1.5-2.3 us.

Each cell times, alternating, every output checked first (y against float64; mean /
rstd of the ``_sb`` kernel bit for bit against the same layout's row-by-row kernel):
``ship`` / ``ship_ns`` (the launcher's own kernel with / without the statistics),
``ship_row`` (with them, under tuning fwd_plain_stats_block False: the layout and
row-by-row store shipped before v62's rows, _PLAIN_STATS_BLOCK, sixty-eighth session),
then for each layout (words, rows a block) of the cell's list ``L`` (row by row),
``L_ns`` (without statistics) and ``L_sb`` (a block's rows at a time); ``ship_sb``
where the launcher's layout takes two to four rows a block (half sectors or less a
block: between the two if the hypothesis holds); at the cells
of ``BOUNDS``, ``ship_lb``: the launcher's kernel with statistics under launch bounds
for the blocks an SM its ``_nostats`` form reaches (the RMSNorm kernel writing rstd
takes 4-8 registers more; predicted: within 0.3 us of ``ship_ns`` at 16-bit N =
8192 if occupancy is that cell's gap, no nearer than ``ship`` if not).
``stats_block_ncu.sh`` reads the DRAM and L2 sectors behind the same comparison."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.ab.carveout_ab import DTYPES, _picked  # noqa: E402
from bench.ab.offgrid_plain import alternating_medians, report_kernels  # noqa: E402
from bench.ab.placement import _ref  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402

# cell -> plain layouts (words, rows a block) of eight rows a block or more, blocks of
# 256 or 512 threads (the shipped layouts there take one to four rows a block).
CELLS = {
    "f32-ln-512": [(4, 8), (2, 8)], "f32-rms-512": [(4, 8), (2, 8)],
    "f32-ln-768": [(6, 8), (3, 8)], "f32-ln-1024": [(8, 8), (4, 8)],
    "f16-ln-512": [(4, 16), (2, 8)], "f16-rms-512": [(4, 16), (2, 8)],
    "f16-ln-768": [(3, 8), (6, 16)], "f16-ln-1024": [(4, 8), (2, 8)],
    "f16-rms-8192": [], "bf16-rms-8192": [], "f32-rms-1024": [],
    # Sixty-eighth session: bfloat16 at one of v62's rows (16-bit LayerNorm 512).
    "bf16-ln-512": [(2, 8)],
    # Sixty-sixth session: N = 896 (Qwen2's width, off the sweep), where v61's plain
    # layouts (seven words; 16-bit LayerNorm 16-thread rows eight a block, float32 warp
    # rows four a block) run the training forward 1-4 us behind torch.compile's y alone.
    "f16-ln-896": [], "bf16-ln-896": [], "f32-ln-896": [(7, 8)], "f32-rms-896": [(7, 8)],
}
# cell -> launch bounds (blocks an SM) giving the RMSNorm kernel with rstd the blocks
# its _nostats form has (ptxas: 36-40 registers -> 32, no spills): provider
# ``ship_lb``. At 16-bit N = 8192 (8192 rows: 32 KB of rstd) the statistics' bytes
# are nothing, yet ``numba`` ran 1.1 / 1.8 us behind ``numba_infer``.
# (N = 512's left in the sixty-eighth session: v62's rows take 256 / 512 threads a
# block there, which 16 blocks an SM would not fit.)
BOUNDS = {"f32-rms-1024": 16, "f16-rms-8192": 4, "bf16-rms-8192": 4}


def _fwd(op, tune, stats):
    """Our forward of ``op`` under tuning ``tune``: (y, mean or None, rstd or None)."""
    def fwd(x, w, b):
        with ln.tuning(**tune):
            if op == "rms":
                y, rstd = ln.rms_norm_forward(x, w, 1e-6, stats=stats)
                return y, None, rstd
            return ln.layer_norm_forward(x, w, b, 1e-5, stats=stats)
    return fwd


def providers(layouts, bounds=None, ship_rows=1):
    """label -> (tuning overrides, stats) of a cell's providers (``ship_rows``: rows
    a block of the launcher's own plain layout, 0 where it runs another kernel)."""
    provs = {"ship": ({}, True), "ship_ns": ({}, False),
             "ship_row": ({"fwd_plain_stats_block": False}, True)}
    if ship_rows >= 2:
        provs["ship_sb"] = ({"fwd_plain": True, "fwd_plain_stats_block": True}, True)
    if bounds:
        provs["ship_lb"] = ({"fwd_plain": True, "fwd_plain_min_blocks": bounds}, True)
    for words, rpb in layouts:
        lay = {"fwd_plain": True, "fwd_plain_layout": (words, rpb)}
        provs[f"p{words}x{rpb}"] = (lay, True)
        provs[f"p{words}x{rpb}_ns"] = (lay, False)
        provs[f"p{words}x{rpb}_sb"] = ({**lay, "fwd_plain_stats_block": True}, True)
    return provs


def run_cell(cell, passes, reps, rows=None):
    dt, op, n = cell.split("-")
    n = int(n)
    dtype = DTYPES[dt]
    m = rows or 2**26 // n
    g = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    w = (torch.rand(n, device="cuda", generator=g) + 0.5).to(dtype)
    b = torch.randn(n, device="cuda", generator=g).to(dtype)
    fns, names, outs, bad = {}, {}, {}, []
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    want = _ref(op, n, x[-256:], w, b)
    name = str(dtype).removeprefix("torch.")
    vec = 16 // x.element_size()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lay = (ln._plain_layout(n, vec, op == "rms", name, True)
           if ln._fwd_plain(name, op == "rms", n // vec, vec, m, sms, True) else None)
    provs = providers(CELLS[cell], BOUNDS.get(cell), lay[2] if lay else 0)
    for label, (tune, stats) in provs.items():
        full = _fwd(op, tune, stats)
        fns[label] = (lambda f: lambda x, w, b: f(x, w, b)[0])(full)
        names[label] = ",".join(k.name for k, _, _ in _picked(full, (x, w, b)))
        outs[label] = full(x, w, b)
        got = outs[label][0][-256:].double()
        err = ((got - want).norm() / want.norm()).item()
        if not err < tol:
            bad.append(f"{label} y {err:.2e}")
        if label.endswith("_sb"):
            held = outs[label[:-3]]
            for i in (1, 2):
                if (held[i] is None) != (outs[label][i] is None) or (
                        held[i] is not None and not torch.equal(held[i], outs[label][i])):
                    bad.append(f"{label} stats[{i}] differ from {label[:-3]}'s")
        outs[label] = (None, *outs[label][1:])  # y's memory back; the statistics kept
    med = alternating_medians(fns, (x, w, b), passes, reps)
    gaps = [f"{p} {med[p] - med['ship_ns']:+.2f}" for p in ("ship", "ship_row", "ship_sb", "ship_lb")
            if p in med] + [
        f"{p[:-3]} row {med[p[:-3]] - med[p[:-3] + '_ns']:+.2f} block "
        f"{med[p] - med[p[:-3] + '_ns']:+.2f}" for p in med
        if p.endswith("_sb") and p != "ship_sb"]
    print(f"| {cell} | m {m} | " + " | ".join(f"{p} {t:.2f}" for p, t in med.items())
          + f" | stats cost: {'; '.join(gaps)} | "
          + ("FAIL " + "; ".join(bad) if bad else "checks ok") + " |", flush=True)
    del x
    report_kernels(cell, names)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="all")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rows", type=int, default=None,
                    help="rows a cell (default 2^26 / N): a quick check of the script")
    args = ap.parse_args(argv)
    print(f"GPU: {torch.cuda.get_device_name(0)}", flush=True)
    cells = list(CELLS) if args.cells == "all" else args.cells.split(",")
    for cell in cells:
        run_cell(cell, args.passes, args.reps, args.rows)


if __name__ == "__main__":
    main()
