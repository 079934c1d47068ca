"""How fast can a numba kernel move the forward's bytes? (issue 16, twenty-second session)

The 16-bit LayerNorm / RMSNorm forwards read 128 MiB and write 128 MiB at M x N = 2^26
and sat 1-2 us (1-2%) behind inductor back to back. Each part (``--part``, comma
separated) times kernels of those bytes, back to back as ``bench/common.time_cuda``
does (a GPU sleep ahead, events around each call, inputs rotated past the L2, a fresh
output each call), two passes each:

- copies: torch's ``empty_like(x).copy_(x)``; ``ldg``: each thread loads K 16-byte
  words (``ld.global.v4``) a block apart, then stores them; ``tma``: one thread of a
  block moves C bytes by the Hopper bulk copies (``cp.async.bulk`` global -> shared on
  an mbarrier, then shared -> global);
- rows: the copy shaped like the forward (a block a row of 128 x K words; loads, two
  dependent block reductions, stores), blocks an SM set by padding shared memory;
- ladder: the fp16 LayerNorm forward in its plainest form (a block a row group, no
  loop), with w / b and the statistics on or off, early or late, beside ours;
- persist: that kernel on a persistent grid with w / b held in registers;
- ln: ours, inductor's (``torch.compile`` of F.layer_norm under no_grad, a fresh
  compile a shape; the configs its autotuner kept go to OUT/inductor_configs.txt) and
  the copy, at a few shapes.

Found (H100, us; bench/notes_layer_norm.md "Twenty-second session"): copy 92.9, ldg K
= 1 92.9 and K = 2 / 4 / 8 93.4 / 94.2 / 95.1, tma 94.1-94.8; the row-shaped copy
92.3-92.9 wherever 1536+ threads an SM or K >= 2; the plain LayerNorm 93.7-94.5 at N
= 1024-8192 with w / b loaded with the row (w / b after the reductions cost 1-1.3 us
at two groups a thread, the statistics after y up to 0.6), ours 94.5-96; persistent
99-105. Prints a line a case and writes OUT/copy_ceiling.json.

    python3 bench/ab/copy_ceiling.py --out DIR [--reps 50] [--part copies,rows,ln]
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import cuda, types  # noqa: E402
from numba.core.extending import intrinsic  # noqa: E402

from bench.common import rotations, time_cuda  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402
from numba_fused import tensor_core as tc  # noqa: E402
from numba_fused.jit import inline_device  # noqa: E402

I32, I64 = ir.IntType(32), ir.IntType(64)


def _asm(builder, argtys, text, cons, args):
    fnty = ir.FunctionType(ir.VoidType(), argtys)
    builder.call(ir.InlineAsm(fnty, text, cons, side_effect=True), args)


def _addr(context, builder, arrty, arr, idxty, idx, space):
    ary = context.make_array(arrty)(context, builder, value=arr)
    ptr = builder.gep(ary.data, [context.cast(builder, idx, idxty, types.intp)])
    p = builder.addrspacecast(builder.bitcast(ptr, ir.IntType(8).as_pointer()),
                              ir.PointerType(ir.IntType(8), space))
    return builder.ptrtoint(p, I32 if space == 3 else I64)


@intrinsic
def expect_tx(typingctx, bar, bidx, nbytes):
    def codegen(context, builder, sig, args):
        a = _addr(context, builder, sig.args[0], args[0], sig.args[1], args[1], 3)
        n = context.cast(builder, args[2], sig.args[2], types.uint32)
        _asm(builder, [I32, I32], "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
             "r,r,~{memory}", [a, n])
        return context.get_dummy_value()
    return types.void(bar, bidx, nbytes), codegen


@intrinsic
def bulk_load(typingctx, smem, sidx, src, gidx, nbytes, bar, bidx):
    def codegen(context, builder, sig, args):
        s = _addr(context, builder, sig.args[0], args[0], sig.args[1], args[1], 3)
        g = _addr(context, builder, sig.args[2], args[2], sig.args[3], args[3], 1)
        n = context.cast(builder, args[4], sig.args[4], types.uint32)
        b = _addr(context, builder, sig.args[5], args[5], sig.args[6], args[6], 3)
        _asm(builder, [I32, I64, I32, I32],
             "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
             "[$0], [$1], $2, [$3];", "r,l,r,r,~{memory}", [s, g, n, b])
        return context.get_dummy_value()
    return types.void(smem, sidx, src, gidx, nbytes, bar, bidx), codegen


@intrinsic
def bulk_store(typingctx, dst, gidx, smem, sidx, nbytes):
    def codegen(context, builder, sig, args):
        g = _addr(context, builder, sig.args[0], args[0], sig.args[1], args[1], 1)
        s = _addr(context, builder, sig.args[2], args[2], sig.args[3], args[3], 3)
        n = context.cast(builder, args[4], sig.args[4], types.uint32)
        _asm(builder, [I64, I32, I32], "cp.async.bulk.global.shared::cta.bulk_group "
             "[$0], [$1], $2;", "l,r,r,~{memory}", [g, s, n])
        return context.get_dummy_value()
    return types.void(dst, gidx, smem, sidx, nbytes), codegen


@intrinsic
def bulk_commit_wait_read(typingctx):
    def codegen(context, builder, sig, args):
        _asm(builder, [], "cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0;",
             "~{memory}", [])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def fence_mbarrier_init(typingctx):
    def codegen(context, builder, sig, args):
        _asm(builder, [], "fence.mbarrier_init.release.cluster;", "~{memory}", [])
        return context.get_dummy_value()
    return types.void(), codegen


@inline_device
def load4(a, idx, v, j):
    """v[j, 0:4] = the 16-byte word of uint32 array ``a`` at element ``idx``."""
    a0, a1, a2, a3 = tc.ld_global_v4(a, idx)
    v[j, 0] = a0
    v[j, 1] = a1
    v[j, 2] = a2
    v[j, 3] = a3
    return 0


def make_ldg(k, block):
    @cuda.jit(lineinfo=False)
    def ldg_copy(src, dst):
        # src, dst: flat uint32, 4 a 16-byte word; a block moves block * k words.
        base = cuda.blockIdx.x * (block * k) + cuda.threadIdx.x
        v = cuda.local.array((k, 4), types.uint32)
        for j in range(k):
            load4(src, (base + j * block) * 4, v, j)
        for j in range(k):
            tc.st_global_v4(dst, (base + j * block) * 4, v[j, 0], v[j, 1], v[j, 2], v[j, 3])
    return ldg_copy


def make_tma(chunk):
    words = chunk // 4
    alloc = words + 4

    @cuda.jit(lineinfo=False)
    def tma_copy(src, dst):
        # numba aligns a shared array to its item size; bulk copies need 16 bytes.
        buf = cuda.shared.array(alloc, types.uint32)
        bar = cuda.shared.array(1, types.uint64)
        if cuda.threadIdx.x == 0:
            s0 = ((16 - (tc.shared_address(buf, 0) & 15)) & 15) // 4
            off = cuda.blockIdx.x * words
            tc.mbarrier_init(bar, 0, 1)
            fence_mbarrier_init()
            expect_tx(bar, 0, chunk)
            bulk_load(buf, s0, src, off, chunk, bar, 0)
            tc.mbarrier_wait(bar, 0, 0)
            bulk_store(dst, off, buf, s0, chunk)
            bulk_commit_wait_read()
    return tma_copy


def make_rowcopy(k, block, nred):
    """A copy shaped like the LayerNorm forward: a block a row of ``block * k`` words,
    loaded, then ``nred`` block reductions (each waits on the last, as the centred
    variance waits on the mean), then stored; the stored words depend on the sums
    (through ``zero``, 0 at run time) so no store can go ahead of them."""
    warps = block // 32

    @cuda.jit(lineinfo=False)
    def rowcopy(src, dst, zero):
        red = cuda.shared.array((2, 32), types.float32)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * (block * k) + tid
        v = cuda.local.array((k, 4), types.uint32)
        s = types.float32(0)
        for j in range(k):
            load4(src, (base + j * block) * 4, v, j)
            s += types.float32(v[j, 0] & 0xFFFF) + types.float32(v[j, 2] & 0xFFFF)
        mask = types.uint32(0)
        for r in range(nred):
            t = s
            for off in (16, 8, 4, 2, 1):
                t += cuda.shfl_xor_sync(0xFFFFFFFF, t, off)
            if tid % 32 == 0:
                red[r, tid // 32] = t
            cuda.syncthreads()
            tot = types.float32(0)
            for i in range(warps):
                tot += red[r, i]
            s = (s - tot) * (s - tot)
            mask |= types.uint32(tot) & types.uint32(zero)
        for j in range(k):
            tc.st_global_v4(dst, (base + j * block) * 4, v[j, 0] ^ mask, v[j, 1], v[j, 2],
                            v[j, 3])
    return rowcopy


def numba_rowcopy(kernel, grid, block, pad):
    def fn(x):
        y = torch.empty_like(x)
        kernel[grid, block, 0, pad](
            cuda.as_cuda_array(x.view(-1).view(torch.int32)).view("uint32"),
            cuda.as_cuda_array(y.view(-1).view(torch.int32)).view("uint32"), 0)
        return y
    return fn


def inductor_configs(out, tag):
    """The configs inductor's autotuner kept for its LayerNorm forward kernels."""
    from torch._inductor.codecache import PyCodeCache
    lines = []
    for key, mod in list(PyCodeCache.modules_by_key.items()) if hasattr(
            PyCodeCache, "modules_by_key") else []:
        for name in dir(mod):
            obj = getattr(mod, name)
            launchers = getattr(obj, "launchers", None)
            if launchers:
                lines.append(f"{name}: " + "; ".join(str(l.config) for l in launchers))
    for mod in getattr(PyCodeCache, "modules", []):
        for name in dir(mod):
            obj = getattr(mod, name)
            launchers = getattr(obj, "launchers", None)
            if launchers:
                lines.append(f"{name}: " + "; ".join(str(l.config) for l in launchers))
    text = "\n".join(sorted(set(lines)))
    print(f"inductor configs at {tag}:\n{text}", flush=True)
    with open(os.path.join(out, "inductor_configs.txt"), "a") as f:
        f.write(f"== {tag}\n{text}\n")


