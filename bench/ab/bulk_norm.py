"""The 16-bit LayerNorm forward with y sent through the async proxy: a timing prototype
(fifty-sixth session), not a shipped kernel.

    python3 bench/ab/bulk_norm.py [--n 1024] [--reps 30] [--passes 2] [--variants a,b,...]
    python3 bench/ab/bulk_norm.py --ptx      # compile for sm_90 on the CPU, ptxas report

Why. The fifty-third session's ``ab/fence_proxy.py`` found a one-wave fp16 dropout loop
~5 us faster with its stores sent from shared memory by ``cp.async.bulk`` than with
register stores; the dropout kernels did not keep it (``ab/bulk_bwd.py``,
``ab/bulk_fwd.py``). The 16-bit LayerNorm forwards at N = 512-1024 trail inductor by
1-2 us (``RESULTS.md``, the v48 sweep), on a plan like that loop's: one row a warp, 64
registers, 32 warps an SM, each row's 2 KB of y stored at its end. This asks whether
the gain appears there.

The kernel mirrors the shipped plain forward (``layer_norm.make_plain_forward_kernel``,
w and b, early) for rows of ``N = words * 32 * 8`` values: warp ``threadIdx.y`` of a
block takes one row, lane t holds groups ``k * 32 + t`` (k < words) as raw words, the
two-pass statistics are xor-shuffle sums in the shipped order (same bits). Variants
(name: store_rpb_loop[_warps]):
  store  reg: st.global.v4 from registers (the shipped store); bulk: the warp writes the
         row's y into its slot of a per-warp shared ring, fences the async proxy,
         __syncwarp, and lane 0 sends the whole row with one cp.async.bulk (one commit
         group a row; before it, lane 0 waits until the ring's other slot is read)
  rpb    warps a block: 1 as shipped at N = 1024, or 2 / 4
  loop   1: a row a warp, a grid of every row (as shipped); 2: two rows a warp side
         by side, both loaded before either's math (inductor's XBLOCK 2, num_warps 1;
         two ring slots); p: a resident grid, rows strided over it (two ring slots a
         warp); q: as p, with the next row's x loaded before the current row's math
  warps  optional: launch bounds for that many warps an SM (default 32)
Launch bounds for 32 warps an SM give ptxas 13.0's 64 registers, as the shipped
kernel's (8 bytes of stack for the register store); two rows a warp take 80 at 24
warps, 96 at 20, 128 at 16. Each is checked bit for bit against
``layer_norm_forward`` (y, mean, rstd), then timed beside the shipped call (``gpu`` us,
as tune_dropout's column), one pass after another. At N = 512 the shipped layout is
not this one (16 lanes a row, four words), so the bits there differ.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
# At module level, so that the simulator's kernel globals see its cuda module.
from numba import cuda, types  # noqa: E402

TPR = 32
ROW_ELEMS = 2**26
# The resident loops (p, q) spill at the bounds' 64 registers (144-216 bytes), so
# they are not in the default set.
VARIANTS = ("reg_1_1", "bulk_1_1", "reg_2_1", "bulk_2_1", "reg_4_1", "bulk_4_1")


def parse_variant(name):
    store, rpb, loop, *warps = name.split("_")
    warps = int(warps[0]) if warps else 32
    if (store not in ("reg", "bulk") or rpb not in ("1", "2", "4") or loop not in "12pq"
            or not 8 <= warps <= 32 or warps % int(rpb)):
        raise ValueError(f"bad variant {name!r}")
    return store == "bulk", int(rpb), loop, warps


@functools.lru_cache(maxsize=None)
def make_kernel(variant, dtype="float16", words=4):
    """A ``numba_fused.launch.Kernel`` of the variant (see the module docstring)."""
    from bench.ab.bulk_bwd import _intrinsics
    from numba_fused import layer_norm as ln
    from numba_fused import tensor_core as tc
    from numba_fused.jit import inline_device
    from numba_fused.launch import Kernel

    bulk, rpb, loop, sm_warps = parse_variant(variant)
    bulk_store, st_shared_v4, commit, waits, proxy_fence = _intrinsics()
    wait_all = waits[0]
    bf16 = dtype == "bfloat16"
    NX = 4 * words
    span = TPR * words              # 16-byte groups a row
    row_words = 4 * span            # 4-byte words a row
    row_bytes = np.uint32(4 * row_words)
    slots = 1 if loop == "1" else 2
    ring_words = rpb * slots * row_words
    persistent = loop in "pq"
    rpt = 2 if loop == "2" else 1   # rows a warp, side by side
    ahead = loop == "q"

    @inline_device
    def seg_sum(v):
        for k in range(5):
            v += cuda.shfl_xor_sync(ln.FULL_MASK, v, 16 >> k)
        return v

    @inline_device
    def moment(xr, mu, square):
        s = np.float32(0.0)
        for i in range(NX):
            lo, hi = ln._unpack2(xr[i], bf16)
            if square:
                s += (lo - mu) * (lo - mu) + (hi - mu) * (hi - mu)
            else:
                s += lo + hi
        return s

    @inline_device
    def out_word(xw, ww, bw, mu, r):
        lo, hi = ln._unpack2(xw, bf16)
        lo = (lo - mu) * r
        hi = (hi - mu) * r
        wl, wh = ln._unpack2(ww, bf16)
        lo = lo * wl
        hi = hi * wh
        bl, bh = ln._unpack2(bw, bf16)
        lo = lo + bl
        hi = hi + bh
        return ln._bf2(lo, hi) if bf16 else ln.pack_f16x2(lo, hi)

    @inline_device
    def load_row(x, xr, row, t):
        base = (row * span + t) * 4
        for k in range(words):
            q = tc.ld_global_v4(x, base + k * TPR * 4)
            for i in range(4):
                xr[4 * k + i] = q[i]
        return 0

    @inline_device
    def norm_row(xr, wr, br, y, mean_out, rstd_out, ring, row, o, t, eps, nf):
        """Row ``row``'s statistics and y: to y (reg) or ring words o.. (bulk); nf:
        the row length, read at run time as the shipped kernel's (a constant divisor
        costs 16 registers, the fifty-sixth session's const_n)."""
        mu = seg_sum(moment(xr, np.float32(0.0), False)) / nf
        var = seg_sum(moment(xr, mu, True)) / nf
        r = ln._rsqrt(var + eps)
        if t == 0:
            mean_out[row] = mu
            rstd_out[row] = r
        base = (row * span + t) * 4
        for k in range(words):
            v0 = out_word(xr[4 * k], wr[4 * k], br[4 * k], mu, r)
            v1 = out_word(xr[4 * k + 1], wr[4 * k + 1], br[4 * k + 1], mu, r)
            v2 = out_word(xr[4 * k + 2], wr[4 * k + 2], br[4 * k + 2], mu, r)
            v3 = out_word(xr[4 * k + 3], wr[4 * k + 3], br[4 * k + 3], mu, r)
            if bulk:
                st_shared_v4(tc.shared_address(ring, o + (k * TPR + t) * 4), v0, v1, v2, v3)
            else:
                tc.st_global_v4(y, base + k * TPR * 4, v0, v1, v2, v3)
        return 0

    @inline_device
    def send(y, ring, row, o, t):
        """The warp's row in ring words o.. to y with one cp.async.bulk (lane 0); with
        two slots, lane 0 first waits until the other slot's send has read it."""
        proxy_fence()
        if t == 0 and slots == 2:
            wait_all()
        cuda.syncwarp()
        if t == 0:
            bulk_store(y, row * row_words, tc.shared_address(ring, o), row_bytes)
            commit()
        return 0

    def kernel(x, w, b, y, mean_out, rstd_out, m, n, eps):
        """x, y: [m * N / 2] uint32 words; w, b: [N / 2]; mean_out, rstd_out: float32
        [m]; n = N; eps: as the shipped forward's."""
        nf = np.float32(n)
        if bulk:
            ring = cuda.shared.array(ring_words, np.uint32, alignment=128)
        else:  # unused (and the simulator takes no alignment)
            ring = cuda.shared.array(1, np.uint32)
        xr = cuda.local.array(NX, np.uint32)
        nx = cuda.local.array(NX, np.uint32)
        wr = cuda.local.array(NX, np.uint32)
        br = cuda.local.array(NX, np.uint32)
        t = np.uint32(cuda.threadIdx.x)
        s = np.uint32(cuda.threadIdx.y)
        row = (np.int64(cuda.blockIdx.x) * rpb + s) * rpt
        mine = np.uint32(s * (slots * row_words))
        if row >= m:
            return
        load_row(x, xr, row, t)
        two = rpt == 2 and row + 1 < m
        if two:
            load_row(x, nx, row + 1, t)
        for k in range(words):
            q = tc.ld_global_v4(w, (k * TPR + t) * 4)
            for i in range(4):
                wr[4 * k + i] = q[i]
            q = tc.ld_global_v4(b, (k * TPR + t) * 4)
            for i in range(4):
                br[4 * k + i] = q[i]
        if rpt == 2:
            norm_row(xr, wr, br, y, mean_out, rstd_out, ring, row, mine, t, eps, nf)
            if two:
                norm_row(nx, wr, br, y, mean_out, rstd_out, ring, row + 1,
                         mine + row_words, t, eps, nf)
            if bulk:
                send(y, ring, row, mine, t)
                if two:
                    send(y, ring, row + 1, mine + row_words, t)
                if t == 0:
                    wait_all()
            return
        if not persistent:
            norm_row(xr, wr, br, y, mean_out, rstd_out, ring, row, mine, t, eps, nf)
            if bulk:
                send(y, ring, row, mine, t)
                if t == 0:
                    wait_all()
            return
        stride = np.int64(cuda.gridDim.x) * rpb
        slot = np.uint32(0)
        while row < m:
            nxt = row + stride
            if ahead and nxt < m:
                load_row(x, nx, nxt, t)
            o = np.uint32(mine + slot * row_words)
            norm_row(xr, wr, br, y, mean_out, rstd_out, ring, row, o, t, eps, nf)
            if bulk:
                send(y, ring, row, o, t)
                slot = np.uint32(1) - slot
            row = nxt
            if ahead:
                for i in range(NX):
                    xr[i] = nx[i]
            elif row < m:
                load_row(x, xr, row, t)
        if bulk and t == 0:
            wait_all()

    st = types.Array(types.uint32, 1, "C")
    f32 = types.Array(types.float32, 1, "C")
    argtypes = (st, st, st, st, f32, f32, types.int64, types.int64, types.float32)
    # By default the shipped kernel's 64 registers (32 warps an SM): without bounds
    # ptxas takes 72 for the register store, 127 for the resident loops.
    bounds = {"launch_bounds": (TPR * rpb, sm_warps // rpb)}
    return Kernel(f"bulk_norm_{dtype}_w{words}_{variant}", kernel, argtypes, **bounds)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024, help="row length (a multiple of 256)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--ptx", action="store_true", help="compile for sm_90 on the CPU and "
                    "print ptxas's report (no GPU)")
    args = ap.parse_args(argv)
    if args.n % 256 or not 256 <= args.n <= 2048:
        raise SystemExit("--n must be 256, 512, ..., 2048")
    words = args.n // 256
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        parse_variant(v)
    if args.ptx:
        from bench.ab.bulk_bwd import _ptx_report as rep

        rep(variants, args.dtype, lambda name, dt: make_kernel(name, dt, words))
        return

    import torch

    from bench import tune_dropout as T
    from numba_fused import layer_norm as ln
    from numba_fused.launch import sm_count

    dev = torch.cuda.current_device()
    tdt = getattr(torch, args.dtype)
    m = ROW_ELEMS // args.n
    x = (torch.randn(m, args.n, device="cuda") * 2 + 0.5).to(tdt)
    w = torch.randn(args.n, device="cuda").to(tdt)
    b = torch.randn(args.n, device="cuda").to(tdt)

    def words_of(t):
        return cuda.as_cuda_array(t.reshape(-1).view(torch.int32)).view(np.uint32)

    xw, ww, bw = words_of(x), words_of(w), words_of(b)
    want = ln.layer_norm_forward(x, w, b, 1e-5)
    runs = {}
    for v in variants:
        bulk, rpb, loop, _ = parse_variant(v)
        k = make_kernel(v, args.dtype, words)
        resident = k.resident_blocks(TPR * rpb, 0, dev)
        rows = rpb * (2 if loop == "2" else 1)
        grid = (-(-m // rows) if loop in "12"
                else min(-(-m // rpb), resident * sm_count(dev)))
        y = torch.full_like(x, float("nan"))
        mean = torch.full((m,), float("nan"), device="cuda")
        rstd = torch.full((m,), float("nan"), device="cuda")
        a = (xw, ww, bw, words_of(y), cuda.as_cuda_array(mean), cuda.as_cuda_array(rstd),
             m, args.n, np.float32(1e-5))
        fn = k.dispatcher[grid, (TPR, rpb)]

        def launch(p, q, s, fn=fn, a=a):
            fn(*a)

        launch(None, None, None)
        torch.cuda.synchronize()
        ok = (torch.equal(y.view(torch.int16), want[0].view(torch.int16))
              and torch.equal(mean, want[1]) and torch.equal(rstd, want[2]))
        print(f"{v} regs {k.regs_per_thread} resident {resident} grid {grid} "
              f"check {ok}", flush=True)
        runs[v] = launch

    def shipped(p, q, s):
        ln.layer_norm_forward(x, w, b, 1e-5)

    timed = [("shipped", shipped)] + list(runs.items())
    for p in range(args.passes):
        for name, fn in timed:
            _, gpu = T._time(fn, [(None, None, None)], args.reps, 5)
            print(f"pass {p} {name} gpu_us {gpu:.2f}", flush=True)


if __name__ == "__main__":
    main()
