"""Whether where x lies in memory moves the float32 norms forwards' gap to
torch.compile (issue #16, written in the sixtieth session, not yet run).

    python3 bench/ab/placement.py [--cells rms4096,rms2048,ln4096] [--passes 3] [--reps 30]

Why. The sixtieth session compiled a Triton kernel of inductor's shape for float32
RMSNorm offline (``bench/ab/rms_triton_offline.py``: a row a program; at N = 4096
and 16 warps): its memory instructions are ours at that layout (two LDG.128 of x,
two of w, the latter with .EL, two STG.128), its block reduction takes two barriers
against our one, yet torch.compile reads 2-4 us faster in every sweep. One
thing the sweep does not hold equal is placement: y comes from the caching allocator
for each provider, x from the setup, and which DRAM channels a row's read and the
same row's write meet depends on where the two lie. Here x is a view at a byte
offset into one larger buffer (``off`` below: 0 up to 2 MiB and one odd 16-byte
multiple), so x's phase against y changes while the bytes moved do not; ours
(``stats=False``) and torch.compile are timed alternately at each offset, back to
back as the sweep times them (bench.common.time_cuda). If the gap follows the
offset, the sweep's float32 gaps are placement; if it holds at every offset, they
are the kernels'. Each output is checked against float64 once per cell.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.common import time_cuda  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402

# cell -> (op, N); float32, M = 2^26 / N.
CELLS = {"rms4096": ("rms", 4096), "rms2048": ("rms", 2048), "ln4096": ("ln", 4096),
         "rms12288": ("rms", 12288)}
# Byte offsets of x into its buffer (multiples of 16: the kernels' 16-byte groups).
OFFSETS = (0, 4096, 65536, 2**20, 2**21 - 4096, 16 * 12345)


def _ours(op, n):
    if op == "rms":
        return lambda x, w, b: ln.rms_norm_forward(x, w, 1e-6, stats=False)[0]
    return lambda x, w, b: ln.layer_norm_forward(x, w, b, 1e-5, stats=False)[0]


def _compiled(op, n, dynamic=None):
    """torch.compile of the op (``dynamic`` as torch.compile's; None its default)."""
    if op == "rms":
        return torch.compile(lambda x, w, b: F.rms_norm(x, (n,), w, 1e-6), dynamic=dynamic)
    return torch.compile(lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5), dynamic=dynamic)


def _ref(op, n, x, w, b):
    xd = x.double()
    if op == "rms":
        return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    return F.layer_norm(xd, (n,), w.double(), b.double(), 1e-5)


def run_cell(name, passes, reps):
    op, n = CELLS[name]
    m = 2**26 // n
    numel = m * n
    g = torch.Generator(device="cuda").manual_seed(n)
    buf = torch.empty(numel + max(OFFSETS) // 4, device="cuda", dtype=torch.float32)
    buf.normal_(generator=g)
    w = torch.rand(n, device="cuda", generator=g) + 0.5
    b = torch.randn(n, device="cuda", generator=g)
    provs = {"ours": _ours(op, n), "compile": _compiled(op, n)}
    with torch.no_grad():
        x0 = buf[:numel].view(m, n)
        want = _ref(op, n, x0[:256], w, b)
        for prov, fn in provs.items():
            got = fn(x0, w, b)[:256].double()
            err = ((got - want).norm() / want.norm()).item()
            print(f"| {name} | {prov} | check {err:.2e} {'ok' if err < 1e-5 else 'FAIL'} |",
                  flush=True)
        times = {(off, p): [] for off in OFFSETS for p in provs}
        for k in range(passes):
            for off in (OFFSETS if k % 2 == 0 else OFFSETS[::-1]):
                x = buf[off // 4:off // 4 + numel].view(m, n)
                for prov in (provs if k % 2 == 0 else list(provs)[::-1]):
                    t = time_cuda(provs[prov], [(x, w, b)], reps=reps, warmup=5)
                    times[(off, prov)].append(t["median_ms"] * 1e3)
        for off in OFFSETS:
            ours, comp = times[(off, "ours")], times[(off, "compile")]
            mid = sorted(ours)[passes // 2] - sorted(comp)[passes // 2]
            print(f"| {name} | x at +{off} B | ours {', '.join(f'{v:.1f}' for v in ours)} | "
                  f"compile {', '.join(f'{v:.1f}' for v in comp)} | median gap {mid:+.2f} |",
                  flush=True)
    del buf
    torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    for name in args.cells.split(","):
        run_cell(name, args.passes, args.reps)


if __name__ == "__main__":
    main()
