"""Does a tree repeat its own float32 RMSNorm backward bits? Four deterministic
backward calls a row length on the inputs of ``bits_dump.py`` (same seeds), each
call's dx / dW digest (first 12 hex digits) and dW's error against float64.

    python3 bench/ab/dw_repeat.py TAG        # in each tree; TAG labels the lines

Written when v35 / v36's digests differed only in float32 RMSNorm dW at N = 512-1024
(thirty-fifth session): equal digests within a tree and differing across trees mean
a changed summation grouping, not a race.
"""

import sys

import torch

from bits_dump import digest, inputs  # this folder (the script's, first on sys.path)

NS = (512, 768, 1024, 2048)
CALLS = 4


def main(tag):
    from numba_fused import layer_norm as ln

    for n in NS:
        x, w, _, dy = inputs(n, torch.float32)
        _, rstd = ln.rms_norm_forward(x, w, 1e-6)
        outs = []
        for _ in range(CALLS):
            dx, dw = ln.rms_norm_backward(dy, x, w, rstd, deterministic=True)
            outs.append((digest(dx)[:12], digest(dw)[:12]))
        ref = (x.double() * rstd.double()[:, None] * dy.double()).sum(0)
        err = float((dw.double() - ref).abs().max() / ref.abs().max())
        print(tag, n, outs, "maxrel", err, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tree"))
