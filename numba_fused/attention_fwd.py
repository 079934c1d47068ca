"""Memory-efficient attention: the forward kernel and the tile helpers the backward reuses.

Data layout (as the seed kernel, PyTorch's ``mem_eff_attention``): q ``[B, Sq, H, D]``,
k ``[B, Sk, H, D]``, v ``[B, Sk, H, Dv]``, out ``[B, Sq, H, Dv]`` and lse
``[B, H, Sq]`` float32. Kernels take 4-D arrays with any strides (torch's
``[B, H, S, D]`` tensors come in as transposed views, no copy); under varlen the
batch dimension is 1, the sequences are packed along dim 1 and ``cu_seqlens``
gives where each starts.

Tiling. A block owns ``blk`` queries (forward) or ``blk`` keys (backward) and
walks over the other side in tiles of ``blk``. Its ``nt = (blk / rm) * (blk / 4)``
threads form a ``ty x tx`` grid (``ty = blk / rm``, ``tx = blk / 4``); lanes of one
row group are ``tx`` consecutive lanes of one warp.

- Score-shaped tiles ``[blk queries x blk keys]`` (S, P, dP, dS): thread ``(ty, tx)``
  holds rows ``ty + ty_n * r`` (``r < rm``) and the 4 consecutive keys
  ``4 * tx + c`` (``c < 4``), so one Philox draw covers its 4 dropout decisions of
  a row, and row reductions (max, sum) are ``xor`` shuffles across the ``tx`` lanes.
- Output-shaped tiles ``[blk x d_max]`` (O, dQ, dK, dV): rows ``ty + ty_n * r``, columns
  ``tx + tx_n * c`` (``c < d_max / tx_n``): same rows as the score tiles, so the
  softmax statistics of a row never leave the thread's registers.

Every matmul is one of three device functions over shared-memory tiles (``mm_s``
for the score tiles, ``mm_o_km`` / ``mm_o_mk`` for the output tiles; "km"/"mk" is the
layout of the A operand), each accumulating an ``rm x rn`` register tile from
``kc``-deep staged slices, so a later tensor-core version can replace them one by
one. Staged slices are float32 in shared memory; global loads widen the storage
dtype (float32 / float16 / bfloat16 bits) through :mod:`numba_fused.dtypes`.

Forward math (per query row ``i``; keys ``j`` it sees, see :func:`visible`):
``s_ij = scale * q_i . k_j + bias_ij``; online softmax with running max ``m`` and
sum ``l``: ``l = l * exp(m_old - m) + sum_j exp(s_ij - m)``;
``o_i = sum_j exp(s_ij - m) * z_ij * v_j / l``; ``lse_i = m + log(l)``.
A row that sees no key gets ``o = 0`` and ``lse = -inf``.

Dropout (``z_ij = keep_ij / (1 - p)``, kept when the uniform draw is ``>= p``) is
regenerated from Philox4x32-10, never stored. Keying (identical in forward and
backward, independent of the launch configuration): key = ``(seed_lo, seed_hi)``;
counter = ``(lo, hi, offset_lo, offset_hi)`` where ``lo, hi`` are the two words of the
64-bit position ``((b * H + h) * rows + i) * groups + j // 4``, with ``rows = Sq``,
``groups = ceil(Sk / 4)`` (varlen: ``b`` the sequence, ``i, j`` positions inside it,
``rows = max_seqlen_q``, ``groups = ceil(max_seqlen_k / 4)``); output word ``j % 4``
decides key ``j``. :func:`numba_fused.attention.dropout_keep_ref` is the NumPy twin.
"""

import functools
import math
from collections import namedtuple

import numpy as np
from numba import cuda, types

from . import dtypes, philox
from .jit import inline_device
from .launch import SIMULATOR, Kernel

__all__ = ["TileConfig", "tile_helpers", "make_attention_fwd_kernel", "D_MAXES", "FWD_PARAMS",
           "MATH_SCALARS", "argtypes_for",
           "MASK_NONE", "MASK_TOP_LEFT", "MASK_BOTTOM_RIGHT"]

MASK_NONE, MASK_TOP_LEFT, MASK_BOTTOM_RIGHT = 0, 1, 2
D_MAXES = (16, 32, 64, 128)

_FULL = 0xFFFFFFFF
_F32 = np.float32
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_NEG_INF = np.float32(-np.inf)
_LO32 = 0xFFFFFFFF


# Helpers hold register tiles: always inlined (a call would pass them through memory).
_device = inline_device


