"""The 16-bit dropout backward with the bias grad, grad_x sent through the async proxy:
a timing prototype (fifty-fourth session), not a shipped kernel.

    python3 bench/ab/bulk_bwd.py [--reps 30] [--passes 2] [--variants a,b,...]
    python3 bench/ab/bulk_bwd.py --ptx      # compile for sm_90 on the CPU, ptxas report

Why. The fifty-third session's ``ab/fence_proxy.py`` found that a one-wave fp16 dropout
loop whose stores go out from shared memory with ``cp.async.bulk`` runs ~5 us faster
than the same loop with register stores (72.8-73.1 against 77.7-77.9 us). The nearest
miss of issue #16 is the fp16 'none' backward with the bias grad (0.0760 ms against
0.0743): this asks whether that gain survives the bias grad's accumulators and its
last-block epilogue.

The kernel is the shipped vector-path backward for activation 'none' with Philox
draws (``dropout.make_backward_kernel``, fixed_mode 1) at N = 4096 (a multiple of 256,
so every warp owns a whole 512-byte piece of one row): block (32, 8), thread (tx, ty)
owns columns 8 (32 bx + tx) .. + 7 of rows row0 + ty, row0 + ty + 8, ...;
a = grad_out * scale where kept, else 0 (float32, then packed); acc += a; at the end
the shipped epilogue (``dropout._bias_epilogue``, block fence, final_step 2, the
"direct" tile reduce) writes partial row blockIdx.y and the last block of a strip
sums them into grad_bias. Variants (name: store_ahead_minblocks_slots[_end]):
  reg    grad_x with st.global.v4 from registers (the shipped store)
  bulk   each warp writes its row piece (32 lanes x 16 bytes) into its own slot of
         a per-warp shared ring (``slots`` slots of 512 bytes), fences the async
         proxy, __syncwarp, and lane 0 sends it with cp.async.bulk (one commit group
         a step; before a step's __syncwarp lane 0 waits until at most slots - 2
         groups are still reading, so the slot the next step writes is free)
  ahead  rows whose loads are issued before the current row is computed (0, 1, 2);
         4: the shipped batches (the next four rows' loads, then the current four)
  minb   launch bounds' minimum blocks an SM (ptxas's register target)
  end    e: the shipped epilogue (default); p: the partial rows only (no fence,
         count or last block: what the tail costs); n: no epilogue (no bias grad);
         c16, c8: the row blocks of a strip as one thread-block cluster (c16: 16
         blocks of 256 threads, non-portable; c8: 8 of 512 threads), the column sums
         reduced through distributed shared memory (register stores only); q16, q8:
         the same cluster launch with p's ending (what the cluster launch costs)
The grid is one wave of the compiled kernel's resident blocks (16 column strips x
n_rb row blocks, rows_per_block a multiple of 8), as the shipped one-wave plan.
Each variant is checked bit for bit against ``dropout_bias_act_backward``: grad_x,
and grad_bias against the shipped kernel launched with the same rows_per_block (the
same partial rows, summed in the same order). Then times the shipped call (its
default plan) and each variant: registers, resident blocks, median us (``gpu``:
CUDA events, stream held, as tune_dropout's column).
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

BX = 32  # blockDim.x: a warp along a row
ROWS, COLS = 16384, 4096
P_DROP = 0.1
PIECE_WORDS = BX * 4  # a warp's row piece: 32 lanes x 16 bytes
ENDS = ("e", "p", "n")
VARIANTS = ("reg_4_2_0_e", "reg_4_2_0_p", "reg_4_2_0_c16", "reg_4_2_0_q16", "reg_4_1_0_c8",
            "reg_4_1_0_q8")


def parse_variant(name):
    store, ahead, minb, slots, *end = name.split("_")
    if store not in ("reg", "bulk"):
        raise ValueError(f"store must be reg or bulk, got {store!r}")
    end = end[0] if end else "e"
    if end not in ENDS + ("c8", "c16", "q8", "q16"):
        raise ValueError(f"end must be one of {ENDS}, got {end!r}")
    return store == "bulk", int(ahead), int(minb), int(slots), end


def _void_asm(text):
    """An intrinsic running the PTX ``text`` (no operands; a memory clobber)."""
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

    from numba_fused import tensor_core as tc

    @intrinsic
    def op(typingctx):
        def codegen(context, builder, signature, args):
            tc._asm(builder, ir.VoidType(), [], text, "~{memory}", [], True)
            return context.get_dummy_value()

        return types.void(), codegen

    return op


def _intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

    from numba_fused import tensor_core as tc

    I32, I64 = ir.IntType(32), ir.IntType(64)

    @intrinsic
    def bulk_store(typingctx, dst, idx, src, nbytes):
        # dst[idx]: the global destination (16-byte aligned); src: a shared address.
        sig = types.void(dst, idx, src, nbytes)

        def codegen(context, builder, signature, args):
            g = tc._global_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])
            s = context.cast(builder, args[2], signature.args[2], types.uint32)
            n = context.cast(builder, args[3], signature.args[3], types.uint32)
            tc._asm(builder, ir.VoidType(), [I64, I32, I32],
                    "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;",
                    "l,r,r,~{memory}", [g, s, n], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def st_shared_v4(typingctx, addr, v0, v1, v2, v3):
        sig = types.void(addr, v0, v1, v2, v3)

        def codegen(context, builder, signature, args):
            vals = [context.cast(builder, v, t, types.uint32)
                    for t, v in zip(signature.args, args)]
            tc._asm(builder, ir.VoidType(), [I32] * 5,
                    "st.shared.v4.u32 [$0], {$1,$2,$3,$4};", "r,r,r,r,r,~{memory}", vals,
                    True)
            return context.get_dummy_value()

        return sig, codegen

    waits = {n: _void_asm(f"cp.async.bulk.wait_group.read {n};") for n in range(4)}
    return (bulk_store, st_shared_v4, _void_asm("cp.async.bulk.commit_group;"), waits,
            _void_asm("fence.proxy.async.shared::cta;"))


def warp_sender(slots):
    """(send, drain) device functions of the per-warp ring of ``slots`` slots of 512
    bytes: ``slot = send(dst, q, ring, mine, slot, tx, v0, v1, v2, v3)`` writes lane
    tx's 16 bytes into the warp's slot (its ring starts at word ``mine``), fences the
    async proxy, and lane 0 sends the slot to dst's words 4 q .. (lane 0's q) with
    cp.async.bulk, one commit group a row; before that, lane 0 waits until at most
    slots - 2 groups are still reading, so the slot the next row writes was read by
    the group issued slots - 1 rows before it; returns the next slot. ``drain(tx)``:
    lane 0 waits for every group's reads (the ring must outlive them)."""
    import numpy as np
    from numba import cuda

    from numba_fused import tensor_core as tc
    from numba_fused.jit import inline_device

    bulk_store, st_shared_v4, commit, waits, proxy_fence = _intrinsics()
    wait_some = waits[max(slots - 2, 0)]
    wait_all = waits[0]
    piece_bytes = np.uint32(PIECE_WORDS * 4)

    @inline_device
    def send(dst, q, ring, mine, slot, tx, v0, v1, v2, v3):
        o = np.uint32(mine + slot * PIECE_WORDS)
        st_shared_v4(tc.shared_address(ring, o + 4 * tx), v0, v1, v2, v3)
        proxy_fence()
        if tx == 0:
            wait_some()
        cuda.syncwarp()
        if tx == 0:
            bulk_store(dst, np.uint32(q * 4), tc.shared_address(ring, o), piece_bytes)
            commit()
        slot = np.uint32(slot + 1)
        return np.uint32(0) if slot == slots else slot

    @inline_device
    def drain(tx):
        if tx == 0:
            wait_all()

    return send, drain


