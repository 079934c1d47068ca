"""Instruction mix of the innermost loop that loads 16 bytes and shuffles (a norm
kernel's row loop) in nvdisasm SASS files.

    python3 bench/ab/sass_mix.py FILE.sass [FILE.sass ...]

For each file: the loop's instruction count and its mix by class (float, integer and
control, memory, sync) and by opcode, to set two kernels' row loops side by side
(bench/notes_layer_norm.md, "SASS of the 16-bit row backward").
"""

import collections
import re
import sys

_INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)")
_FLOAT = {"FFMA", "FADD", "FMUL", "HADD2", "HFMA2", "HMUL2", "F2FP", "FSEL", "MUFU", "F2F",
          "FMNMX", "FSETP"}
_MEMORY = {"LDG", "STG", "LDS", "STS", "LD", "ST", "LDSM"}
_SYNC = {"SHFL", "BAR", "WARPSYNC", "BSSY", "BSYNC", "REDUX"}


def _loops(lines):
    """(start, end) line indices of every backward branch's loop body."""
    labels = {}
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = i
    for i, line in enumerate(lines):
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i:
            yield labels[m.group(1)], i


def row_loop_mix(text):
    """(count, by class, by opcode) of the innermost loop with a 128-bit global load
    and a shuffle; None when there is none."""
    lines = text.splitlines()
    best = None
    for start, end in _loops(lines):
        body = lines[start:end + 1]
        if any(".128" in b and ("LDG" in b or "LD.E" in b) for b in body) and \
                any("SHFL" in b for b in body):
            ops = [m.group(3).split(".")[0] for m in map(_INSTR.match, body) if m]
            if best is None or len(ops) < len(best):
                best = ops
    if best is None:
        return None
    classes = collections.Counter(
        "float" if op in _FLOAT else "memory" if op in _MEMORY else
        "sync" if op in _SYNC else "integer/control" for op in best)
    return len(best), classes, collections.Counter(best)


def main(argv):
    for path in argv:
        with open(path) as f:
            mix = row_loop_mix(f.read())
        if mix is None:
            print(f"{path}: no row loop found")
            continue
        n, classes, ops = mix
        mix = ", ".join(f"{k} {v}" for k, v in classes.most_common())
        print(f"{path}: {n} instructions; {mix}")
        print("  " + ", ".join(f"{k} {v}" for k, v in ops.most_common(24)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
