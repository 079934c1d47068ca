"""A warp-specialised 16-bit dropout(gelu(x + b)) forward: a timing prototype (fortieth
session), not a shipped kernel.

    python3 bench/ab/ws_gelu.py [--dtype float16] [--stages 4] [--rows 36,18,72] [--reps 30]

Why. ``bench/ab/gelu_cost.py`` showed the shipped forward's time following its SASS
instruction count (85.2 us at 223 instructions per 8 elements, 0.2 us an instruction)
down to the memory floor (72 us), as if the issue time and a memory wait added up
rather than overlapped. Here the loads leave the computing warps: a block is one
producer warp and 8 consumer warps (288 threads). One producer lane streams the
block's rows (16 bytes x 256 consumers = 4 KB a row piece) into a ring of ``stages``
shared-memory slots with ``cp.async.bulk`` (the copy engine; no registers, one
instruction a row), completing on the slot's "full" mbarrier; each consumer waits on
it, reads its 16 bytes (``ld.shared.v4``), arrives on the slot's "empty" mbarrier and
computes exactly what the shipped kernel computes (same Philox groups, same
``_scaled_act`` gelu), then stores. If the coupling costs the ~13 us above the floor,
this runs near 72-76 us; if not, near 85.

Measured (v19 in bench/notes_dropout.md): 83.9-84.9 us at 18-36 rows a block, stages 4,
the shipped forward's time: refuted. (The mbarrier init / arrive / wait are
numba_fused.tensor_core's since the review after the measurement: the same SASS as the
measured code's own, checked on the CPU.)

Restrictions of the prototype: the vector path only, N % 2048 == 0 (a block's column
strip is 256 chunks of 8), p > 0, bias given, no mask output, the whole array in one
launch. Its output is compared bit for bit with the shipped forward's before timing.
Prints one line a rows-per-block setting: registers, blocks an SM, median GPU us.
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

CONSUMERS = 256
THREADS = CONSUMERS + 32
STRIP = CONSUMERS  # chunks of 8 elements a block's column strip holds


def _intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

    from numba_fused import tensor_core as tc

    I32, I64 = ir.IntType(32), ir.IntType(64)

    def asm_void(text, cons, argtys):
        def codegen(context, builder, signature, args):
            vals = [context.cast(builder, a, t, types.uint32) if t != types.uint64 else a
                    for a, t in zip(args, signature.args)]
            tc._asm(builder, ir.VoidType(), argtys, text, cons, vals, True)
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def mbar_fence_init(typingctx):
        def codegen(context, builder, signature, args):
            tc._asm(builder, ir.VoidType(), [], "fence.mbarrier_init.release.cluster;",
                    "~{memory}", [], True)
            return context.get_dummy_value()

        return types.void(), codegen

    @intrinsic
    def mbar_expect_tx(typingctx, addr, nbytes):
        return types.void(addr, nbytes), asm_void(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}",
            [I32, I32])

    @intrinsic
    def lds16_at(typingctx, addr):
        ret = types.UniTuple(types.uint32, 4)

        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[0], signature.args[0], types.uint32)
            res = tc._asm(builder, ir.LiteralStructType([I32] * 4), [I32],
                          "ld.shared.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r,~{memory}",
                          [a], True)
            return context.make_tuple(builder, ret, [builder.extract_value(res, k)
                                                     for k in range(4)])

        return ret(addr), codegen

    @intrinsic
    def bulk_copy(typingctx, dst, src, idx, nbytes, mbar):
        # dst, mbar: shared addresses; src[idx]: the global source (16-byte aligned).
        sig = types.void(dst, src, idx, nbytes, mbar)

        def codegen(context, builder, signature, args):
            d = context.cast(builder, args[0], signature.args[0], types.uint32)
            g = tc._global_addr(context, builder, signature.args[1], args[1],
                                signature.args[2], args[2])
            n = context.cast(builder, args[3], signature.args[3], types.uint32)
            m = context.cast(builder, args[4], signature.args[4], types.uint32)
            tc._asm(builder, ir.VoidType(), [I32, I64, I32, I32],
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                    "[$0], [$1], $2, [$3];", "r,l,r,r,~{memory}", [d, g, n, m], True)
            return context.get_dummy_value()

        return sig, codegen

    return mbar_fence_init, mbar_expect_tx, lds16_at, bulk_copy


@functools.lru_cache(maxsize=None)
def make_ws_kernel(dtype, stages, min_blocks, ptx_only=False):
    import numpy as np
    from numba import cuda, types

    from numba_fused import dropout as D
    from numba_fused.jit import inline_device
    from numba_fused import tensor_core as tc
    from numba_fused.tensor_core import shared_address

    mbar_fence_init, mbar_expect_tx, lds16_at, bulk_copy = _intrinsics()
    prep, act_s = D._scaled_act("gelu", dtype, True)
    bias8 = D._bias_loader(dtype)
    _, stc, unpack, pack, _ = D._VEC[dtype]
    slot_words = STRIP * 4
    ring_words = stages * slot_words
    bar_count = 2 * stages
    if stages not in (2, 4):
        raise ValueError(f"stages must be 2 or 4, got {stages}")
    piece_bytes = np.uint32(slot_words * 4)
    slot_bytes = np.uint32(slot_words * 4)
    F0 = np.float32(0.0)

    @inline_device
    def row(slot, it, phase, nrows, mine, bars, q, chunks, b, y, g_base, keys, off_lo, off_hi,
            thr, scale_, c):
        if np.uint32(it + slot) < nrows:
            tc.mbarrier_wait(bars, slot, phase)
            words = lds16_at(np.uint32(mine + slot * slot_bytes))
            tc.mbarrier_arrive(bars, stages + slot)
            v = unpack(words)
            k = D._keep8(g_base + np.uint64(q), keys, off_lo, off_hi, thr)
            a = (act_s(v[0] + b[0], scale_, c), act_s(v[1] + b[1], scale_, c),
                 act_s(v[2] + b[2], scale_, c), act_s(v[3] + b[3], scale_, c),
                 act_s(v[4] + b[4], scale_, c), act_s(v[5] + b[5], scale_, c),
                 act_s(v[6] + b[6], scale_, c), act_s(v[7] + b[7], scale_, c))
            stc(y, q, pack(((a[0] if k[0] else F0), (a[1] if k[1] else F0),
                            (a[2] if k[2] else F0), (a[3] if k[3] else F0),
                            (a[4] if k[4] else F0), (a[5] if k[5] else F0),
                            (a[6] if k[6] else F0), (a[7] if k[7] else F0))))
        return np.uint32(q + chunks)

    def kernel(x, bias, y, n_rows, n_cols, rows_per_block, g_base,
               k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
               k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
               off_lo, off_hi, thr, scale):
        keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
        ring = cuda.shared.array(ring_words, np.uint32, alignment=128)
        bars = cuda.shared.array(bar_count, np.uint64)
        tid = cuda.threadIdx.x
        chunks = np.uint32(n_cols >> 3)
        row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
        row_end = np.uint32(min(n_rows, row0 + rows_per_block))
        nrows = np.uint32(row_end - row0)
        j0 = np.uint32(cuda.blockIdx.x * STRIP)
        if tid == 0:
            for s in range(stages):
                tc.mbarrier_init(bars, s, np.uint32(1))
                tc.mbarrier_init(bars, stages + s, np.uint32(CONSUMERS))
            mbar_fence_init()
        cuda.syncthreads()
        if tid >= CONSUMERS:
            if tid == CONSUMERS:
                for i in range(nrows):
                    s = i % stages
                    use = i // stages
                    if use > 0:
                        tc.mbarrier_wait(bars, stages + s, np.uint32((use - 1) & 1))
                    full = shared_address(bars, s)
                    mbar_expect_tx(full, piece_bytes)
                    word = np.uint64(row0 + i) * np.uint64(chunks * 4) + np.uint64(j0 * 4)
                    bulk_copy(shared_address(ring, s * slot_words), x, word, piece_bytes, full)
            return
        scale_, c = scale, prep(scale)
        j = np.uint32(j0 + tid)
        b = bias8(bias, 8 * j, n_cols, True)
        # The loop takes `stages` rows a trip, one a slot (unrolled by hand: every slot's
        # addresses are constants), and the phase flips once a trip.
        mine = shared_address(ring, np.uint32(tid * 4))
        q = np.uint32(row0 * chunks + j)
        it = np.uint32(0)
        phase = np.uint32(0)
        while it < nrows:
            q = row(0, it, phase, nrows, mine, bars, q, chunks, b, y, g_base, keys, off_lo,
                    off_hi, thr, scale_, c)
            q = row(1, it, phase, nrows, mine, bars, q, chunks, b, y, g_base, keys, off_lo,
                    off_hi, thr, scale_, c)
            if stages == 4:
                q = row(2, it, phase, nrows, mine, bars, q, chunks, b, y, g_base, keys,
                        off_lo, off_hi, thr, scale_, c)
                q = row(3, it, phase, nrows, mine, bars, q, chunks, b, y, g_base, keys,
                        off_lo, off_hi, thr, scale_, c)
            it = np.uint32(it + stages)
            phase = np.uint32(phase ^ 1)

    from numba_fused import dtypes

    words = types.Array(types.uint32, 1, "C")
    st = types.Array(dtypes.numba_storage_type(dtype), 1, "C")
    sig = tuple([words, st, words] + [types.int64] * 3 + [types.uint64] + [types.uint32] * 23
                + [types.float32])
    if ptx_only:
        return cuda.compile_ptx(kernel, sig, cc=(9, 0), launch_bounds=(THREADS, min_blocks))[0]
    return cuda.jit(sig, launch_bounds=(THREADS, min_blocks))(kernel)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--min-blocks", type=int, default=7)
    ap.add_argument("--rows", default="36,18,72")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ptx", action="store_true", help="compile for sm_90 on the CPU and "
                    "print ptxas's report (no GPU)")
    args = ap.parse_args(argv)
    if args.ptx:
        from numba_fused import registry

        with registry.offline_compile():
            ptx = make_ws_kernel(args.dtype, args.stages, args.min_blocks, True)
        print(registry.ptxas_report(ptx))
        return

    import torch

    from bench import tune_dropout as T
    from numba_fused import dropout as D

    from gelu_cost import input_sets  # this script's folder is on the path

    m, n = 16384, 4096
    sets = input_sets(args.dtype, m, n)
    kern = make_ws_kernel(args.dtype, args.stages, args.min_blocks)
    _, rng = D._rng_args(T.SEED, T.OFFSET, T.P)
    scale = float(D._dropout_scale(T.P))

    def launcher(rows):
        grid = (n // (8 * STRIP), -(-m // rows))

        def fn(x, b, g):
            y = torch.empty_like(x)
            xw = x.view(torch.int32).view(-1)
            yw = y.view(torch.int32).view(-1)
            bb = b if args.dtype == "float16" else b.view(torch.int16)
            kern[grid, THREADS](xw, bb, yw, m, n, rows, 0, *rng, scale)
            return y

        return fn

    ref = D.dropout_bias_act_forward(sets[0][0], sets[0][1], T.P, T.SEED, T.OFFSET, "gelu")
    torch.cuda.synchronize()
    for rows in (int(r) for r in args.rows.split(",")):
        fn = launcher(rows)
        out = fn(*sets[0])
        torch.cuda.synchronize()
        same = bool(torch.equal(out.view(torch.int16), ref.view(torch.int16)))
        _, gpu = T._time(fn, sets, args.reps, 5)
        ov = kern.overloads[next(iter(kern.overloads))]
        print(f"ws {args.dtype} stages {args.stages} rows {rows} regs {ov.regs_per_thread} "
              f"same_bits {same} gpu_us {gpu:.1f}", flush=True)


if __name__ == "__main__":
    main()
