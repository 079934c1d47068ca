"""ptxas registers / spills and static SASS counts (SHFL, LDS, STS, BAR, all
instructions) of the shipped LayerNorm kernels whose names contain every ``--match``
string, compiled for sm_90 on this machine (no GPU needed: numba-fused[ci]'s
ptxas and nvdisasm).

    python3 bench/ab/ptxas_counts.py --match rms --match bwd --out A.json   # each tree
    python3 bench/ab/ptxas_counts.py --compare A.json B.json

The device's driver compiles the PTX itself, with its own ptxas: its register counts
(the launch reports of tune_layer_norm.py) can differ from these by a few.
"""

import argparse
import json
import re
import sys

_COUNTS = {"shfl": r"\bSHFL\.", "lds": r"\bLDS", "sts": r"\bSTS", "bar": r"\bBAR\.",
           "instr": r"/\*[0-9a-f]{4,}\*/"}


def dump(matches, path):
    from numba_fused import layer_norm as ln
    from numba_fused.registry import offline_compile, ptxas_report, sass

    out = {}
    with offline_compile():
        for k in ln.shipped_kernels():
            if not all(m in k.name for m in matches):
                continue
            ptx = k.ptx()
            r = ptxas_report(ptx)
            text = sass(ptx)
            r.update({key: len(re.findall(pat, text)) for key, pat in _COUNTS.items()})
            out[k.name] = r
            print(k.name, r, flush=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    return 0


def compare(a, b):
    with open(a) as f:
        da = json.load(f)
    with open(b) as f:
        db = json.load(f)
    keys = ("registers", "spill_stores") + tuple(_COUNTS)
    for name in sorted(set(da) & set(db)):
        x, y = da[name], db[name]
        print(f"{name:58s} " + " ".join(f"{k} {x[k]}->{y[k]}" for k in keys))
    for name in sorted(set(da) ^ set(db)):
        print(f"{name}: in one file only")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--match", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2)
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("--out or --compare")
    return dump(args.match, args.out)


if __name__ == "__main__":
    sys.exit(main())