class TileConfig(namedtuple("TileConfig", "blk rm kc")):
    """Block shape. blk: queries (and keys) per tile; rm: rows per thread; kc: depth
    of one staged slice (along head_dim for QK^T and dO V^T, along keys or queries for
    the output matmuls)."""

    __slots__ = ()

    @property
    def ty(self):
        return self.blk // self.rm

    @property
    def tx(self):
        return self.blk // 4

    @property
    def nt(self):
        return self.ty * self.tx

    def validate(self):
        blk, rm, kc = self
        tx = blk // 4
        ok = (blk % 4 == 0 and blk % rm == 0 and blk % kc == 0 and rm <= 8
              and tx & (tx - 1) == 0 and tx <= 32 and self.nt >= blk and self.nt <= 1024
              and (self.nt // blk) & (self.nt // blk - 1) == 0)
        if not ok:
            raise ValueError(f"unsupported attention tile config {tuple(self)}")
        return self

    def d_max_for(self, head_dim):
        """Smallest supported register width >= head_dim (None if above 128)."""
        for d in D_MAXES:
            if d >= head_dim and d % self.tx == 0:
                return d
        return None


def _make_mm(rm, rn, kc, a_kstep, a_rstep, b_kstep, b_cstep, a_relu=False):
    """acc[r, c] += sum_{kk < kc} a_s[a0 + kk * a_kstep + r * a_rstep]
                                * b_s[b0 + kk * b_kstep + c * b_cstep],
    with negative A entries read as 0 when a_relu (dropped entries, see the backward).

    a0, b0 (uint32) already hold the calling thread's row / column offsets. Shared
    tiles are 1-D and indexed in uint32 so that numba emits no negative-index
    wraparound and the constant parts of each index fold into the load's address."""
    ak, ar, bk, bc = (np.uint32(x) for x in (a_kstep, a_rstep, b_kstep, b_cstep))

    def mm(acc, a_s, a0, b_s, b0):
        a = cuda.local.array(rm, np.float32)
        b = cuda.local.array(rn, np.float32)
        for kk in range(kc):
            k = np.uint32(kk)
            for r in range(rm):
                a[r] = a_s[a0 + k * ak + np.uint32(r) * ar]
                if a_relu:
                    a[r] = max(a[r], _ZERO)
            for c in range(rn):
                b[c] = b_s[b0 + k * bk + np.uint32(c) * bc]
            for r in range(rm):
                for c in range(rn):
                    acc[r, c] += a[r] * b[c]

    return _device(mm)


Helpers = namedtuple("Helpers", "cfg d_max rnb row_max row_sum visible keep_bits stage_km "
                                "stage_km_perm stage_rows stage_rows_dq dq_parts mm_s mm_o_km "
                                "mm_o_km_relu mm_o_mk mm_dq philox")


def _inline_philox():
    # philox.philox4x32 is a plain device function: called, it returns its four words
    # through a stack frame. Re-jitting its Python source with forceinline keeps them
    # in registers.
    if SIMULATOR:
        return philox.philox4x32
    return _device(philox.philox4x32.py_func)


@functools.lru_cache(maxsize=None)
def tile_helpers(dtype, d_max, cfg):
    """Device functions shared by the attention kernels of one dtype / width / tile shape.

    Shared tiles (1-D float32): ``sA``, ``sB`` ``[kc][blk + 1]`` (k-major staged slices
    of the score matmuls), ``sR`` ``[kc][d_max]`` (row slices for the output matmuls),
    ``pt`` ``[blk][blk + 1]`` (P * Z or dS, query-major)."""
    cfg = TileConfig(*cfg).validate()
    blk, rm, kc = cfg
    ty_n, tx_n, nt = cfg.ty, cfg.tx, cfg.nt
    if d_max % tx_n:
        raise ValueError(f"d_max={d_max} is not a multiple of {tx_n} columns per row group")
    rnb = d_max // tx_n
    pad = blk + 1
    log_tx = tx_n.bit_length() - 1
    load = dtypes.loader(dtype)
    philox4x32 = _inline_philox()
    uniform = philox.uniform_from_bits
    u_nt, u_kc, u_blk, u_dmax, u_pad, u_tx = (np.uint32(x) for x in (nt, kc, blk, d_max, pad, tx_n))
    u_four = np.uint32(4)

    def row_max(v):
        """max of v over the tx lanes that hold one row (every lane gets it)."""
        for s in range(log_tx):
            v = max(v, cuda.shfl_xor_sync(_FULL, v, tx_n >> (s + 1)))
        return v

    def row_sum(v):
        """sum of v over the tx lanes that hold one row (every lane gets it)."""
        for s in range(log_tx):
            v += cuda.shfl_xor_sync(_FULL, v, tx_n >> (s + 1))
        return v

    def visible(i, j, sq, sk, mask_kind, shift, window):
        """Query i sees key j: both in range, and for a causal mask j <= i + shift and,
        with window > 0, j > i + shift - window (docs/API.md's masks)."""
        if i >= sq or j >= sk:
            return False
        if mask_kind != MASK_NONE:
            if j > i + shift:
                return False
            if window > 0 and j <= i + shift - window:
                return False
        return True

    def keep_bits(bh, i, j0, rows, groups, p, seed_lo, seed_hi, off_lo, off_hi):
        """Bit c set when dropout keeps key j0 + c of query i (j0 % 4 == 0): one
        Philox draw at position ((bh * rows + i) * groups + j0 // 4)."""
        pos = (np.int64(bh) * rows + i) * groups + j0 // 4
        r0, r1, r2, r3 = philox4x32(np.uint32(pos & _LO32), np.uint32(pos >> 32),
                                    off_lo, off_hi, seed_lo, seed_hi)
        bits = 0
        if uniform(r0) >= p:
            bits |= 1
        if uniform(r1) >= p:
            bits |= 2
        if uniform(r2) >= p:
            bits |= 4
        if uniform(r3) >= p:
            bits |= 8
        return bits

    def _make_stage_km(perm):
        def stage_km(dst, src, base, rstride, r0, nrows, c0, ncols):
            """dst[kk * (blk + 1) + m] = src[base + (r0 + m) * rstride + c0 + kk] for
            kk < kc, m < blk (zero outside r0 + m < nrows, c0 + kk < ncols); with perm,
            m is stored at (m % 4) * tx + m // 4 so that mm_s's B loads of the 4
            consecutive keys of a thread hit distinct banks."""
            idx = np.uint32(cuda.threadIdx.x)
            while idx < u_kc * u_blk:
                kk = idx % u_kc
                m = idx // u_kc
                val = _ZERO
                if r0 + m < nrows and c0 + kk < ncols:
                    val = load(src, np.uint64(base + (r0 + m) * rstride + c0 + kk))
                if perm:
                    dst[kk * u_pad + (m % u_four) * u_tx + m // u_four] = val
                else:
                    dst[kk * u_pad + m] = val
                idx += u_nt

        return _device(stage_km)

    def _make_stage_rows(width):
        u_w = np.uint32(width)

        def stage_rows(dst, src, base, rstride, r0, nrows, c0, ncols):
            """dst[kk * width + c] = src[base + (r0 + kk) * rstride + c0 + c] for kk < kc,
            c < width (zero outside r0 + kk < nrows, c0 + c < ncols)."""
            idx = np.uint32(cuda.threadIdx.x)
            while idx < u_kc * u_w:
                kk = idx // u_w
                c = idx % u_w
                val = _ZERO
                if r0 + kk < nrows and c0 + c < ncols:
                    val = load(src, np.uint64(base + (r0 + kk) * rstride + c0 + c))
                dst[idx] = val
                idx += u_nt

        return _device(stage_rows)

    # dQ is computed in column halves when the output tile is wide: the backward
    # holds dK and dV in registers throughout, and a whole dQ tile on top of them
    # would not fit in 255 registers at head_dim 128.
    dq_parts = 2 if rnb >= 8 else 1
    half = d_max // dq_parts

    return Helpers(
        cfg=cfg, d_max=d_max, rnb=rnb,
        row_max=_device(row_max), row_sum=_device(row_sum), visible=_device(visible),
        keep_bits=_device(keep_bits),
        stage_km=_make_stage_km(False), stage_km_perm=_make_stage_km(True),
        stage_rows=_make_stage_rows(d_max), stage_rows_dq=_make_stage_rows(half),
        dq_parts=dq_parts,
        # S / dP tile: A = sA[kk][row], B = sB[kk][permuted key].
        mm_s=_make_mm(rm, 4, kc, pad, ty_n, pad, tx_n),
        # dV, dK: A = pt[i0 + kk][key row] (P^T, dS^T), B = sR[kk][col].
        mm_o_km=_make_mm(rm, rnb, kc, pad, ty_n, d_max, tx_n),
        mm_o_km_relu=_make_mm(rm, rnb, kc, pad, ty_n, d_max, tx_n, a_relu=True),
        # O, dQ: A = pt[query row][j0 + kk], B = sR[kk][col].
        mm_o_mk=_make_mm(rm, rnb, kc, 1, ty_n * pad, d_max, tx_n),
        # dQ (one column part): A = pt[query row][j0 + kk], B = sR[kk][col of the part].
        mm_dq=_make_mm(rm, rnb // dq_parts, kc, 1, ty_n * pad, half, tx_n),
        philox=philox4x32,
    )


def array1(dtype):
    """1-D view of a tensor's storage as the kernels take it (elements addressed through
    explicit strides, so a batch / head offset is one base value per block)."""
    return types.Array(dtypes.numba_storage_type(dtype), 1, "C")


F32_1D = types.Array(types.float32, 1, "C")
I32_1D = types.Array(types.int32, 1, "C")
I64 = types.int64

# Scalars every attention kernel takes after its strides, in this order.
MATH_SCALARS = (
    ("scale", types.float32),
    ("mask_kind", I64),    # MASK_NONE / MASK_TOP_LEFT / MASK_BOTTOM_RIGHT
    ("window", I64),       # > 0: local attention (with a causal mask)
    ("has_bias", I64),
    ("varlen", I64),
    ("p_drop", types.float32),
    ("drop_scale", types.float32),  # 1 / (1 - p_drop), 0 when p_drop == 1
    ("seed_lo", types.uint32), ("seed_hi", types.uint32),
    ("off_lo", types.uint32), ("off_hi", types.uint32),
    ("drop_rows", I64), ("drop_groups", I64),
)


def _stride_args(*prefixes):
    """(name, int64) for the batch, seq and head strides of each [B, S, H, D] tensor."""
    return tuple((f"{p}_{w}", I64) for p in prefixes for w in ("sb", "ss", "sh"))


FWD_PARAMS = (
    ("q", None), ("k", None), ("v", None), ("bias", None), ("out", None),
    ("lse", F32_1D), ("cu_q", I32_1D), ("cu_k", I32_1D),
    *_stride_args("q", "k", "v", "o"),
    ("b_sb", I64), ("b_sh", I64), ("b_si", I64), ("b_sj", I64),
    ("l_sb", I64), ("l_sh", I64), ("l_si", I64),
    ("seq_q", I64), ("seq_k", I64), ("d", I64), ("dv", I64), ("lse_rows", I64),
    *MATH_SCALARS,
)


def argtypes_for(params, dtype):
    """numba argtypes of a parameter table: None stands for a 1-D array of ``dtype``."""
    st = array1(dtype)
    return tuple(st if t is None else t for _, t in params)


@functools.lru_cache(maxsize=None)
def make_attention_fwd_kernel(dtype, d_max, dropout, cfg):
    """Forward kernel for storage ``dtype``, head dims <= ``d_max``, dropout on/off,
    tile shape ``cfg`` (a :class:`TileConfig` tuple). Grid ``(ceil(lse_rows / blk), H,
    batches)``, block ``cfg.nt`` threads; parameters as :data:`FWD_PARAMS`."""
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
    row_max, row_sum, visible, keep_bits = hp.row_max, hp.row_sum, hp.visible, hp.keep_bits
    stage_km, stage_km_perm, stage_rows = hp.stage_km, hp.stage_km_perm, hp.stage_rows
    mm_s, mm_o_mk = hp.mm_s, hp.mm_o_mk

    def attn_fwd(q, k, v, bias, out, lse, cu_q, cu_k,
                 q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, o_sb, o_ss, o_sh,
                 b_sb, b_sh, b_si, b_sj, l_sb, l_sh, l_si,
                 seq_q, seq_k, d, dv, lse_rows,
                 scale, mask_kind, window, has_bias, varlen,
                 p_drop, drop_scale, seed_lo, seed_hi, off_lo, off_hi, drop_rows, drop_groups):
        """Attention forward for the ``blk`` queries of block x, head y, batch z.

        q [B, Sq, H, D], k [B, Sk, H, D], v [B, Sk, H, Dv], out [B, Sq, H, Dv]: flat
        storage, element (b, s, h, c) at b * X_sb + s * X_ss + h * X_sh + c. bias
        [B, H, Sq, Sk] at b * b_sb + h * b_sh + i * b_si + j * b_sj (read when has_bias).
        lse float32 [nb, H, lse_rows] at b * l_sb + h * l_sh + i * l_si (rows past a
        sequence's end get -inf). Without varlen Sq = seq_q, Sk = seq_k; with varlen
        (B = 1) sequence z holds rows cu_q[z] .. cu_q[z + 1] of q (cu_k: of k, v).
        s = scale * q.k + bias, masked by mask_kind and window (see ``visible``);
        out = sum_j softmax(s)_j * z_j * v_j, z the dropout factor (0 or drop_scale);
        lse = log sum_j exp(s_j).
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
            for i in range(q_start + tid, min(q_start + blk, lse_rows), nt):
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

        m = cuda.local.array(rm, np.float32)
        lsum = cuda.local.array(rm, np.float32)
        o = cuda.local.array((rm, rnb), np.float32)
        s = cuda.local.array((rm, 4), np.float32)
        for r in range(rm):
            m[r] = _NEG_INF
            lsum[r] = _ZERO
            for c in range(rnb):
                o[r, c] = _ZERO
        bh = b * cuda.gridDim.y + h

        ks = (k_lo // blk) * blk
        while ks <= k_hi:
            for r in range(rm):
                for c in range(4):
                    s[r, c] = _ZERO
            for d0 in range(0, d, kc):
                stage_km(sA, q, q_base, q_ss, q_start, sq, d0, d)
                stage_km_perm(sB, k, k_base, k_ss, ks, sk, d0, d)
                cuda.syncthreads()
                mm_s(s, sA, uty, sB, utx)
                cuda.syncthreads()

            for r in range(rm):
                i = q_start + ty + ty_n * r
                mx = _NEG_INF
                for c in range(4):
                    j = ks + 4 * tx + c
                    x = _NEG_INF
                    if visible(i, j, sq, sk, mask_kind, shift, window):
                        x = s[r, c] * scale
                        if has_bias != 0:
                            x += load(bias, np.uint64(bias_base + i * b_si + j * b_sj))
                    s[r, c] = x
                    mx = max(mx, x)
                mx = row_max(mx)
                m_new = max(m[r], mx)
                alpha = _ONE
                if m_new != _NEG_INF:
                    alpha = math.exp(m[r] - m_new)
                rs = _ZERO
                for c in range(4):
                    pv = _ZERO
                    if s[r, c] != _NEG_INF:
                        pv = math.exp(s[r, c] - m_new)
                    rs += pv
                    pt[(uty + u_tyn * np.uint32(r)) * u_pad + u_four * utx + np.uint32(c)] = pv
                rs = row_sum(rs)
                lsum[r] = lsum[r] * alpha + rs
                m[r] = m_new
                for c in range(rnb):
                    o[r, c] *= alpha
            if dropout:
                # Its own loop: with Philox inlined the row loop above would be too
                # large to unroll, and its register tiles would go to the stack.
                for r in range(rm):
                    i = q_start + ty + ty_n * r
                    if i < sq:
                        kb = keep_bits(bh, i, ks + 4 * tx, drop_rows, drop_groups, p_drop,
                                       seed_lo, seed_hi, off_lo, off_hi)
                        row = (uty + u_tyn * np.uint32(r)) * u_pad + u_four * utx
                        for c in range(4):
                            cell = row + np.uint32(c)
                            pt[cell] = pt[cell] * drop_scale if (kb >> c) & 1 else _ZERO
            cuda.syncthreads()

            nk = min(blk, sk - ks)
            for j0 in range(0, nk, kc):
                stage_rows(sR, v, v_base, v_ss, ks + j0, sk, 0, dv)
                cuda.syncthreads()
                mm_o_mk(o, pt, uty * u_pad + np.uint32(j0), sR, utx)
                cuda.syncthreads()
            ks += blk

        o_base = bq * o_sb + h * o_sh + qrow0 * o_ss
        for r in range(rm):
            i = q_start + ty + ty_n * r
            if i < sq:
                inv = _ZERO
                if lsum[r] > _ZERO:
                    inv = _ONE / lsum[r]
                for c in range(rnb):
                    col = tx + tx_n * c
                    if col < dv:
                        store(out, np.uint64(o_base + i * o_ss + col), o[r, c] * inv)
                if tx == 0:
                    if lsum[r] > _ZERO:
                        lse[np.uint64(lse_base + i * l_si)] = m[r] + math.log(lsum[r])
                    else:
                        lse[np.uint64(lse_base + i * l_si)] = _NEG_INF
            elif i < lse_rows and tx == 0:
                lse[np.uint64(lse_base + i * l_si)] = _NEG_INF

    name = f"attn_fwd_{dtype}_d{d_max}_{'drop' if dropout else 'nodrop'}_b{blk}x{rm}x{kc}"
    return Kernel(name, attn_fwd, argtypes_for(FWD_PARAMS, dtype))
