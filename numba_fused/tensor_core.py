"""Tensor-core and asynchronous-copy primitives for numba kernels, with exact
simulator emulations.

numba-cuda has no API for the tensor cores, ``ldmatrix``, ``cp.async`` or 16-byte
vector memory accesses. On the GPU each name below is an ``@intrinsic`` that emits
one inline-PTX instruction; under ``NUMBA_ENABLE_CUDASIM=1`` the same name is a
Python function that reproduces the instruction's per-lane semantics (fragment
layouts as the PTX ISA defines them, warp collectives through a per-warp rendezvous
of the simulator's threads), so kernels that use them run
unchanged in CPU CI. Which set is bound is decided once, at import.

Memory operands are given as ``(array, index)``: the element ``index`` of a
C-contiguous array counted in the array's own elements (the flat index, whatever
the array's rank). On the GPU the address is computed in codegen from the array's
data pointer; the emulation takes the same arguments. Shared-memory operands must
be ``cuda.shared.array`` arrays, global ones kernel arguments.

Warp-collective (all 32 lanes of a full warp, converged):

- ``mma_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)`` and ``mma_bf16(...)``:
  ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32``,
  ``D[16x8] = A[16x16] @ B[16x8] + C``. ``a*``/``b*`` are 32-bit registers holding
  two 16-bit values (the lower-indexed element in the low half); ``c*`` float32.
  Returns ``(d0, d1, d2, d3)`` float32. With ``g = lane // 4`` and ``t = lane % 4``:
  ``a0 = A[g, 2t:2t+2]``, ``a1 = A[g+8, 2t:2t+2]``, ``a2 = A[g, 2t+8:2t+10]``,
  ``a3 = A[g+8, 2t+8:2t+10]``; ``b0 = B[2t:2t+2, g]``, ``b1 = B[2t+8:2t+10, g]``;
  ``c0, c1 = C[g, 2t], C[g, 2t+1]``, ``c2, c3 = C[g+8, 2t], C[g+8, 2t+1]`` (and D
  likewise).
- ``ldmatrix_x1/x2/x4(smem, idx)`` and ``ldmatrix_x1_trans/x2_trans/x4_trans``:
  ``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16``. Lanes ``8i..8i+7``
  give, through ``idx``, the start of rows 0..7 of 8x8 matrix ``i`` (16 bytes each,
  16-byte aligned). Returns one uint32 per matrix (a tuple for x2/x4): without
  ``.trans`` lane ``l`` gets row ``l // 4``, elements ``2(l%4), 2(l%4)+1``; with
  ``.trans`` it gets column ``l // 4``, rows ``2(l%4), 2(l%4)+1`` (the matrix
  transposed). Lanes whose row address the shape does not use still pass a valid one.
- ``shared_address(smem, idx)`` -> uint32: the shared-window address of ``smem[idx]``;
  ``ldmatrix_x{1,2,4}[_trans]_at(addr)`` take such an address (plus byte offsets the
  kernel computed), so a kernel can form fragment addresses once and add constants
  in the loop instead of recomputing element indices. Under the simulator the
  "address" is the host address of the element, resolved back to the array.

Per thread:

- ``cp_async_16(smem, sidx, src, gidx, nbytes)``: ``cp.async.cg.shared.global`` of
  16 bytes, the first ``nbytes`` (0..16) read from global memory and the rest
  zero-filled (``nbytes = 0`` reads nothing: a masked load). Both addresses 16-byte
  aligned. ``cp_async_commit()`` closes a group; ``cp_async_wait(n)`` (``n`` a
  compile-time constant) waits until at most ``n`` of this thread's committed groups
  are outstanding; ``cp_async_wait_all()`` waits for everything issued. Other threads
  see the data after a ``syncthreads`` that follows the wait.
- ``ld_global_v4(arr, idx)`` -> 4 x uint32, ``st_global_v4(arr, idx, v0, v1, v2, v3)``:
  16-byte global accesses (16-byte aligned); ``st_global_v2(arr, idx, v0, v1)`` the
  8-byte store (8-byte aligned); ``ld_global_b32`` / ``st_global_b32`` the 4-byte
  forms. ``ld_global_v4_prefetch(size)`` gives the load with the L2 prefetch-size
  hint ``.L2::<size>B`` (64, 128 or 256; the same values).
- ``red_add_v2_f32(arr, idx, a, b)``: ``red.global.add.v2.f32``, one atomic
  reduction adding float32 ``a`` to ``arr[idx]`` and ``b`` to ``arr[idx + 1]``
  (8-byte aligned; sm_90): half the atomic instructions of two scalar
  ``cuda.atomic.add`` calls, no return value, and no negative-index wraparound in
  the address (numba's atomics wrap every index).
- ``pack_f16x2(lo, hi)`` / ``pack_bf16x2(lo, hi)``: two float32 rounded to nearest
  even into one uint32 (``lo`` in the low half; ``cvt.rn.{f16,bf16}x2.f32``);
  ``unpack_f16x2(u)`` / ``unpack_bf16x2(u)``: the exact float32 pair back;
  ``half_packers(dtype)`` -> ``(pack, unpack)``, the pair for 'float16' | 'bfloat16'.

Warpgroup-collective (Hopper, sm_90a: all 128 threads of a warpgroup, 4 consecutive
warps starting at a multiple of 4; numba-cuda compiles for ``compute_90a`` on a
Hopper device, and offline with ``cc=(9, 0, "a")``):

- ``wgmma_op(n, dtype, trans_a=False, trans_b=False)`` -> ``wgmma(acc, desc_a,
  desc_b, scale_d)``:
  ``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16,bf16}.{f16,bf16}`` with both
  operands in shared memory, ``D[64 x n] = A[64 x 16] @ B[16 x n] (+ D if scale_d !=
  0)``; ``acc`` a float32 array of ``n / 2`` accumulators per thread, read and
  written in place (layout: :func:`wgmma_acc_layout`). ``n`` in :data:`WGMMA_NS`.
  Index ``acc`` with compile-time constants only, or it lives in local memory.
- ``wgmma_desc(smem, idx, lbo, sbo, swizzle=0)`` -> uint64: the matrix descriptor of
  a K-major operand starting at ``smem[idx]`` (16-byte aligned) in the no-swizzle
  canonical layout (:func:`kmajor_offset`: 8-row x 16-byte core matrices, ``lbo``
  bytes apart along K, ``sbo`` bytes apart along M / N). A is 64 rows, B is given
  transposed, ``n`` rows of K. With ``trans_a`` / ``trans_b`` that operand is MN-major
  instead (:func:`mnmajor_offset`: core matrices of 8 k-lines x 16 bytes along M / N;
  the same LBO / SBO meaning). ``swizzle=128`` (a compile-time constant; layout type
  1) describes the 128-byte swizzled layout instead (:func:`sw128_kmajor_offset`,
  :func:`sw128_mnmajor_offset`): 128-byte lines, 8 of them a 1024-byte atom whose
  16-byte chunks the hardware XORs with the line's index in the atom (bits 7-9 of
  the shared address into bits 4-6). The XOR is on the final address, so the atoms
  must start on 1024-byte boundaries of the shared window (the matrix base offset
  field is left 0): declare the array with ``alignment=1024``. Then K-major: SBO the
  distance between 8-row groups, LBO unused (pass 16), and the next 16-wide K step
  starts 32 bytes further; MN-major: SBO the distance between groups of 8 k-lines,
  LBO the distance between 64-element M / N atoms.
- ``wgmma_fence()`` before the first ``wgmma`` and whenever other instructions
  wrote the accumulators; ``wgmma_commit()`` closes a group of issued ``wgmma``;
  ``wgmma_wait(n)`` (compile-time ``n``) waits until at most ``n`` groups are
  pending: read ``acc`` only after it. ``fence_proxy_async()`` in every thread that
  wrote an operand with ordinary stores, before the barrier that precedes the
  ``wgmma`` (the tensor cores read shared memory through the async proxy).

TMA (one thread; :mod:`numba_fused.tma` makes the tensor maps):

- ``tma_load_2d(smem, idx, tmap, col0, row0, bars, bidx)``: ``cp.async.bulk.tensor.2d``
  (tile mode) of the box the map ``tmap`` (a global int64 array of 16 words)
  describes, at element (row0, col0) of its operand, into ``smem[idx:]`` (128-byte
  aligned, 1024 with the 128-byte swizzle); out-of-bounds elements arrive as zeros.
  Its bytes complete on the mbarrier ``bars[bidx]``.
- ``mbarrier_arrive_expect_tx(bars, bidx, nbytes)``: one arrival that also announces
  ``nbytes`` bytes of such copies for the phase; the phase completes when every
  arrival is in and the announced bytes have landed.
- ``fence_proxy_tensormap(tmap)``: ``fence.proxy.tensormap::generic.acquire.gpu``,
  before a kernel's first copy through a map the host wrote.

Under the simulator the descriptor is a record of the array, offset, strides and
swizzle (the array's start taken as a 1024-byte boundary, as ``alignment=1024``
makes it on the GPU), and ``wgmma`` computes when all 128 threads have called it,
with the same numerics as the ``mma`` emulation below; the asynchrony is not
modelled (fence, commit and wait are checked for form only), so a kernel must order
them right on its own.

The NumPy helpers (``a_fragments``, ``b_fragments``, ``c_fragments``,
``d_from_fragments``, ``mma_reference``, ``ldmatrix_reference``, ``pack_pair``)
state the layouts once; the emulations and the tests both use them.

Numerics of the emulated ``mma``: products of the 16-bit inputs are exact in
float64, the sum of 16 of them and C is formed in float64 and rounded once to
float32. The hardware's internal accumulation is not specified to the bit, so the
two agree bit for bit wherever the exact result is a float32 (e.g. small integers),
and otherwise to within float32 accumulation error.
"""

