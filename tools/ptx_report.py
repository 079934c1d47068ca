"""Compile every shipped kernel specialisation to PTX for sm_90 and report ptxas's
registers, spills, stack and static shared memory per kernel (no GPU needed).

    python tools/ptx_report.py [--ops dropout layer_norm ...] [--match REGEX] [--markdown FILE]
                               [--digest FILE] [--against FILE]

--match keeps the kernels whose name matches REGEX (re.search). The last column is
the host seconds numba + NVVM + ptxas took for the kernel: what a user's first call
of that specialisation waits.

--digest FILE writes each kernel's PTX md5 (JSON, name -> digest); --against FILE
compares this tree's digests with such a file and lists the kernels whose PTX
changed, appeared or went. A refactor that leaves every digest equal changed no
kernel, so it needs no device time to re-measure: write the digests before the
change, then run with --against after it (same --ops / --match).

Exits non-zero if any kernel spills or fails to compile, or, with --against, if any
PTX differs.
"""

import argparse
import hashlib
import json
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
    ap.add_argument("--digest", default=None, help="write name -> PTX md5 (JSON)")
    ap.add_argument("--against", default=None, help="compare with a --digest file")
    args = ap.parse_args(argv)
    digests = {}
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
                    ptx = k.ptx()
                    # A kernel listed twice (one specialisation reached by two
                    # tunings) keeps both entries, in listing order.
                    key, i = k.name, 1
                    while key in digests:
                        i += 1
                        key = f"{k.name}#{i}"
                    digests[key] = ptx_digest(ptx)
                    rep = registry.ptxas_report(ptx)
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
    if args.digest:
        with open(args.digest, "w") as f:
            json.dump(digests, f, indent=1, sort_keys=True)
    if args.against:
        with open(args.against) as f:
            before = json.load(f)
        changed = compare_digests(before, digests)
        print("\n".join(changed) if changed else f"PTX unchanged: {len(digests)} kernels")
        bad += len(changed)
    return 1 if bad else 0


_NUMBA_ENV = re.compile(r"^\.common \.global .*NumbaEnv.*$\n?", re.M)
_MANGLED = re.compile(r"_Z[A-Za-z0-9_$]+")
_SMEM = re.compile(r"_cudapy_smem_\d+")


def ptx_digest(ptx):
    """md5 of ``ptx`` with what varies between processes and unrelated edits taken
    out: numba's environment-pointer declarations (emitted in set order, unused by
    the kernels), its mangled names, whose unique-id parts count the functions
    defined before them, and its shared arrays' symbols, numbered by a counter over
    every kernel compiled before (so dropping one kernel renumbers the rest's); each
    name becomes its order of first use."""
    body = _renumber(_MANGLED, "_Z", _NUMBA_ENV.sub("", ptx))
    body = _renumber(_SMEM, "_cudapy_smem_", body)
    return hashlib.md5(body.encode()).hexdigest()


def _renumber(pattern, tag, text):
    """``text`` with each distinct match of ``pattern`` named ``tag`` + its order of
    first use."""
    seen = {}
    return pattern.sub(lambda m: seen.setdefault(m.group(0), f"{tag}{len(seen)}"), text)


def compare_digests(before, after):
    """Lines naming each kernel whose PTX digest differs between two name -> digest
    maps, or that only one of them has."""
    out = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a != b:
            what = "new" if a is None else "gone" if b is None else "changed"
            out.append(f"PTX {what}: {name}")
    return out


if __name__ == "__main__":
    sys.exit(main())
