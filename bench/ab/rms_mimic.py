"""A stand-alone numba kernel written after torch.compile's float32 RMSNorm 4096
forward, instruction for instruction as far as numba allows, timed against ours and
torch.compile (issue #16, sixty-first session; written after the device time, not yet
run).

    python3 bench/ab/rms_mimic.py [--rows 16384] [--passes 5] [--reps 30]

Why. The sixty-first session took every measurable difference between our plain
kernel and inductor's (layout, occupancy, L1 eviction hints, the row read again,
instruction count, the partials' order, y word by word) into the library kernel as
opt-in knobs (v53-v55): all of them together run 2.1-2.7 us behind torch.compile where
our default runs 0.8-0.9 behind. ncu: the same DRAM work, ours 90.5 % of DRAM peak in
steady state against 93 %. What the library kernel cannot shed is its own frame: six
array arguments (numba's array structs), 64-bit row arithmetic, one barrier and every
thread summing the warps' partials. This kernel has none of it: three raw float32
arrays, 32-bit offsets, inductor's two-barrier reduction (each warp's sum to shared
memory; the first 16 lanes of every warp read one partial each and finish with
shuffles; lane 0 stores the total; a second barrier; everyone reads it), inductor's
loads (x ``evict_last``, then x ``evict_first`` and w ``evict_last`` a half-row at a
time, each half stored before the next is read).

Predicted: if numba's code can reach inductor's rate, the mimic times within 0.3 us of
torch.compile; if it times like v53-v55 (+2 us), what holds ours back is in how numba's
kernels are built or launched, not in any kernel choice we have tried.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

N = 4096
THREADS = 512
WARPS = THREADS // 32
HALF = N // 2  # floats: a thread's two 16-byte groups sit HALF apart
EPS = np.float32(1e-6)
INV_N = np.float32(1.0 / N)


def mimic_source(l2=False):
    """(the mimic's Python function, its signature): y[r, :] = x[r, :] *
    rsqrt(sum(x[r, :]^2) / N + eps) * w, a row a block of 512 threads, float32 x, w, y
    raw 1-D arrays (row-major M x 4096). ``cuda.compile_ptx`` takes them on a machine
    without a GPU (its SASS against inductor's: ``bench/results/s61/pair_*``). ``l2``:
    each load also carries inductor's L2 cache policy (``evict_last`` beside the L1
    ``evict_last``, ``evict_first`` beside ``evict_first``), the one part of its PTX
    the first mimic lacked (sixty-third session, ``inductor_ptx_edit.py``)."""
    from numba import cuda, float32, int32, void

    from numba_fused.intrinsics import f32_as_u32, u32_as_f32
    from numba_fused.tensor_core import ld_global_v4_evict, st_global_v4

    ld_last = ld_global_v4_evict("last+L2last" if l2 else "last")
    ld_first = ld_global_v4_evict("first+L2first" if l2 else "first")

    def rms_mimic(x, w, y):
        part = cuda.shared.array(WARPS, np.float32)
        total = cuda.shared.array(1, np.float32)
        t = int32(cuda.threadIdx.x)
        base = int32(cuda.blockIdx.x) * int32(N) + t * int32(4)
        a = ld_last(x, base)
        c = ld_last(x, base + int32(HALF))
        s = float32(0.0)
        for i in range(4):
            va = u32_as_f32(a[i])
            vc = u32_as_f32(c[i])
            s += va * va
            s += vc * vc
        for k in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(0xFFFFFFFF, s, k)
        lane = t & int32(31)
        if lane == 0:
            part[t >> 5] = s
        cuda.syncthreads()
        v = float32(0.0)
        if lane < WARPS:
            v = part[lane]
        for k in (8, 4, 2, 1):
            v += cuda.shfl_xor_sync(0xFFFFFFFF, v, k)
        if t == 0:
            total[0] = v
        cuda.syncthreads()
        r = cuda.libdevice.rsqrtf(total[0] * INV_N + EPS)
        for h in range(2):
            off = base + int32(h * HALF)
            q = ld_first(x, off)
            g = ld_last(w, t * int32(4) + int32(h * HALF))
            st_global_v4(y, off,
                         f32_as_u32(u32_as_f32(q[0]) * r * u32_as_f32(g[0])),
                         f32_as_u32(u32_as_f32(q[1]) * r * u32_as_f32(g[1])),
                         f32_as_u32(u32_as_f32(q[2]) * r * u32_as_f32(g[2])),
                         f32_as_u32(u32_as_f32(q[3]) * r * u32_as_f32(g[3])))

    return rms_mimic, void(float32[::1], float32[::1], float32[::1])


def make_kernel(l2=False):
    from numba import cuda

    fn, sig = mimic_source(l2)
    return cuda.jit(sig)(fn)


def numba_provider(m, l2=False):
    """The mimic (``l2``: with L2 cache policies) on ``m`` rows through numba's
    dispatcher, on torch's current stream: ``run(x, w) -> y``."""
    import torch
    from numba import cuda

    kern = make_kernel(l2)
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)

    def run(x, w):
        y = torch.empty_like(x)
        kern[m, THREADS, stream](cuda.as_cuda_array(x.view(-1)), cuda.as_cuda_array(w),
                                 cuda.as_cuda_array(y.view(-1)))
        return y
    return run