import functools
import threading
import time

import numpy as np
from numba import config

__all__ = [
    "SIMULATOR",
    "mma_f16", "mma_bf16",
    "ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4",
    "ldmatrix_x1_trans", "ldmatrix_x2_trans", "ldmatrix_x4_trans",
    "shared_address", "ldmatrix_x1_at", "ldmatrix_x2_at", "ldmatrix_x4_at",
    "ldmatrix_x1_trans_at", "ldmatrix_x2_trans_at", "ldmatrix_x4_trans_at",
    "cp_async_16", "cp_async_commit", "cp_async_wait", "cp_async_wait_all",
    "ld_global_v4", "ld_global_v4_prefetch", "L2_PREFETCH_SIZES",
    "ld_global_v4_evict", "L1_EVICT_POLICIES", "LOAD_POLICIES",
    "st_global_v4", "st_global_v2", "ld_global_b32", "st_global_b32", "red_add_v2_f32",
    "pack_f16x2", "pack_bf16x2", "unpack_f16x2", "unpack_bf16x2", "half_packers",
    "wgmma_desc", "wgmma_op", "wgmma_fence", "wgmma_commit", "wgmma_wait",
    "fence_proxy_async", "mbarrier_init", "mbarrier_arrive", "mbarrier_wait",
    "cp_async_mbarrier_arrive", "setmaxnreg_inc", "setmaxnreg_dec", "named_barrier_sync",
    "mbarrier_arrive_expect_tx", "tma_load_2d", "fence_proxy_tensormap",
    "WGMMA_NS", "WGMMA_SWIZZLES", "wgmma_acc_layout", "kmajor_offset",
    "mnmajor_offset", "sw128_kmajor_offset", "sw128_mnmajor_offset", "wgmma_reference",
    "a_fragments", "b_fragments", "c_fragments", "d_from_fragments",
    "mma_reference", "ldmatrix_reference", "pack_pair", "bits_to_f64",
    "ONES_F16X2", "ONES_BF16X2",
]

SIMULATOR = bool(config.ENABLE_CUDASIM)

# Two 1.0 values in one register: a B fragment of ones turns mma into row sums.
ONES_F16X2 = np.uint32(0x3C003C00)
ONES_BF16X2 = np.uint32(0x3F803F80)

# ---------------------------------------------------------------------------
# Fragment layouts (NumPy, shared by the emulation and the tests)
# ---------------------------------------------------------------------------