def _ln_parts(k, tpr):
    """Device helpers of the plain fp16 LayerNorm kernels below, for rows whose thread
    t holds groups j * tpr + t (j < k) as raw words ``v[j, 0:4]`` (loaded by
    :func:`load4`): row_stats(xr, red, t, slot,
    nf, eps) -> (mu, r): mu = sum(x) / n, r = 1 / sqrt(sum((x - mu)^2) / n + eps) over
    the row (warp shuffles, then, for rows of several warps, the warps' partials in
    ``red[pass, slot * warps:]`` summed in order after a barrier); write(y, idx, xr,
    wr, br, j, jw, mu, r, wb) stores group j of y = (x - mu) r w + b (w / b from
    wr / br[jw] with ``wb``)."""
    warps = max(1, tpr // 32)
    shuffles = tuple(o for o in (16, 8, 4, 2, 1) if o < tpr)

    @inline_device
    def row_sum(s, red, p, t, slot):
        for o in shuffles:
            s += cuda.shfl_xor_sync(0xFFFFFFFF, s, o)
        if warps > 1:
            if t % 32 == 0:
                red[p, slot * warps + t // 32] = s
            cuda.syncthreads()
            s = types.float32(0)
            for i in range(warps):
                s += red[p, slot * warps + i]
        return s

    @inline_device
    def row_stats(xr, red, t, slot, nf, eps):
        s = types.float32(0)
        for j in range(k):
            for i in range(4):
                lo, hi = tc.unpack_f16x2(xr[j, i])
                s += lo + hi
        mu = row_sum(s, red, 0, t, slot) / nf
        ss = types.float32(0)
        for j in range(k):
            for i in range(4):
                lo, hi = tc.unpack_f16x2(xr[j, i])
                ss += (lo - mu) * (lo - mu) + (hi - mu) * (hi - mu)
        ss = row_sum(ss, red, 1, t, slot)
        return mu, types.float32(1.0) / math.sqrt(ss / nf + types.float32(eps))

    @inline_device
    def write(y, idx, xr, wr, br, j, jw, mu, r, wb):
        out = cuda.local.array(4, types.uint32)
        for i in range(4):
            lo, hi = tc.unpack_f16x2(xr[j, i])
            lo = (lo - mu) * r
            hi = (hi - mu) * r
            if wb:
                wl, wh = tc.unpack_f16x2(wr[jw, i])
                bl, bh = tc.unpack_f16x2(br[jw, i])
                lo = lo * wl + bl
                hi = hi * wh + bh
            out[i] = tc.pack_f16x2(lo, hi)
        tc.st_global_v4(y, idx, out[0], out[1], out[2], out[3])
        return 0

    return row_stats, write


def make_lnsimple(k, tpr, rpb, wb, stats, wb_early=False, st_early=False):
    """The fp16 LayerNorm forward in its plainest form, for the ladder from the row
    copy: a block of ``rpb`` rows of ``tpr`` threads, no loop (a block a row group);
    thread t of row slot s holds groups j * tpr + t (j < k) of its row as raw words;
    mu = sum(x) / n, var = sum((x - mu)^2) / n (a block reduction each), r =
    rsqrt(var + eps), y = (x - mu) r w + b (w, b only with ``wb``: loaded after the
    reductions, or with ``wb_early`` right after the row's loads, into registers);
    mean / rstd stored with ``stats`` (after y, or with ``st_early`` before it)."""
    row_stats, write = _ln_parts(k, tpr)
    kw = k if (wb and wb_early) else 1

    @cuda.jit(lineinfo=False)
    def lnk(x, w, b, y, mean, rstd, n, eps):
        red = cuda.shared.array((2, 32), types.float32)
        t = cuda.threadIdx.x
        slot = cuda.threadIdx.y
        row = cuda.blockIdx.x * rpb + slot
        base = row * (tpr * k) + t
        xr = cuda.local.array((k, 4), types.uint32)
        wr = cuda.local.array((kw, 4), types.uint32)
        br = cuda.local.array((kw, 4), types.uint32)
        for j in range(k):
            load4(x, (base + j * tpr) * 4, xr, j)
        if wb and wb_early:
            for j in range(k):
                load4(w, (j * tpr + t) * 4, wr, j)
                load4(b, (j * tpr + t) * 4, br, j)
        mu, r = row_stats(xr, red, t, slot, types.float32(n), eps)
        if stats and st_early and t == 0:
            mean[row] = mu
            rstd[row] = r
        for j in range(k):
            if wb and not wb_early:
                load4(w, (j * tpr + t) * 4, wr, 0)
                load4(b, (j * tpr + t) * 4, br, 0)
            write(y, (base + j * tpr) * 4, xr, wr, br, j, j if wb_early else 0, mu, r, wb)
        if stats and not st_early and t == 0:
            mean[row] = mu
            rstd[row] = r
    return lnk


def make_lnpersist(k, tpr, rpb):
    """make_lnsimple's kernel (w, b, statistics before y) on a persistent grid: w and b
    loaded once into registers, then row slot s of block i takes rows i * rpb + s,
    + gridDim.x * rpb, ..."""
    row_stats, write = _ln_parts(k, tpr)

    @cuda.jit(lineinfo=False)
    def lnp(x, w, b, y, mean, rstd, m, n, eps):
        red = cuda.shared.array((2, 32), types.float32)
        t = cuda.threadIdx.x
        slot = cuda.threadIdx.y
        xr = cuda.local.array((k, 4), types.uint32)
        wr = cuda.local.array((k, 4), types.uint32)
        br = cuda.local.array((k, 4), types.uint32)
        for j in range(k):
            load4(w, (j * tpr + t) * 4, wr, j)
            load4(b, (j * tpr + t) * 4, br, j)
        row = cuda.blockIdx.x * rpb + slot
        while row < m:
            base = row * (tpr * k) + t
            for j in range(k):
                load4(x, (base + j * tpr) * 4, xr, j)
            mu, r = row_stats(xr, red, t, slot, types.float32(n), eps)
            if t == 0:
                mean[row] = mu
                rstd[row] = r
            for j in range(k):
                write(y, (base + j * tpr) * 4, xr, wr, br, j, j, mu, r, True)
            row += cuda.gridDim.x * rpb
    return lnp


def numba_lnpersist(kernel, m, n, tpr, rpb, per_sm):
    def u32(a):
        return cuda.as_cuda_array(a.reshape(-1).view(torch.int32)).view("uint32")

    grid = min(m // rpb, 132 * per_sm)

    def fn(x, w, b):
        y = torch.empty_like(x)
        mean = torch.empty(m, device=x.device, dtype=torch.float32)
        rstd = torch.empty(m, device=x.device, dtype=torch.float32)
        kernel[grid, (tpr, rpb)](u32(x), u32(w), u32(b), u32(y), cuda.as_cuda_array(mean),
                                 cuda.as_cuda_array(rstd), m, n, 1e-5)
        return y, mean, rstd
    return fn


def numba_lnsimple(kernel, m, n, tpr, rpb):
    def u32(a):
        return cuda.as_cuda_array(a.reshape(-1).view(torch.int32)).view("uint32")

    def fn(x, w, b):
        y = torch.empty_like(x)
        mean = torch.empty(m, device=x.device, dtype=torch.float32)
        rstd = torch.empty(m, device=x.device, dtype=torch.float32)
        kernel[m // rpb, (tpr, rpb)](u32(x), u32(w), u32(b), u32(y), cuda.as_cuda_array(mean),
                                     cuda.as_cuda_array(rstd), n, 1e-5)
        return y, mean, rstd
    return fn


def numba_copy(kernel, grid, block):
    def fn(x):
        y = torch.empty_like(x)
        kernel[grid, block](cuda.as_cuda_array(x.view(-1).view(torch.int32)).view("uint32"),
                            cuda.as_cuda_array(y.view(-1).view(torch.int32)).view("uint32"))
        return y
    return fn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--part", default="copies,rows,ln",
                   help="comma-separated: copies, rows, ladder, persist, ln")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    total = 2**26
    nbytes16 = total * 2
    sets = [(torch.randn(total, device="cuda", dtype=torch.float16),)
            for _ in range(rotations(nbytes16))]
    words16 = nbytes16 // 16
    rows = []

    def record(name, fn, arg_sets, nbytes):
        for attempt in range(2):
            t = time_cuda(fn, arg_sets, reps=args.reps)
            us = t["median_ms"] * 1e3
            rows.append({"case": name, "pass": attempt, "us": us,
                         "TB/s": 2 * nbytes / us / 1e6})
            print(f"{name:40s} pass {attempt}: {us:8.2f} us  {2 * nbytes / us / 1e6:.3f} TB/s",
                  flush=True)

    ref = sets[0][0]
    parts = args.part.split(",")
    if "rows" in parts:
        smem = 233472  # bytes an SM (228 KiB), each block also holding 1 KiB
        for nred in (0, 2):
            for k in (1, 2, 4):
                for per_sm in (6, 8, 12, 16):
                    pad = smem // per_sm - 1024 - 64
                    fn = numba_rowcopy(make_rowcopy(k, 128, nred), words16 // (k * 128), 128,
                                       pad)
                    assert torch.equal(fn(ref), ref)
                    record(f"rows red={nred} k={k} x128 {per_sm * 128}/SM", fn, sets,
                           nbytes16)
    if "copies" in parts:
        record("torch copy fp16 2^26", lambda x: torch.empty_like(x).copy_(x), sets, nbytes16)
        for k, block in ((1, 256), (2, 256), (4, 256), (1, 128), (1, 512)):
            fn = numba_copy(make_ldg(k, block), words16 // (k * block), block)
            assert torch.equal(fn(ref), ref)
            record(f"ldg k={k} block={block}", fn, sets, nbytes16)
        for chunk, block in ((4096, 32), (16384, 32)):
            fn = numba_copy(make_tma(chunk), nbytes16 // chunk, block)
            assert torch.equal(fn(ref), ref)
            record(f"tma chunk={chunk} block={block}", fn, sets, nbytes16)
    if "ladder" in parts:
        # (N, k, tpr, rpb): rows of N fp16 as k groups of tpr threads, rpb rows a block.
        cases = [(512, 2, 32, 8), (512, 1, 64, 4), (1024, 1, 128, 1), (1024, 2, 64, 2),
                 (2048, 2, 128, 1), (2048, 4, 64, 2), (4096, 4, 128, 1), (8192, 4, 256, 1),
                 (8192, 8, 128, 1)]
        for n, k, tpr, rpb in cases:
            m = total // n
            xs = [(torch.randn(m, n, device="cuda", dtype=torch.float16),
                   torch.randn(n, device="cuda", dtype=torch.float16),
                   torch.randn(n, device="cuda", dtype=torch.float16))
                  for _ in range(rotations(nbytes16))]
            flags = [(True, True, False, False), (True, True, True, False),
                     (True, True, False, True), (True, True, True, True)]
            if (n, k, tpr) == (4096, 4, 128):
                flags += [(False, False, False, False)]
            for wb, stats, wbe, ste in flags:
                if wbe and k > 4:
                    continue
                fn = numba_lnsimple(make_lnsimple(k, tpr, rpb, wb, stats, wbe, ste), m, n, tpr,
                                    rpb)
                xx, ww, bb = xs[0]
                got = fn(xx, ww, bb)[0].float()
                want = F.layer_norm(xx.float(), (n,), ww.float() if wb else None,
                                    bb.float() if wb else None)
                err = (got - want).abs().max().item()
                assert err < 0.05, err
                record(f"ladder N={n} k={k} tpr={tpr} rpb={rpb} wb={int(wb)}{'e' * wbe} "
                       f"st={int(stats)}{'e' * ste}", fn, xs, nbytes16)
            record(f"LN ours fp16 {m}x{n}", lambda x, w, b: ln.layer_norm_forward(x, w, b), xs,
                   nbytes16)
    if "persist" in parts:
        # (N, k, tpr, rpb, blocks an SM)
        # Blocks an SM as the registers allow (ptxas: 64 at k = 2, 127 at k = 4).
        cases = [(512, 2, 32, 8, 4), (512, 2, 32, 4, 8), (1024, 2, 64, 2, 8),
                 (1024, 4, 32, 4, 4), (2048, 2, 128, 1, 8), (4096, 4, 128, 1, 4),
                 (4096, 2, 256, 1, 4), (8192, 4, 256, 1, 2)]
        seen = set()
        for n, k, tpr, rpb, per_sm in cases:
            m = total // n
            xs = [(torch.randn(m, n, device="cuda", dtype=torch.float16),
                   torch.randn(n, device="cuda", dtype=torch.float16),
                   torch.randn(n, device="cuda", dtype=torch.float16))
                  for _ in range(rotations(nbytes16))]
            fn = numba_lnpersist(make_lnpersist(k, tpr, rpb), m, n, tpr, rpb, per_sm)
            xx, ww, bb = xs[0]
            got = fn(xx, ww, bb)[0].float()
            want = F.layer_norm(xx.float(), (n,), ww.float(), bb.float())
            err = (got - want).abs().max().item()
            assert err < 0.05, err
            record(f"persist N={n} k={k} tpr={tpr} rpb={rpb} x{per_sm}/SM", fn, xs, nbytes16)
            if n not in seen:
                seen.add(n)
                fn = numba_lnsimple(make_lnsimple(k, tpr, rpb, True, True, k <= 4, True), m, n,
                                    tpr, rpb)
                record(f"ladder N={n} k={k} tpr={tpr} rpb={rpb} wb=1e st=1e", fn, xs,
                       nbytes16)
                record(f"LN ours fp16 {m}x{n}", lambda x, w, b: ln.layer_norm_forward(x, w, b),
                       xs, nbytes16)
    if "ln" in parts:
        for dt, m, n in ((torch.float16, 131072, 512), (torch.float16, 65536, 1024),
                         (torch.float16, 16384, 4096), (torch.float16, 8192, 8192),
                         (torch.float32, 65536, 1024), (torch.float32, 8192, 8192)):
            torch._dynamo.reset()
            comp = torch.compile(F.layer_norm, dynamic=False)
            xs = [(torch.randn(m, n, device="cuda", dtype=dt),
                   torch.randn(n, device="cuda", dtype=dt),
                   torch.randn(n, device="cuda", dtype=dt))
                  for _ in range(rotations(m * n * dt.itemsize))]
            nb = m * n * dt.itemsize
            record(f"LN ours {dt} {m}x{n}", lambda x, w, b: ln.layer_norm_forward(x, w, b),
                   xs, nb)
            with torch.no_grad():
                record(f"LN inductor {dt} {m}x{n}", lambda x, w, b: comp(x, (n,), w, b), xs,
                       nb)
                inductor_configs(args.out, f"{dt} {m}x{n}")
            record(f"copy {dt} {m}x{n}", lambda x, w, b: torch.empty_like(x).copy_(x), xs, nb)
    with open(os.path.join(args.out, "copy_ceiling.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
