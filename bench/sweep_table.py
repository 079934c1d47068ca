"""Issue #16's sweep tables: one row per (op or activation, pass, dtype), one column per N.

    python3 bench/sweep_table.py norms bench/results/norms_sweep_h100_v11.json
    python3 bench/sweep_table.py dropout bench/results/dropout_sweep_h100_v5.json

Each cell: ours at array level (ms), then the best baseline's time over ours and
which baseline it was (e torch eager, c torch.compile, L Liger); **bold** where ours
is slower (also where the ratio rounds to 1.00). A cell whose own 20th and 80th
percentiles differ by more than 2x is marked ``!`` (a disturbed measurement: its
median is not the kernel's time). The last line counts the cells where ours is
slower, and those within 0.5% (the ratio rounds to 1.00).
Norms forward cells with a ``numba_infer`` row (ours with ``stats=False``, y alone)
hold torch.compile to it: the sweep times every torch-side forward under no_grad,
where inductor's kernel writes y alone; eager and Liger write their statistics there
and are held to ``numba`` (with them). The cell's time is still ``numba``'s.
Reads the JSON that ``bench/layer_norm.py --json`` / ``bench/dropout.py --json`` write.
"""

import argparse
import collections
import json

LETTER = {"torch": "e", "eager": "e", "compile": "c", "liger": "L"}
# Baselines whose forward writes y alone, and our provider that does the same.
INFER = {"compile": "numba_infer"}
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def _norm_rows(results):
    """{(row label, N): {provider: result}} from bench/layer_norm.py's results."""
    cells = collections.defaultdict(dict)
    for r in results:
        if "median_ms" not in r:
            continue
        op = {"layer_norm": "LN", "rms_norm": "RMS"}[r["op"]]
        label = f"{op} {r['dir']} {DTYPE_SHORT[r['dtype']]}"
        cells[(label, r["N"])][r["provider"]] = r
    return cells


def _dropout_rows(results):
    """The same from bench/dropout.py's results (timing rows only)."""
    cells = collections.defaultdict(dict)
    for r in results:
        if r.get("kind") != "timing" or "median_ms" not in r:
            continue
        n = int(r["shape"].split("x")[-1])
        label = f"{r['activation']} {r['direction']} {DTYPE_SHORT[r['dtype']]}"
        cells[(label, n)][r["provider"]] = r
    return cells


def table(results, kind):
    """(markdown lines, cells where ours is slower, cells within 0.5%, cells compared)."""
    cells = (_norm_rows if kind == "norms" else _dropout_rows)(results)
    labels = list(dict.fromkeys(label for label, _ in cells))
    ns = sorted({n for _, n in cells})
    lines = ["| op, pass, dtype | " + " | ".join(str(n) for n in ns) + " |",
             "|---|" + "---|" * len(ns)]
    lost = ties = compared = 0
    for label in labels:
        row = []
        for n in ns:
            by = cells.get((label, n), {})
            ours = by.get("numba")
            base = {p: r["median_ms"] for p, r in by.items() if p in LETTER}
            if ours is None or not base:
                row.append("-")
                continue
            # Like for like: each baseline against ours doing the same writes.
            mine = {p: (by[INFER[p]] if INFER.get(p) in by else ours)["median_ms"] for p in base}
            best = min(base, key=lambda p: base[p] / mine[p])
            ratio = base[best] / mine[best]
            compared += 1
            slower = round(ratio, 2) <= 1.0
            lost += ratio < 1.0
            ties += slower and ratio >= 1.0
            text = f"**{ratio:.2f}**" if slower else f"{ratio:.2f}"
            noisy = ours["p80_ms"] > 2 * ours["p20_ms"]
            row.append(f"{ours['median_ms']:.3f}{'!' if noisy else ''} {text}{LETTER[best]}")
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return lines, lost, ties, compared


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["norms", "dropout"])
    ap.add_argument("json")
    args = ap.parse_args(argv)
    with open(args.json) as f:
        results = json.load(f)
    lines, lost, ties, compared = table(results, args.kind)
    print("\n".join(lines))
    print(f"\nours slower in {lost} of {compared} cells, within 0.5% in {ties} more")
    return lost, ties, compared


if __name__ == "__main__":
    main()
