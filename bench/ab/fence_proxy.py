"""Does a block's closing fence wait for its stores when they go through the async
proxy? A timing prototype (fifty-third session), not a shipped kernel.

    python3 bench/ab/fence_proxy.py [--reps 30] [--passes 2]
    python3 bench/ab/fence_proxy.py --ptx      # compile for sm_90 on the CPU, ptxas report

Why. The bias-grad dropout backward ends each block with its partial row, a fence and
an arrival count (the last block of a strip sums the partial rows). Back to back, with
the previous call's dirty lines in the L2, that ending costs its one-wave plan a few
us and the ring plan 8-12 (``results/s38_ab/trace_summary.txt``). A fence
(``fence.acq_rel.gpu``) orders the thread's earlier generic-proxy writes, so it may wait until the block's grad_x stores
have all reached the L2. If grad_x went out through the async proxy instead
(``cp.async.bulk`` from shared memory), the fence would order only the partial row,
and the ending might cost ~nothing. This measures that premise on a plain copy.

The kernels copy the same 2^26 16-bit elements (x -> y, 16 bytes a thread a step, a
block of 256 threads streaming a contiguous piece of 31 x 4 KB) on one wave of 8
blocks an SM:
  plain        ld.global / st.global, nothing at the end
  plain_fence  the same, then each thread stores one float of a partial row, a
               barrier, and thread 0 fences and counts the block in (atomic add)
  bulk         ld.global, the 16 bytes into a 4-slot shared ring, and thread 0 sends
               each 4 KB slot to y with cp.async.bulk (one barrier a step; the slot's
               previous copy has been read before it is rewritten); before exit
               cp.async.bulk.wait_group.read 0
  bulk_fence   bulk, then plain_fence's ending
  plain2, plain2_fence  plain's with two steps' loads issued before their stores
  drop, drop_bulk       plain / bulk computing the shipped fp16 dropout (no bias, no
                        activation) on the way: y = x / (1 - p) where kept, the keep
                        flags from dropout's own Philox groups (``_keep8``), p = 0.1;
                        checked bit for bit against ``dropout_bias_act_forward``
Each is checked (y == x, or the shipped dropout's bits) before timing. Prints one line
a kernel a pass: registers, median us (CUDA events, stream held, as tune_dropout's
``gpu`` column). If bulk_fence - bulk is near 0 while plain_fence - plain is not, the
premise holds.

Measured (H200, ``results/s53/fence_proxy.log``): the ending costs ~1 us in every form
(premise refuted); bulk stores 1.4-2.2 us faster on the copy, 4.6-5.1 on the dropout
loop (``drop`` 77.7-77.9 us, ``drop_bulk`` 72.8-73.1, the same bits).
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

THREADS = 256
SLOTS = 4
STEPS = 31  # 4 KB pieces a block
VARIANTS = ("plain", "plain_fence", "bulk", "bulk_fence", "plain2", "plain2_fence",
            "drop", "drop_bulk")


def _intrinsics():
    # ab/bulk_bwd.py's (the same PTX: the variants' digests did not change when this
    # script took them from there).
    from bench.ab.bulk_bwd import _intrinsics as bulk_intrinsics

    bulk_store, _, commit, waits, proxy_fence = bulk_intrinsics()
    return bulk_store, commit, waits[SLOTS - 2], waits[0], proxy_fence


@functools.lru_cache(maxsize=None)
def make_kernel(variant, ptx_only=False):
    import numpy as np
    from numba import cuda, types

    from numba_fused import dropout as D
    from numba_fused import tensor_core as tc
    from numba_fused.intrinsics import fence_acq_rel_gpu

    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    bulk = "bulk" in variant
    two = variant.startswith("plain2")
    drop = variant.startswith("drop")
    fence = variant.endswith("fence")
    _, _, unpack, pack, _ = D._VEC["float16"]
    bulk_store, commit, wait_some, wait_all, proxy_fence = _intrinsics()
    slot_words = THREADS * 4
    ring_words = SLOTS * slot_words
    piece_bytes = np.uint32(slot_words * 4)

    def kernel(x, y, partial, counter, k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
               k10, k11, k12, k13, k14, k15, k16, k17, k18, k19, off_lo, off_hi, thr, scale):
        """x, y: [gridDim.x * STEPS * 1024] 4-byte words; block b copies words
        [b * STEPS * 1024, (b + 1) * STEPS * 1024); partial: [gridDim.x * 256] float32;
        counter: [1] int32, zero on entry and on exit; the rest: dropout's Philox
        arguments and scale (read by the drop variants)."""
        keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
        ring = cuda.shared.array(ring_words, np.uint32, alignment=128)
        t = cuda.threadIdx.x
        base = cuda.blockIdx.x * (STEPS * slot_words)
        mine = t * 4
        if two:
            # Two steps' loads before their stores: two 16-byte loads in flight.
            for s in range(0, STEPS - 1, 2):
                w = base + s * slot_words + mine
                a0, a1, a2, a3 = tc.ld_global_v4(x, w)
                b0, b1, b2, b3 = tc.ld_global_v4(x, w + slot_words)
                tc.st_global_v4(y, w, a0, a1, a2, a3)
                tc.st_global_v4(y, w + slot_words, b0, b1, b2, b3)
        for s in range(STEPS - 1 if two else 0, STEPS):
            w = base + s * slot_words + mine
            v0, v1, v2, v3 = tc.ld_global_v4(x, w)
            if drop:
                d = unpack((v0, v1, v2, v3))
                k = D._keep8(np.uint64(w >> 2), keys, off_lo, off_hi, thr)
                v0, v1, v2, v3 = pack((d[0] * scale if k[0] else np.float32(0.0),
                                       d[1] * scale if k[1] else np.float32(0.0),
                                       d[2] * scale if k[2] else np.float32(0.0),
                                       d[3] * scale if k[3] else np.float32(0.0),
                                       d[4] * scale if k[4] else np.float32(0.0),
                                       d[5] * scale if k[5] else np.float32(0.0),
                                       d[6] * scale if k[6] else np.float32(0.0),
                                       d[7] * scale if k[7] else np.float32(0.0)))
            if bulk:
                o = (s % SLOTS) * slot_words + mine
                ring[o] = v0
                ring[o + 1] = v1
                ring[o + 2] = v2
                ring[o + 3] = v3
                proxy_fence()
                if t == 0:
                    # At most SLOTS - 2 copies still reading: the slot the next step
                    # writes was read by a copy issued SLOTS - 1 steps before it.
                    wait_some()
                cuda.syncthreads()
                if t == 0:
                    bulk_store(y, base + s * slot_words,
                               tc.shared_address(ring, (s % SLOTS) * slot_words), piece_bytes)
                    commit()
            else:
                tc.st_global_v4(y, w, v0, v1, v2, v3)
        if bulk and t == 0:
            wait_all()
        if fence:
            partial[cuda.blockIdx.x * THREADS + t] = np.float32(t)
            cuda.syncthreads()
            if t == 0:
                fence_acq_rel_gpu()
                old = cuda.atomic.add(counter, 0, np.int32(1))
                if old == np.int32(cuda.gridDim.x - 1):
                    counter[0] = np.int32(0)

    words = types.Array(types.uint32, 1, "C")
    sig = (words, words, types.Array(types.float32, 1, "C"), types.Array(types.int32, 1, "C"),
           *([types.uint32] * 23), types.float32)
    if ptx_only:
        return cuda.compile_ptx(kernel, sig, cc=(9, 0), launch_bounds=(THREADS, 8))[0]
    return cuda.jit(sig, launch_bounds=(THREADS, 8))(kernel)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--ptx", action="store_true", help="compile for sm_90 on the CPU and "
                    "print ptxas's report (no GPU)")
    args = ap.parse_args(argv)
    if args.ptx:
        from numba_fused import registry

        with registry.offline_compile():
            for v in VARIANTS:
                print(v, registry.ptxas_report(make_kernel(v, True)))
        return

    import numpy as np
    import torch
    from numba import cuda

    from bench import tune_dropout as T
    from numba_fused import dropout as D
    from numba_fused.launch import sm_count

    blocks = 8 * sm_count(torch.cuda.current_device())
    n_words = blocks * STEPS * THREADS * 4
    # fp16 normals, so the drop variants compute on finite values.
    xt = torch.randn(2 * n_words // 4096, 4096, device="cuda").half()
    yt = torch.empty_like(xt)
    x = cuda.as_cuda_array(xt.view(-1).view(torch.int32)).view(np.uint32)
    y = cuda.as_cuda_array(yt.view(-1).view(torch.int32)).view(np.uint32)
    p_drop = 0.1
    _, rng = D._rng_args(T.SEED, T.OFFSET, p_drop)
    scale = float(D._dropout_scale(p_drop))
    partial = torch.zeros(blocks * THREADS, dtype=torch.float32, device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    print(f"blocks {blocks} bytes moved {2 * 4 * n_words / 1e6:.1f} MB", flush=True)
    kernels = {v: make_kernel(v) for v in VARIANTS}

    def launcher(k):
        def fn(a, b, c):
            k[blocks, THREADS](a, b, partial, counter, *rng, scale)

        return fn

    want = D.dropout_bias_act_forward(xt, None, p_drop, T.SEED, T.OFFSET, "none")
    for v, k in kernels.items():
        yt.zero_()
        launcher(k)(x, y, None)
        torch.cuda.synchronize()
        ref = want if v.startswith("drop") else xt
        ok = (bool(torch.equal(yt.view(torch.int16), ref.view(torch.int16)))
              and int(counter.item()) == 0)
        print(f"{v} check {ok}", flush=True)
    for p in range(args.passes):
        for v, k in kernels.items():
            _, gpu = T._time(launcher(k), [(x, y, None)], args.reps, 5)
            ov = k.overloads[next(iter(k.overloads))]
            print(f"pass {p} {v} regs {ov.regs_per_thread} gpu_us {gpu:.2f}", flush=True)


if __name__ == "__main__":
    main()
