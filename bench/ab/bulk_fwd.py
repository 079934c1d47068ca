"""The 16-bit dropout forward with its stores sent through the async proxy: a timing
prototype (fifty-fourth session), not a shipped kernel.

    python3 bench/ab/bulk_fwd.py [--reps 30] [--passes 2] [--variants a,b,...] [--dtype float16]
    python3 bench/ab/bulk_fwd.py --ptx      # compile for sm_90 on the CPU, ptxas report

Why. The fifty-third session's ``ab/fence_proxy.py`` found a one-wave fp16 dropout loop
(one row in flight a thread, 8 blocks an SM) ~5 us faster with its stores sent from
shared memory by ``cp.async.bulk`` than with register stores. The bias-grad backward
did not keep that gain (``ab/bulk_bwd.py``, v20). The 16-bit gelu forward after v22 runs
on the same kind of plan (one row a batch, 32 registers, 8 blocks an SM, four waves)
and is 1.5 us over its target. This asks whether the gain appears there.

The kernel mirrors the shipped vector-path forward (``dropout.make_forward_kernel``,
Philox compiled in, unroll 1: the next row's 16 bytes are loaded before the current
row is computed) at N = 4096 on the shipped grid (block (32, 8); ``fill`` waves of the
resident blocks, ``_plan``'s rounding). Variants (name: act_store_minblocks_slots):
  act    gelu or none
  store  reg: st.global.v4 (the shipped store); bulk: each warp writes its 512-byte
         row piece into its own slot of a per-warp shared ring, fences the async proxy,
         __syncwarp, and lane 0 sends it with cp.async.bulk (``ab/bulk_bwd.py``'s)
  minb   launch bounds' minimum blocks an SM (8: ptxas keeps 32 registers; 0: no
         bounds, as the shipped kernel at 256 threads)
  slots  the ring's slots (bulk only)
  feat   optional, the shipped kernel's run-time generality, one letter each (to find
         why this loop read 0.8 us faster than the shipped one, call 11): g, the
         launch's 64-bit first group added to the Philox counter; b, has_bias read
         at run time; e, the early exit of threads past the row; d, blockDim read at
         run time (the step and the column); a, the output allocated each call (as
         the shipped call's; host side only)
Each is checked bit for bit against ``dropout_bias_act_forward``, then timed beside
the shipped call (``gpu`` us, as tune_dropout's column), one pass after another.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

BX, BY = 32, 8
ROWS, COLS = 16384, 4096
P_DROP = 0.1
FILL = 4
PIECE_WORDS = BX * 4
VARIANTS = ("gelu_reg_8_0", "gelu_bulk_8_4", "gelu_bulk_8_3", "gelu_bulk_7_4",
            "none_reg_8_0", "none_bulk_8_4")


FEATURES = "gbeda"


def parse_variant(name):
    act, store, minb, slots, *feat = name.split("_")
    feat = feat[0] if feat else ""
    if (act not in ("gelu", "none") or store not in ("reg", "bulk")
            or any(f not in FEATURES for f in feat)):
        raise ValueError(f"bad variant {name!r}")
    return act, store == "bulk", int(minb), int(slots), feat


@functools.lru_cache(maxsize=None)
def make_kernel(variant, dtype="float16"):
    """A ``numba_fused.launch.Kernel`` of the variant (see the module docstring)."""
    import numpy as np
    from numba import cuda, types

    from bench.ab.bulk_bwd import warp_sender
    from numba_fused import dropout as D
    from numba_fused.launch import Kernel

    act, bulk, minb, slots, feat = parse_variant(variant)
    use_gbase, rt_bias, early, rt_dims = ("g" in feat, "b" in feat, "e" in feat,
                                          "d" in feat)
    if bulk and not 3 <= slots <= 4:
        raise ValueError(f"bad variant {variant!r}")
    ldc, stc, unpack, pack, zero = D._VEC[dtype]
    send, drain = warp_sender(slots)
    prep, act_s = D._scaled_act(act, dtype, True)
    bias8 = D._bias_loader(dtype)
    ring_words = max(1, BY * slots * PIECE_WORDS)
    F0 = np.float32(0.0)

    def kernel(x, bias, y, n_rows, n_cols, rows_per_block, g_base, k0, k1, k2, k3, k4, k5,
               k6, k7, k8, k9, k10, k11, k12, k13, k14, k15, k16, k17, k18, k19, off_lo,
               off_hi, thr, scale, has_bias):
        """x, y: [M * N / 2] uint32 words (N a multiple of 256); bias: [N]; g_base: 0,
        added to the Philox group (feature g); has_bias: True (read at run time with
        feature b); the rest as the shipped forward's (Philox keys, offset, keep
        threshold, 1 / (1 - p))."""
        ring = cuda.shared.array(ring_words, np.uint32, alignment=128)
        keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
        c = prep(scale)
        chunks = np.uint32(n_cols >> 3)
        tx = np.uint32(cuda.threadIdx.x)
        ty = np.uint32(cuda.threadIdx.y)
        bx = cuda.blockDim.x if rt_dims else BX
        j = np.uint32(cuda.blockIdx.x * bx + tx)
        if early and j >= chunks:
            return
        b = bias8(bias, D.GROUP * j, n_cols, has_bias if rt_bias else True)
        step = np.uint32(cuda.blockDim.y if rt_dims else BY)
        gstep = np.uint32(step * chunks)
        row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
        row_end = np.uint32(min(n_rows, row0 + rows_per_block))
        r = np.uint32(row0 + ty)
        q = np.uint32(r * chunks + j)
        mine = np.uint32(ty * (slots * PIECE_WORDS))
        slot = np.uint32(0)
        w = zero
        if r < row_end:
            w = ldc(x, q)
        while r < row_end:
            nw = zero
            if np.uint32(r + step) < row_end:
                nw = ldc(x, np.uint32(q + gstep))
            v = unpack(w)
            if use_gbase:
                k = D._keep8(g_base + np.uint64(q), keys, off_lo, off_hi, thr)
            else:
                k = D._keep8(np.uint64(q), keys, off_lo, off_hi, thr)
            a0 = act_s(v[0] + b[0], scale, c)
            a1 = act_s(v[1] + b[1], scale, c)
            a2 = act_s(v[2] + b[2], scale, c)
            a3 = act_s(v[3] + b[3], scale, c)
            a4 = act_s(v[4] + b[4], scale, c)
            a5 = act_s(v[5] + b[5], scale, c)
            a6 = act_s(v[6] + b[6], scale, c)
            a7 = act_s(v[7] + b[7], scale, c)
            o = pack(((a0 if k[0] else F0), (a1 if k[1] else F0), (a2 if k[2] else F0),
                      (a3 if k[3] else F0), (a4 if k[4] else F0), (a5 if k[5] else F0),
                      (a6 if k[6] else F0), (a7 if k[7] else F0)))
            if bulk:
                slot = send(y, q, ring, mine, slot, tx, o[0], o[1], o[2], o[3])
            else:
                stc(y, q, o)
            w = nw
            r = np.uint32(r + step)
            q = np.uint32(q + gstep)
        if bulk:
            drain(tx)

    words = types.Array(types.uint32, 1, "C")
    argtypes = (words, D._storage(dtype), words, types.int64, types.int64, types.int64,
                types.uint64, *([types.uint32] * 23), types.float32, types.boolean)
    bounds = {"launch_bounds": (BX * BY, minb)} if minb else {}
    return Kernel(f"bulk_fwd_{dtype}_{variant}", kernel, argtypes, **bounds)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--shipped-last", action="store_true",
                    help="time the shipped calls after the variants in each pass")
    ap.add_argument("--ptx", action="store_true", help="compile for sm_90 on the CPU and "
                    "print ptxas's report (no GPU)")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        parse_variant(v)
    if args.ptx:
        from bench.ab.bulk_bwd import _ptx_report

        _ptx_report(variants, args.dtype, make_kernel)
        return

    import numpy as np
    import torch
    from numba import cuda

    from bench import tune_dropout as T
    from numba_fused import dropout as D
    from numba_fused.launch import sm_count

    dev = torch.cuda.current_device()
    tdt = getattr(torch, args.dtype)
    x = torch.randn(ROWS, COLS, device="cuda").to(tdt)
    bias = torch.randn(COLS, device="cuda").to(tdt)
    xw = cuda.as_cuda_array(x.view(-1).view(torch.int32)).view(np.uint32)
    bw = cuda.as_cuda_array(bias.view(torch.int16)).view(D._storage(args.dtype).dtype.name)
    _, rng = D._rng_args(T.SEED, T.OFFSET, P_DROP)
    scale = float(D._dropout_scale(P_DROP))
    n_cb = COLS // (8 * BX)
    runs = {}
    acts = sorted({parse_variant(v)[0] for v in variants})
    for v in variants:
        act = parse_variant(v)[0]
        want = D.dropout_bias_act_forward(x, bias, P_DROP, T.SEED, T.OFFSET, act)
        k = make_kernel(v, args.dtype)
        resident = k.resident_blocks(BX * BY, 0, dev)
        n_rb = max(1, min(-(-ROWS // BY), FILL * sm_count(dev) * resident // n_cb))
        rpb = -(-(-(-ROWS // n_rb)) // BY) * BY
        n_rb = -(-ROWS // rpb)
        y = torch.full_like(x, float("nan"))
        a = (xw, bw, cuda.as_cuda_array(y.view(-1).view(torch.int32)).view(np.uint32),
             ROWS, COLS, rpb, 0, *rng, scale, True)
        fn = k.dispatcher[(n_cb, n_rb), (BX, BY)]

        def launch(p, q, s, fn=fn, a=a, fresh="a" in parse_variant(v)[4]):
            if fresh:
                # As the shipped call: the output from the caching allocator each call.
                out = torch.empty_like(x)
                fn(a[0], a[1], cuda.as_cuda_array(out.view(-1).view(torch.int32)).view(
                    np.uint32), *a[3:])
                return out
            fn(*a)

        launch(None, None, None)
        torch.cuda.synchronize()
        ok = bool(torch.equal(y.view(torch.int16), want.view(torch.int16)))
        print(f"{v} regs {k.regs_per_thread} resident {resident} grid {n_cb}x{n_rb} "
              f"rpb {rpb} check {ok}", flush=True)
        runs[v] = launch

    def shipped(p, q, s, act):
        D.dropout_bias_act_forward(x, bias, P_DROP, T.SEED, T.OFFSET, act)

    timed = [(f"shipped_{act}", functools.partial(shipped, act=act)) for act in acts]
    timed += list(runs.items())
    if args.shipped_last:
        timed = timed[len(acts):] + timed[:len(acts)]
    for p in range(args.passes):
        for name, fn in timed:
            _, gpu = T._time(fn, [(None, None, None)], args.reps, 5)
            print(f"pass {p} {name} gpu_us {gpu:.2f}", flush=True)


if __name__ == "__main__":
    main()
