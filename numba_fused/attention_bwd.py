"""Memory-efficient attention backward, after the seed kernel's data flow.

Three kernels:

- ``prep`` (grid: query blocks x heads x batches): ``delta_i = sum_c dO_ic * O_ic``
  with the row's lanes reduced by ``xor`` shuffles (the seed's ``computeDelta``);
  zeroes this query block's dQ workspace rows (every slice) and its lock / counter;
  writes dQ = 0 for query blocks that no key block reaches (rows that see no key) and
  dBias = 0 outside the key blocks the main kernel visits.
- ``main`` (grid: key splits x heads x batches, the seed's ``(num_splits_key, H, B)``):
  block ``split`` owns key blocks ``split, split + n, split + 2n, ...`` (``n`` =
  gridDim.x). For each it keeps dK, dV in registers and walks the query blocks that
  can see it (``smallest_query_for_key`` .. the window's last query, rotated by
  ``query_start_shift`` to spread the dQ locks when unmasked, as the seed), per query
  block: recompute ``P = exp(scale * Q K^T + bias - lse)`` (0 where masked),
  ``dV += (P * Z)^T dO``; ``dP = (dO V^T) * Z``; ``dS = P * (dP - delta)``;
  ``dBias = dS``; ``dQ += scale * dS K`` (through the workspace); ``dK += dS^T Q``;
  at the end of the key block ``dK *= scale`` and both are written (zero for keys no
  query sees: the seed's ``zfillGradKV``).
- ``bias_grad_reduce``: when the bias is broadcast (stride 0), sums the full per
  ``(b, h, i, j)`` dS over the broadcast dimensions in a fixed order.

dQ across key splits. Every query block has a float32 workspace tile per slice, an
int32 lock and an arrival counter. Non-deterministic (the seed's scheme): a block
takes the tile's lock (``atomicCAS`` spin by thread 0, then ``syncthreads`` and a
fence), adds its partial, and either stores the sum back and releases (fence,
``syncthreads``, ``atomicExch(lock, 0)``), or, when it is the last of the
``num_parallel_blocks`` splits that touch the tile (counted on the arrival counter when
a split makes its last contribution), writes dQ itself and keeps the lock. The order
of the additions depends on timing. Deterministic: one workspace slice per split, each
written only by its split (no lock); each split's last contribution bumps the counter
after a fence, and the last arriver sums the slices in split order and writes dQ:
bit-identical run to run. Atomic (flash-attention's dQ accumulation): no lock, each
block adds its partial with float32 ``atomicAdd`` (``RED`` at L2, nothing to wait
for), then the arrival counter as above; the tensor-core main kernel keeps no
counter in this scheme: a fourth kernel, ``dq_store``, writes dQ from the workspace
after it (as flash-attention's ``convert_dQ``), which saves every (key block, query
block) step a fence, two barriers and the counter's atomic. No block ever waits for
another to make progress except through the lock, which its holder releases without
waiting on anyone.
"""

import functools
import math
from types import SimpleNamespace

import numpy as np
from numba import cuda, types

from . import dtypes
from .attention_fwd import (F32_1D, I32_1D, I64, MASK_BOTTOM_RIGHT, MASK_NONE, MATH_SCALARS,
                            TileConfig, _device, _stride_args, argtypes_for, tile_helpers)
from .launch import SIMULATOR, Kernel

__all__ = ["make_attention_bwd_kernel", "make_attention_bwd_prep_kernel",
           "make_bias_grad_reduce_kernel", "make_dq_store_kernel", "schedule", "BWD_PARAMS",
           "PREP_PARAMS", "DQ_STORE_PARAMS"]

_ZERO = np.float32(0.0)
_NEG_INF = np.float32(-np.inf)
_FULL = 0xFFFFFFFF
# Pause between attempts on a held dQ lock, as the seed's AtomicLock (__nanosleep(40)).
_BACKOFF_NS = np.uint32(40)


