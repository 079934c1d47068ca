"""RESULTS.md's "Through interop.torch" table from interop_s27.sh's two JSON files.

    python3 bench/ab/interop_table.py DROPOUT_JSON NORMS_JSON

One row per (op, pass, dtype, shape): the array-level median (``numba``), the
``interop.torch`` median (``numba_torch``) with its share of copy bandwidth, torch
eager's and torch.compile's; a baseline faster than ``interop.torch`` is marked
"(behind)". Rows whose providers' outputs failed their check are marked too.
"""

import json
import sys

_NORM_NAMES = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def _dropout_rows(path):
    rows = {}
    for r in json.load(open(path)):
        if r.get("kind") != "timing":
            continue
        key = (r["op"], r["direction"], r["dtype"], r["shape"])
        rows.setdefault(key, {})[r["provider"]] = (r["median_ms"], r["pct_copy_bw"], r["check"])
    return rows


def _norm_rows(path):
    rows = {}
    for r in json.load(open(path)):
        key = (_NORM_NAMES[r["op"]], r["dir"], r["dtype"], f"{r['M']}x{r['N']}")
        prov = {"torch": "eager"}.get(r["provider"], r["provider"])
        rows.setdefault(key, {})[prov] = (r["median_ms"], r["%copy"], r["check"])
    return rows


def table(dropout_json, norms_json):
    lines = ["| op, pass, dtype, M x N | array level ms | `interop.torch` ms (% of copy) "
             "| torch eager | torch.compile |", "|---|---|---|---|---|"]
    for rows in (_dropout_rows(dropout_json), _norm_rows(norms_json)):
        for (op, d, dt, shape), p in rows.items():
            ours = p["numba_torch"][0]
            cells = [f"{p['numba'][0]:.4f}", f"{ours:.4f} ({p['numba_torch'][1]:.0f}%)"]
            for base in ("eager", "compile"):
                t = p[base][0]
                cells.append(f"{t:.4f}" + (" (behind)" if t < ours else ""))
            bad = [k for k, v in p.items() if v[2] != "ok"]
            note = f" check failed: {', '.join(bad)}" if bad else ""
            lines.append(f"| {op} {d} {_DTYPES[dt]} {shape}{note} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1], sys.argv[2]))