def baseline_providers():
    """Ours (``stats=False``), ours in inductor's two-read shape with its L2 cache
    policies (``fwd_plain_reload="l2"``) and torch.compile (static shapes) for float32
    RMSNorm N."""
    import torch
    import torch.nn.functional as F

    from numba_fused import layer_norm as ln

    def ours_rl2(x, w):
        with ln.tuning(fwd_plain_reload="l2"):
            return ln.rms_norm_forward(x, w, 1e-6, stats=False)[0]

    return {"ours": lambda x, w: ln.rms_norm_forward(x, w, 1e-6, stats=False)[0],
            "ours_rl2": ours_rl2,
            "compile": torch.compile(lambda x, w: F.rms_norm(x, (N,), w, 1e-6),
                                     dynamic=False)}


def check(provs, x, w, rows):
    """Each provider's y at ``rows`` (a slice) against float64, printed; the names
    within 1e-5."""
    import torch

    with torch.no_grad():
        xd = x[rows].double()
        want = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
        good = []
        for name, fn in provs.items():
            got = fn(x, w)[rows].double()
            err = ((got - want).norm() / want.norm()).item()
            print(f"| {name} | check {err:.2e} {'ok' if err < 1e-5 else 'FAIL'} |", flush=True)
            if err < 1e-5:
                good.append(name)
    return good


def time_providers(provs, x, w, passes, reps):
    """Time each provider in alternating order over ``passes``; print each one's
    times, median and median minus compile's."""
    import torch

    from bench.common import time_cuda

    times = {p: [] for p in provs}
    with torch.no_grad():
        for k in range(passes):
            for name in (list(provs) if k % 2 == 0 else list(provs)[::-1]):
                t = time_cuda(provs[name], [(x, w)], reps=reps, warmup=5)
                times[name].append(t["median_ms"] * 1e3)
    med = {p: sorted(v)[passes // 2] for p, v in times.items()}
    for name, v in times.items():
        print(f"| {name} | {', '.join(f'{u:.1f}' for u in v)} | median {med[name]:.2f} | "
              f"- compile {med[name] - med.get('compile', float('nan')):+.2f} |", flush=True)


def setup(m, compile_now=False):
    """float32 x (``m`` x N, seeded) and w, and the providers mimic, mimic_l2, ours,
    ours_rl2 and compile;
    with ``compile_now`` torch.compile has run once (its kernels are in the caches)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, N, device="cuda", generator=g)
    w = torch.rand(N, device="cuda", generator=g) + 0.5
    provs = {"mimic": numba_provider(m), "mimic_l2": numba_provider(m, l2=True),
             **baseline_providers()}
    if compile_now:
        with torch.no_grad():
            provs["compile"](x, w)
        torch.cuda.synchronize()
    return x, w, provs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    x, w, provs = setup(args.rows)
    check(provs, x, w, slice(None, 512))
    time_providers(provs, x, w, args.passes, args.reps)


if __name__ == "__main__":
    main()