_LANE = np.arange(32)
_G = _LANE // 4
_T = _LANE % 4
_H8 = np.arange(8)
# A (16x16, row-major): half h of lane l, h = 2 * register + (0 low | 1 high).
_A_ROW = _G[:, None] + 8 * ((_H8[None, :] // 2) % 2)
_A_COL = 2 * _T[:, None] + (_H8[None, :] % 2) + 8 * (_H8[None, :] // 4)
_H4 = np.arange(4)
# B (16x8, "col": element (k, n)): half h of lane l.
_B_K = 2 * _T[:, None] + (_H4[None, :] % 2) + 8 * (_H4[None, :] // 2)
_B_N = np.broadcast_to(_G[:, None], (32, 4))
# C / D (16x8 float32): value i of lane l.
_C_ROW = _G[:, None] + 8 * (_H4[None, :] // 2)
_C_COL = 2 * _T[:, None] + (_H4[None, :] % 2)


def bits_to_f64(bits, dtype):
    """float64 values of 16-bit patterns ``bits`` holding ``dtype`` ('float16' | 'bfloat16')."""
    bits = np.asarray(bits, dtype=np.uint16)
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")


def _halves_to_regs(halves):
    h = np.ascontiguousarray(halves, dtype=np.uint16)
    return h.astype(np.uint32)[..., 0::2] | (h.astype(np.uint32)[..., 1::2] << np.uint32(16))


def _regs_to_halves(regs):
    r = np.asarray(regs, dtype=np.uint64).astype(np.uint32)
    out = np.empty(r.shape[:-1] + (2 * r.shape[-1],), dtype=np.uint16)
    out[..., 0::2] = r & np.uint32(0xFFFF)
    out[..., 1::2] = r >> np.uint32(16)
    return out


def a_fragments(a_bits):
    """(32, 4) uint32 registers of the 16x16 A operand given as 16-bit patterns."""
    a_bits = np.asarray(a_bits, dtype=np.uint16)
    if a_bits.shape != (16, 16):
        raise ValueError(f"A must be 16x16, got {a_bits.shape}")
    return _halves_to_regs(a_bits[_A_ROW, _A_COL])


def b_fragments(b_bits):
    """(32, 2) uint32 registers of the 16x8 (k x n) B operand given as 16-bit patterns."""
    b_bits = np.asarray(b_bits, dtype=np.uint16)
    if b_bits.shape != (16, 8):
        raise ValueError(f"B must be 16x8, got {b_bits.shape}")
    return _halves_to_regs(b_bits[_B_K, _B_N])


def c_fragments(c):
    """(32, 4) float32 registers of the 16x8 accumulator ``c``."""
    c = np.asarray(c, dtype=np.float32)
    if c.shape != (16, 8):
        raise ValueError(f"C must be 16x8, got {c.shape}")
    return c[_C_ROW, _C_COL]


def d_from_fragments(d):
    """The 16x8 matrix held by (32, 4) per-lane accumulator registers ``d``."""
    d = np.asarray(d)
    out = np.empty((16, 8), dtype=d.dtype)
    out[_C_ROW, _C_COL] = d
    return out


def _a_matrix(regs, dtype):
    a = np.empty((16, 16))
    a[_A_ROW, _A_COL] = bits_to_f64(_regs_to_halves(regs), dtype)
    return a


def _b_matrix(regs, dtype):
    b = np.empty((16, 8))
    b[_B_K, _B_N] = bits_to_f64(_regs_to_halves(regs), dtype)
    return b


def mma_reference(a_regs, b_regs, c_regs, dtype):
    """(32, 4) float32 D registers of m16n8k16 from per-lane registers: ``a_regs``
    (32, 4), ``b_regs`` (32, 2) uint32, ``c_regs`` (32, 4) float32."""
    a = _a_matrix(a_regs, dtype)
    b = _b_matrix(b_regs, dtype)
    c = np.asarray(c_regs, dtype=np.float32).astype(np.float64)
    prod = a @ b
    return (prod[_C_ROW, _C_COL] + c).astype(np.float32)


def ldmatrix_reference(mem_bits, row_starts, num, trans):
    """(32, num) uint32 registers ldmatrix returns: ``mem_bits`` a 1-D uint16 array,
    ``row_starts[l]`` the element index lane ``l`` addresses (lanes ``8i..8i+7``:
    rows of matrix ``i``)."""
    mem = np.asarray(mem_bits, dtype=np.uint16)
    rows = np.asarray(row_starts, dtype=np.int64)
    out = np.empty((32, num), dtype=np.uint32)
    for i in range(num):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            if trans:
                lo = mem[rows[8 * i + 2 * t] + g]
                hi = mem[rows[8 * i + 2 * t + 1] + g]
            else:
                lo = mem[rows[8 * i + g] + 2 * t]
                hi = mem[rows[8 * i + g] + 2 * t + 1]
            out[lane, i] = np.uint32(lo) | (np.uint32(hi) << np.uint32(16))
    return out


def _f32_to_bf16_bits_np(x):
    x = np.float32(x)
    if x != x:
        return 0x7FFF
    u = int(x.view(np.uint32))
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFFFFFF
    return u >> 16


def _f32_to_f16_bits_np(x):
    x = np.float32(x)
    if x != x:
        return 0x7FFF
    with np.errstate(over="ignore"):  # overflow rounds to inf, as cvt.rn does
        return int(np.float16(x).view(np.uint16))


def pack_pair(lo, hi, dtype):
    """uint32 holding float32 ``lo``/``hi`` rounded to ``dtype`` (nearest even; NaN
    becomes the canonical 0x7FFF as the hardware's ``cvt`` gives)."""
    conv = _f32_to_f16_bits_np if dtype == "float16" else _f32_to_bf16_bits_np
    return np.uint32(conv(lo) | (conv(hi) << 16))



# ---------------------------------------------------------------------------
# Hopper warpgroup MMA (wgmma): layouts (NumPy, shared by the emulation and tests)
# ---------------------------------------------------------------------------

# The n of wgmma.mma_async.m64nNk16 for 16-bit inputs: multiples of 8 up to 256.
WGMMA_NS = tuple(range(8, 257, 8))
# wgmma_desc's swizzle argument -> the descriptor's layout type (bits 62-63).
WGMMA_SWIZZLES = {0: 0, 128: 1}


def wgmma_acc_layout(n):
    """(rows, cols): int arrays ``(128, n // 2)``; float32 accumulator register ``i``
    of warpgroup thread ``tid`` holds ``D[rows[tid, i], cols[tid, i]]`` of the 64 x n
    result. Warp ``w = tid // 32`` owns rows ``16 w .. 16 w + 15`` in mma.sync's
    16 x 8 accumulator layout, repeated over the n / 8 column tiles: with ``g = lane
    // 4``, ``t = lane % 4``, register ``4 j + e`` is ``D[16 w + g + 8 (e // 2), 8 j +
    2 t + e % 2]``."""
    if n not in WGMMA_NS:
        raise ValueError(f"n must be a multiple of 8 in [8, 256], got {n!r}")
    tid = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = tid // 32, tid % 32
    rows = 16 * w + lane // 4 + 8 * ((i % 4) // 2)
    cols = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    return rows, cols


def kmajor_offset(r, k, lbo, sbo):
    """Byte offset of element ``(r, k)`` of a K-major 16-bit wgmma operand (A: r < 64
    along M; B: r < n along N; k < 16) in the no-swizzle canonical layout its
    descriptor describes: 8 x 8 core matrices of 8 rows x 16 contiguous bytes, core
    matrices ``lbo`` bytes apart along K and ``sbo`` bytes apart along M / N."""
    return (r // 8) * sbo + (k // 8) * lbo + (r % 8) * 16 + (k % 8) * 2


def mnmajor_offset(r, k, lbo, sbo):
    """Byte offset of element ``(r, k)`` of an MN-major 16-bit wgmma operand (the
    transposed forms, ``trans_a`` / ``trans_b``: consecutive r contiguous) in the
    no-swizzle layout: core matrices of 8 k-lines x 16 bytes (8 consecutive r), core
    matrices ``lbo`` bytes apart along K and ``sbo`` bytes apart along M / N, as for
    :func:`kmajor_offset`."""
    return (r // 8) * sbo + (k // 8) * lbo + (k % 8) * 16 + (r % 8) * 2


def _swizzle128(o):
    # 16-byte chunk (bits 4-6) XOR line within the 1024-byte atom (bits 7-9).
    return o ^ (((o >> 7) & 7) << 4)


def sw128_kmajor_offset(r, k, sbo, start=0):
    """Byte offset, from a 1024-byte boundary, of element ``(r, k)`` of a K-major
    16-bit operand in the 128-byte swizzled layout whose descriptor starts ``start``
    bytes past that boundary: line ``r`` holds 64 consecutive k (128 bytes), 8 lines
    form a 1024-byte atom, atoms ``sbo`` bytes apart along M / N, and 16-byte chunk
    ``c`` of line ``r`` lies at chunk ``c ^ (r % 8)`` of its line (for ``sbo`` a
    multiple of 1024). ``start = 32 j`` with ``k < 16`` is K step ``j`` of the atom;
    ``start = 0`` with ``k < 64`` the whole tile."""
    return _swizzle128(start + (r // 8) * sbo + (r % 8) * 128 + k * 2)


def sw128_mnmajor_offset(r, k, lbo, sbo, start=0):
    """As :func:`sw128_kmajor_offset` for an MN-major operand: line ``k`` holds 64
    consecutive r (128 bytes), 8 k-lines form an atom, atoms ``sbo`` bytes apart along
    K and ``lbo`` bytes apart along M / N; chunk ``c`` (r // 8 % 8) of line ``k`` lies
    at chunk ``c ^ (k % 8)``."""
    return _swizzle128(start + (r // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + (r % 64) * 2)


def wgmma_reference(a_bits, bt_bits, c, dtype):
    """float32 ``64 x n`` result of ``wgmma.m64nNk16``: ``A @ B + C`` with A the ``64 x
    16`` and ``bt_bits`` B transposed (``n x 16``), both 16-bit patterns of
    ``dtype``; ``c`` float32 ``64 x n`` or None (scale-d 0). Products and sum in
    float64, rounded once."""
    a = bits_to_f64(np.asarray(a_bits, dtype=np.uint16), dtype)
    bt = bits_to_f64(np.asarray(bt_bits, dtype=np.uint16), dtype)
    if a.shape != (64, 16) or bt.ndim != 2 or bt.shape[1] != 16:
        raise ValueError(f"A must be 64x16 and B^T n x 16, got {a.shape} and {bt.shape}")
    d = a @ bt.T
    if c is not None:
        d = d + np.asarray(c, dtype=np.float32).astype(np.float64)
    return d.astype(np.float32)


# The prefetch sizes PTX's ``ld`` takes as ``.L2::<size>B`` (sm_75 on).
L2_PREFETCH_SIZES = (64, 128, 256)


def ld_global_v4_prefetch(size):
    """``ld_global_v4`` with the L2 prefetch-size hint ``ld.global.L2::<size>B``
    (``size`` in L2_PREFETCH_SIZES), or ``ld_global_v4`` itself for None: L2 fetches
    ``size`` bytes around the access. Same operands and values."""
    if size is None:
        return ld_global_v4
    if size not in L2_PREFETCH_SIZES:
        raise ValueError(f"size must be None or one of {L2_PREFETCH_SIZES}, got {size!r}")
    return _LD_GLOBAL_V4_PF[size]


# The L1 eviction priorities PTX's ``ld`` takes (sm_70 on): ``.L1::evict_first`` /
# ``.L1::evict_last`` (Triton's ``eviction_policy`` emits these two) and
# ``.L1::no_allocate``.
L1_EVICT_POLICIES = ("first", "last", "no_allocate")


# With them, L2 cache policies (``createpolicy.fractional.L2::evict_first`` /
# ``evict_last`` on the whole access, passed to the load by ``.L2::cache_hint``: what
# Triton lowers ``eviction_policy`` to, beside the L1 priority): "L2first" / "L2last"
# alone, or "<L1 priority>+L2<first|last>" for both.
LOAD_POLICIES = L1_EVICT_POLICIES + ("L2first", "L2last", "first+L2first", "last+L2last",
                                     "no_allocate+L2first")


def _l1_qualifier(policy):
    return f"L1::{policy}" if policy == "no_allocate" else f"L1::evict_{policy}"


def _load_policy_parts(policy):
    """(L1 priority or None, L2 policy "first" / "last" or None) of a LOAD_POLICIES
    entry."""
    l1, l2 = None, None
    for part in policy.split("+"):
        if part.startswith("L2"):
            l2 = part[2:]
        else:
            l1 = part
    return l1, l2


def ld_global_v4_evict(policy):
    """``ld_global_v4`` with an eviction policy (``policy`` in LOAD_POLICIES), or
    ``ld_global_v4`` itself for None. The L1 priorities (L1_EVICT_POLICIES:
    ``ld.global.L1::evict_first`` / ``evict_last`` / ``no_allocate``): "last" keeps
    the lines in L1 ahead of others (data read again soon), "first" gives them up
    first (its last read), "no_allocate" does not allocate them in L1 at all (read
    once, so the lines others read again stay). The L2 ones ("L2first" / "L2last",
    alone or after an L1 priority and "+"): the same two priorities for the lines in
    L2, through a ``createpolicy`` cache policy and ``.L2::cache_hint``. Same operands
    and values."""
    if policy is None:
        return ld_global_v4
    if policy not in LOAD_POLICIES:
        raise ValueError(f"policy must be None or one of {LOAD_POLICIES}, got {policy!r}")
    return _LD_GLOBAL_V4_EV[policy]


# ---------------------------------------------------------------------------
# Simulator emulation
# ---------------------------------------------------------------------------

if SIMULATOR:
    from numba.cuda.simulator import kernelapi as _sim_kernelapi
    from numba.cuda.simulator.cudadrv.devicearray import (
        FakeCUDAArray, FakeWithinKernelCUDAArray)

    from .sim_support import exited_threads


    def _ndarray(arr, what):
        if isinstance(arr, FakeWithinKernelCUDAArray):
            arr = arr.__dict__["_item"]
        if isinstance(arr, FakeCUDAArray):
            arr = arr._ary
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{what}: expected an array, got {type(arr).__name__}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{what}: the array must be C-contiguous")
        return arr

    def _bytes_at(arr, idx, nbytes, align, what):
        """(uint8 view of the whole array, byte offset) for element ``idx``."""
        a = _ndarray(arr, what)
        buf = a.reshape(-1).view(np.uint8)
        off = int(idx) * a.itemsize
        if off < 0 or off + nbytes > buf.size:
            raise IndexError(f"{what}: bytes [{off}, {off + nbytes}) outside an array of "
                             f"{buf.size} bytes")
        addr = a.__array_interface__["data"][0] + off
        if addr % align:
            raise ValueError(f"{what}: address {addr:#x} is not {align}-byte aligned")
        return buf, off

    def _u32(x):
        return int(x) & 0xFFFFFFFF

    # Warp collectives meet in a per-warp exchange of our own: the k-th collective call
    # of every lane of a warp is one rendezvous (warp-synchronous code calls them in
    # the same order). sim_support's rendezvous would do, but its divergence check
    # reads the simulator's syncthreads flag, which the simulator clears one thread at
    # a time after a barrier: under load a lane released early finds a lane not yet
    # cleared and reports a false "waits in syncthreads" (seen in ~1 in 100 GEMM tests).
    _EXCHANGE_LOCK = threading.Lock()
    _POLL_S = 0.1
    _BACKSTOP_S = 120.0

    class _Exchange:
        """Rendezvous records of one simulated warp (or warpgroup), by per-thread
        call count."""

        def __init__(self, size=32):
            self.cond = threading.Condition()
            self.count = [0] * size
            self.records = {}

    def _group_exchange(op, value, size=32):
        """Deposit this thread's ``value``; when all ``size`` threads of its group (a
        warp for 32, a warpgroup for 128: consecutive threads, the group starting at a
        multiple of ``size``) have made their matching call, return (values by thread
        of the group, own index in it)."""
        thread = threading.current_thread()
        manager = thread._manager
        w, lane = divmod(thread.thread_id, size)
        what = "warp" if size == 32 else f"group of {size} threads"
        bx, by, bz = manager._block_dim
        if bx * by * bz - size * w < size:
            raise RuntimeError(f"{op} needs all {size} threads of a full {what}; {what} {w} "
                               f"of this block has {bx * by * bz - size * w}")
        with _EXCHANGE_LOCK:
            table = manager.__dict__.setdefault("_tensor_core_exchange", {})
            ex = table.get((size, w))
            if ex is None:
                ex = table[(size, w)] = _Exchange(size)
        with ex.cond:
            k = ex.count[lane]
            ex.count[lane] = k + 1
            rec = ex.records.get(k)
            if rec is None:
                rec = ex.records[k] = {"op": op, "values": [None] * size, "arrived": 0,
                                       "left": size}
            if rec["op"] != op:
                raise RuntimeError(f"{what} {w} diverged: thread {lane} calls {op} as its "
                                   f"collective #{k}, others call {rec['op']}")
            rec["values"][lane] = value
            rec["arrived"] += 1
            if rec["arrived"] == size:
                ex.cond.notify_all()
            start = time.monotonic()
            while rec["arrived"] < size:
                ex.cond.wait(_POLL_S)
                if rec["arrived"] == size:
                    break
                if thread.abort:
                    raise RuntimeError(f"{op}: the launch was aborted by another thread")
                missing = [i for i in range(size) if rec["values"][i] is None]
                exited = exited_threads(thread)
                gone = [i for i in missing if size * w + i in exited]
                if gone or time.monotonic() - start > _BACKSTOP_S:
                    why = "exited" if gone else f"did not arrive within {_BACKSTOP_S:.0f} s"
                    raise RuntimeError(f"{op} (collective #{k}) in {what} {w}: threads "
                                       f"{gone or missing} {why}")
            values = rec["values"]
            rec["left"] -= 1
            if rec["left"] == 0:
                del ex.records[k]
        return values, lane

    def _warp_exchange(op, value):
        """:func:`_group_exchange` over the 32 lanes of a warp."""
        return _group_exchange(op, value, 32)

    def _mma(op, dtype, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        regs = (_u32(a0), _u32(a1), _u32(a2), _u32(a3), _u32(b0), _u32(b1))
        values, lane = _warp_exchange(op, regs)
        r = np.array(values, dtype=np.uint32)
        a = _a_matrix(r[:, :4], dtype)
        b = _b_matrix(r[:, 4:], dtype)
        g, t = lane // 4, lane % 4
        cols = (2 * t, 2 * t + 1)
        out = []
        for i, c in enumerate((c0, c1, c2, c3)):
            row = g + 8 * (i // 2)
            s = float(np.dot(a[row], b[:, cols[i % 2]]))
            out.append(np.float32(s + float(np.float32(c))))
        return tuple(out)

    def mma_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("mma_f16", "float16", a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    def mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return _mma("mma_bf16", "bfloat16", a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    def _ldmatrix(num, trans, smem, idx):
        op = f"ldmatrix_x{num}{'_trans' if trans else ''}"
        a = _ndarray(smem, op)
        if a.itemsize != 2:
            raise TypeError(f"{op}: needs an array of 16-bit elements, got {a.dtype}")
        values, lane = _warp_exchange(op, (a, int(idx)))
        g, t = lane // 4, lane % 4
        regs = []
        for i in range(num):
            if trans:
                srcs = ((8 * i + 2 * t, g), (8 * i + 2 * t + 1, g))
            else:
                srcs = ((8 * i + g, 2 * t), (8 * i + g, 2 * t + 1))
            halves = []
            for src_lane, col in srcs:
                arr, start = values[src_lane]
                buf, off = _bytes_at(arr, start, 16, 16, f"{op} row address of lane {src_lane}")
                halves.append(int(buf[off:off + 16].view(np.uint16)[col]))
            regs.append(np.uint32(halves[0] | (halves[1] << 16)))
        return regs[0] if num == 1 else tuple(regs)

    def shared_address(smem, idx):
        """The emulation's shared address: the host address of ``smem[idx]``, with the
        array recorded (per simulated block) so ``ldmatrix_*_at`` can find it."""
        a = _ndarray(smem, "shared_address")
        base = a.__array_interface__["data"][0]
        thread = threading.current_thread()
        arrays = thread._manager.__dict__.setdefault("_tensor_core_shared", {})
        arrays.setdefault(base, a)
        # int64 so that adding NumPy int32 offsets neither overflows nor wraps.
        return np.int64(base + int(idx) * a.itemsize)

    def _shared_at(addr, what):
        """(array, element index) of the 16 bytes at emulated shared address ``addr``."""
        arrays = threading.current_thread()._manager.__dict__.get("_tensor_core_shared", {})
        for base, a in list(arrays.items()):
            if base <= addr and addr + 16 <= base + a.nbytes:
                if (addr - base) % a.itemsize:
                    break
                return a, (addr - base) // a.itemsize
        raise IndexError(f"{what}: address {addr:#x} is not inside a shared array given to "
                         f"shared_address")

    def _ldmatrix_at(num, trans, addr):
        op = f"ldmatrix_x{num}{'_trans' if trans else ''}_at"
        a, idx = _shared_at(int(addr), op)
        return _ldmatrix(num, trans, a, idx)

    def ldmatrix_x1_at(addr):
        return _ldmatrix_at(1, False, addr)

    def ldmatrix_x2_at(addr):
        return _ldmatrix_at(2, False, addr)

    def ldmatrix_x4_at(addr):
        return _ldmatrix_at(4, False, addr)

    def ldmatrix_x1_trans_at(addr):
        return _ldmatrix_at(1, True, addr)

    def ldmatrix_x2_trans_at(addr):
        return _ldmatrix_at(2, True, addr)

    def ldmatrix_x4_trans_at(addr):
        return _ldmatrix_at(4, True, addr)

    def ldmatrix_x1(smem, idx):
        return _ldmatrix(1, False, smem, idx)

    def ldmatrix_x2(smem, idx):
        return _ldmatrix(2, False, smem, idx)

    def ldmatrix_x4(smem, idx):
        return _ldmatrix(4, False, smem, idx)

    def ldmatrix_x1_trans(smem, idx):
        return _ldmatrix(1, True, smem, idx)

    def ldmatrix_x2_trans(smem, idx):
        return _ldmatrix(2, True, smem, idx)

    def ldmatrix_x4_trans(smem, idx):
        return _ldmatrix(4, True, smem, idx)

    # cp.async: copies wait in per-thread groups and land only when a wait retires
    # their group, so a kernel that reads shared memory too early reads stale data
    # here as it could on the GPU.
    _CP = threading.local()

    def _cp_state():
        st = getattr(_CP, "state", None)
        if st is None:
            st = _CP.state = {"pending": [], "groups": []}
        return st

    def _cp_land(copies):
        for dbuf, doff, sbuf, soff, n in copies:
            dbuf[doff:doff + 16] = 0
            if n:
                dbuf[doff:doff + n] = sbuf[soff:soff + n]

    def cp_async_16(smem, sidx, src, gidx, nbytes):
        n = int(nbytes)
        if not 0 <= n <= 16:
            raise ValueError(f"cp_async_16: nbytes must be in [0, 16], got {n}")
        dbuf, doff = _bytes_at(smem, sidx, 16, 16, "cp_async_16 shared destination")
        if n:
            sbuf, soff = _bytes_at(src, gidx, n, 16, "cp_async_16 global source")
        else:
            sbuf, soff = None, 0
        _cp_state()["pending"].append((dbuf, doff, sbuf, soff, n))

    def cp_async_commit():
        st = _cp_state()
        st["groups"].append(st["pending"])
        st["pending"] = []

    def cp_async_wait(n):
        groups = _cp_state()["groups"]
        while len(groups) > int(n):
            _cp_land(groups.pop(0))

    def cp_async_wait_all():
        st = _cp_state()
        for group in st["groups"]:
            _cp_land(group)
        _cp_land(st["pending"])
        st["groups"] = []
        st["pending"] = []

    def ld_global_v4(arr, idx):
        buf, off = _bytes_at(arr, idx, 16, 16, "ld_global_v4")
        return tuple(np.uint32(v) for v in buf[off:off + 16].view(np.uint32))

    # The prefetch-size hint changes what L2 fetches, never the values.
    _LD_GLOBAL_V4_PF = {size: ld_global_v4 for size in L2_PREFETCH_SIZES}
    # Nor do the eviction policies, in L1 or L2.
    _LD_GLOBAL_V4_EV = {policy: ld_global_v4 for policy in LOAD_POLICIES}

    def st_global_v4(arr, idx, v0, v1, v2, v3):
        buf, off = _bytes_at(arr, idx, 16, 16, "st_global_v4")
        buf[off:off + 16].view(np.uint32)[:] = [_u32(v0), _u32(v1), _u32(v2), _u32(v3)]

    def st_global_v2(arr, idx, v0, v1):
        buf, off = _bytes_at(arr, idx, 8, 8, "st_global_v2")
        buf[off:off + 8].view(np.uint32)[:] = [_u32(v0), _u32(v1)]

    def ld_global_b32(arr, idx):
        buf, off = _bytes_at(arr, idx, 4, 4, "ld_global_b32")
        return np.uint32(buf[off:off + 4].view(np.uint32)[0])

    def st_global_b32(arr, idx, v):
        buf, off = _bytes_at(arr, idx, 4, 4, "st_global_b32")
        buf[off:off + 4].view(np.uint32)[0] = _u32(v)

    def red_add_v2_f32(arr, idx, a, b):
        buf, off = _bytes_at(arr, idx, 8, 8, "red_add_v2_f32")
        if _ndarray(arr, "red_add_v2_f32").dtype != np.float32:
            raise TypeError("red_add_v2_f32: needs a float32 array")
        # The simulator's own lock of cuda.atomic.add: the two kinds of add may meet
        # on one array.
        with _sim_kernelapi.addlock:
            v = buf[off:off + 8].view(np.float32)
            v[0] = np.float32(v[0] + np.float32(a))
            v[1] = np.float32(v[1] + np.float32(b))


    # wgmma: the descriptor is a record of (byte view, offset, lbo, sbo, swizzle)
    # here, and the MMA runs when the warpgroup's 128 threads have all called it (the
    # asynchrony is not modelled: the kernel's fence / commit / wait calls are
    # checked for form only, so a kernel must be right about them on its own).
    class _WgmmaDesc(tuple):
        __slots__ = ()

    def wgmma_desc(smem, idx, lbo, sbo, swizzle=0):
        a = _ndarray(smem, "wgmma_desc")
        if a.itemsize != 2:
            raise TypeError(f"wgmma_desc: needs an array of 16-bit elements, got {a.dtype}")
        buf, off = _bytes_at(smem, idx, 16, 16, "wgmma_desc")
        lbo, sbo, swizzle = int(lbo), int(sbo), int(swizzle)
        for name, v in (("lbo", lbo), ("sbo", sbo)):
            if v % 16 or not 0 <= v < 1 << 18:
                raise ValueError(f"wgmma_desc: {name} must be a multiple of 16 below 2**18, "
                                 f"got {v}")
        if swizzle not in WGMMA_SWIZZLES:
            raise ValueError(f"wgmma_desc: swizzle must be one of {sorted(WGMMA_SWIZZLES)}, "
                             f"got {swizzle}")
        return _WgmmaDesc((buf, off, lbo, sbo, swizzle))

    def _operand_tile(desc, rows, mn_major, what):
        """The ``rows x 16`` operand (16-bit patterns) a descriptor points at."""
        if not isinstance(desc, _WgmmaDesc):
            raise TypeError(f"{what}: expected a descriptor from wgmma_desc")
        buf, off, lbo, sbo, swizzle = desc
        r = np.arange(rows)[:, None]
        k = np.arange(16)[None, :]
        if swizzle and mn_major:
            o = sw128_mnmajor_offset(r, k, lbo, sbo, off)
        elif swizzle:
            o = sw128_kmajor_offset(r, k, sbo, off)
        else:
            o = off + (mnmajor_offset if mn_major else kmajor_offset)(r, k, lbo, sbo)
        if o.max() + 2 > buf.size:
            raise IndexError(f"{what}: the {rows} x 16 operand runs past its shared array")
        bits = buf[o].astype(np.uint16) | (buf[o + 1].astype(np.uint16) << np.uint16(8))
        return bits

    def fence_proxy_async():
        pass

    def wgmma_fence():
        pass

    def wgmma_commit():
        pass

    def wgmma_wait(n):
        if not 0 <= int(n) <= 7:
            raise ValueError(f"wgmma_wait: group count must be in [0, 7], got {n}")

    # mbarrier: a phase bit and a pending-arrival count per barrier, kept per
    # simulated block by address (the 8 shared bytes themselves are not used).
    _MBAR_LOCK = threading.Lock()

    def _mbarrier(smem, idx, what):
        a = _ndarray(smem, what)
        addr = a.__array_interface__["data"][0] + int(idx) * a.itemsize
        if addr % 8:
            raise ValueError(f"{what}: address {addr:#x} is not 8-byte aligned")
        manager = threading.current_thread()._manager
        with _MBAR_LOCK:
            table = manager.__dict__.setdefault("_tensor_core_mbarriers", {})
            cond = manager.__dict__.setdefault("_tensor_core_mbarrier_cond",
                                               threading.Condition())
        return table, cond, addr

    def mbarrier_init(smem, idx, count):
        """Initialise the mbarrier at ``smem[idx]``: phase 0, ``count`` arrivals."""
        n = int(count)
        if not 1 <= n < 2**20:
            raise ValueError(f"mbarrier_init: count must be in [1, 2^20), got {n}")
        table, cond, addr = _mbarrier(smem, idx, "mbarrier_init")
        with cond:
            table[addr] = {"count": n, "pending": n, "phase": 0, "tx": 0}

    def _mbarrier_state(table, addr, what):
        st = table.get(addr)
        if st is None:
            raise RuntimeError(f"{what}: mbarrier at {addr:#x} was never initialised")
        return st

    def _mbarrier_settle(st, cond):
        """Complete the phase once every arrival is in and no announced byte is still
        in flight (the transaction count back at zero)."""
        if st["pending"] == 0 and st["tx"] == 0:
            st["phase"] ^= 1
            st["pending"] = st["count"]
            cond.notify_all()

    def _mbarrier_arrive(table, cond, addr, what, tx=0):
        with cond:
            st = _mbarrier_state(table, addr, what)
            st["tx"] += tx
            st["pending"] -= 1
            _mbarrier_settle(st, cond)

    def mbarrier_arrive(smem, idx):
        """One arrival on the mbarrier at ``smem[idx]``; the last one of a phase
        completes it (flips the phase, pending back to the count)."""
        _mbarrier_arrive(*_mbarrier(smem, idx, "mbarrier_arrive"), "mbarrier_arrive")

    def mbarrier_wait(smem, idx, parity):
        """Wait until the phase of parity ``parity`` of the mbarrier at ``smem[idx]``
        has completed (the current phase's parity differs; parity 1 passes at once on
        a fresh barrier, as the hardware's try_wait.parity)."""
        table, cond, addr = _mbarrier(smem, idx, "mbarrier_wait")
        thread = threading.current_thread()
        start = time.monotonic()
        with cond:
            while True:
                st = table.get(addr)
                if st is None:
                    raise RuntimeError(f"mbarrier_wait: mbarrier at {addr:#x} was never "
                                       "initialised")
                if st["phase"] != (int(parity) & 1):
                    return
                cond.wait(_POLL_S)
                if thread.abort:
                    raise RuntimeError("mbarrier_wait: the launch was aborted by another thread")
                if time.monotonic() - start > _BACKSTOP_S:
                    raise RuntimeError(f"mbarrier_wait: phase {int(parity) & 1} of the mbarrier "
                                       f"at {addr:#x} did not complete within "
                                       f"{_BACKSTOP_S:.0f} s (pending {st['pending']})")

    def cp_async_mbarrier_arrive(smem, idx):
        """``cp.async.mbarrier.arrive.noinc``: one arrival on the mbarrier once every
        cp.async this thread issued so far has landed (landed here at once, whatever
        their commit groups)."""
        st = _cp_state()
        for group in st["groups"]:
            _cp_land(group)
        _cp_land(st["pending"])
        st["groups"] = []
        st["pending"] = []
        _mbarrier_arrive(*_mbarrier(smem, idx, "cp_async_mbarrier_arrive"),
                         "cp_async_mbarrier_arrive")

    def mbarrier_arrive_expect_tx(smem, idx, nbytes):
        """``mbarrier.arrive.expect_tx``: announce ``nbytes`` more bytes of asynchronous
        copies for the current phase, then arrive once; the phase completes when
        every arrival is in and those bytes have landed."""
        n = int(nbytes)
        if not 0 <= n < 2**20:
            raise ValueError(f"mbarrier_arrive_expect_tx: nbytes must be in [0, 2^20), got {n}")
        _mbarrier_arrive(*_mbarrier(smem, idx, "mbarrier_arrive_expect_tx"),
                         "mbarrier_arrive_expect_tx", tx=n)

    def tma_load_2d(smem, sidx, tmap, col0, row0, bars, bidx):
        """``cp.async.bulk.tensor.2d`` (tile mode): the box of the operand tensor map
        ``tmap`` describes (:mod:`numba_fused.tma`) at element (``row0``, ``col0``),
        zeros outside the operand, into shared memory at ``smem[sidx]`` in the map's
        layout; its bytes complete on the mbarrier at ``bars[bidx]``. Landed at once
        here (the GPU needs the destination 128-byte aligned, 1024 with the
        swizzle; the simulator's shared arrays guarantee 16)."""
        from .tma import box_layout_ref, sim_map

        words = _ndarray(tmap, "tma_load_2d tensor map").reshape(-1).view(np.uint64)
        host, _, _, _, _, box_rows, box_cols, swizzle = sim_map(words)
        data = box_layout_ref(host, int(row0), int(col0), box_rows, box_cols, swizzle)
        dbuf, doff = _bytes_at(smem, sidx, data.size, 16, "tma_load_2d shared destination")
        dbuf[doff:doff + data.size] = data
        table, cond, addr = _mbarrier(bars, bidx, "tma_load_2d")
        with cond:
            st = _mbarrier_state(table, addr, "tma_load_2d")
            st["tx"] -= data.size
            _mbarrier_settle(st, cond)

    def fence_proxy_tensormap(tmap):
        """``fence.proxy.tensormap::generic.acquire.gpu`` on the map: nothing to order
        in the simulator."""
        _ndarray(tmap, "fence_proxy_tensormap")

    def setmaxnreg_inc(n):
        if not (24 <= int(n) <= 256 and int(n) % 8 == 0):
            raise ValueError(f"setmaxnreg: count must be a multiple of 8 in [24, 256], got {n}")

    setmaxnreg_dec = setmaxnreg_inc

    def named_barrier_sync(bar, count):
        """``bar.sync bar, count``: wait until ``count`` threads of the block (whole
        warps) have reached named barrier ``bar`` (1..15; 0 is syncthreads')."""
        b, n = int(bar), int(count)
        if not 1 <= b <= 15 or n % 32 or n <= 0:
            raise ValueError(f"named_barrier_sync: barrier {b} must be in [1, 15] and the "
                             f"count a positive multiple of 32, got {n}")
        thread = threading.current_thread()
        manager = thread._manager
        with _MBAR_LOCK:
            table = manager.__dict__.setdefault("_tensor_core_named_barriers", {})
            barrier = table.get(b)
            if barrier is None or barrier.parties != n:
                barrier = table[b] = threading.Barrier(n)
        try:
            barrier.wait(_BACKSTOP_S)
        except threading.BrokenBarrierError:
            raise RuntimeError(f"named_barrier_sync: named barrier {b} ({n} threads) did not "
                               f"fill within {_BACKSTOP_S:.0f} s") from None

    @functools.lru_cache(maxsize=None)
    def wgmma_op(n, dtype, trans_a=False, trans_b=False):
        op = f"wgmma_m64n{n}k16_{dtype}{'_ta' if trans_a else ''}{'_tb' if trans_b else ''}"
        rows, cols = wgmma_acc_layout(n)
        m = n // 2

        def wgmma(acc, desc_a, desc_b, scale_d):
            a = _ndarray(acc, op)
            if a.dtype != np.float32 or a.size < m:
                raise TypeError(f"{op}: acc must be a float32 array of >= {m} elements")
            key = tuple(d[0].__array_interface__["data"][0] + d[1] for d in (desc_a, desc_b)) \
                + tuple(desc_a[2:]) + tuple(desc_b[2:]) + (bool(scale_d),)
            values, tid = _group_exchange(op, (a.reshape(-1)[:m].copy(), key), 128)
            if any(v[1] != key for v in values):
                raise RuntimeError(f"{op}: the warpgroup's threads passed different "
                                   "descriptors or scale-d")
            c = None
            if scale_d:
                c = np.empty((64, n), dtype=np.float32)
                c[rows, cols] = np.stack([v[0] for v in values])
            d = wgmma_reference(_operand_tile(desc_a, 64, trans_a, op),
                                _operand_tile(desc_b, n, trans_b, op), c, dtype)
            a.reshape(-1)[:m] = d[rows[tid], cols[tid]]

        wgmma.__name__ = op
        return wgmma

    def pack_f16x2(lo, hi):
        return pack_pair(lo, hi, "float16")

    def pack_bf16x2(lo, hi):
        return pack_pair(lo, hi, "bfloat16")

    def unpack_f16x2(u):
        h = np.array([_u32(u)], dtype=np.uint32).view(np.float16)
        return np.float32(h[0]), np.float32(h[1])

    def unpack_bf16x2(u):
        u = _u32(u)
        lo = np.uint32((u & 0xFFFF) << 16).view(np.float32)
        hi = np.uint32(u & 0xFFFF0000).view(np.float32)
        return np.float32(lo), np.float32(hi)

# ---------------------------------------------------------------------------
# GPU intrinsics (inline PTX)
# ---------------------------------------------------------------------------

else:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.core.extending import intrinsic

    from .intrinsics import plain_asm

    _I32 = ir.IntType(32)
    _I64 = ir.IntType(64)
    _F32 = ir.FloatType()
    _I8P = ir.IntType(8).as_pointer()
    _U32 = types.uint32

    def _asm(builder, ret, argtys, text, constraints, args, side_effect):
        fnty = ir.FunctionType(ret, argtys)
        return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args)

    def _to_i32(context, builder, ty, val):
        return context.cast(builder, val, ty, _U32)

    def _is_array(ty):
        return isinstance(ty, types.Array)

    def _elem_ptr(context, builder, arrty, arr, idxty, idx):
        """Generic ``i8*`` to element ``idx`` (flat, in elements) of a C array."""
        ary = context.make_array(arrty)(context, builder, value=arr)
        i = context.cast(builder, idx, idxty, types.intp)
        ptr = builder.gep(ary.data, [i])
        return builder.bitcast(ptr, _I8P)

    def _shared_addr(context, builder, arrty, arr, idxty, idx):
        """32-bit shared-window address of ``arr[idx]`` (a shared array)."""
        p = _elem_ptr(context, builder, arrty, arr, idxty, idx)
        sp = builder.addrspacecast(p, ir.PointerType(ir.IntType(8), 3))
        return builder.ptrtoint(sp, _I32)

    def _global_addr(context, builder, arrty, arr, idxty, idx):
        """64-bit global-window address of ``arr[idx]`` (a kernel argument array)."""
        p = _elem_ptr(context, builder, arrty, arr, idxty, idx)
        gp = builder.addrspacecast(p, ir.PointerType(ir.IntType(8), 1))
        return builder.ptrtoint(gp, _I64)

    def _check_mem(name, arr, idx):
        if not _is_array(arr) or arr.layout != "C":
            raise TypingError(f"{name}: expected a C-contiguous array, got {arr}")
        if not isinstance(idx, types.Integer):
            raise TypingError(f"{name}: the index must be an integer, got {idx}")

    def _make_mma(kind):
        text = (f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 "
                "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};")

        def impl(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            regs = (a0, a1, a2, a3, b0, b1)
            if not all(isinstance(r, types.Integer) for r in regs):
                raise TypingError(f"mma_{kind}: a*/b* must be 32-bit integer registers")
            sig = types.UniTuple(types.float32, 4)(*regs, *([types.float32] * 4))

            def codegen(context, builder, signature, args):
                ins = [_to_i32(context, builder, t, v)
                       for t, v in zip(signature.args[:6], args[:6])]
                ins += list(args[6:])
                res = _asm(builder, ir.LiteralStructType([_F32] * 4), [_I32] * 6 + [_F32] * 4,
                           text, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", ins, False)
                vals = [builder.extract_value(res, i) for i in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        impl.__name__ = f"mma_{kind}"
        return intrinsic(impl)

    mma_f16 = _make_mma("f16")
    mma_bf16 = _make_mma("bf16")

    def _make_ldmatrix(num, trans):
        name = f"ldmatrix_x{num}{'_trans' if trans else ''}"
        outs = ",".join(f"${i}" for i in range(num))
        text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
                f"{{{outs}}}, [${num}];")
        cons = ",".join(["=r"] * num) + ",r,~{memory}"

        def impl(typingctx, smem, idx):
            _check_mem(name, smem, idx)
            ret = _U32 if num == 1 else types.UniTuple(_U32, num)
            sig = ret(smem, idx)

            def codegen(context, builder, signature, args):
                addr = _shared_addr(context, builder, signature.args[0], args[0],
                                    signature.args[1], args[1])
                rty = _I32 if num == 1 else ir.LiteralStructType([_I32] * num)
                res = _asm(builder, rty, [_I32], text, cons, [addr], True)
                if num == 1:
                    return res
                vals = [builder.extract_value(res, i) for i in range(num)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        impl.__name__ = name
        return intrinsic(impl)

    ldmatrix_x1 = _make_ldmatrix(1, False)
    ldmatrix_x2 = _make_ldmatrix(2, False)
    ldmatrix_x4 = _make_ldmatrix(4, False)
    ldmatrix_x1_trans = _make_ldmatrix(1, True)
    ldmatrix_x2_trans = _make_ldmatrix(2, True)
    ldmatrix_x4_trans = _make_ldmatrix(4, True)

    @intrinsic
    def shared_address(typingctx, smem, idx):
        _check_mem("shared_address", smem, idx)
        sig = _U32(smem, idx)

        def codegen(context, builder, signature, args):
            return _shared_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])

        return sig, codegen

    def _make_ldmatrix_at(num, trans):
        name = f"ldmatrix_x{num}{'_trans' if trans else ''}_at"
        outs = ",".join(f"${i}" for i in range(num))
        text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
                f"{{{outs}}}, [${num}];")
        cons = ",".join(["=r"] * num) + ",r,~{memory}"

        def impl(typingctx, addr):
            if not isinstance(addr, types.Integer):
                raise TypingError(f"{name}: the shared address must be an integer")
            ret = _U32 if num == 1 else types.UniTuple(_U32, num)
            sig = ret(addr)

            def codegen(context, builder, signature, args):
                a = _to_i32(context, builder, signature.args[0], args[0])
                rty = _I32 if num == 1 else ir.LiteralStructType([_I32] * num)
                res = _asm(builder, rty, [_I32], text, cons, [a], True)
                if num == 1:
                    return res
                vals = [builder.extract_value(res, i) for i in range(num)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        impl.__name__ = name
        return intrinsic(impl)

    ldmatrix_x1_at = _make_ldmatrix_at(1, False)
    ldmatrix_x2_at = _make_ldmatrix_at(2, False)
    ldmatrix_x4_at = _make_ldmatrix_at(4, False)
    ldmatrix_x1_trans_at = _make_ldmatrix_at(1, True)
    ldmatrix_x2_trans_at = _make_ldmatrix_at(2, True)
    ldmatrix_x4_trans_at = _make_ldmatrix_at(4, True)

    @intrinsic
    def cp_async_16(typingctx, smem, sidx, src, gidx, nbytes):
        _check_mem("cp_async_16 (shared)", smem, sidx)
        _check_mem("cp_async_16 (global)", src, gidx)
        if not isinstance(nbytes, types.Integer):
            raise TypingError("cp_async_16: nbytes must be an integer")
        sig = types.void(smem, sidx, src, gidx, nbytes)

        def codegen(context, builder, signature, args):
            st, sit, gt, git, nt = signature.args
            saddr = _shared_addr(context, builder, st, args[0], sit, args[1])
            gaddr = _global_addr(context, builder, gt, args[2], git, args[3])
            n = _to_i32(context, builder, nt, args[4])
            _asm(builder, ir.VoidType(), [_I32, _I64, _I32],
                 "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}",
                 [saddr, gaddr, n], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async_commit(typingctx):
        sig = types.void()

        def codegen(context, builder, signature, args):
            _asm(builder, ir.VoidType(), [], "cp.async.commit_group;", "~{memory}", [], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            raise TypingError("cp_async_wait: the group count must be a compile-time "
                              "integer constant (a closure or global int)")
        count = int(n.literal_value)
        if not 0 <= count <= 7:
            raise TypingError(f"cp_async_wait: group count must be in [0, 7], got {count}")
        sig = types.void(n)

        def codegen(context, builder, signature, args):
            _asm(builder, ir.VoidType(), [], f"cp.async.wait_group {count};", "~{memory}",
                 [], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async_wait_all(typingctx):
        sig = types.void()

        def codegen(context, builder, signature, args):
            _asm(builder, ir.VoidType(), [], "cp.async.wait_all;", "~{memory}", [], True)
            return context.get_dummy_value()

        return sig, codegen

    def _make_ld_global_v4(name, op, tail=";"):
        @intrinsic
        def load(typingctx, arr, idx):
            _check_mem(name, arr, idx)
            sig = types.UniTuple(_U32, 4)(arr, idx)

            def codegen(context, builder, signature, args):
                addr = _global_addr(context, builder, signature.args[0], args[0],
                                    signature.args[1], args[1])
                res = _asm(builder, ir.LiteralStructType([_I32] * 4), [_I64],
                           f"{op}.v4.u32 {{$0,$1,$2,$3}}, [$4]{tail}", "=r,=r,=r,=r,l,~{memory}",
                           [addr], True)
                vals = [builder.extract_value(res, i) for i in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return load

    ld_global_v4 = _make_ld_global_v4("ld_global_v4", "ld.global")
    _LD_GLOBAL_V4_PF = {
        size: _make_ld_global_v4(f"ld_global_v4_pf{size}", f"ld.global.L2::{size}B")
        for size in L2_PREFETCH_SIZES}
    def _evict_load(policy):
        l1, l2 = _load_policy_parts(policy)
        op = "ld.global" + (f".{_l1_qualifier(l1)}" if l1 else "")
        name = "ld_global_v4_ev" + policy.replace("+", "_")
        if l2 is None:
            return _make_ld_global_v4(name, op)
        # The policy register lives in the asm's own scope: each load makes its own
        # policy, as Triton's PTX does (the same registers: test_plain_hints_in_ptx).
        return _make_ld_global_v4(
            name, f"{{ .reg .b64 pol; createpolicy.fractional.L2::evict_{l2}.b64 pol, 1.0; "
            f"{op}.L2::cache_hint", ", pol; }")

    _LD_GLOBAL_V4_EV = {policy: _evict_load(policy) for policy in LOAD_POLICIES}

    @intrinsic
    def st_global_v4(typingctx, arr, idx, v0, v1, v2, v3):
        _check_mem("st_global_v4", arr, idx)
        if not all(isinstance(v, types.Integer) for v in (v0, v1, v2, v3)):
            raise TypingError("st_global_v4: values must be 32-bit integers")
        sig = types.void(arr, idx, v0, v1, v2, v3)

        def codegen(context, builder, signature, args):
            addr = _global_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])
            vals = [_to_i32(context, builder, t, v) for t, v in zip(signature.args[2:], args[2:])]
            _asm(builder, ir.VoidType(), [_I64] + [_I32] * 4,
                 "st.global.v4.u32 [$0], {$1,$2,$3,$4};", "l,r,r,r,r,~{memory}",
                 [addr] + vals, True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def st_global_v2(typingctx, arr, idx, v0, v1):
        _check_mem("st_global_v2", arr, idx)
        if not all(isinstance(v, types.Integer) for v in (v0, v1)):
            raise TypingError("st_global_v2: values must be 32-bit integers")
        sig = types.void(arr, idx, v0, v1)

        def codegen(context, builder, signature, args):
            addr = _global_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])
            vals = [_to_i32(context, builder, t, v) for t, v in zip(signature.args[2:], args[2:])]
            _asm(builder, ir.VoidType(), [_I64] + [_I32] * 2,
                 "st.global.v2.u32 [$0], {$1,$2};", "l,r,r,~{memory}", [addr] + vals, True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def ld_global_b32(typingctx, arr, idx):
        _check_mem("ld_global_b32", arr, idx)
        sig = _U32(arr, idx)

        def codegen(context, builder, signature, args):
            addr = _global_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])
            return _asm(builder, _I32, [_I64], "ld.global.u32 $0, [$1];", "=r,l,~{memory}",
                        [addr], True)

        return sig, codegen

    @intrinsic
    def st_global_b32(typingctx, arr, idx, v):
        _check_mem("st_global_b32", arr, idx)
        if not isinstance(v, types.Integer):
            raise TypingError("st_global_b32: the value must be a 32-bit integer")
        sig = types.void(arr, idx, v)

        def codegen(context, builder, signature, args):
            addr = _global_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])
            val = _to_i32(context, builder, signature.args[2], args[2])
            _asm(builder, ir.VoidType(), [_I64, _I32], "st.global.u32 [$0], $1;",
                 "l,r,~{memory}", [addr, val], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def red_add_v2_f32(typingctx, arr, idx, a, b):
        _check_mem("red_add_v2_f32", arr, idx)
        if arr.dtype != types.float32:
            raise TypingError(f"red_add_v2_f32: needs a float32 array, got {arr}")
        if not (isinstance(a, types.Float) and isinstance(b, types.Float)):
            raise TypingError("red_add_v2_f32: the values must be floats")
        sig = types.void(arr, idx, a, b)

        def codegen(context, builder, signature, args):
            addr = _global_addr(context, builder, signature.args[0], args[0],
                                signature.args[1], args[1])
            va = context.cast(builder, args[2], signature.args[2], types.float32)
            vb = context.cast(builder, args[3], signature.args[3], types.float32)
            _asm(builder, ir.VoidType(), [_I64, _F32, _F32],
                 "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f,~{memory}",
                 [addr, va, vb], True)
            return context.get_dummy_value()

        return sig, codegen


    fence_proxy_async = plain_asm("fence_proxy_async", "fence.proxy.async.shared::cta;")
    wgmma_fence = plain_asm("wgmma_fence", "wgmma.fence.sync.aligned;")
    wgmma_commit = plain_asm("wgmma_commit", "wgmma.commit_group.sync.aligned;")

    @intrinsic
    def wgmma_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            raise TypingError("wgmma_wait: the group count must be a compile-time integer "
                              "constant (a closure or global int)")
        count = int(n.literal_value)
        if not 0 <= count <= 7:
            raise TypingError(f"wgmma_wait: group count must be in [0, 7], got {count}")
        sig = types.void(n)

        def codegen(context, builder, signature, args):
            _asm(builder, ir.VoidType(), [], f"wgmma.wait_group.sync.aligned {count};",
                 "~{memory}", [], True)
            return context.get_dummy_value()

        return sig, codegen

    def _make_mbarrier_op(name, text, value=None):
        """Intrinsic ``name(smem, idx)`` running inline PTX ``text`` on the 32-bit shared
        address of ``smem[idx]`` ($0); with ``value`` (the argument's name) it takes a
        third, integer argument, passed as a 32-bit register ($1)."""
        if value is None:
            def impl(typingctx, smem, idx):
                _check_mem(name, smem, idx)
                sig = types.void(smem, idx)

                def codegen(context, builder, signature, args):
                    addr = _shared_addr(context, builder, signature.args[0], args[0],
                                        signature.args[1], args[1])
                    _asm(builder, ir.VoidType(), [_I32], text, "r,~{memory}", [addr], True)
                    return context.get_dummy_value()

                return sig, codegen
        else:
            def impl(typingctx, smem, idx, v):
                _check_mem(name, smem, idx)
                if not isinstance(v, types.Integer):
                    raise TypingError(f"{name}: {value} must be an integer")
                sig = types.void(smem, idx, v)

                def codegen(context, builder, signature, args):
                    st, it, vt = signature.args
                    addr = _shared_addr(context, builder, st, args[0], it, args[1])
                    val = _to_i32(context, builder, vt, args[2])
                    _asm(builder, ir.VoidType(), [_I32, _I32], text, "r,r,~{memory}",
                         [addr, val], True)
                    return context.get_dummy_value()

                return sig, codegen

        impl.__name__ = name
        return intrinsic(impl)

    mbarrier_init = _make_mbarrier_op("mbarrier_init", "mbarrier.init.shared::cta.b64 [$0], $1;",
                                      "count")
    mbarrier_arrive = _make_mbarrier_op("mbarrier_arrive",
                                        "mbarrier.arrive.shared::cta.b64 _, [$0];")
    # Labels inside a { } block are local to it: the loop can be inlined many times in
    # one function.
    mbarrier_wait = _make_mbarrier_op(
        "mbarrier_wait", "{ .reg .pred p; WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, "
        "[$0], $1; @!p bra WAIT; }", "parity")
    cp_async_mbarrier_arrive = _make_mbarrier_op(
        "cp_async_mbarrier_arrive", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];")
    mbarrier_arrive_expect_tx = _make_mbarrier_op(
        "mbarrier_arrive_expect_tx", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
        "nbytes")

    def _map_addr(context, builder, arrty, arr):
        """64-bit generic address of a tensor map (element 0 of a global int64 array)."""
        p = _elem_ptr(context, builder, arrty, arr, types.intp, ir.Constant(_I64, 0))
        return builder.ptrtoint(p, _I64)

    def _check_map(name, tmap):
        if not (_is_array(tmap) and tmap.layout == "C" and isinstance(tmap.dtype, types.Integer)
                and tmap.dtype.bitwidth == 64):
            raise TypingError(f"{name}: the tensor map must be a C-contiguous 64-bit integer "
                              f"array, got {tmap}")

    @intrinsic
    def tma_load_2d(typingctx, smem, sidx, tmap, col0, row0, bars, bidx):
        _check_mem("tma_load_2d (shared)", smem, sidx)
        _check_mem("tma_load_2d (mbarrier)", bars, bidx)
        _check_map("tma_load_2d", tmap)
        if not (isinstance(col0, types.Integer) and isinstance(row0, types.Integer)):
            raise TypingError("tma_load_2d: the coordinates must be integers")
        sig = types.void(smem, sidx, tmap, col0, row0, bars, bidx)

        def codegen(context, builder, signature, args):
            st, sit, tt, ct, rt, bt, bit = signature.args
            saddr = _shared_addr(context, builder, st, args[0], sit, args[1])
            taddr = _map_addr(context, builder, tt, args[2])
            c0 = _to_i32(context, builder, ct, args[3])
            r0 = _to_i32(context, builder, rt, args[4])
            baddr = _shared_addr(context, builder, bt, args[5], bit, args[6])
            _asm(builder, ir.VoidType(), [_I32, _I64, _I32, _I32, _I32],
                 "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r,~{memory}",
                 [saddr, taddr, c0, r0, baddr], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def fence_proxy_tensormap(typingctx, tmap):
        _check_map("fence_proxy_tensormap", tmap)
        sig = types.void(tmap)

        def codegen(context, builder, signature, args):
            taddr = _map_addr(context, builder, signature.args[0], args[0])
            _asm(builder, ir.VoidType(), [_I64],
                 "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", "l,~{memory}",
                 [taddr], True)
            return context.get_dummy_value()

        return sig, codegen

    def _make_setmaxnreg(kind):
        def impl(typingctx, n):
            if not isinstance(n, types.IntegerLiteral):
                raise TypingError(f"setmaxnreg_{kind}: the count must be a compile-time "
                                  "integer constant")
            count = int(n.literal_value)
            if not (24 <= count <= 256 and count % 8 == 0):
                raise TypingError(f"setmaxnreg_{kind}: count must be a multiple of 8 in "
                                  f"[24, 256], got {count}")
            sig = types.void(n)

            def codegen(context, builder, signature, args):
                _asm(builder, ir.VoidType(), [], f"setmaxnreg.{kind}.sync.aligned.u32 {count};",
                     "~{memory}", [], True)
                return context.get_dummy_value()

            return sig, codegen

        impl.__name__ = f"setmaxnreg_{kind}"
        return intrinsic(impl)

    setmaxnreg_inc = _make_setmaxnreg("inc")
    setmaxnreg_dec = _make_setmaxnreg("dec")

    @intrinsic
    def named_barrier_sync(typingctx, bar, count):
        if not (isinstance(bar, types.IntegerLiteral) and isinstance(count, types.IntegerLiteral)):
            raise TypingError("named_barrier_sync: barrier and count must be compile-time "
                              "integer constants")
        b, n = int(bar.literal_value), int(count.literal_value)
        if not 1 <= b <= 15 or n % 32 or n <= 0:
            raise TypingError(f"named_barrier_sync: barrier {b} must be in [1, 15] and the "
                              f"count a positive multiple of 32, got {n}")
        sig = types.void(bar, count)

        def codegen(context, builder, signature, args):
            _asm(builder, ir.VoidType(), [], f"bar.sync {b}, {n};", "~{memory}", [], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def wgmma_desc(typingctx, smem, idx, lbo, sbo, swizzle=0):
        _check_mem("wgmma_desc", smem, idx)
        if not (isinstance(lbo, types.Integer) and isinstance(sbo, types.Integer)):
            raise TypingError("wgmma_desc: lbo and sbo must be integers")
        # Omitted, swizzle arrives as the Python default, and lowering passes that
        # default as a constant of the signature's type.
        if isinstance(swizzle, int):
            value, swizzle = swizzle, types.intp
        elif isinstance(swizzle, types.IntegerLiteral):
            value = swizzle.literal_value
        else:
            raise TypingError("wgmma_desc: swizzle must be a compile-time integer constant "
                              "(a closure or global int)")
        if value not in WGMMA_SWIZZLES:
            raise TypingError(f"wgmma_desc: swizzle must be one of {sorted(WGMMA_SWIZZLES)}, "
                              f"got {value}")
        sig = types.uint64(smem, idx, lbo, sbo, swizzle)
        layout = WGMMA_SWIZZLES[value]

        def codegen(context, builder, signature, args):
            addr = builder.zext(_shared_addr(context, builder, signature.args[0], args[0],
                                             signature.args[1], args[1]), _I64)

            def field(v, shift):
                v = builder.lshr(builder.and_(v, ir.Constant(_I64, 0x3FFFF)),
                                 ir.Constant(_I64, 4))
                return builder.shl(v, ir.Constant(_I64, shift)) if shift else v

            lb = context.cast(builder, args[2], signature.args[2], types.uint64)
            sb = context.cast(builder, args[3], signature.args[3], types.uint64)
            desc = builder.or_(builder.or_(field(addr, 0), field(lb, 16)), field(sb, 32))
            # Base offset (bits 49-51) stays 0: the atoms start on 1024-byte boundaries.
            return builder.or_(desc, ir.Constant(_I64, layout << 62)) if layout else desc

        return sig, codegen

    @functools.lru_cache(maxsize=None)
    def wgmma_op(n, dtype, trans_a=False, trans_b=False):
        if n not in WGMMA_NS:
            raise ValueError(f"n must be a multiple of 8 in [8, 256], got {n!r}")
        kind = {"float16": "f16", "bfloat16": "bf16"}[dtype]
        name = f"wgmma_m64n{n}k16_{dtype}{'_ta' if trans_a else ''}{'_tb' if trans_b else ''}"
        m = n // 2
        outs = ",".join(f"${i}" for i in range(m))
        # scale-d is a predicate operand: set from the integer inside a scope;
        # imm-scale-a / -b 1, imm-trans-a / -b from the flags.
        text = (f"{{ .reg .pred p; setp.ne.b32 p, ${2 * m + 2}, 0; "
                f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} "
                f"{{{outs}}}, ${2 * m}, ${2 * m + 1}, p, 1, 1, {int(trans_a)}, {int(trans_b)}; }}")
        cons = ",".join(["=f"] * m + [str(i) for i in range(m)] + ["l", "l", "r", "~{memory}"])

        def impl(typingctx, acc, desc_a, desc_b, scale_d):
            if not (_is_array(acc) and acc.dtype == types.float32 and acc.layout == "C"):
                raise TypingError(f"{name}: acc must be a C-contiguous float32 array")
            if not all(isinstance(t, types.Integer) for t in (desc_a, desc_b, scale_d)):
                raise TypingError(f"{name}: descriptors and scale-d must be integers")
            sig = types.void(acc, desc_a, desc_b, scale_d)

            def codegen(context, builder, signature, args):
                ary = context.make_array(signature.args[0])(context, builder, value=args[0])
                ptrs = [builder.gep(ary.data, [ir.Constant(_I64, i)]) for i in range(m)]
                vals = [builder.load(q) for q in ptrs]
                da = context.cast(builder, args[1], signature.args[1], types.uint64)
                db = context.cast(builder, args[2], signature.args[2], types.uint64)
                sc = _to_i32(context, builder, signature.args[3], args[3])
                res = _asm(builder, ir.LiteralStructType([_F32] * m),
                           [_F32] * m + [_I64, _I64, _I32], text, cons, vals + [da, db, sc], True)
                for i in range(m):
                    builder.store(builder.extract_value(res, i), ptrs[i])
                return context.get_dummy_value()

            return sig, codegen

        impl.__name__ = name
        return intrinsic(impl)

    def _make_pack(kind):
        # cvt.rn.{f16x2,bf16x2}.f32 d, a, b puts a in the upper half, b in the lower.
        text = f"cvt.rn.{kind}x2.f32 $0, $1, $2;"

        def impl(typingctx, lo, hi):
            if not (isinstance(lo, types.Float) and isinstance(hi, types.Float)):
                raise TypingError(f"pack_{kind}x2: arguments must be floats")
            sig = _U32(lo, hi)

            def codegen(context, builder, signature, args):
                lo_v = context.cast(builder, args[0], signature.args[0], types.float32)
                hi_v = context.cast(builder, args[1], signature.args[1], types.float32)
                return _asm(builder, _I32, [_F32, _F32], text, "=r,f,f", [hi_v, lo_v], False)

            return sig, codegen

        impl.__name__ = f"pack_{kind}x2"
        return intrinsic(impl)

    pack_f16x2 = _make_pack("f16")
    pack_bf16x2 = _make_pack("bf16")

    @intrinsic
    def unpack_f16x2(typingctx, u):
        if not isinstance(u, types.Integer):
            raise TypingError("unpack_f16x2: the argument must be a 32-bit integer")
        sig = types.UniTuple(types.float32, 2)(u)

        def codegen(context, builder, signature, args):
            v = _to_i32(context, builder, signature.args[0], args[0])
            res = _asm(builder, ir.LiteralStructType([_F32, _F32]), [_I32],
                       "{.reg .f16 lo, hi; mov.b32 {lo, hi}, $2; "
                       "cvt.f32.f16 $0, lo; cvt.f32.f16 $1, hi;}",
                       "=f,=f,r", [v], False)
            vals = [builder.extract_value(res, i) for i in range(2)]
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    @intrinsic
    def unpack_bf16x2(typingctx, u):
        if not isinstance(u, types.Integer):
            raise TypingError("unpack_bf16x2: the argument must be a 32-bit integer")
        sig = types.UniTuple(types.float32, 2)(u)

        def codegen(context, builder, signature, args):
            v = _to_i32(context, builder, signature.args[0], args[0])
            lo = builder.bitcast(builder.shl(v, ir.Constant(_I32, 16)), _F32)
            hi = builder.bitcast(builder.and_(v, ir.Constant(_I32, 0xFFFF0000)), _F32)
            return context.make_tuple(builder, signature.return_type, [lo, hi])

        return sig, codegen


def half_packers(dtype):
    """``(pack, unpack)``: :func:`pack_f16x2` and :func:`unpack_f16x2` for 'float16',
    the bf16 pair for 'bfloat16' (two float32 in one 32-bit word and back)."""
    if dtype == "float16":
        return pack_f16x2, unpack_f16x2
    if dtype == "bfloat16":
        return pack_bf16x2, unpack_bf16x2
    raise ValueError(f"half_packers: dtype must be 'float16' or 'bfloat16', got {dtype!r}")
