"""SASS digests of the wgmma kernels (no GPU): every ``linear_act.WG_*`` tiling x
role x 16-bit dtype x pair form that builds, compiled offline for sm_90a; with
``--against`` the kernels whose SASS changed, appeared or went.

    python bench/ab/wg_digest.py OUT.json [--match REGEX] [--against BASE.json] [--jobs N]

Each tiling's kernels compile in a process of their own, in a fixed order (see
``_digests``). A kernel-side refactor that leaves a tiling's digests equal changed nothing the GPU
verified on it. (tools/ptx_report.py does the same by PTX for the shipped kernels
the registry lists; most wgmma tilings are opt-in and not listed there.) Exits 1
if any digest differs from BASE's, 2 if nvdisasm is missing.
"""

import argparse
import hashlib
import json
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _tilings(match):
    from numba_fused import linear_act as la

    return sorted(name for name, v in vars(la).items()
                  if isinstance(v, la.WgmmaConfig) and name.startswith("WG_")
                  and (match is None or re.search(match, name)))


def _digests(name):
    """``[(key, digest)]`` of tiling ``name``'s kernels, compiled in a fixed order in
    this (fresh) process: the SASS of kernels that share a device function (the epi
    >= 1 switch) can depend on what the process compiled before, so each tiling gets
    a process of its own and the same history in every run."""
    from numba_fused import linear_act as la

    return [d for d in (_digest(name, role, dtype, pair) for role in la.ROLES
                        for dtype in ("float16", "bfloat16") for pair in (False, True))
            if d is not None]


def _digest(name, role, dtype, pair):
    from numba_fused import linear_act as la
    from numba_fused.registry import offline_compile, sass

    cfg = getattr(la, name)
    try:
        with offline_compile((9, 0, "a")):
            ptx = la.make_wgmma_kernel(role, dtype, cfg, pair).ptx(cc=(9, 0, "a"))
    except ValueError:
        return None
    # The instructions only, with their addresses and the symbols they name (numba's
    # mangled names count the functions a process compiled before) taken out, as the
    # data section's symbol table: they change with nothing the GPU runs.
    lines = (re.sub(r"`\([^)]*\)", "`(sym)", re.sub(r"/\*[0-9a-f]{4,}\*/", "", ln)).strip()
             for ln in sass(ptx, arch="sm_90a").splitlines()
             if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))
    body = "\n".join(ln for ln in lines if not ln.startswith("."))
    return f"{name}:{role}:{dtype}:{int(pair)}", hashlib.md5(body.encode()).hexdigest()


def main(argv=None):
    from numba_fused.registry import find_nvdisasm

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--match")
    p.add_argument("--against")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    if not find_nvdisasm():
        print("no nvdisasm (pip install numba-fused[ci])", file=sys.stderr)
        return 2
    with ProcessPoolExecutor(args.jobs, max_tasks_per_child=1) as ex:
        digests = dict(d for ds in ex.map(_digests, _tilings(args.match)) for d in ds)
    with open(args.out, "w") as fh:
        json.dump(digests, fh, indent=0, sort_keys=True)
    print(f"{len(digests)} kernels")
    if not args.against:
        return 0
    with open(args.against) as fh:
        base = json.load(fh)
    changed = sorted(k for k in digests.keys() & base.keys() if digests[k] != base[k])
    new, gone = sorted(digests.keys() - base.keys()), sorted(base.keys() - digests.keys())
    for label, keys in (("changed", changed), ("new", new), ("gone", gone)):
        print(f"{label}: {len(keys)}")
        for k in keys:
            print(f"  {k}")
    return 1 if changed or gone else 0


if __name__ == "__main__":
    sys.exit(main())