@functools.lru_cache(maxsize=None)
def schedule(blk):
    """The seed's iteration-order helpers for key/query blocks of ``blk`` rows, as
    device functions. sq, sk: this sequence's query / key counts."""

    @_device
    def query_end(sq):
        return (sq + blk - 1) // blk * blk

    @_device
    def smallest_query_for_key(key_start, sq, sk, mask_kind, window):
        """First query block (its start) that sees some key of the block at key_start;
        query_end(sq) when none does (getSmallestQueryForKey)."""
        if mask_kind == MASK_NONE:
            return 0
        shift = sk - sq if mask_kind == MASK_BOTTOM_RIGHT else 0
        wsize = window if window > 0 else sq + sk
        last_key = min(key_start + blk, sk) - 1
        first_query = key_start - shift
        last_query = last_key - shift + wsize - 1
        if last_query < 0 or first_query >= sq:
            return query_end(sq)
        first_query = max(0, first_query)
        return (first_query // blk) * blk

    @_device
    def query_start_shift(split, nsplit, sq, mask_kind):
        """Unmasked and split: each split starts at a different query block, so the
        splits do not queue on the same dQ lock (getQueryStartShift)."""
        if mask_kind == MASK_NONE and nsplit > 1 and sq > 0:
            return (split * blk) % query_end(sq)
        return 0

    @_device
    def query_start(split, nsplit, key_start, sq, sk, mask_kind, window):
        return (smallest_query_for_key(key_start, sq, sk, mask_kind, window)
                + query_start_shift(split, nsplit, sq, mask_kind))

    @_device
    def next_block(split, nsplit, qs, ks, sq, sk, mask_kind, window):
        """(next query start, next key start) after tile (qs, ks) (incrIteration)."""
        next_query = qs + blk
        qshift = query_start_shift(split, nsplit, sq, mask_kind)
        if qshift != 0:
            if next_query >= sq:
                return smallest_query_for_key(ks, sq, sk, mask_kind, window), ks
            if not (qs < qshift and qshift <= next_query):
                return next_query, ks
        elif window > 0:
            shift = sk - sq if mask_kind == MASK_BOTTOM_RIGHT else 0
            last_key = min(ks + blk, sk) - 1
            last_query = last_key - shift + window - 1
            if next_query <= last_query and next_query < sq:
                return next_query, ks
        elif next_query < sq:
            return next_query, ks
        next_key = ks + nsplit * blk
        return query_start(split, nsplit, next_key, sq, sk, mask_kind, window), next_key

    @_device
    def key_range(qs, sq, sk, mask_kind, window):
        """(first, last) key index that some query of block qs sees; first > last if none."""
        if mask_kind == MASK_NONE:
            return 0, sk - 1
        shift = sk - sq if mask_kind == MASK_BOTTOM_RIGHT else 0
        last_q = min(qs + blk, sq) - 1
        last_key = min(last_q + shift, sk - 1)
        first_key = 0
        if window > 0:
            first_key = max(qs - window + 1 + shift, 0)
        return first_key, last_key

    @_device
    def num_parallel_blocks(qs, sq, sk, mask_kind, window, nsplit):
        """How many splits add into dQ block qs (getNumParallelBlocksForQuery)."""
        first_key, last_key = key_range(qs, sq, sk, mask_kind, window)
        if last_key < 0 or first_key >= sk or first_key > last_key:
            return 0
        nkb = last_key // blk - first_key // blk + 1
        return min(nsplit, nkb)

    return SimpleNamespace(
        query_end=query_end, smallest_query_for_key=smallest_query_for_key,
        query_start_shift=query_start_shift, query_start=query_start, next_block=next_block,
        key_range=key_range, num_parallel_blocks=num_parallel_blocks)


PREP_PARAMS = (
    ("out", None), ("gout", None), ("delta", F32_1D), ("ws", F32_1D), ("locks", I32_1D),
    ("gq", None), ("gb", None), ("cu_q", I32_1D), ("cu_k", I32_1D),
    *_stride_args("o", "g", "gq"),
    ("gb_sb", I64), ("gb_sh", I64), ("gb_si", I64),
    ("seq_q", I64), ("seq_k", I64), ("d", I64), ("dv", I64), ("rows", I64), ("ws_rows", I64),
    ("slices", I64), ("nsplit", I64), ("mask_kind", I64), ("window", I64), ("varlen", I64),
    ("grad_bias", I64),
)

BWD_PARAMS = (
    ("q", None), ("k", None), ("v", None), ("gout", None), ("bias", None),
    ("lse", F32_1D), ("delta", F32_1D), ("gq", None), ("gk", None), ("gv", None), ("gb", None),
    ("ws", F32_1D), ("locks", I32_1D), ("cu_q", I32_1D), ("cu_k", I32_1D),
    *_stride_args("q", "k", "v", "g", "gq", "gk", "gv"),
    ("b_sb", I64), ("b_sh", I64), ("b_si", I64), ("b_sj", I64),
    ("l_sb", I64), ("l_sh", I64), ("l_si", I64),
    ("gb_sb", I64), ("gb_sh", I64), ("gb_si", I64),
    ("seq_q", I64), ("seq_k", I64), ("d", I64), ("dv", I64), ("rows", I64), ("ws_rows", I64),
    *MATH_SCALARS,
    ("grad_bias", I64), ("dq_mode", I64),
)

# dQ accumulation schemes (the main kernels' dq_mode): the seed's per-tile lock,
# a workspace slice per split (deterministic), float32 atomic adds (flash-attention's).
DQ_LOCK, DQ_SLICES, DQ_ATOMIC = 0, 1, 2
DQ_MODES = {"lock": DQ_LOCK, "atomic": DQ_ATOMIC}

DQ_STORE_PARAMS = (
    ("ws", F32_1D), ("gq", None), ("cu_q", I32_1D), ("gq_sb", I64), ("gq_ss", I64),
    ("gq_sh", I64), ("seq_q", I64), ("d", I64), ("ws_rows", I64), ("varlen", I64),
)


@functools.lru_cache(maxsize=None)
def make_dq_store_kernel(dtype, blk, nt):
    """dQ from the atomic scheme's workspace, once the tensor-core main kernel has
    added every split's part (flash-attention's ``convert_dQ``): grid ``(ceil(rows /
    blk), H, batches)``, ``nt`` threads (a multiple of 32); parameters as
    :data:`DQ_STORE_PARAMS`."""
    store = dtypes.storer(dtype)
    nw = nt // 32

    def attn_dq_store(ws, gq, cu_q, gq_sb, gq_ss, gq_sh, seq_q, d, ws_rows, varlen):
        """gq[b, i, h, c] = ws[((b H + h) ws_rows + i) d + c] (rounded to the dtype) for
        the ``blk`` rows i of query block x below the sequence's length (``cu_q`` with
        varlen) and c < d; h = y, b = z, H = gridDim.y. gq ``[B, Sq, H, D]`` at
        b gq_sb + h gq_sh + i gq_ss + c (b = 0 and i offset by cu_q[z] with varlen).
        Warp w copies rows w, w + nw, .., a row's columns across its lanes."""
        lane = cuda.threadIdx.x & 31
        w = cuda.threadIdx.x >> 5
        qs = cuda.blockIdx.x * blk
        h = cuda.blockIdx.y
        b = cuda.blockIdx.z
        bq = b
        qrow0 = 0
        sq = seq_q
        if varlen != 0:
            bq = 0
            qrow0 = np.int64(cu_q[b])
            sq = np.int64(cu_q[b + 1]) - qrow0
        src = ((b * cuda.gridDim.y + h) * ws_rows + qs) * d
        dst = bq * gq_sb + h * gq_sh + (qrow0 + qs) * gq_ss
        for r in range(w, min(blk, sq - qs), nw):
            for c in range(lane, d, 32):
                store(gq, np.uint64(dst + r * gq_ss + c), ws[np.uint64(src + r * d + c)])

    return Kernel(f"attn_dq_store_{dtype}_b{blk}", attn_dq_store,
                  argtypes_for(DQ_STORE_PARAMS, dtype))


@functools.lru_cache(maxsize=None)
def make_attention_bwd_prep_kernel(dtype, cfg):
    """delta, workspace zeroing, dQ / dBias zero-fill of unvisited regions. Grid
    ``(ceil(rows / blk), H, batches)``, block ``cfg.nt``; parameters as
    :data:`PREP_PARAMS`."""
    cfg = TileConfig(*cfg).validate()
    blk = cfg.blk
    nt = cfg.nt
    tpr = nt // blk
    log_tpr = tpr.bit_length() - 1
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)
    sch = schedule(blk)
    key_range = sch.key_range
    num_parallel_blocks = sch.num_parallel_blocks

    def attn_bwd_prep(out, gout, delta, ws, locks, gq, gb, cu_q, cu_k,
                      o_sb, o_ss, o_sh, g_sb, g_ss, g_sh, gq_sb, gq_ss, gq_sh,
                      gb_sb, gb_sh, gb_si,
                      seq_q, seq_k, d, dv, rows, ws_rows, slices, nsplit,
                      mask_kind, window, varlen, grad_bias):
        """For query block x of head y, batch z (H = gridDim.y, nb = gridDim.z):
        delta[(z * H + y) * rows + i] = sum_c out[i, c] * gout[i, c] (float32, the rows
        i of this block and sequence); the block's rows of every workspace slice
        (ws[((s * nb + z) * H + y) * ws_rows + i) * d + c]) and its lock / counter
        (locks[2 * ((z * H + y) * nqb + x) + {0, 1}]) set to 0; gq rows = 0 when no key
        split adds into the block (its rows see no key); gb[z, y, i, j] = 0 for keys
        outside the key blocks the main kernel visits (when grad_bias).
        out, gout [B, Sq, H, Dv], gq [B, Sq, H, D] with strides as the forward's; gb
        [B, H, Sq, Sk] at z * gb_sb + y * gb_sh + i * gb_si + j.
        """
        tid = cuda.threadIdx.x
        qb = cuda.blockIdx.x
        qs = qb * blk
        h = cuda.blockIdx.y
        b = cuda.blockIdx.z
        nheads = cuda.gridDim.y
        nb = cuda.gridDim.z
        bq = b
        qrow0 = 0
        sq = seq_q
        sk = seq_k
        if varlen != 0:
            bq = 0
            qrow0 = np.int64(cu_q[b])
            sq = np.int64(cu_q[b + 1]) - qrow0
            sk = np.int64(cu_k[b + 1]) - np.int64(cu_k[b])

        for sl in range(slices):
            base = (((sl * nb + b) * nheads + h) * ws_rows + qs) * d
            for idx in range(tid, blk * d, nt):
                ws[np.uint64(base + idx)] = _ZERO
        if tid < 2:
            locks[2 * ((b * nheads + h) * (ws_rows // blk) + qb) + tid] = 0
        if qs >= sq:
            return

        o_base = bq * o_sb + h * o_sh + qrow0 * o_ss
        g_base = bq * g_sb + h * g_sh + qrow0 * g_ss
        row = tid // tpr
        lane = tid % tpr
        i = qs + row
        acc = _ZERO
        if i < sq:
            for c in range(lane, dv, tpr):
                acc += (load(out, np.uint64(o_base + i * o_ss + c))
                        * load(gout, np.uint64(g_base + i * g_ss + c)))
        for st in range(log_tpr):
            acc += cuda.shfl_xor_sync(_FULL, acc, tpr >> (st + 1))
        if lane == 0 and i < sq:
            delta[np.uint64((b * nheads + h) * rows + i)] = acc

        nrows = min(blk, sq - qs)
        if num_parallel_blocks(qs, sq, sk, mask_kind, window, nsplit) == 0:
            gq_base = bq * gq_sb + h * gq_sh + qrow0 * gq_ss
            for idx in range(tid, nrows * d, nt):
                store(gq, np.uint64(gq_base + (qs + idx // d) * gq_ss + idx % d), _ZERO)
        if grad_bias != 0:
            first_key, last_key = key_range(qs, sq, sk, mask_kind, window)
            lo = sk
            hi = sk
            if first_key <= last_key and last_key >= 0 and first_key < sk:
                lo = (first_key // blk) * blk
                hi = min((last_key // blk + 1) * blk, sk)
            gb_base = b * gb_sb + h * gb_sh
            for rr in range(nrows):
                row_base = gb_base + (qs + rr) * gb_si
                for j in range(tid, lo, nt):
                    store(gb, np.uint64(row_base + j), _ZERO)
                for j in range(hi + tid, sk, nt):
                    store(gb, np.uint64(row_base + j), _ZERO)

    return Kernel(f"attn_bwd_prep_{dtype}_b{blk}x{cfg.rm}x{cfg.kc}", attn_bwd_prep,
                  argtypes_for(PREP_PARAMS, dtype))


@functools.lru_cache(maxsize=None)
def make_attention_bwd_kernel(dtype, d_max, dropout, cfg):
    """Backward main kernel for storage ``dtype``, head dims <= ``d_max``, dropout
    on/off, tile shape ``cfg``. Grid ``(num_splits, H, batches)``, block ``cfg.nt``;
    parameters as :data:`BWD_PARAMS`."""
    hp = tile_helpers(dtype, d_max, tuple(cfg))
    cfg = hp.cfg
    blk, rm, kc = cfg
    ty_n, tx_n, nt = cfg.ty, cfg.tx, cfg.nt
    rnb = hp.rnb
    # Shared tiles, 1-D (see tile_helpers); the score tiles carry one pad column so
    # that row-strided accesses spread over the banks.
    u_pad = np.uint32(blk + 1)
    n_stage = kc * (blk + 1)
    n_rows = kc * d_max
    n_pt = blk * (blk + 1)
    u_tyn = np.uint32(ty_n)
    u_four = np.uint32(4)
    store = dtypes.storer(dtype)
    load = dtypes.loader(dtype)
    visible, keep_bits = hp.visible, hp.keep_bits
    stage_km, stage_km_perm, stage_rows = hp.stage_km, hp.stage_km_perm, hp.stage_rows
    stage_rows_dq, mm_dq = hp.stage_rows_dq, hp.mm_dq
    mm_s, mm_o_km, mm_o_km_relu = hp.mm_s, hp.mm_o_km, hp.mm_o_km_relu
    dq_parts = hp.dq_parts
    rnq = rnb // dq_parts
    dq_width = d_max // dq_parts
    sch = schedule(blk)
    smallest_query_for_key = sch.smallest_query_for_key
    query_start = sch.query_start
    next_block = sch.next_block
    num_parallel_blocks = sch.num_parallel_blocks

    def attn_bwd(q, k, v, gout, bias, lse, delta, gq, gk, gv, gb, ws, locks, cu_q, cu_k,
                 q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, g_sb, g_ss, g_sh,
                 gq_sb, gq_ss, gq_sh, gk_sb, gk_ss, gk_sh, gv_sb, gv_ss, gv_sh,
                 b_sb, b_sh, b_si, b_sj, l_sb, l_sh, l_si, gb_sb, gb_sh, gb_si,
                 seq_q, seq_k, d, dv, rows, ws_rows,
                 scale, mask_kind, window, has_bias, varlen,
                 p_drop, drop_scale, seed_lo, seed_hi, off_lo, off_hi, drop_rows, drop_groups,
                 grad_bias, dq_mode):
        """Attention backward for the key blocks of split x (of n = gridDim.x), head y,
        batch z (H = gridDim.y, nb = gridDim.z).

        Inputs as the forward's (q, k, v, bias, lse, cu_q, cu_k, strides and scalars),
        gout = dO [B, Sq, H, Dv] (strides g_*), delta float32 [nb, H, rows] = rowsum(dO * O)
        from prep. Outputs gq [B, Sq, H, D] = scale * dS K, gk [B, Sk, H, D] =
        scale * dS^T Q, gv [B, Sk, H, Dv] = (P * Z)^T dO (strides gq_*, gk_*, gv_*) and
        gb [B, H, Sq, Sk] = dS (when grad_bias; unit key stride), where
        P = exp(scale * Q K^T + bias - lse) (0 where masked), Z the dropout factors and
        dS = P * ((dO V^T) * Z - delta). ws float32 [slices * nb * H, ws_rows, d] and
        locks int32 [nb * H * (ws_rows / blk), 2] (lock, arrival counter per query block)
        are the zeroed dQ workspace; slices = n when dq_mode is DQ_SLICES, else 1.
        dq_mode: DQ_LOCK, DQ_SLICES or DQ_ATOMIC (see the module docstring).
        """
        sA = cuda.shared.array(n_stage, np.float32)
        sB = cuda.shared.array(n_stage, np.float32)
        sR = cuda.shared.array(n_rows, np.float32)
        pt = cuda.shared.array(n_pt, np.float32)
        tid = cuda.threadIdx.x
        tx = tid % tx_n
        ty = tid // tx_n
        utx = np.uint32(tx)
        uty = np.uint32(ty)
        split = cuda.blockIdx.x
        nsplit = cuda.gridDim.x
        h = cuda.blockIdx.y
        b = cuda.blockIdx.z
        nheads = cuda.gridDim.y
        nb = cuda.gridDim.z
        nqb = ws_rows // blk
        bq = b
        qrow0 = 0
        krow0 = 0
        sq = seq_q
        sk = seq_k
        if varlen != 0:
            bq = 0
            qrow0 = np.int64(cu_q[b])
            sq = np.int64(cu_q[b + 1]) - qrow0
            krow0 = np.int64(cu_k[b])
            sk = np.int64(cu_k[b + 1]) - krow0
        q_base = bq * q_sb + h * q_sh + qrow0 * q_ss
        k_base = bq * k_sb + h * k_sh + krow0 * k_ss
        v_base = bq * v_sb + h * v_sh + krow0 * v_ss
        g_base = bq * g_sb + h * g_sh + qrow0 * g_ss
        bias_base = b * b_sb + h * b_sh
        gb_base = b * gb_sb + h * gb_sh
        lse_base = b * l_sb + h * l_sh
        delta_base = (b * nheads + h) * rows
        shift = sk - sq if mask_kind == MASK_BOTTOM_RIGHT else 0
        bh = b * nheads + h

        dk = cuda.local.array((rm, rnb), np.float32)
        dvv = cuda.local.array((rm, rnb), np.float32)
        dq = cuda.local.array((rm, rnq), np.float32)
        s = cuda.local.array((rm, 4), np.float32)
        lse_r = cuda.local.array(rm, np.float32)
        dl_r = cuda.local.array(rm, np.float32)

        ks = split * blk
        while ks < sk:
            for r in range(rm):
                for c in range(rnb):
                    dk[r, c] = _ZERO
                    dvv[r, c] = _ZERO
            qs = query_start(split, nsplit, ks, sq, sk, mask_kind, window)
            nk = min(blk, sk - ks)
            while qs < sq:
                nq = min(blk, sq - qs)
                for r in range(rm):
                    i = qs + ty + ty_n * r
                    lse_r[r] = _NEG_INF
                    dl_r[r] = _ZERO
                    if i < sq:
                        lse_r[r] = lse[np.uint64(lse_base + i * l_si)]
                        dl_r[r] = delta[np.uint64(delta_base + i)]

                # S = Q K^T, then P (kept in registers) and P * Z (to shared, for dV).
                for r in range(rm):
                    for c in range(4):
                        s[r, c] = _ZERO
                for d0 in range(0, d, kc):
                    stage_km(sA, q, q_base, q_ss, qs, sq, d0, d)
                    stage_km_perm(sB, k, k_base, k_ss, ks, sk, d0, d)
                    cuda.syncthreads()
                    mm_s(s, sA, uty, sB, utx)
                    cuda.syncthreads()
                for r in range(rm):
                    i = qs + ty + ty_n * r
                    for c in range(4):
                        j = ks + 4 * tx + c
                        pv = _ZERO
                        if lse_r[r] != _NEG_INF and visible(i, j, sq, sk, mask_kind, shift, window):
                            x = s[r, c] * scale
                            if has_bias != 0:
                                x += load(bias, np.uint64(bias_base + i * b_si + j * b_sj))
                            pv = math.exp(x - lse_r[r])
                        pt[(uty + u_tyn * np.uint32(r)) * u_pad + u_four * utx + np.uint32(c)] = pv
                if dropout:
                    # pt keeps P itself (needed for dS), its sign bit marking dropped
                    # entries; a loop of its own so that the one above still unrolls.
                    for r in range(rm):
                        i = qs + ty + ty_n * r
                        if i < sq:
                            kb = keep_bits(bh, i, ks + 4 * tx, drop_rows, drop_groups, p_drop,
                                           seed_lo, seed_hi, off_lo, off_hi)
                            row = (uty + u_tyn * np.uint32(r)) * u_pad + u_four * utx
                            for c in range(4):
                                if not (kb >> c) & 1:
                                    cell = row + np.uint32(c)
                                    pt[cell] = -pt[cell]
                cuda.syncthreads()

                # dV += (P * Z)^T dO: dropped (negative) entries read as 0, the factor
                # 1 / (1 - p) applied when dV is written.
                for i0 in range(0, nq, kc):
                    stage_rows(sR, gout, g_base, g_ss, qs + i0, sq, 0, dv)
                    cuda.syncthreads()
                    if dropout:
                        mm_o_km_relu(dvv, pt, np.uint32(i0) * u_pad + uty, sR, utx)
                    else:
                        mm_o_km(dvv, pt, np.uint32(i0) * u_pad + uty, sR, utx)
                    cuda.syncthreads()

                # dP = (dO V^T) * Z; dS = P * (dP - delta); dBias = dS.
                for r in range(rm):
                    for c in range(4):
                        s[r, c] = _ZERO
                for d0 in range(0, dv, kc):
                    stage_km(sA, gout, g_base, g_ss, qs, sq, d0, dv)
                    stage_km_perm(sB, v, v_base, v_ss, ks, sk, d0, dv)
                    cuda.syncthreads()
                    mm_s(s, sA, uty, sB, utx)
                    cuda.syncthreads()
                for r in range(rm):
                    i = qs + ty + ty_n * r
                    for c in range(4):
                        j = ks + 4 * tx + c
                        cell = (uty + u_tyn * np.uint32(r)) * u_pad + u_four * utx + np.uint32(c)
                        pv = pt[cell]
                        dp = s[r, c]
                        if dropout:
                            dp = dp * drop_scale if pv > _ZERO else _ZERO
                            pv = abs(pv)
                        ds = pv * (dp - dl_r[r])
                        if grad_bias != 0 and i < sq and j < sk:
                            store(gb, np.uint64(gb_base + i * gb_si + j), ds)
                        pt[cell] = ds
                cuda.syncthreads()

                # dQ partial = dS K (scaled below), added through the workspace; in
                # dq_parts column parts of dq_width columns each.
                next_key = ks + nsplit * blk
                is_last = next_key >= sk or qs < smallest_query_for_key(
                    next_key, sq, sk, mask_kind, window)
                npar = num_parallel_blocks(qs, sq, sk, mask_kind, window, nsplit)
                lock = 2 * ((b * nheads + h) * nqb + qs // blk)
                gq_base = bq * gq_sb + h * gq_sh + qrow0 * gq_ss
                if dq_mode == DQ_LOCK and nsplit > 1:
                    if tid == 0:
                        while cuda.atomic.cas(locks, lock, np.int32(0),
                                              np.int32(split + 1)) != 0:
                            if not SIMULATOR:
                                cuda.nanosleep(_BACKOFF_NS)
                    cuda.syncthreads()
                    cuda.threadfence()
                # Deterministic: this split's own slice. With one split both modes are
                # the same: the block owns the tile and writes dQ on its last visit.
                region = (b * nheads + h) * ws_rows
                if dq_mode == DQ_SLICES:
                    region += split * nb * nheads * ws_rows
                for part in range(dq_parts):
                    c0 = part * dq_width
                    for r in range(rm):
                        for c in range(rnq):
                            dq[r, c] = _ZERO
                    for j0 in range(0, nk, kc):
                        stage_rows_dq(sR, k, k_base, k_ss, ks + j0, sk, c0, d)
                        cuda.syncthreads()
                        mm_dq(dq, pt, uty * u_pad + np.uint32(j0), sR, utx)
                        cuda.syncthreads()
                    for r in range(rm):
                        i = qs + ty + ty_n * r
                        for c in range(rnq):
                            col = c0 + tx + tx_n * c
                            if i < sq and col < d:
                                cell = np.uint64((region + i) * d + col)
                                if is_last and nsplit == 1:
                                    store(gq, np.uint64(gq_base + i * gq_ss + col),
                                          ws[cell] + dq[r, c] * scale)
                                elif dq_mode == DQ_ATOMIC:
                                    cuda.atomic.add(ws, cell, dq[r, c] * scale)
                                else:
                                    ws[cell] += dq[r, c] * scale
                if nsplit > 1:
                    # Arrival: each split's last contribution to this dQ block bumps the
                    # counter once its sums are visible; the split that completes the
                    # count writes dQ.
                    cuda.threadfence()
                    cuda.syncthreads()
                    arrived = 0
                    if is_last and tid == 0:
                        arrived = cuda.atomic.add(locks, lock + 1, np.int32(1)) + 1
                    final = cuda.syncthreads_or(1 if arrived == npar else 0) != 0
                    if final:
                        cuda.threadfence()
                        slices = nsplit if dq_mode == DQ_SLICES else 1
                        stride = nb * nheads * ws_rows * d
                        base = (b * nheads + h) * ws_rows
                        for idx in range(tid, nq * d, nt):
                            i = qs + idx // d
                            col = idx % d
                            acc = _ZERO
                            for sl in range(slices):
                                acc += ws[np.uint64((base + i) * d + col + sl * stride)]
                            store(gq, np.uint64(gq_base + i * gq_ss + col), acc)
                    elif dq_mode == DQ_LOCK:
                        cuda.syncthreads()
                        if tid == 0:
                            cuda.atomic.exch(locks, lock, np.int32(0))

                # dK += dS^T Q (scaled when written)
                for i0 in range(0, nq, kc):
                    stage_rows(sR, q, q_base, q_ss, qs + i0, sq, 0, d)
                    cuda.syncthreads()
                    mm_o_km(dk, pt, np.uint32(i0) * u_pad + uty, sR, utx)
                    cuda.syncthreads()

                qs, nks = next_block(split, nsplit, qs, ks, sq, sk, mask_kind, window)
                if nks != ks:
                    break

            gk_base = bq * gk_sb + h * gk_sh + krow0 * gk_ss
            gv_base = bq * gv_sb + h * gv_sh + krow0 * gv_ss
            for r in range(rm):
                j = ks + ty + ty_n * r
                if j < sk:
                    for c in range(rnb):
                        col = tx + tx_n * c
                        if col < d:
                            store(gk, np.uint64(gk_base + j * gk_ss + col), dk[r, c] * scale)
                        if col < dv:
                            if dropout:
                                dvv[r, c] *= drop_scale
                            store(gv, np.uint64(gv_base + j * gv_ss + col), dvv[r, c])
            ks += nsplit * blk

    name = f"attn_bwd_{dtype}_d{d_max}_{'drop' if dropout else 'nodrop'}_b{blk}x{rm}x{kc}"
    return Kernel(name, attn_bwd, argtypes_for(BWD_PARAMS, dtype))


@functools.lru_cache(maxsize=None)
def make_bias_grad_reduce_kernel(dtype):
    """Sum of the full dBias over the broadcast dimensions. 1-D grid-stride launch."""
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)

    def bias_grad_reduce(full, red, rb, rh, ri, rj):
        """red[b', h', i', j'] = sum of full[b, h, i, j] over every index of each reduced
        dimension (rb, rh, ri, rj nonzero) and the matching one of the others, added in
        float32 in index order. full [B, H, Sq, Sk] and red [B', H', Sq', Sk'] (1 where
        reduced), both C-contiguous."""
        n0, n1, n2, n3 = red.shape
        total = n0 * n1 * n2 * n3
        for idx in range(cuda.grid(1), total, cuda.gridsize(1)):
            j = idx % n3
            t = idx // n3
            i = t % n2
            t = t // n2
            hh = t % n1
            bb = t // n1
            b_lo, b_hi = (0, full.shape[0]) if rb != 0 else (bb, bb + 1)
            h_lo, h_hi = (0, full.shape[1]) if rh != 0 else (hh, hh + 1)
            i_lo, i_hi = (0, full.shape[2]) if ri != 0 else (i, i + 1)
            j_lo, j_hi = (0, full.shape[3]) if rj != 0 else (j, j + 1)
            acc = _ZERO
            for b in range(b_lo, b_hi):
                for h in range(h_lo, h_hi):
                    for ii in range(i_lo, i_hi):
                        for jj in range(j_lo, j_hi):
                            acc += load(full, (b, h, ii, jj))
            store(red, (bb, hh, i, j), acc)

    st = types.Array(dtypes.numba_storage_type(dtype), 4, "C")
    argtypes = (st, st, types.int64, types.int64, types.int64, types.int64)
    return Kernel(f"attn_bias_grad_reduce_{dtype}", bias_grad_reduce, argtypes)