def _cluster_intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

    from numba_fused import tensor_core as tc

    I32, F32 = ir.IntType(32), ir.FloatType()

    @intrinsic
    def ctarank(typingctx):
        def codegen(context, builder, signature, args):
            return tc._asm(builder, I32, [], "mov.u32 $0, %cluster_ctarank;", "=r", [], True)

        return types.uint32(), codegen

    @intrinsic
    def ld_cluster_f32(typingctx, addr, rank):
        # The float32 at shared address ``addr`` of the cluster's block ``rank``.
        sig = types.float32(addr, rank)

        def codegen(context, builder, signature, args):
            a, r = (context.cast(builder, v, t, types.uint32)
                    for t, v in zip(signature.args, args))
            return tc._asm(builder, F32, [I32, I32],
                           "{ .reg .u32 ca; mapa.shared::cluster.u32 ca, $1, $2; "
                           "ld.shared::cluster.f32 $0, [ca]; }", "=f,r,r,~{memory}", [a, r],
                           True)

        return sig, codegen

    return (ctarank, ld_cluster_f32, _void_asm("barrier.cluster.arrive.release.aligned;"),
            _void_asm("barrier.cluster.wait.acquire.aligned;"))


def cluster_size(end):
    """Blocks a cluster (the row blocks of a column strip) of an end ``c8`` / ``c16`` /
    ``q8`` / ``q16``; 0 for the others."""
    return int(end[1:]) if end[0] in "cq" else 0


