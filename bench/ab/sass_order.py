"""The order of a kernel's global loads and the instructions that use them, read in
its sm_90 SASS (ptxas + nvdisasm, no GPU: numba-fused[ci]), as one letter an
instruction, for every kernel of ``registry.all_kernels()`` whose name contains all
``--match`` strings; with ``--bounds T`` also as ptxas compiles it given a register
budget: at most T threads a block and one block an SM (``.maxntid`` and
``.minnctapersm``, what ``launch_bounds=(T, 1)`` writes; either alone leaves ptxas to
pick its own, lower, register count).

    python3 bench/ab/sass_order.py --match linear_fwd_bfloat16_skinny_g1_w8_u2_t1 --bounds 256

Letters: L global load (LDG), C cp.async (LDGSTS), S global store, H HMMA, W HGMMA,
l / s shared load / store, f shuffle, B barrier, > branch, | label. How the
eighty-second session found the few-row kernel's loads sunk below its MMAs
(bench/NOTES.md, v1c).
"""

import argparse
import re
import sys

_LETTERS = (("LDGSTS", "C"), ("LDG", "L"), ("STG", "S"), ("HMMA", "H"), ("HGMMA", "W"),
            ("LDS", "l"), ("STS", "s"), ("SHFL", "f"), ("BAR", "B"), ("BRA", ">"))
_OP = re.compile(r"\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def letters(text):
    """The SASS ``text`` as one letter per instruction of interest (see the module)."""
    out = []
    for line in text.splitlines():
        if line.startswith(".L_x"):
            out.append("|")
            continue
        m = _OP.search(line)
        if m:
            # The first key that matches (LDGSTS before LDG).
            out.append(next((ch for key, ch in _LETTERS if m.group(1).startswith(key)), ""))
    return "".join(out)


def with_bounds(ptx, threads):
    """``ptx`` with ``.maxntid threads, 1, 1`` and ``.minnctapersm 1`` on its (single)
    entry."""
    head = ptx.index(".visible .entry")
    end = ptx.index(")", head)
    return f"{ptx[:end + 1]}\n.maxntid {threads}, 1, 1\n.minnctapersm 1\n{ptx[end + 1:]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--match", action="append", default=[], help="name substring (all must match)")
    ap.add_argument("--bounds", type=int, default=0, help="also compile with .maxntid BOUNDS")
    ap.add_argument("--most", type=int, default=4, help="at most this many kernels")
    ap.add_argument("--width", type=int, default=200, help="letters shown per line")
    args = ap.parse_args(argv)
    from numba_fused import registry
    from numba_fused.registry import offline_compile, ptxas_report, sass

    shown = 0
    for kernel in registry.all_kernels():
        if shown >= args.most or not all(m in kernel.name for m in args.match):
            continue
        with offline_compile():
            ptx = kernel.ptx()
        forms = [("as shipped", ptx)]
        if args.bounds and ".maxntid" not in ptx:
            forms.append((f"bounds {args.bounds}, 1", with_bounds(ptx, args.bounds)))
        print(kernel.name, kernel.jit_options or "")
        for label, text in forms:
            regs = ptxas_report(text)["registers"]
            print(f"  {label:>14} ({regs} registers): {letters(sass(text))[:args.width]}")
        shown += 1
    if not shown:
        print("no kernel matches", args.match, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
