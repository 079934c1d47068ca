"""Which shared-memory configuration the driver gives a plain forward kernel at each
carveout preference (issue #16, sixty-second session): run under ncu,

    ncu --section LaunchStats -k regex:norm_fwd python3 bench/ab/carveout_cfg.py [P,P,... [R]]

launches float32 RMSNorm 16384 x 4096's plain kernel once as the launcher leaves it,
then once per preference (``PERCENTS`` or the argument; -1: none), in that order, so
ncu's "Shared Memory Configuration Size" of launch i + 1 is preference i's (with R,
each preference launches R times in a row). Why: ncu
read v56's kernel (preference 7 %, meant as 16 KB of 228) at a 167.94 KB configuration.
Found (H200, sixty-second session): none and 0 -> 8 KB, 1 -> 32, 2-3 -> 64, 4 -> 100,
5-6 -> 132, 7-8 -> 164, 9 -> 196, 10 and up -> 228 (233.47 KB as ncu prints it).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from bench.ab.carveout_ab import _picked  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402

PERCENTS = (-1, 0, 3, 7, 14, 28, 50, 100)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    percents = tuple(int(p) for p in args[0].split(",")) if args else PERCENTS
    # A second argument: launches a preference, back to back (for ncu with
    # --cache-control none: the caches as the previous launch left them).
    repeat = int(args[1]) if len(args) > 1 else 1
    x = torch.randn(16384, 4096, device="cuda")
    w = torch.rand(4096, device="cuda") + 0.5
    kern = _picked(lambda: ln.rms_norm_forward(x, w, 1e-6, stats=False), ())[0][0]
    torch.cuda.synchronize()
    for pct in percents:
        kern._set_carveout(x.device.index, pct)
        for _ in range(repeat):
            ln.rms_norm_forward(x, w, 1e-6, stats=False)
        torch.cuda.synchronize()
        print(f"launch{'es' if repeat > 1 else ''} with preference {pct} ({repeat}): "
              f"{kern.name}", flush=True)


if __name__ == "__main__":
    main()
