"""Attention forward and backward on tensor cores (float16 / bfloat16 inputs).

The same math, masks, dropout keying, bias handling, varlen, dQ lock / arrival
scheme and kernel parameters as the CUDA-core kernels (:mod:`numba_fused.attention_fwd`,
:mod:`numba_fused.attention_bwd`; their docstrings define them), with every matmul on
``mma.sync.m16n8k16`` (:mod:`numba_fused.tensor_core`), float32 accumulation. float32
inputs keep the CUDA-core kernels: float16 / bfloat16 tensor cores would round them.

Layout (flash-attention-2). A block is ``nw = blk / 16`` warps (``2 * blk`` threads);
``blk`` is the query block of the forward, the key block of the backward, and the
tile length along the other side. Warp ``w`` owns 16 rows (queries in the forward,
keys in the backward) and keeps its score tile in mma accumulator fragments: with
``g = lane / 4``, ``t = lane % 4``, a lane holds rows ``g, g + 8`` and columns
``8 n + 2 t, 8 n + 2 t + 1`` of each 8-column tile ``n``. Row statistics (max, sum) are
two ``xor`` shuffles among the four lanes of a quad. A probability tile becomes the A
operand of the next mma in registers (two accumulator tiles = one 16x16 A fragment),
rounded to the input dtype (``pack_*x2``, nearest even) as flash-attention does; the
accumulators stay float32.

Operand tiles (Q, K, V, dO: ``blk`` rows of ``d_max`` 16-bit elements) are copied to
shared memory by 16-byte ``cp.async`` when every row start is 16-byte aligned (the
launcher's ``vec`` flag; zero-filled past ``d`` and past the sequence), else element
by element. Tile rows are padded by 16 bytes (``d_max + 8`` elements; the dS tile
``blk + 8``): the eight row addresses of every ``ldmatrix`` phase then hit distinct
banks, and every fragment address is a per-lane base plus a compile-time constant
(an XOR swizzle would need a per-lane term per fragment, which ptxas kept in
registers). Fragments come from shared memory by ``ldmatrix`` (``.trans`` where the
operand is stored k-major).

Forward (grid ``(ceil(lse_rows / blk), H, batches)``): Q's fragments are loaded once
(up to head_dim 128; at 256 they are read from the Q tile at every k-step);
key blocks stream through two K / V buffers (the next block's copy overlaps this
block's math). Per key block: ``S = Q K^T``; scale, bias, mask; online softmax (``exp``
as ``ex2.approx``; running
max ``m`` and per-lane partial sums ``l``, rescaled by ``exp(m_old - m)``); dropout
zeroes dropped probabilities (the ``1 / (1 - p)`` factor is applied to ``out`` at the
end); ``O += P V``.

Backward (grid ``(num_splits, H, batches)``, the CUDA-core kernel's schedule: key
blocks ``split, split + n, ...``, query blocks from ``smallest_query_for_key`` with the
seed's rotation): K and V stay in shared memory for the key block, Q and dO (and lse,
delta) are double-buffered across query blocks (one buffer at head_dim 128, see
``_qbufs``). Per query block, in sub-tiles of
``qn`` queries: ``S^T = K Q^T``; ``P^T = exp(scale S^T + bias^T - lse)``;
``dV += (P Z)^T dO``; ``dP^T = V dO^T``; ``dS^T = P^T * (dP^T Z - delta)``;
``dBias = dS``; ``dK += dS^T Q`` (dK, dV in registers for the whole key block). dS (in the
input dtype) goes to shared memory, then each warp forms ``dQ = dS K`` for 16 queries
and adds it into the float32 workspace by the CUDA-core kernel's scheme (``dq_mode``:
the seed's lock, atomic adds, or its own slice when deterministic), with the same
arrival counter. At head_dim 256 (padded) a key block is shared by
:func:`bwd_col_parts` blocks, each holding dK, dV and forming dQ for its share of the
columns (S and dP, recomputed by each, contract over all of them; only the first
writes dBias).

Dropout: the decisions are the CUDA-core kernels' (output word ``j % 4`` of the Philox
draw at position ``((b H + h) rows + i) groups + j / 4`` decides key ``j``). A lane's
fragment columns span two 4-key groups, so per 8-column tile every lane draws once
(for one (row, group) pair its quad or column needs) and the lanes exchange the 4-bit
keep masks by shuffles: one draw per four decisions, as the CUDA-core kernels.
"""

import functools
import math
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
from numba import cuda, types

from . import dtypes
from .attention_bwd import BWD_PARAMS, DQ_ATOMIC, DQ_LOCK, DQ_SLICES, schedule
from .attention_fwd import FWD_PARAMS, MASK_BOTTOM_RIGHT, MASK_NONE, _device, argtypes_for
from .launch import SIMULATOR, Kernel
from .philox import philox4x32_i32, uniform_from_bits
from .tensor_core import (cp_async_16, cp_async_commit, cp_async_wait_all, ldmatrix_x4_at,
                          ldmatrix_x4_trans_at, mma_bf16, mma_f16, pack_bf16x2, pack_f16x2,
                          red_add_v2_f32, shared_address)

__all__ = ["TcConfig", "TC_D_MAXES", "TC_FWD_PARAMS", "TC_BWD_PARAMS",
           "make_attention_fwd_tc_kernel", "make_attention_bwd_tc_kernel",
           "fwd_smem_bytes", "bwd_smem_bytes", "tc_d_max", "bwd_col_parts"]

TC_D_MAXES = (16, 32, 64, 128, 256)
TC_FWD_PARAMS = FWD_PARAMS + (("vec", types.int64),)
TC_BWD_PARAMS = BWD_PARAMS + (("vec", types.int64), ("heads", types.int64))

_FULL = 0xFFFFFFFF
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_NEG_INF = np.float32(-np.inf)
_POS_INF = np.float32(np.inf)
_LOG2E = np.float32(1.4426950408889634)
_LO32 = 0xFFFFFFFF
_SMEM_ALIGN = None if SIMULATOR else 16  # the simulator takes no alignment argument
_F32_DT = np.dtype(np.float32)
_U32_DT = np.dtype(np.uint32)
_I64_DT = np.dtype(np.int64)
_BACKOFF_NS = np.uint32(40)

if SIMULATOR:
    def _exp(x):
        return np.float32(np.exp(np.float32(x)))

    def _exp2(x):
        return np.float32(np.exp2(np.float32(x)))

    def _ldsm(base, off):
        return ldmatrix_x4_at(base + off)

    def _ldsm_t(base, off):
        return ldmatrix_x4_trans_at(base + off)