def block_rows(end):
    """blockDim.y: 16 (512 threads, one block an SM) for clusters of 8, else 8."""
    return 16 if cluster_size(end) == 8 else 8


@functools.lru_cache(maxsize=None)
def make_kernel(variant, dtype="float16"):
    """A ``numba_fused.launch.Kernel`` of the variant (see the module docstring)."""
    import numpy as np
    from numba import cuda, types

    from numba_fused import dropout as D
    from numba_fused import tensor_core as tc
    from numba_fused.jit import inline_device
    from numba_fused.launch import Kernel

    bulk, ahead, minb, slots, end = parse_variant(variant)
    cs = cluster_size(end)
    dsmem = end[0] == "c"
    by = block_rows(end)
    threads = BX * by
    if (ahead not in (0, 1, 2, 4) or (cs and bulk) or not 1 <= minb <= 8
            or (bulk and not 3 <= slots <= 4)):
        raise ValueError(f"bad variant {variant!r}")
    ldc, stc, unpack, pack, _ = D._VEC[dtype]
    send, drain = warp_sender(slots)
    gstore = D.dtypes.storer(dtype)
    tile_n = D._tile_floats(threads, D.GROUP)
    ctarank, ld_cluster_f32, cluster_arrive, cluster_wait = _cluster_intrinsics()
    strip = BX * D.GROUP
    per = strip // max(cs, 1)  # columns each block of a cluster finishes
    epilogue = D._bias_epilogue(dtype, True, "block", D._FINAL_STEP, "direct")
    ring_words = max(1, by * slots * PIECE_WORDS)
    F0 = np.float32(0.0)

    @inline_device
    def row(grad_x, ring, w, q, acc, slot, mine, tx, keys, off_lo, off_hi, thr, scale):
        # One row piece: grad_x's 16 bytes of the thread, the sums, the ring slot after.
        d = unpack(w)
        k = D._keep8(np.uint64(q), keys, off_lo, off_hi, thr)
        a0 = d[0] * scale if k[0] else F0
        a1 = d[1] * scale if k[1] else F0
        a2 = d[2] * scale if k[2] else F0
        a3 = d[3] * scale if k[3] else F0
        a4 = d[4] * scale if k[4] else F0
        a5 = d[5] * scale if k[5] else F0
        a6 = d[6] * scale if k[6] else F0
        a7 = d[7] * scale if k[7] else F0
        acc = (acc[0] + a0, acc[1] + a1, acc[2] + a2, acc[3] + a3,
               acc[4] + a4, acc[5] + a5, acc[6] + a6, acc[7] + a7)
        v = pack((a0, a1, a2, a3, a4, a5, a6, a7))
        if bulk:
            slot = send(grad_x, q, ring, mine, slot, tx, v[0], v[1], v[2], v[3])
        else:
            stc(grad_x, q, v)
        return acc, slot

    def kernel(grad, grad_x, partial, counters, grad_bias, n_rows, n_cols, rows_per_block,
               tile_stride, n_parts, k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
               k10, k11, k12, k13, k14, k15, k16, k17, k18, k19, off_lo, off_hi, thr, scale):
        """grad, grad_x: [M * N / 2] uint32 words of grad_out and grad_x (N a multiple
        of 256); partial: [n_parts * N] float32, row blockIdx.y written; counters:
        [gridDim.x] uint32, zero on entry and exit; grad_bias: [N] (dtype); the rest as
        the shipped backward's (Philox keys, offset, keep threshold, 1 / (1 - p))."""
        tile = cuda.shared.array(tile_n, np.float32)
        flag = cuda.shared.array(1, np.int32)
        ring = cuda.shared.array(ring_words, np.uint32, alignment=128)
        keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
        chunks = np.uint32(n_cols >> 3)
        tx = np.uint32(cuda.threadIdx.x)
        ty = np.uint32(cuda.threadIdx.y)
        j = np.uint32(cuda.blockIdx.x * BX + tx)
        step = np.uint32(by)
        gstep = np.uint32(step * chunks)
        row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
        row_end = np.uint32(min(n_rows, row0 + rows_per_block))
        r = np.uint32(row0 + ty)
        q = np.uint32(r * chunks + j)
        mine = np.uint32(ty * (slots * PIECE_WORDS))
        acc = (F0, F0, F0, F0, F0, F0, F0, F0)
        z = np.uint32(0)
        wa = (z, z, z, z)
        wb = wc = wd = wa
        slot = np.uint32(0)
        if ahead == 4:
            # The shipped register batches: the next four rows' loads are issued
            # before the current four are computed.
            if r < row_end:
                wa = ldc(grad, q)
            if np.uint32(r + step) < row_end:
                wb = ldc(grad, np.uint32(q + gstep))
            if np.uint32(r + 2 * step) < row_end:
                wc = ldc(grad, np.uint32(q + 2 * gstep))
            if np.uint32(r + 3 * step) < row_end:
                wd = ldc(grad, np.uint32(q + 3 * gstep))
            while r < row_end:
                rn = np.uint32(r + 4 * step)
                qn = np.uint32(q + 4 * gstep)
                na = nb = nc = nd = wa
                if rn < row_end:
                    na = ldc(grad, qn)
                if np.uint32(rn + step) < row_end:
                    nb = ldc(grad, np.uint32(qn + gstep))
                if np.uint32(rn + 2 * step) < row_end:
                    nc = ldc(grad, np.uint32(qn + 2 * gstep))
                if np.uint32(rn + 3 * step) < row_end:
                    nd = ldc(grad, np.uint32(qn + 3 * gstep))
                acc, slot = row(grad_x, ring, wa, q, acc, slot, mine, tx, keys, off_lo, off_hi,
                                thr, scale)
                if np.uint32(r + step) < row_end:
                    acc, slot = row(grad_x, ring, wb, np.uint32(q + gstep), acc, slot, mine, tx,
                                    keys, off_lo, off_hi, thr, scale)
                if np.uint32(r + 2 * step) < row_end:
                    acc, slot = row(grad_x, ring, wc, np.uint32(q + 2 * gstep), acc, slot, mine,
                                    tx, keys, off_lo, off_hi, thr, scale)
                if np.uint32(r + 3 * step) < row_end:
                    acc, slot = row(grad_x, ring, wd, np.uint32(q + 3 * gstep), acc, slot, mine,
                                    tx, keys, off_lo, off_hi, thr, scale)
                r = rn
                q = qn
                wa = na
                wb = nb
                wc = nc
                wd = nd
        else:
            if ahead >= 1 and r < row_end:
                wa = ldc(grad, q)
            if ahead >= 2 and np.uint32(r + step) < row_end:
                wb = ldc(grad, np.uint32(q + gstep))
            while r < row_end:
                if ahead == 0:
                    w = ldc(grad, q)
                elif ahead == 1:
                    w = wa
                    if np.uint32(r + step) < row_end:
                        wa = ldc(grad, np.uint32(q + gstep))
                else:
                    w = wa
                    wa = wb
                    if np.uint32(r + 2 * step) < row_end:
                        wb = ldc(grad, np.uint32(q + 2 * gstep))
                acc, slot = row(grad_x, ring, w, q, acc, slot, mine, tx, keys, off_lo, off_hi,
                                thr, scale)
                r = np.uint32(r + step)
                q = np.uint32(q + gstep)
        if dsmem:
            # The strip's row blocks are one cluster: each block's column sums stay in
            # its shared memory (red), and block R of the cluster sums columns R per ..
            # (R + 1) per - 1 of all of them (ranks in row order) through distributed
            # shared memory. No partial rows, fence, counter or last block.
            red = cuda.shared.array(strip, np.float32)
            base = ty * tile_stride + tx
            for kk in range(8):
                tile[base + kk * BX] = acc[kk]
            cuda.syncthreads()
            t = ty * BX + tx
            if t < strip:
                c8 = t >> 3
                kk = t & 7
                sc = F0
                for i in range(by):
                    sc += tile[i * tile_stride + kk * BX + c8]
                red[t] = sc
            cluster_arrive()
            cluster_wait()
            rank = ctarank()
            if t < strip:
                src = np.uint32(t // per)
                cl = np.uint32(rank * per + t % per)
                tile[t] = ld_cluster_f32(tc.shared_address(red, cl), src)
            cuda.syncthreads()
            # The other blocks may leave once every block has read their sums.
            cluster_arrive()
            if t < per:
                sc = F0
                for i in range(cs):
                    sc += tile[i * per + t]
                gstore(grad_bias, np.int64(cuda.blockIdx.x * strip + rank * per + t), sc)
            cluster_wait()
        elif end != "n":
            epilogue(tile, tile_stride, acc, partial, cuda.blockIdx.y, n_cols, counters,
                     n_parts, end == "e", grad_bias, flag)
            if cs:
                # q: launched as clusters, nothing shared; no block leaves its cluster
                # early (as in c).
                cluster_arrive()
                cluster_wait()
        if bulk:
            drain(tx)

    words = types.Array(types.uint32, 1, "C")
    argtypes = (words, words, types.Array(types.float32, 1, "C"), words,
                D._storage(dtype), types.int64, types.int64, types.int64,
                types.int64, types.int64, *([types.uint32] * 23), types.float32)
    return Kernel(f"bulk_bwd_{dtype}_{variant}", kernel, argtypes, launch_bounds=(threads, minb))


def _ptx_report(variants, dtype, make=None):
    """ptxas's report of each variant's kernel from ``make`` (default this module's
    make_kernel), compiled for sm_90 on the CPU."""
    from numba import cuda

    from numba_fused import registry

    with registry.offline_compile():
        for v in variants:
            k = (make or make_kernel)(v, dtype)
            ptx = cuda.compile_ptx(k.pyfunc, k.argtypes, cc=(9, 0), **k.jit_options)[0]
            print(v, registry.ptxas_report(ptx), flush=True)


class _cluster_launcher:
    """Launches ``k`` on ``grid`` blocks of ``block`` threads in clusters of (1, cs)
    blocks through cuda.core (numba's launch takes no cluster); ``a``: the arguments
    as numba arrays and scalars."""

    def __init__(self, k, dev, grid, block, cs, a):
        import torch
        from cuda.core import LaunchConfig, Stream
        from numba.cuda.cudadrv.driver import binding, driver

        cufunc = k.function(dev)[0]
        if cs > 8:
            driver.cuKernelSetAttribute(
                binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1, cufunc.handle, dev)
        self.kernel = cufunc.kernel
        self.config = LaunchConfig(grid=(grid[0], grid[1] // cs), cluster=(1, cs),
                                   block=block)
        self.stream = Stream.from_handle(int(torch.cuda.current_stream().cuda_stream))
        flat = []
        for v, conv in zip(a, k._convert):
            if conv is None:
                n = v.size
                item = v.dtype.itemsize
                flat += [0, 0, n, item, int(v.device_ctypes_pointer.value), n, item]
            else:
                flat.append(conv(v))
        self.flat = flat

    def max_active_clusters(self):
        return self.kernel.occupancy.max_active_clusters(self.config, stream=self.stream)

    def __call__(self, x, y, z):
        from cuda.core import launch

        launch(self.stream, self.config, self.kernel, *self.flat)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--ptx", action="store_true", help="compile for sm_90 on the CPU and "
                    "print ptxas's report (no GPU)")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        parse_variant(v)
    if args.ptx:
        _ptx_report(variants, args.dtype)
        return

    import numpy as np
    import torch
    from numba import cuda

    from bench import tune_dropout as T
    from numba_fused import dropout as D
    from numba_fused.launch import sm_count

    dev = torch.cuda.current_device()
    sms = sm_count(dev)
    tdt = getattr(torch, args.dtype)
    g = torch.randn(ROWS, COLS, device="cuda").to(tdt)
    bias = torch.randn(COLS, device="cuda").to(tdt)
    gw = cuda.as_cuda_array(g.view(-1).view(torch.int32)).view(np.uint32)
    _, rng = D._rng_args(T.SEED, T.OFFSET, P_DROP)
    scale = float(D._dropout_scale(P_DROP))
    want_gx, _ = D.dropout_bias_act_backward(g, None, bias, P_DROP, T.SEED, T.OFFSET, "none",
                                             True)
    n_cb = COLS // (8 * BX)
    ref_gb64 = want_gx.double().sum(0)
    _, ref_gb = D.dropout_bias_act_backward(g, None, bias, P_DROP, T.SEED, T.OFFSET, "none",
                                            True)
    shipped_err = float(((ref_gb.double() - ref_gb64).abs() / ref_gb64.abs().clamp_min(1)).max())
    print(f"shipped grad_bias max_rel_err {shipped_err:.2e} (against the sum of its "
          "rounded grad_x)", flush=True)
    runs = {}
    for v in variants:
        bulk, ahead, minb, slots, end = parse_variant(v)
        cs, by = cluster_size(end), block_rows(end)
        threads = BX * by
        k = make_kernel(v, args.dtype)
        resident = k.resident_blocks(threads, 0, dev)
        n_rb = cs or max(1, sms * resident // n_cb)
        rpb = -(-(-(-ROWS // n_rb)) // by) * by
        n_rb = -(-ROWS // rpb)
        stride = D.tile_stride(BX, by, D.GROUP)
        gx = torch.empty_like(g)
        gb = torch.empty_like(bias)
        partial = torch.empty(n_rb * COLS, dtype=torch.float32, device="cuda")
        counters = torch.zeros(n_cb, dtype=torch.int32, device="cuda")
        gb_np = D._storage(args.dtype).dtype.name
        a = (gw, cuda.as_cuda_array(gx.view(-1).view(torch.int32)).view(np.uint32),
             cuda.as_cuda_array(partial), cuda.as_cuda_array(counters).view(np.uint32),
             cuda.as_cuda_array(gb.view(torch.int16)).view(gb_np),
             ROWS, COLS, rpb, stride, n_rb, *rng, scale)
        if cs:
            launch = _cluster_launcher(k, dev, (n_cb, n_rb), (BX, by), cs, a)
            try:
                fit = launch.max_active_clusters()
            except Exception as exc:  # noqa: BLE001 (reported, not fatal)
                fit = f"? ({type(exc).__name__}: {exc})"
        else:
            fn = k.dispatcher[(n_cb, n_rb), (BX, by)]
            fit = "-"

            def launch(x, y, z, fn=fn, a=a):
                fn(*a)

        gx.fill_(float("nan"))
        gb.fill_(float("nan"))
        launch(None, None, None)
        torch.cuda.synchronize()
        _, ref_gb = D.dropout_bias_act_backward(g, None, bias, P_DROP, T.SEED, T.OFFSET, "none",
                                                True,
                                                config=D.LaunchConfig(rows_per_block=rpb))
        same_gb = "-"
        err = float("nan")
        if end == "e" or end[0] == "c":
            same_gb = bool(torch.equal(gb.view(torch.int16), ref_gb.view(torch.int16)))
            err = float(((gb.double() - ref_gb64).abs() / ref_gb64.abs().clamp_min(1)).max())
        ok = (torch.equal(gx.view(torch.int16), want_gx.view(torch.int16))
              and (end != "e" or same_gb) and int(counters.abs().sum()) == 0
              and not (end[0] == "c" and not err <= shipped_err))
        print(f"{v} regs {k.regs_per_thread} resident {resident} grid {n_cb}x{n_rb} "
              f"rpb {rpb} clusters_fit {fit} grad_bias same_bits_as_shipped {same_gb} "
              f"max_rel_err {err:.2e} check {ok}", flush=True)
        runs[v] = launch

    def shipped(x, y, z, nbg=True):
        D.dropout_bias_act_backward(g, None, bias, P_DROP, T.SEED, T.OFFSET, "none", nbg)

    for p in range(args.passes):
        for name, nbg in (("shipped", True), ("shipped_nobiasgrad", False)):
            _, gpu = T._time(functools.partial(shipped, nbg=nbg), [(None, None, None)],
                             args.reps, 5)
            print(f"pass {p} {name} gpu_us {gpu:.2f}", flush=True)
        for v, fn in runs.items():
            _, gpu = T._time(fn, [(None, None, None)], args.reps, 5)
            print(f"pass {p} {v} gpu_us {gpu:.2f}", flush=True)


if __name__ == "__main__":
    main()
