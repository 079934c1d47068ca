"""Compile every shipped kernel specialisation to PTX for sm_90 and report ptxas's
registers, spills, stack and static shared memory per kernel (no GPU needed).

    python tools/ptx_report.py [--ops dropout layer_norm ...] [--match REGEX] [--markdown FILE]

--match keeps the kernels whose name matches REGEX (re.search). The last column is
the host seconds numba + NVVM + ptxas took for the kernel: what a user's first call
of that specialisation waits.

Exits non-zero if any kernel spills or fails to compile.
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    from numba_fused import registry

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="+", default=list(registry.OP_MODULES))
    ap.add_argument("--match", default=None, help="regex on kernel names")
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args(argv)
    lines = ["| kernel | registers | spill st/ld (B) | stack (B) | static smem (B) | compile s |",
             "|---|---|---|---|---|---|"]
    bad = 0
    with registry.offline_compile():
        for op in args.ops:
            for k in registry.all_kernels((op,)):
                if args.match and not re.search(args.match, k.name):
                    continue
                t0 = time.perf_counter()
                try:
                    rep = registry.ptxas_report(k.ptx())
                except Exception as exc:
                    bad += 1
                    lines.append(f"| {k.name} | FAILED: {type(exc).__name__} | | | | |")
                    continue
                spill = rep["spill_stores"] + rep["spill_loads"]
                bad += spill > 0
                lines.append(f"| {k.name} | {rep['registers']} | {rep['spill_stores']}/"
                             f"{rep['spill_loads']} | {rep['stack']} | {rep['smem']} | "
                             f"{time.perf_counter() - t0:.1f} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