else:
    from llvmlite import ir
    from numba.core.errors import TypingError
    from numba.core.extending import intrinsic
    from numba.cuda import libdevice

    # ex2.approx of x * log2(e): one MUFU op, relative error ~1e-7 for the arguments
    # here (x <= 0 after the max is subtracted); libdevice's accurate expf is ~10.
    _exp = libdevice.fast_expf
    # ex2.approx: softmax's exp(x - m) as exp2(x log2(e) - m log2(e)), the
    # subtraction fused into the scaling (one FFMA and one MUFU op per score).
    _exp2 = libdevice.exp2f

    def _make_ldsm(trans):
        # ldmatrix.x4 at shared address base + off, the add inside the asm: LLVM then
        # cannot hoist one address per fragment out of the loops (it did, as 64-bit
        # values, and ptxas spilled them); ptxas folds the constant into the load.
        name = f"ldsm_x4{'_trans' if trans else ''}_off"
        text = ("{.reg .u32 a; add.u32 a, $4, $5; "
                f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 "
                "{$0,$1,$2,$3}, [a];}")
        i32 = ir.IntType(32)

        def impl(typingctx, base, off):
            if not (isinstance(base, types.Integer) and isinstance(off, types.Integer)):
                raise TypingError(f"{name}: base and offset must be integers")
            sig = types.UniTuple(types.uint32, 4)(base, off)

            def codegen(context, builder, signature, args):
                ins = [context.cast(builder, v, t, types.uint32)
                       for v, t in zip(args, signature.args)]
                fnty = ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32, i32])
                res = builder.call(ir.InlineAsm(fnty, text, "=r,=r,=r,=r,r,r,~{memory}",
                                                side_effect=True), ins)
                vals = [builder.extract_value(res, i) for i in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        impl.__name__ = name
        return intrinsic(impl)

    _ldsm = _make_ldsm(False)
    _ldsm_t = _make_ldsm(True)


class TcConfig(namedtuple("TcConfig", "blk qn")):
    """Tensor-core tiling. blk: queries per forward block = keys per backward block =
    the tile along the other side (16 per warp); qn: backward query sub-tile (score
    registers per lane: qn / 2 for S and as many for dP)."""

    __slots__ = ()

    @property
    def nw(self):
        return self.blk // 16

    @property
    def nt(self):
        return 2 * self.blk

    def validate(self):
        blk, qn = self
        if blk not in (16, 32, 64) or qn < 16 or qn % 16 or blk % qn:
            raise ValueError(f"unsupported tensor-core attention tile {tuple(self)}: blk in "
                             f"(16, 32, 64), qn a multiple of 16 dividing blk")
        return self


def tc_d_max(head_dim):
    """Padded head dim of the tensor-core kernels for ``head_dim`` (None above 256)."""
    for d in TC_D_MAXES:
        if d >= head_dim:
            return d
    return None


def _bias_pad(blk):
    # Bias tile rows of blk + 8 16-bit elements: the 8 rows a fragment read touches
    # start 16 bytes apart in the banks.
    return blk + 8


def fwd_smem_bytes(cfg, d_max, has_bias):
    """Dynamic shared memory of the forward: Q, two K and two V buffers, and the bias
    tile when there is a bias."""
    n = 5 * cfg.blk * _row(d_max)
    if has_bias:
        n += cfg.blk * _bias_pad(cfg.blk)
    return 2 * n


def _row(n):
    """Padded row length (16-bit elements) of a shared tile n elements wide."""
    return n + 8


_N_COLD = 16


def _qbufs(d_max):
    """Q / dO buffers of the backward: two (the next query block's copy overlaps this
    one's math) up to head_dim 64; one at 128, where two would take 115 KB of shared
    memory a block and leave room for one block per SM instead of two."""
    return 2 if d_max <= 64 else 1


def _bwd_layout(blk, d_max):
    """(tile, dS offset, float32 offset, int64 offset, bias offset) of the backward's
    shared memory: K, V, [Q, dO] x _qbufs, dS (16-bit elements), lse[2], delta[2]
    (float32), the block's base offsets (int64), then the bias tile (16-bit)."""
    tile = blk * _row(d_max)
    s_off = (2 + 2 * _qbufs(d_max)) * tile
    f_off = (s_off + blk * _row(blk)) // 2
    c_off = (f_off + 4 * blk) // 2
    b_off = 4 * (c_off + _N_COLD)
    return tile, s_off, f_off, c_off, b_off


def bwd_smem_bytes(cfg, d_max, has_bias):
    _, _, _, _, b_off = _bwd_layout(cfg.blk, d_max)
    if has_bias:
        b_off += cfg.blk * _bias_pad(cfg.blk)
    return 2 * b_off


def _log2(v):
    return int(v).bit_length() - 1


def bwd_col_parts(d_max, dropout):
    """Column parts of the backward at padded head dim ``d_max``: at 256 a lane's dK
    and dV for the whole width (128 registers each) cannot be held, so two blocks
    share a key block, each accumulating dK, dV and dQ for 128 of the columns (and
    each recomputing S and dP over all of them); four with dropout, whose keep-bit
    draws on top of 128 columns spilled (ptxas, sm_90: 16 bytes)."""
    if d_max <= 128:
        return 1
    return 4 if dropout else 2


@functools.lru_cache(maxsize=None)
def _helpers(dtype, d_max, cfg):
    blk = cfg.blk
    nt = cfg.nt
    chunks = d_max // 8
    log_ch = _log2(chunks)
    rs = _row(d_max)
    iters = blk * chunks // nt
    rstep = nt // chunks      # rows between a thread's chunks
    log_blk = _log2(blk)
    bpad = _bias_pad(blk)
    uniform = uniform_from_bits

    def load_tile(sm, off, src, base, rstride, r0, nrows, ncols, vec, tid):
        """sm[off + r * (d_max + 8) + c] = src[base + (r0 + r) * rstride + c] for r < blk,
        c < d_max, zero where r0 + r >= nrows or c >= ncols. vec != 0: one 16-byte
        cp.async per 8 elements (the caller commits and waits; rows 16-byte aligned);
        else element copies.

        A thread copies the same 8 columns of rows r, r + rstep, ..: its column, byte
        count and addresses are formed once, and the vector loop, apart from the
        element path, is small enough to unroll (the kernels are issue-bound)."""
        r = tid >> log_ch
        c = (tid & (chunks - 1)) << 3
        dst = off + r * rs + c
        row = r0 + r
        if vec != 0:
            n = min(16, (ncols - c) * 2)
            gi = base + row * rstride + c
            for it in range(iters):
                sdst = np.uint64(dst + it * rstep * rs)
                if n > 0 and row + it * rstep < nrows:
                    cp_async_16(sm, sdst, src, gi + it * rstep * rstride, n)
                else:
                    cp_async_16(sm, sdst, src, 0, 0)
        else:
            for it in range(iters):
                rr = row + it * rstep
                dd = dst + it * rstep * rs
                for x in range(8):
                    if rr < nrows and c + x < ncols:
                        sm[dd + x] = src[np.uint64(base + rr * rstride + c + x)]
                    else:
                        sm[dd + x] = 0

    def stage_bias(sm, off, bias, base, si, sj, i0, sq, j0, sk, tid):
        """sm[off + r * (blk + 8) + c] = bias[base + (i0 + r) * si + (j0 + c) * sj] for
        r, c < blk (0 outside the sequences); plain loads (any strides)."""
        for idx in range(tid, blk * blk, nt):
            r = idx >> log_blk
            c = idx & (blk - 1)
            i = i0 + r
            j = j0 + c
            if i < sq and j < sk:
                sm[off + r * bpad + c] = bias[np.uint64(base + i * si + j * sj)]
            else:
                sm[off + r * bpad + c] = 0

    def row_keys(i, sq, sk, mask_kind, shift, window):
        """(first, last) key that query i sees (docs/API.md's masks); first > last if none."""
        if i >= sq:
            return np.int64(1), np.int64(0)
        lo = np.int64(0)
        hi = sk - 1
        if mask_kind != MASK_NONE:
            hi = min(hi, i + shift)
            if window > 0:
                lo = max(lo, i + shift - window + 1)
        return lo, hi

    def key_queries(j, sq, sk, mask_kind, shift, window):
        """(first, last) query that sees key j; first > last if none."""
        if j >= sk:
            return np.int64(1), np.int64(0)
        lo = np.int64(0)
        hi = sq - 1
        if mask_kind != MASK_NONE:
            lo = max(lo, j - shift)
            if window > 0:
                hi = min(hi, j - shift + window - 1)
        return lo, hi

    def keep_bits(bh, i, j0, rows, groups, p, seed_lo, seed_hi, off_lo, off_hi):
        """Bit c set when dropout keeps key j0 + c of query i (j0 % 4 == 0): the
        kernels' Philox keying (see attention_fwd)."""
        pos = (np.int64(bh) * rows + i) * groups + j0 // 4
        r0, r1, r2, r3 = philox4x32_i32(pos & _LO32, pos >> 32, off_lo, off_hi, seed_lo, seed_hi)
        bits = 0
        if uniform(r0) >= p:
            bits |= 1
        if uniform(r1) >= p:
            bits |= 2
        if uniform(r2) >= p:
            bits |= 4
        if uniform(r3) >= p:
            bits |= 8
        return np.int32(bits)

    return SimpleNamespace(load_tile=_device(load_tile), stage_bias=_device(stage_bias),
                           row_keys=_device(row_keys), key_queries=_device(key_queries),
                           keep_bits=_device(keep_bits))


def _mma_pack(dtype):
    if dtype == "float16":
        return mma_f16, pack_f16x2
    if dtype == "bfloat16":
        return mma_bf16, pack_bf16x2
    raise ValueError(f"tensor-core attention takes float16 or bfloat16, got {dtype!r}")


@functools.lru_cache(maxsize=None)
def _mma_x2(dtype):
    """Device function ``mma2(acc, c, a0, a1, a2, a3, fb)``: the two ``m16n8k16`` MMAs
    of A fragment ``a0 .. a3`` with the two 8-column B fragments of an ``ldmatrix``
    x4 result ``fb`` (``fb[0:2]``, ``fb[2:4]``), added into the float32 accumulator
    tiles ``acc[c .. c + 3]`` and ``acc[c + 4 .. c + 7]`` in place."""
    mma = _mma_pack(dtype)[0]

    @_device
    def mma2(acc, c, a0, a1, a2, a3, fb):
        r = mma(a0, a1, a2, a3, fb[0], fb[1], acc[c], acc[c + 1], acc[c + 2], acc[c + 3])
        acc[c] = r[0]
        acc[c + 1] = r[1]
        acc[c + 2] = r[2]
        acc[c + 3] = r[3]
        r = mma(a0, a1, a2, a3, fb[2], fb[3], acc[c + 4], acc[c + 5], acc[c + 6],
                acc[c + 7])
        acc[c + 4] = r[0]
        acc[c + 5] = r[1]
        acc[c + 6] = r[2]
        acc[c + 7] = r[3]

    return mma2


def _fswz(width):
    """Mask of the row swizzle of a float32 staging tile ``width`` floats wide: float
    column c of row r sits at c ^ ((r & mask) << 3), so the 8 rows of a fragment
    store spread over the banks and 8 consecutive columns stay contiguous."""
    return min(width // 8, 8) - 1


@functools.lru_cache(maxsize=None)
def _edge_mask(ntiles, width, fill):
    """Device function ``mask(frag, t, rlo0, rhi0, rlo1, rhi1)``: in an accumulator
    fragment of ``ntiles`` 8-column tiles (lane (g, t): rows g and g + 8, values
    ``4 n + e``) over ``width`` columns, set ``fill`` where the column lies outside
    [rlo0, rhi0] (row g) or [rlo1, rhi1] (row g + 8). Tests nothing on tiles both
    rows see whole: the kernels are issue-bound and most tiles are interior."""

    @_device
    def mask(frag, t, rlo0, rhi0, rlo1, rhi1):
        if rlo0 > 0 or rhi0 < width - 1 or rlo1 > 0 or rhi1 < width - 1:
            for n in range(ntiles):
                for e in range(4):
                    c = 8 * n + 2 * t + (e & 1)
                    if e < 2:
                        if c < rlo0 or c > rhi0:
                            frag[4 * n + e] = fill
                    elif c < rlo1 or c > rhi1:
                        frag[4 * n + e] = fill

    return mask


@functools.lru_cache(maxsize=None)
def make_attention_fwd_tc_kernel(dtype, d_max, dropout, cfg):
    """Tensor-core forward for ``dtype`` float16 / bfloat16, head dims <= ``d_max``
    (one of :data:`TC_D_MAXES`), dropout on/off, tiling ``cfg`` (:class:`TcConfig`). Grid
    ``(ceil(lse_rows / blk), H, batches)``, ``cfg.nt`` threads,
    :func:`fwd_smem_bytes` of dynamic shared memory; parameters as
    :data:`TC_FWD_PARAMS`."""
    cfg = TcConfig(*cfg).validate()
    if d_max not in TC_D_MAXES:
        raise ValueError(f"d_max must be one of {TC_D_MAXES}, got {d_max}")
    pack = _mma_pack(dtype)[1]
    mma2 = _mma_x2(dtype)
    blk = cfg.blk
    NT = cfg.nt
    KD = d_max // 16          # k-steps over the head dim
    NTK = blk // 8            # 8-key tiles of S
    NTD = d_max // 8          # 8-column tiles of O
    TILE = blk * _row(d_max)
    L2 = _row(d_max) * 2      # bytes per tile row
    K_OFF = TILE              # two K buffers, two V buffers, then the bias tile
    V_OFF = 3 * TILE
    B_OFF = 5 * TILE
    BPAD = _bias_pad(blk)
    O_OFF = K_OFF // 2        # float32 output staging over the K buffers
    FSW = _fswz(d_max)
    LOG_D = _log2(d_max)
    # Q's fragments stay in registers up to head_dim 128 (64 registers at 256 would sit
    # beside O's 128 and S's 32): at 256 each k-step reads them from the Q tile again.
    Q_REGS = d_max <= 128
    N_QF, N_S, N_O = (KD * 4 if Q_REGS else 4), NTK * 4, NTD * 4
    SDT = dtypes.STORAGE[dtype]
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)
    hp = _helpers(dtype, d_max, cfg)
    load_tile, stage_bias, row_keys, keep_bits = (hp.load_tile, hp.stage_bias, hp.row_keys,
                                                  hp.keep_bits)
    mask_scores = _edge_mask(NTK, blk, _NEG_INF)

    def attn_fwd_tc(q, k, v, bias, out, lse, cu_q, cu_k,
                    q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, o_sb, o_ss, o_sh,
                    b_sb, b_sh, b_si, b_sj, l_sb, l_sh, l_si,
                    seq_q, seq_k, d, dv, lse_rows,
                    scale, mask_kind, window, has_bias, varlen,
                    p_drop, drop_scale, seed_lo, seed_hi, off_lo, off_hi, drop_rows, drop_groups,
                    vec):
        """Attention forward for the ``blk`` queries of block x, head y, batch z on
        tensor cores; arguments and results as the CUDA-core forward's
        (``make_attention_fwd_kernel``), plus vec (1: every row of q, k, v starts
        16-byte aligned). Warp w: queries q_start + 16 w ..; per key block
        S = Q K^T (float32 accumulators), x = scale * S + bias (masked: -inf),
        m' = max(m, rowmax x), P = exp(x - m'), l = l exp(m - m') + rowsum P,
        O = O exp(m - m') + round(P * keep) V; at the end out = O * drop_scale / l
        (drop_scale only under dropout), lse = m + log l."""
        sm = cuda.shared.array(0, SDT, alignment=_SMEM_ALIGN)
        smf = cuda.shared.array(0, _F32_DT, alignment=_SMEM_ALIGN)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        t = lane & 3
        q_start = cuda.blockIdx.x * blk
        h = cuda.blockIdx.y
        b = cuda.blockIdx.z
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
        lse_base = b * l_sb + h * l_sh
        if q_start >= sq:
            for i in range(q_start + tid, min(q_start + blk, lse_rows), NT):
                lse[np.uint64(lse_base + i * l_si)] = _NEG_INF
            return
        q_base = bq * q_sb + h * q_sh + qrow0 * q_ss
        k_base = bq * k_sb + h * k_sh + krow0 * k_ss
        v_base = bq * v_sb + h * v_sh + krow0 * v_ss
        bias_base = b * b_sb + h * b_sh

        shift = sk - sq if mask_kind == MASK_BOTTOM_RIGHT else 0
        q_last = min(q_start + blk, sq) - 1
        k_lo = 0
        k_hi = sk - 1
        if mask_kind != MASK_NONE:
            k_hi = min(q_last + shift, sk - 1)
            if window > 0:
                k_lo = max(q_start + shift - window + 1, 0)
        ks = (k_lo // blk) * blk

        load_tile(sm, 0, q, q_base, q_ss, q_start, sq, d, vec, tid)
        if ks <= k_hi:
            load_tile(sm, K_OFF, k, k_base, k_ss, ks, sk, d, vec, tid)
            load_tile(sm, V_OFF, v, v_base, v_ss, ks, sk, dv, vec, tid)
        cp_async_commit()

        # Per-lane ldmatrix addresses: a fragment of rows r0 .. r0 + 15 and 16-byte
        # chunks c, c + 1 is at lane + r0 * L2 + 16 c. Pattern 1 (A operands, and B
        # operands stored k-major): lane row lane % 16, chunk lane / 16. Pattern 2 (B
        # operands stored n-major): row lane % 8 + 8 (lane / 16), chunk (lane / 8) % 2.
        sbase = shared_address(sm, 0)
        p1 = (lane & 15) * L2 + ((lane >> 4) << 4)
        p2 = ((lane & 7) + ((lane >> 4) << 3)) * L2 + (((lane >> 3) & 1) << 4)
        q_lane = sbase + warp * 16 * L2 + p1
        k_lane = sbase + K_OFF * 2 + p2
        v_lane = sbase + V_OFF * 2 + p1
        b_lane = B_OFF + (warp * 16 + g) * BPAD + 2 * t

        qf = cuda.local.array(N_QF, np.uint32)
        s = cuda.local.array(N_S, np.float32)
        o = cuda.local.array(N_O, np.float32)
        for i in range(N_O):
            o[i] = _ZERO
        m0 = _NEG_INF
        m1 = _NEG_INF
        l0 = _ZERO
        l1 = _ZERO
        row0 = q_start + warp * 16 + g
        row1 = row0 + 8
        lo0, hi0 = row_keys(row0, sq, sk, mask_kind, shift, window)
        lo1, hi1 = row_keys(row1, sq, sk, mask_kind, shift, window)
        bh = b * cuda.gridDim.y + h
        cur = 0
        first = True
        while ks <= k_hi:
            cp_async_wait_all()
            cuda.syncthreads()
            if Q_REGS and first:
                for kk in range(KD):
                    fq = _ldsm(q_lane, 32 * kk)
                    qf[4 * kk] = fq[0]
                    qf[4 * kk + 1] = fq[1]
                    qf[4 * kk + 2] = fq[2]
                    qf[4 * kk + 3] = fq[3]
                first = False
            nks = ks + blk
            if nks <= k_hi:
                # The other buffer's readers finished before the barrier above.
                load_tile(sm, K_OFF + (1 - cur) * TILE, k, k_base, k_ss, nks, sk, d, vec, tid)
                load_tile(sm, V_OFF + (1 - cur) * TILE, v, v_base, v_ss, nks, sk, dv, vec, tid)
                cp_async_commit()
            if has_bias != 0:
                stage_bias(sm, B_OFF, bias, bias_base, b_si, b_sj, q_start, sq, ks, sk, tid)
                cuda.syncthreads()

            kb = np.int64(0)
            if dropout:
                # Keep bits first, while no score registers are live. Lane (g, t) draws
                # for row g + 8 (t % 2), keys of group 2 n + t / 2; row g's words come
                # from lane 4 g + (t & 2), row g + 8's from the next. Bit 4 n + e: fragment
                # value 4 n + e is kept.
                rd = row0 + 8 * (t & 1)
                src = 4 * g + (t & 2)
                wsh = 2 * (t & 1)
                for n in range(NTK):
                    bits = keep_bits(bh, rd, ks + 8 * n + 4 * (t >> 1), drop_rows, drop_groups,
                                     p_drop, seed_lo, seed_hi, off_lo, off_hi)
                    w0 = (cuda.shfl_sync(_FULL, bits, src) >> wsh) & 3
                    w1 = (cuda.shfl_sync(_FULL, bits, src + 1) >> wsh) & 3
                    kb |= np.int64(w0 | (w1 << 2)) << (4 * n)

            for i in range(N_S):
                s[i] = _ZERO
            kbuf = k_lane + cur * (TILE * 2)
            for kk in range(KD):
                qk = 4 * kk
                if not Q_REGS:
                    fq = _ldsm(q_lane, 32 * kk)
                    qf[0] = fq[0]
                    qf[1] = fq[1]
                    qf[2] = fq[2]
                    qf[3] = fq[3]
                    qk = 0
                for jn in range(NTK // 2):
                    fb = _ldsm(kbuf, jn * (16 * L2) + 32 * kk)
                    c = 8 * jn
                    mma2(s, c, qf[qk], qf[qk + 1], qf[qk + 2], qf[qk + 3], fb)

            # x = scale * S + bias, -inf outside [lo, hi] of the row. Every loop over
            # the fragment registers keeps a small body so that it unrolls and the
            # registers never go to local memory. The bias test and the mask stay out
            # of the per-score loops where they can: the mask only on tiles that the
            # lane's rows do not see whole (issue-bound kernel: ncu, bench/NOTES.md).
            if has_bias != 0:
                for n in range(NTK):
                    for e in range(4):
                        s[4 * n + e] = (s[4 * n + e] * scale
                                        + load(sm, np.uint64(b_lane + 8 * (e >> 1) * BPAD
                                                             + 8 * n + (e & 1))))
            else:
                for i in range(N_S):
                    s[i] *= scale
            rlo0 = lo0 - ks
            rhi0 = hi0 - ks
            rlo1 = lo1 - ks
            rhi1 = hi1 - ks
            mask_scores(s, t, rlo0, rhi0, rlo1, rhi1)
            mx0 = _NEG_INF
            mx1 = _NEG_INF
            for n in range(NTK):
                mx0 = max(mx0, max(s[4 * n], s[4 * n + 1]))
                mx1 = max(mx1, max(s[4 * n + 2], s[4 * n + 3]))
            mx0 = max(mx0, cuda.shfl_xor_sync(_FULL, mx0, 1))
            mx0 = max(mx0, cuda.shfl_xor_sync(_FULL, mx0, 2))
            mx1 = max(mx1, cuda.shfl_xor_sync(_FULL, mx1, 1))
            mx1 = max(mx1, cuda.shfl_xor_sync(_FULL, mx1, 2))
            mn0 = max(m0, mx0)
            mn1 = max(m1, mx1)
            # A row with no visible key so far keeps m = -inf: subtract 0 instead, so
            # exp(-inf - 0) = 0 rather than NaN.
            a0 = _ONE
            mu0 = _ZERO
            if mn0 != _NEG_INF:
                a0 = _exp(m0 - mn0)
                mu0 = mn0
            a1 = _ONE
            mu1 = _ZERO
            if mn1 != _NEG_INF:
                a1 = _exp(m1 - mn1)
                mu1 = mn1
            m0 = mn0
            m1 = mn1
            rs0 = _ZERO
            rs1 = _ZERO
            ml0 = mu0 * _LOG2E
            ml1 = mu1 * _LOG2E
            for n in range(NTK):
                p = _exp2(s[4 * n] * _LOG2E - ml0)
                s[4 * n] = p
                rs0 += p
                p = _exp2(s[4 * n + 1] * _LOG2E - ml0)
                s[4 * n + 1] = p
                rs0 += p
                p = _exp2(s[4 * n + 2] * _LOG2E - ml1)
                s[4 * n + 2] = p
                rs1 += p
                p = _exp2(s[4 * n + 3] * _LOG2E - ml1)
                s[4 * n + 3] = p
                rs1 += p
            l0 = l0 * a0 + rs0
            l1 = l1 * a1 + rs1
            for n in range(NTD):
                o[4 * n] *= a0
                o[4 * n + 1] *= a0
                o[4 * n + 2] *= a1
                o[4 * n + 3] *= a1
            if dropout:
                for i in range(N_S):
                    if (kb >> i) & 1 == 0:
                        s[i] = _ZERO

            vbuf = v_lane + cur * (TILE * 2)
            for kq in range(NTK // 2):
                c = 8 * kq
                pa0 = pack(s[c], s[c + 1])
                pa1 = pack(s[c + 2], s[c + 3])
                pa2 = pack(s[c + 4], s[c + 5])
                pa3 = pack(s[c + 6], s[c + 7])
                for jn in range(NTD // 2):
                    fb = _ldsm_t(vbuf, kq * (16 * L2) + 32 * jn)
                    cc = 8 * jn
                    mma2(o, cc, pa0, pa1, pa2, pa3, fb)
            cur = 1 - cur
            ks = nks

        l0 += cuda.shfl_xor_sync(_FULL, l0, 1)
        l0 += cuda.shfl_xor_sync(_FULL, l0, 2)
        l1 += cuda.shfl_xor_sync(_FULL, l1, 1)
        l1 += cuda.shfl_xor_sync(_FULL, l1, 2)
        inv0 = _ZERO
        if l0 > _ZERO:
            inv0 = _ONE / l0
        inv1 = _ZERO
        if l1 > _ZERO:
            inv1 = _ONE / l1
        if dropout:
            inv0 *= drop_scale
            inv1 *= drop_scale
        if t == 0:
            if row0 < sq:
                lv = _NEG_INF
                if l0 > _ZERO:
                    lv = m0 + math.log(l0)
                lse[np.uint64(lse_base + row0 * l_si)] = lv
            elif row0 < lse_rows:
                lse[np.uint64(lse_base + row0 * l_si)] = _NEG_INF
            if row1 < sq:
                lv = _NEG_INF
                if l1 > _ZERO:
                    lv = m1 + math.log(l1)
                lse[np.uint64(lse_base + row1 * l_si)] = lv
            elif row1 < lse_rows:
                lse[np.uint64(lse_base + row1 * l_si)] = _NEG_INF

        # out through a float32 tile over the K buffers: coalesced row stores.
        cp_async_wait_all()
        cuda.syncthreads()
        lr0 = warp * 16 + g
        f0 = O_OFF + lr0 * d_max
        f1 = f0 + 8 * d_max
        sw = (lr0 & FSW) << 3
        for n in range(NTD):
            c = (8 * n + 2 * t) ^ sw
            smf[f0 + c] = o[4 * n] * inv0
            smf[f0 + c + 1] = o[4 * n + 1] * inv0
            smf[f1 + c] = o[4 * n + 2] * inv1
            smf[f1 + c + 1] = o[4 * n + 3] * inv1
        cuda.syncthreads()
        o_base = bq * o_sb + h * o_sh + qrow0 * o_ss
        for idx in range(tid, blk * d_max, NT):
            rr = idx >> LOG_D
            c = idx & (d_max - 1)
            i = q_start + rr
            if i < sq and c < dv:
                store(out, np.uint64(o_base + i * o_ss + c),
                      smf[O_OFF + rr * d_max + (c ^ ((rr & FSW) << 3))])

    name = (f"attn_fwd_tc_{dtype}_d{d_max}_{'drop' if dropout else 'nodrop'}"
            f"_b{cfg.blk}q{cfg.qn}")
    return Kernel(name, attn_fwd_tc, argtypes_for(TC_FWD_PARAMS, dtype))


@functools.lru_cache(maxsize=None)
def make_attention_bwd_tc_kernel(dtype, d_max, dropout, cfg):
    """Tensor-core backward main kernel for ``dtype`` float16 / bfloat16, head dims
    <= ``d_max``, dropout on/off, tiling ``cfg``. Grid ``(G, num_splits, batches * H /
    G * P)`` for a group of G (batch, head) pairs (G divides batches * H) and P =
    :func:`bwd_col_parts` column parts, ``cfg.nt`` threads, :func:`bwd_smem_bytes` of
    dynamic shared memory; parameters as
    :data:`TC_BWD_PARAMS`; runs after the CUDA-core backward's prep kernel (delta,
    zeroed workspace and locks) made with the same ``blk``."""
    cfg = TcConfig(*cfg).validate()
    if d_max not in TC_D_MAXES:
        raise ValueError(f"d_max must be one of {TC_D_MAXES}, got {d_max}")
    pack = _mma_pack(dtype)[1]
    mma2 = _mma_x2(dtype)
    blk, QN = cfg
    NT = cfg.nt
    NSUB = blk // QN          # query sub-tiles per query block
    NQT = QN // 8             # 8-query tiles of S^T / dP^T
    KD = d_max // 16
    NCP = bwd_col_parts(d_max, dropout)
    DO = d_max // NCP         # output columns of dK / dV / dQ a block accumulates
    NTD = DO // 8             # 8-column tiles of dK / dV
    # dQ in column parts of at most 64: 32 accumulators a lane on top of dK and dV.
    DQW = min(DO, 64 if DO <= 64 else 32)
    DQP = DO // DQW
    NDQ = DQW // 8
    RB = min(NDQ, 2)          # column tiles per batch of dQ workspace loads
    NKB = blk // 16           # 16-key steps of dQ = dS K
    N_ACC, N_S, N_DQ = NTD * 4, NQT * 4, NDQ * 4
    TILE, S_OFF, F_OFF, C_OFF, B_OFF = _bwd_layout(blk, d_max)
    # Shared int64 slots of the block's base offsets: ptxas kept every such value in
    # a register pair across the loops (LLVM hoists their uses' address arithmetic),
    # which spilled at head_dim 128; a shared load where they are used is cheaper.
    C_Q, C_G, C_K, C_V, C_GQ, C_GK, C_GV, C_B, C_GB, C_L, C_D, C_COL = (C_OFF + i
                                                                      for i in range(12))
    K_OFF = 0
    V_OFF = TILE
    Q_OFF = 2 * TILE          # Q of buffer c at Q_OFF + 2 c TILE, its dO one TILE later
    DB = _qbufs(d_max) == 2
    BPAD = _bias_pad(blk)
    L2 = _row(d_max) * 2      # bytes per Q / K / V / dO row
    SROW = _row(blk)
    BL2 = SROW * 2            # bytes per dS row
    FT = blk * DO             # float32 staging tile of dK (dV after it)
    FSW = _fswz(DO)
    LOG_D = _log2(DO)
    LOG_BLK = _log2(blk)
    SDT = dtypes.STORAGE[dtype]
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)
    hp = _helpers(dtype, d_max, cfg)
    load_tile, stage_bias, key_queries, keep_bits = (hp.load_tile, hp.stage_bias,
                                                     hp.key_queries, hp.keep_bits)
    mask_probs = _edge_mask(NQT, QN, _ZERO)
    sch = schedule(blk)
    smallest_query_for_key = sch.smallest_query_for_key
    query_start = sch.query_start
    next_block = sch.next_block
    num_parallel_blocks = sch.num_parallel_blocks

    @_device
    def stat_load(lse, delta, lse_base, l_si, delta_base, qs, sq, tid):
        """Thread tid < blk: lse * log2(e) of query qs + tid, +inf for a row that sees
        no key (lse = -inf) or lies past the sequence, so that exp2(x log2(e) - that)
        is 0 there; the others: its delta (0 past the sequence)."""
        r = tid & (blk - 1)
        i = qs + r
        val = _ZERO
        if tid < blk:
            val = _POS_INF
            if i < sq:
                val = lse[np.uint64(lse_base + i * l_si)] * _LOG2E
                if val == _NEG_INF:
                    val = _POS_INF
        elif i < sq:
            val = delta[np.uint64(delta_base + i)]
        return val

    @_device
    def stat_store(smf, buf, tid, val):
        kind = 0 if tid < blk else 2 * blk
        smf[F_OFF + kind + buf * blk + (tid & (blk - 1))] = val

    def attn_bwd_tc(q, k, v, gout, bias, lse, delta, gq, gk, gv, gb, ws, locks, cu_q, cu_k,
                    q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, g_sb, g_ss, g_sh,
                    gq_sb, gq_ss, gq_sh, gk_sb, gk_ss, gk_sh, gv_sb, gv_ss, gv_sh,
                    b_sb, b_sh, b_si, b_sj, l_sb, l_sh, l_si, gb_sb, gb_sh, gb_si,
                    seq_q, seq_k, d, dv, rows, ws_rows,
                    scale, mask_kind, window, has_bias, varlen,
                    p_drop, drop_scale, seed_lo, seed_hi, off_lo, off_hi, drop_rows, drop_groups,
                    grad_bias, dq_mode, vec, heads):
        """Attention backward on tensor cores for the key blocks of split y and
        (batch, head) pair (z / P) * gridDim.x + x (batch-major; ``heads`` per batch),
        output columns [(z % P) DO, (z % P + 1) DO) of dK, dV and dQ (P column parts
        of DO; S and dP always over the whole head dim);
        arguments, results and the dQ workspace protocol as the CUDA-core backward's
        (``make_attention_bwd_kernel``), plus vec (1: every row of q, k, v, gout
        starts 16-byte aligned). The grid runs the splits of gridDim.x heads at a time
        in split order: under causal masks the low key blocks carry the most query
        blocks, so the longest blocks start first and the last to start are short
        (with the split fastest the last heads' longest blocks started last and ran
        alone). Warp w: keys ks + 16 w ..; per query sub-tile
        S^T = K Q^T, P^T = exp(scale S^T + bias^T - lse) (0 where masked or lse = -inf),
        dV += round(P^T keep) dO, dP^T = V dO^T, dS^T = P^T (dP^T Z - delta),
        dK += round(dS^T) Q; per query block dBias = round(dS) and
        dQ += scale round(dS) K. At the end of a key block gk = scale dK,
        gv = drop_scale dV (1 without dropout)."""
        sm = cuda.shared.array(0, SDT, alignment=_SMEM_ALIGN)
        smf = cuda.shared.array(0, _F32_DT, alignment=_SMEM_ALIGN)
        smw = cuda.shared.array(0, _U32_DT, alignment=_SMEM_ALIGN)
        smi = cuda.shared.array(0, _I64_DT, alignment=_SMEM_ALIGN)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        t = lane & 3
        split = cuda.blockIdx.y
        nsplit = cuda.gridDim.y
        hb = (cuda.blockIdx.z // NCP) * cuda.gridDim.x + cuda.blockIdx.x
        nheads = heads
        h = hb % heads
        b = hb // heads
        nb = (cuda.gridDim.z // NCP) * cuda.gridDim.x // heads
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
        gq_base = bq * gq_sb + h * gq_sh + qrow0 * gq_ss
        gk_base = bq * gk_sb + h * gk_sh + krow0 * gk_ss
        gv_base = bq * gv_sb + h * gv_sh + krow0 * gv_ss
        bias_base = b * b_sb + h * b_sh
        gb_base = b * gb_sb + h * gb_sh
        lse_base = b * l_sb + h * l_sh
        delta_base = (b * nheads + h) * rows
        if tid == 0:
            smi[C_Q] = q_base
            smi[C_G] = g_base
            smi[C_K] = k_base
            smi[C_V] = v_base
            smi[C_GQ] = gq_base
            smi[C_GK] = gk_base
            smi[C_GV] = gv_base
            smi[C_B] = bias_base
            smi[C_GB] = gb_base
            smi[C_L] = lse_base
            smi[C_D] = delta_base
            smi[C_COL] = 2 * DO * (cuda.blockIdx.z % NCP)  # first output column, bytes
        shift = sk - sq if mask_kind == MASK_BOTTOM_RIGHT else 0
        bh = b * nheads + h
        scale_l2 = scale * _LOG2E

        # Per-lane ldmatrix addresses (patterns as in the forward).
        sbase = shared_address(sm, 0)
        p1 = (lane & 15) * L2 + ((lane >> 4) << 4)
        p2 = ((lane & 7) + ((lane >> 4) << 3)) * L2 + (((lane >> 3) & 1) << 4)
        k_a = sbase + (K_OFF * 2 + warp * 16 * L2) + p1   # K as A (S^T)
        v_a = sbase + (V_OFF * 2 + warp * 16 * L2) + p1   # V as A (dP^T)
        # The B operands of dQ, dK, dV start at the block's first output column: its
        # byte offset (smi[C_COL]) is read from shared memory where it is added, since
        # held in registers across the loops it spilled at head_dim 256.
        k_t = sbase + K_OFF * 2 + p1                      # K as B, trans (dQ)
        q_b = sbase + Q_OFF * 2 + p2                      # Q as B (S^T)
        q_t = sbase + Q_OFF * 2 + p1                      # Q as B, trans (dK)
        g_b = q_b + TILE * 2                              # dO as B (dP^T)
        g_t = q_t + TILE * 2                              # dO as B, trans (dV)
        s_a = (sbase + S_OFF * 2 + 32 * warp + ((lane & 7) + ((lane >> 4) << 3)) * BL2
               + (((lane >> 3) & 1) << 4))                # dS as A, trans (dQ)
        kw0 = warp * 16 + g       # this lane's first key row in the block
        # Its dS rows kw0, kw0 + 8 in 32-bit words.
        s_w0 = (S_OFF + kw0 * SROW + 2 * t) >> 1
        s_w1 = s_w0 + 4 * SROW
        b_lane = B_OFF + 2 * t * BPAD + kw0

        dk = cuda.local.array(N_ACC, np.float32)
        dvv = cuda.local.array(N_ACC, np.float32)
        sv = cuda.local.array(N_S, np.float32)
        dp = cuda.local.array(N_S, np.float32)
        dq = cuda.local.array(N_DQ, np.float32)

        ks = split * blk
        while ks < sk:
            qs = query_start(split, nsplit, ks, sq, sk, mask_kind, window)
            kr0 = ks + kw0
            qlo0, qhi0 = key_queries(kr0, sq, sk, mask_kind, shift, window)
            qlo1, qhi1 = key_queries(kr0 + 8, sq, sk, mask_kind, shift, window)
            cuda.syncthreads()
            if qs < sq:
                load_tile(sm, K_OFF, k, smi[C_K], k_ss, ks, sk, d, vec, tid)
                load_tile(sm, V_OFF, v, smi[C_V], v_ss, ks, sk, dv, vec, tid)
                load_tile(sm, Q_OFF, q, smi[C_Q], q_ss, qs, sq, d, vec, tid)
                load_tile(sm, Q_OFF + TILE, gout, smi[C_G], g_ss, qs, sq, dv, vec, tid)
                cp_async_commit()
                stat_store(smf, 0, tid, stat_load(lse, delta, smi[C_L], l_si, smi[C_D],
                                                  qs, sq, tid))
            for i in range(N_ACC):
                dk[i] = _ZERO
                dvv[i] = _ZERO
            cur = 0
            while qs < sq:
                cp_async_wait_all()
                cuda.syncthreads()
                nqs, nks = next_block(split, nsplit, qs, ks, sq, sk, mask_kind, window)
                more = nks == ks and nqs < sq
                nstat = _ZERO
                if DB and more:
                    # Next query block's Q, dO into the other buffer (its readers
                    # finished before the barrier above), overlapping this block's math.
                    nbuf = Q_OFF + 2 * (1 - cur) * TILE
                    load_tile(sm, nbuf, q, smi[C_Q], q_ss, nqs, sq, d, vec, tid)
                    load_tile(sm, nbuf + TILE, gout, smi[C_G], g_ss, nqs, sq, dv, vec, tid)
                    cp_async_commit()
                    nstat = stat_load(lse, delta, smi[C_L], l_si, smi[C_D], nqs, sq, tid)
                if has_bias != 0:
                    stage_bias(sm, B_OFF, bias, smi[C_B], b_si, b_sj, qs, sq, ks, sk, tid)
                    cuda.syncthreads()
                qbuf = cur * (4 * TILE)
                q_bb = q_b + qbuf
                q_tb = q_t + qbuf
                g_bb = g_b + qbuf
                g_tb = g_t + qbuf
                lse_off = F_OFF + cur * blk
                dl_off = F_OFF + 2 * blk + cur * blk
                for qh in range(NSUB):
                    qrow = qh * QN            # sub-tile's first row in the Q / dO tiles
                    qb = qs + qrow
                    rlo0 = qlo0 - qb
                    rhi0 = qhi0 - qb
                    rlo1 = qlo1 - qb
                    rhi1 = qhi1 - qb

                    kb = np.int64(0)
                    if dropout:
                        # Keep bits first, while no score registers are live. Lane (g, t)
                        # draws for query 8 n + 2 t + g % 2, keys of group g / 2 of the
                        # warp's 16; lane (g, t) needs word g % 4 of the draws of lanes
                        # (2 (g / 4) + {0, 1, 4, 5}, t). Bit 4 n + e: fragment value
                        # 4 n + e is kept. A dropped entry keeps -P below: its sign
                        # marks the drop for dV and dS.
                        wd = g & 3
                        sl = 8 * (g >> 2) + t
                        for n in range(NQT):
                            bits = keep_bits(bh, qb + 8 * n + 2 * t + (g & 1),
                                             ks + warp * 16 + 4 * (g >> 1), drop_rows,
                                             drop_groups, p_drop, seed_lo, seed_hi, off_lo,
                                             off_hi)
                            w0 = (cuda.shfl_sync(_FULL, bits, sl) >> wd) & 1
                            w1 = (cuda.shfl_sync(_FULL, bits, sl + 4) >> wd) & 1
                            w2 = (cuda.shfl_sync(_FULL, bits, sl + 16) >> wd) & 1
                            w3 = (cuda.shfl_sync(_FULL, bits, sl + 20) >> wd) & 1
                            kb |= np.int64(w0 | (w1 << 1) | (w2 << 2) | (w3 << 3)) << (4 * n)

                    # S^T = K Q^T
                    for i in range(N_S):
                        sv[i] = _ZERO
                    for kk in range(KD):
                        fa = _ldsm(k_a, 32 * kk)
                        for jn in range(NQT // 2):
                            fb = _ldsm(q_bb, (qrow + 16 * jn) * L2 + 32 * kk)
                            c = 8 * jn
                            mma2(sv, c, fa[0], fa[1], fa[2], fa[3], fb)

                    # P^T = exp(x - lse) as exp2(x log2(e) - lse log2(e)) (the shared lse
                    # is scaled by log2(e); +inf where lse = -inf, so P is 0 there);
                    # without bias x log2(e) = S (scale log2(e)): one FFMA a score. 0
                    # outside the key's [first, last] query, tested only on sub-tiles the
                    # lane's keys do not see whole.
                    if has_bias != 0:
                        for n in range(NQT):
                            for e in range(4):
                                qc = 8 * n + 2 * t + (e & 1)
                                x = (sv[4 * n + e] * scale
                                     + load(sm, np.uint64(b_lane + (qrow + 8 * n + (e & 1))
                                                          * BPAD + 8 * (e >> 1))))
                                sv[4 * n + e] = _exp2(x * _LOG2E
                                                      - smf[np.uint64(lse_off + qrow + qc)])
                    else:
                        for n in range(NQT):
                            for e in range(4):
                                qc = 8 * n + 2 * t + (e & 1)
                                sv[4 * n + e] = _exp2(sv[4 * n + e] * scale_l2
                                                      - smf[np.uint64(lse_off + qrow + qc)])
                    mask_probs(sv, t, rlo0, rhi0, rlo1, rhi1)
                    if dropout:
                        for i in range(N_S):
                            if (kb >> i) & 1 == 0:
                                sv[i] = -sv[i]

                    # dV += (P Z)^T dO (dropped entries as 0; 1 / (1 - p) at the end)
                    g_tc = g_tb
                    if NCP > 1:
                        g_tc = g_tb + smi[C_COL]
                    for kq in range(NQT // 2):
                        c = 8 * kq
                        pa0 = pack(max(sv[c], _ZERO), max(sv[c + 1], _ZERO))
                        pa1 = pack(max(sv[c + 2], _ZERO), max(sv[c + 3], _ZERO))
                        pa2 = pack(max(sv[c + 4], _ZERO), max(sv[c + 5], _ZERO))
                        pa3 = pack(max(sv[c + 6], _ZERO), max(sv[c + 7], _ZERO))
                        for jn in range(NTD // 2):
                            fb = _ldsm_t(g_tc, (qrow + 16 * kq) * L2 + 32 * jn)
                            cc = 8 * jn
                            mma2(dvv, cc, pa0, pa1, pa2, pa3, fb)

                    # dP^T = V dO^T
                    for i in range(N_S):
                        dp[i] = _ZERO
                    for kk in range(KD):
                        fa = _ldsm(v_a, 32 * kk)
                        for jn in range(NQT // 2):
                            fb = _ldsm(g_bb, (qrow + 16 * jn) * L2 + 32 * kk)
                            c = 8 * jn
                            mma2(dp, c, fa[0], fa[1], fa[2], fa[3], fb)

                    # dS^T = P^T (dP^T Z - delta), to shared memory (rounded) for dQ and
                    # dBias.
                    for n in range(NQT):
                        for e in range(4):
                            pv = sv[4 * n + e]
                            dpv = dp[4 * n + e]
                            if dropout:
                                dpv = dpv * drop_scale if pv > _ZERO else _ZERO
                                pv = abs(pv)
                            sv[4 * n + e] = pv * (dpv - smf[np.uint64(dl_off + qrow + 8 * n
                                                                      + 2 * t + (e & 1))])
                    for n in range(NQT):
                        sw = (qrow >> 1) + 4 * n
                        smw[np.uint64(s_w0 + sw)] = pack(sv[4 * n], sv[4 * n + 1])
                        smw[np.uint64(s_w1 + sw)] = pack(sv[4 * n + 2], sv[4 * n + 3])

                    # dK += dS^T Q (scale applied at the end)
                    q_tc = q_tb
                    if NCP > 1:
                        q_tc = q_tb + smi[C_COL]
                    for kq in range(NQT // 2):
                        c = 8 * kq
                        pa0 = pack(sv[c], sv[c + 1])
                        pa1 = pack(sv[c + 2], sv[c + 3])
                        pa2 = pack(sv[c + 4], sv[c + 5])
                        pa3 = pack(sv[c + 6], sv[c + 7])
                        for jn in range(NTD // 2):
                            fb = _ldsm_t(q_tc, (qrow + 16 * kq) * L2 + 32 * jn)
                            cc = 8 * jn
                            mma2(dk, cc, pa0, pa1, pa2, pa3, fb)
                cuda.syncthreads()

                if grad_bias != 0 and (NCP == 1 or smi[C_COL] == 0):
                    # dBias[i, j] = dS (already rounded to the dtype in the dS tile),
                    # along keys so the global stores coalesce.
                    for idx in range(tid, blk * blk, NT):
                        kr = idx & (blk - 1)
                        qc = idx >> LOG_BLK
                        i = qs + qc
                        j = ks + kr
                        if i < sq and j < sk:
                            gb[np.uint64(smi[C_GB] + i * gb_si + j)] = sm[S_OFF + kr * SROW + qc]

                # dQ partial = dS K (scaled), added through the workspace as the
                # CUDA-core kernel does; warp w forms rows qs + 16 w .., DQW columns at
                # a time.
                next_key = ks + nsplit * blk
                is_last = next_key >= sk or qs < smallest_query_for_key(
                    next_key, sq, sk, mask_kind, window)
                npar = num_parallel_blocks(qs, sq, sk, mask_kind, window, nsplit)
                lock = 2 * ((b * nheads + h) * nqb + qs // blk)
                if dq_mode == DQ_LOCK and nsplit > 1:
                    if tid == 0:
                        while cuda.atomic.cas(locks, lock, np.int32(0),
                                              np.int32(split + 1)) != 0:
                            if not SIMULATOR:
                                cuda.nanosleep(_BACKOFF_NS)
                    cuda.syncthreads()
                    cuda.threadfence()
                region = (b * nheads + h) * ws_rows
                if dq_mode == DQ_SLICES:
                    region += split * nb * nheads * ws_rows
                qr0 = qs + warp * 16 + g
                ok0 = qr0 < sq
                ok1 = qr0 + 8 < sq
                wrow0 = (region + qr0) * d
                wrow1 = wrow0 + 8 * d
                grow0 = smi[C_GQ] + qr0 * gq_ss
                grow1 = grow0 + 8 * gq_ss
                direct = is_last and nsplit == 1
                even_d = (d & 1) == 0
                k_tc = k_t
                if NCP > 1:
                    k_tc = k_t + smi[C_COL]
                for part in range(DQP):
                    for i in range(N_DQ):
                        dq[i] = _ZERO
                    for kk in range(NKB):
                        fa = _ldsm_t(s_a, kk * (16 * BL2))
                        for jn in range(NDQ // 2):
                            fb = _ldsm_t(k_tc, kk * (16 * L2) + part * (2 * DQW) + 32 * jn)
                            cc = 8 * jn
                            mma2(dq, cc, fa[0], fa[1], fa[2], fa[3], fb)
                    cbase = part * DQW + 2 * t
                    if NCP > 1:
                        cbase += smi[C_COL] >> 1
                    if dq_mode == DQ_ATOMIC and not direct:
                        # A lane's two columns of a row are adjacent: one 8-byte
                        # reduction (red.v2) per pair where the rows are 8-byte
                        # aligned (even d), else two scalar atomics.
                        for n in range(NDQ):
                            col = cbase + 8 * n
                            for hr in range(2):
                                wrow = wrow0 if hr == 0 else wrow1
                                v0 = dq[4 * n + 2 * hr] * scale
                                v1 = dq[4 * n + 2 * hr + 1] * scale
                                if (ok0 if hr == 0 else ok1) and col < d:
                                    if even_d:
                                        red_add_v2_f32(ws, np.uint64(wrow + col), v0, v1)
                                    else:
                                        cuda.atomic.add(ws, np.uint64(wrow + col), v0)
                                        if col + 1 < d:
                                            cuda.atomic.add(ws, np.uint64(wrow + col + 1), v1)
                    else:
                        # The workspace loads of RB column tiles before their stores:
                        # a store to ws (or gq) may alias a later load as far as the
                        # compiler knows, so an interleaved read-modify-write paid an
                        # L2 round trip per element (32 a lane at d64). RB bounds the
                        # values in flight (all 32 at once spilled at d64).
                        for h0 in range(0, NDQ, RB):
                            for n in range(h0, h0 + RB):
                                for e in range(4):
                                    col = cbase + 8 * n + (e & 1)
                                    if (ok0 if e < 2 else ok1) and col < d:
                                        dq[4 * n + e] = (
                                            ws[np.uint64((wrow0 if e < 2 else wrow1) + col)]
                                            + dq[4 * n + e] * scale)
                            for n in range(h0, h0 + RB):
                                for e in range(4):
                                    col = cbase + 8 * n + (e & 1)
                                    if (ok0 if e < 2 else ok1) and col < d:
                                        if direct:
                                            store(gq, np.uint64((grow0 if e < 2 else grow1)
                                                                + col), dq[4 * n + e])
                                        else:
                                            ws[np.uint64((wrow0 if e < 2 else wrow1)
                                                         + col)] = dq[4 * n + e]
                # The atomic scheme needs no arrival count: the dq_store kernel
                # writes dQ once this kernel is done.
                if nsplit > 1 and dq_mode != DQ_ATOMIC:
                    cuda.threadfence()
                    cuda.syncthreads()
                    arrived = 0
                    if is_last and tid == 0:
                        arrived = cuda.atomic.add(locks, lock + 1, np.int32(1)) + 1
                    # Every column part of every parallel key block arrives once.
                    final = cuda.syncthreads_or(1 if arrived == npar * NCP else 0) != 0
                    if final:
                        cuda.threadfence()
                        slices = nsplit if dq_mode == DQ_SLICES else 1
                        stride = nb * nheads * ws_rows * d
                        base = (b * nheads + h) * ws_rows
                        nq = min(blk, sq - qs)
                        for idx in range(tid, nq * d, NT):
                            i = qs + idx // d
                            col = idx % d
                            acc = _ZERO
                            for sl in range(slices):
                                acc += ws[np.uint64((base + i) * d + col + sl * stride)]
                            store(gq, np.uint64(smi[C_GQ] + i * gq_ss + col), acc)
                    elif dq_mode == DQ_LOCK:
                        cuda.syncthreads()
                        if tid == 0:
                            cuda.atomic.exch(locks, lock, np.int32(0))

                if more:
                    if DB:
                        stat_store(smf, 1 - cur, tid, nstat)
                        cur = 1 - cur
                    else:
                        # One buffer: the next query block's tiles once every warp is
                        # done with these.
                        cuda.syncthreads()
                        load_tile(sm, Q_OFF, q, smi[C_Q], q_ss, nqs, sq, d, vec, tid)
                        load_tile(sm, Q_OFF + TILE, gout, smi[C_G], g_ss, nqs, sq, dv, vec,
                                  tid)
                        cp_async_commit()
                        stat_store(smf, 0, tid, stat_load(lse, delta, smi[C_L], l_si, smi[C_D],
                                                          nqs, sq, tid))
                qs = nqs
                if nks != ks:
                    break

            # dK, dV through float32 tiles over K, V, Q, dO: coalesced row stores.
            cp_async_wait_all()
            cuda.syncthreads()
            f0 = kw0 * DO
            f1 = f0 + 8 * DO
            sw = (kw0 & FSW) << 3
            dvs = drop_scale if dropout else _ONE
            for n in range(NTD):
                c = (8 * n + 2 * t) ^ sw
                smf[f0 + c] = dk[4 * n] * scale
                smf[f0 + c + 1] = dk[4 * n + 1] * scale
                smf[f1 + c] = dk[4 * n + 2] * scale
                smf[f1 + c + 1] = dk[4 * n + 3] * scale
                smf[FT + f0 + c] = dvv[4 * n] * dvs
                smf[FT + f0 + c + 1] = dvv[4 * n + 1] * dvs
                smf[FT + f1 + c] = dvv[4 * n + 2] * dvs
                smf[FT + f1 + c + 1] = dvv[4 * n + 3] * dvs
            cuda.syncthreads()
            c_first = 0
            if NCP > 1:
                c_first = smi[C_COL] >> 1
            for idx in range(tid, FT, NT):
                rr = idx >> LOG_D
                c = idx & (DO - 1)
                j = ks + rr
                if j < sk:
                    fi = rr * DO + (c ^ ((rr & FSW) << 3))
                    col = c_first + c
                    if col < d:
                        store(gk, np.uint64(smi[C_GK] + j * gk_ss + col), smf[fi])
                    if col < dv:
                        store(gv, np.uint64(smi[C_GV] + j * gv_ss + col), smf[FT + fi])
            ks += nsplit * blk

    name = (f"attn_bwd_tc_{dtype}_d{d_max}_{'drop' if dropout else 'nodrop'}"
            f"_b{cfg.blk}q{cfg.qn}")
    return Kernel(name, attn_bwd_tc, argtypes_for(TC_BWD_PARAMS, dtype))
