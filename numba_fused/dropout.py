"""Fused ``y = dropout(act(x + bias), p)`` over the last dimension, forward and backward.

With ``x`` flattened to ``[M, N]`` (any leading shape; ``N`` is the last dimension),
``bias`` of length ``N`` and ``e = r * N + c`` the linear index of element ``(r, c)``::

    z[r, c]      = x[r, c] + bias[c]
    keep[e]      = u(e) >= p                       (see "Philox keying")
    y[r, c]      = act(z[r, c]) / (1 - p)   if keep[e] else 0
    grad_x[r, c] = grad_out[r, c] / (1 - p) * act'(z[r, c])   if keep[e] else 0
    grad_bias[c] = sum_r grad_x[r, c]

All arithmetic is float32 (grad_bias is summed from the float32 grad_x values,
before they are rounded to the storage dtype); results are stored in the input
dtype. ``p = 0`` draws no random numbers; ``p = 1`` gives zeros (never NaN, even
for infinite inputs); dropped elements are exact zeros.

Philox keying (the contract other ops and tests rely on)
---------------------------------------------------------
Element ``e`` of the flattened ``[M, N]`` array belongs to group ``g = e // 8``; each
of the four 32-bit Philox words gives two 16-bit draws (v2; v1 used one 32-bit word,
24 bits of it, per element and groups of 4)::

    (w0, w1, w2, w3) = Philox4x32-10(counter=(g_lo, g_hi, offset_lo, offset_hi),
                                     key=(seed_lo, seed_hi))
    h(e)     = low 16 bits of w[(e % 8) // 2] if e is even, else its high 16 bits
    u(e)     = (h(e) + 1/2) / 2**16                 (the midpoint of its 2^-16 cell)
    keep[e]  = u(e) >= float32(p)   <=>   h(e) >= t16 = ceil(2**16 float32(p) - 1/2)

where ``x_lo``/``x_hi`` are the low/high 32-bit halves of the 64-bit integers ``g``,
``seed`` and ``offset``. The mask depends only on ``(seed, offset, e, p)``, never on
the launch configuration. The keep probability is ``1 - t16 / 2**16``, within 2^-17
(7.7e-6) of ``1 - p`` (p is in effect rounded to a multiple of 2^-16: p < 2^-17 keeps
everything, p > 1 - 2^-17 nothing). :func:`keep_threshold` gives ``t16``;
:func:`dropout_keep_mask` is the host twin.

Design (v2)
-----------
Instruction issue and memory both bound these kernels. One Philox call (ten rounds
of two 32x32->64 multiplies and two 3-input xors, ~40 instructions) serves eight
elements. Philox is emitted as 32-bit LLVM IR (:func:`philox.philox_ir`; numba would
widen it to 64-bit) with its 20 round keys passed as kernel parameters; gelu and
gelu_tanh use branch-free forms (see "Activations" below); 16-bit data are unpacked
and packed two at a time (cvt.f32.f16 on both halves, cvt.rn.{f16x2,bf16x2}.f32).
Flags that would otherwise keep per-element keep flags alive across a branch are
compile-time (the forward's uint8-mask output) or select whole per-branch bodies (p =
0, the backward's mask source).

A block is ``(block_x, block_y)`` threads over a strip of ``8 * block_x`` columns
and a range of ``rows_per_block`` rows. Each thread owns 8 consecutive columns (one
Philox group when ``N % 8 == 0``) and walks its rows with stride ``block_y``,
``unroll`` rows per batch, the next batch's loads issued before the current batch is
computed (register double buffering). On the vector path (``N % 8 == 0``, 16-byte
aligned data) a row's 8 elements travel as one 16-byte access (16-bit dtypes) or two
(float32) and the uint8 mask as one uint64; otherwise a scalar path loads element by
element and draws the (at most two) Philox groups a row-straddling chunk touches.

The backward pass sums each thread's grad_x per column over its rows, then the
block reduces them the way LightSeq does: a padded shared tile ``[block_y][8 *
block_x + pad]`` (pad chosen against bank conflicts of both its writes and reads),
per-column sums by ``shfl_down`` over the lanes holding one column, and one float32
partial row per row-block (xformers' ``N_BLOCKS_M`` partials). The partial rows are
reduced in the same kernel: each block then increments an arrival counter of its
column strip (after a fence), and the last block to arrive sums the strip's partial
rows in a fixed order (deterministic) into grad_bias and resets the counter (v1
launched a second kernel for this). No block waits for another. Each round of
resident blocks pays that epilogue with no loads in flight, so the backward with
grad_bias runs on few blocks: at 16 bits one wave of the kernel's real resident
blocks (the driver's occupancy calculator), two without grad_bias (v10,
``_default_fill``); float32 keeps v3's plan, half a wave of a nominal ``2048 //
threads`` blocks an SM with grad_bias and two without (``_WAVES_BIAS_GRAD``).
Without grad_bias the 16-bit backward with Philox draws (silu's aside) reads its rows
through a cp.async ring of 3 shared-memory slots instead (v13, ``_default_stages``):
two rows in flight a thread at 40 registers (6 blocks an SM, three waves) against the
register batches' 93-96 (2 blocks). The 16-bit gelu forward (one row a batch, 8
blocks an SM) runs four waves of its resident blocks on rows up to 16384 columns
(v15, ``_default_fwd_fill``), in blocks of 128 threads (v24,
``_default_fwd_threads``); the other forwards keep the nominal plan. Its gelu
is z sigmoid(h(z)) with h = logit(Phi) a fitted odd polynomial and the dropout scale
inside its reciprocal (v22, :func:`_make_gelu_logit`: 9 instructions an element
against 15; its error, 6.5e-4 of the tests' measure before rounding, is documented
at :data:`_GELU16_LOGIT`): that forward's time follows its instruction count
(bench/notes_dropout.md v17-v19, bench/NOTES.md v22).
"""

import functools
import math
from typing import NamedTuple

import numpy as np
from numba import cuda, types

from interop.dlpack import KernelArray, as_kernel_array, empty_like_lib, stream_handle

from . import activations, checks, dtypes
from .fast_act import _F1, _GELU16_LOGIT, _make_gelu_logit, kernel_act
from .intrinsics import (f32_as_u32, fence_acq_rel_gpu, grid_dependency_wait,
                         grid_dependents_launch, u32_as_f32)
from .intrinsics import ld_cg_f32 as _ld_cg1
from .intrinsics import ld_cg_f32x4 as _ld_cg4
from .jit import inline_device
from .launch import SIMULATOR, Kernel, cdiv, dependent_launch_ok, sm_count
from .philox import philox4x32_np, philox4x32_round_keys, round_keys, split_u64
from .plan import NOW, Recorder
from .reductions import FULL_MASK
from .stream_buffers import ZERO_U32 as _ZERO_U32
from .stream_buffers import StreamZeros, clear_u32_counters
from .tensor_core import cp_async_16, cp_async_commit, cp_async_wait

__all__ = [
    "dropout_bias_act_forward", "dropout_bias_act_backward", "dropout_bias_act_ref",
    "dropout_keep_mask", "keep_threshold", "LaunchConfig", "make_forward_kernel",
    "make_backward_kernel", "make_bias_grad_kernel", "shipped_kernels", "tile_stride",
]

# ---------------------------------------------------------------------------
# Bit-level helpers with exact simulator twins. Philox runs on 32-bit IR
# (``philox.philox4x32_round_keys``, what these RNG-bound kernels need); the kernels
# take the 20 round keys as parameters: ptxas then keeps them in uniform registers
# instead of 18 per-thread ones. numba keeps float16 as an i16 in LLVM.
# ---------------------------------------------------------------------------

if SIMULATOR:

    def _pack_h2(lo, hi):
        return (np.uint32(np.float16(lo).view(np.uint16))
                | (np.uint32(np.float16(hi).view(np.uint16)) << np.uint32(16)))

    def _pack_bf2(lo, hi):
        return (np.uint32(dtypes.f32_to_bf16_bits(np.float32(lo)))
                | (np.uint32(dtypes.f32_to_bf16_bits(np.float32(hi))) << np.uint32(16)))

    def _unpack_h2(w):
        w = int(w) & 0xFFFFFFFF
        return (np.float32(np.uint16(w & 0xFFFF).view(np.float16)),
                np.float32(np.uint16(w >> 16).view(np.float16)))

else:
    from llvmlite import ir
    from numba.core.extending import intrinsic

    from .intrinsics import ir_i32

    def _cvt_pack(instruction):
        # One F2FP.PACK_AB: two float32 rounded to nearest even into one 32-bit word,
        # lo in bits 0-15 (PTX packs its first source into the upper half).
        @intrinsic
        def op(typingctx, lo, hi):
            if lo != types.float32 or hi != types.float32:
                return None

            def codegen(context, builder, signature, args):
                fnty = ir.FunctionType(ir.IntType(32), [ir.FloatType(), ir.FloatType()])
                asm = ir.InlineAsm(fnty, f"{instruction} $0, $1, $2;", "=r,f,f")
                return builder.call(asm, [args[1], args[0]])

            return types.uint32(types.float32, types.float32), codegen

        return op

    _pack_h2 = _cvt_pack("cvt.rn.f16x2.f32")
    # NaN becomes the canonical bfloat16 NaN 0x7FFF (CUDA's __float22bfloat162_rn);
    # dtypes.f32_to_bf16_bits (the simulator twin) gives 0x7FC0. Both are NaN.
    _pack_bf2 = _cvt_pack("cvt.rn.bf16x2.f32")

    @intrinsic
    def _unpack_h2(typingctx, w):
        # Both halves of a 32-bit word as float32: the upper one through the
        # .H1_H1 operand selector, no shift.
        if not isinstance(w, types.Integer):
            return None
        ret = types.UniTuple(types.float32, 2)

        def codegen(context, builder, signature, args):
            pair = ir.LiteralStructType([ir.FloatType(), ir.FloatType()])
            fnty = ir.FunctionType(pair, [ir.IntType(32)])
            asm = ir.InlineAsm(
                fnty, "{ .reg .b16 %hl, %hh; mov.b32 {%hl, %hh}, $2; "
                "cvt.f32.f16 $0, %hl; cvt.f32.f16 $1, %hh; }", "=f,=f,r")
            out = builder.call(asm, [ir_i32(builder, args[0])])
            return context.make_tuple(builder, ret, [builder.extract_value(out, 0),
                                                     builder.extract_value(out, 1)])

        return ret(w), codegen


_F0 = np.float32(0.0)
_U0 = np.uint64(0)
_S32 = np.uint64(32)
_BYTE64 = np.uint64(0xFF)
_LO16 = np.uint32(0xFFFF)
_HI16 = np.uint32(0xFFFF0000)

MODE_NONE, MODE_PHILOX, MODE_MASK = 0, 1, 2
# Aim for about this many resident-block waves: enough blocks that the last wave's
# imbalance is small, few enough that the last block of each column strip (which sums
# the strip's partial rows, one per row block) finishes quickly: 2 waves give 128 row
# blocks at 16384 x 4096 fp16 (v1 used 4).
_WAVES = 2
# The backward with grad_bias: half a wave of 8 blocks per SM (v3, H200, fp16 16384 x
# 4096: 34 row blocks, 86 / 118 us for none / gelu against 98 / 134 with _WAVES'
# 128). Each round of blocks ends in the bias epilogue (tile, shuffles, partial row,
# arrival count) while no loads are in flight, ~8 us a round; fewer rounds pay it
# fewer times. Without grad_bias the 2 waves stay faster (74 against 78 us).
# Tried and rejected (H100, bench/notes_dropout.md v6): one round of every resident
# block (6 an SM at fp16, 784 blocks) 108.8 -> 116.6 us, float32 204.5 -> 248.1;
# the last block's loads per round (final_step 1, 2, 4) move nothing.
_WAVES_BIAS_GRAD = 0.5
_MAX_GRID_Y = 65535
# Partial rows per step of the last block's bias-grad sum (1, 2 or 4): rows
# ty, ty + by, ..., ty + (step - 1) by are loaded before any is added, so the sum over
# n_parts rows takes cdiv(n_parts, step x blockDim.y) dependent rounds of loads.
FINAL_STEPS = (1, 2, 4)
_FINAL_STEP = 2

# Activations: numba_fused.fast_act (the branch-free forms, shared with the 16-bit
# GEMM epilogues).

# The scale's floor before 1 / scale: at p = 1, scale 0, every element is dropped
# anyway, and c stays finite (c + c 2^g is then inf or NaN, never selected).
_SCALE_FLOOR = np.float32(np.finfo(np.float32).tiny)


@functools.lru_cache(maxsize=None)
def _scaled_act(activation, dtype, fold):
    """``(prep, act_s)`` for the forward: ``c = prep(scale)`` once a thread, then
    ``act_s(z, scale, c) = scale act(z)`` an element. With ``fold`` and a 16-bit
    dtype, gelu is :func:`_make_gelu_logit`'s form with the scale inside its
    reciprocal (c = 1 / scale); otherwise, and for every other activation, act(z) is
    multiplied by the scale (c unused)."""
    if activation == "gelu" and fold and dtype != "float32":
        gelu_s = _make_gelu_logit(_GELU16_LOGIT)

        @inline_device
        def prep_gelu(scale):
            return _F1 / max(scale, _SCALE_FLOOR)

        return prep_gelu, gelu_s
    act, _ = kernel_act(activation, dtype)

    @inline_device
    def prep(scale):
        return _F0

    @inline_device
    def act_s(z, scale, c):
        return act(z) * scale

    return prep, act_s


# ---------------------------------------------------------------------------
# Device helpers shared by every kernel
# ---------------------------------------------------------------------------

# Elements per Philox call: each of the four 32-bit words gives two 16-bit draws.
GROUP = 8


@inline_device
def _philox_group(g, keys, off_lo, off_hi):
    """Philox words of element group ``g`` (int64): counter (g_lo, g_hi, off_lo, off_hi)."""
    return philox4x32_round_keys(g, g >> 32, off_lo, off_hi, keys)


@inline_device
def _philox_u64(g, keys, off_lo, off_hi):
    """:func:`_philox_group` of a uint64 group index."""
    return philox4x32_round_keys(g, g >> _S32, off_lo, off_hi, keys)


@inline_device
def _hi_kept(word, thr):
    """keep flag of the draw in the upper half of ``word``: h >= t16 iff word > thr with
    thr = 65536 t16 - 1 (:func:`keep_threshold`; t16 >= 1 whenever draws are made,
    t16 = 65536 for p = 1: thr = 2^32 - 1, nothing kept)."""
    return np.uint32(word) > thr


@inline_device
def _lo_kept(word, thr):
    """keep flag of the draw in the lower half of ``word`` (the same test on it shifted up)."""
    return np.uint32((np.uint32(word) & _LO16) << np.uint32(16)) > thr


@inline_device
def _keep8(g, keys, off_lo, off_hi, thr):
    """Keep flags of the 8 elements of group ``g`` (uint64): element 2i draws the low
    half of Philox word i, element 2i + 1 its high half."""
    w0, w1, w2, w3 = _philox_u64(g, keys, off_lo, off_hi)
    return (_lo_kept(w0, thr), _hi_kept(w0, thr), _lo_kept(w1, thr), _hi_kept(w1, thr),
            _lo_kept(w2, thr), _hi_kept(w2, thr), _lo_kept(w3, thr), _hi_kept(w3, thr))


@functools.lru_cache(maxsize=None)
def _group_of(g64):
    """``group(g_base, q)``: the Philox element group of the vector path's chunk q.
    g64: the launch's first group g_base (uint64) is added (row pieces after the
    first); False: the launch starts at group 0 and g_base is not read (v23: the
    64-bit add is two of the 16-bit gelu forward's 172 instructions per 8 elements,
    ~1 us of its 76 at 16384 x 4096 on the H200)."""
    if g64:
        @inline_device
        def group(g_base, q):
            return g_base + np.uint64(q)
    else:
        @inline_device
        def group(g_base, q):
            return np.uint64(q)
    return group


@inline_device
def _pick4(i, r0, r1, r2, r3):
    if i == 0:
        return r0
    if i == 1:
        return r1
    if i == 2:
        return r2
    return r3


@inline_device
def _flag_at(k, a, b, thr):
    """Keep flag of draw ``k`` (0..15) of the 16 draws held by word tuples a, b."""
    if k < 8:
        w = _pick4(k >> 1, a[0], a[1], a[2], a[3])
    else:
        w = _pick4((k - 8) >> 1, b[0], b[1], b[2], b[3])
    if k & 1:
        return _hi_kept(w, thr)
    return _lo_kept(w, thr)


@inline_device
def _mask_word8(k0, k1, k2, k3, k4, k5, k6, k7):
    """Eight keep flags as the little-endian bytes of a uint64 (byte i = element i)."""
    lo = (np.uint32(k0) | (np.uint32(k1) << np.uint32(8)) | (np.uint32(k2) << np.uint32(16))
          | (np.uint32(k3) << np.uint32(24)))
    hi = (np.uint32(k4) | (np.uint32(k5) << np.uint32(8)) | (np.uint32(k6) << np.uint32(16))
          | (np.uint32(k7) << np.uint32(24)))
    return np.uint64(lo) | (np.uint64(hi) << _S32)


@inline_device
def _mask_byte(w, i):
    return ((np.uint64(w) >> np.uint64(8 * i)) & _BYTE64) != _U0


# ---------------------------------------------------------------------------
# Vector path: a chunk is 8 consecutive elements of one row (one Philox group),
# 16 bytes of a 16-bit dtype (one 16-byte access) or 32 bytes of float32 (two).
# Data arrays are uint32 words; ``q`` is a uint32 chunk index (an unsigned 32-bit
# index skips numba's negative-index wrap-around and makes each address a single
# IMAD.WIDE.U32). ``ld16``/``st16`` are plain LLVM <4 x i32> accesses with 16-byte
# alignment (ld.global.v4.u32 / st.global.v4.u32), free for LLVM and ptxas to schedule.
# ---------------------------------------------------------------------------

if SIMULATOR:
    from .tensor_core import ld_global_v4 as _ld16
    from .tensor_core import st_global_v4 as _st16

    def _lds16(arr, idx):
        i = int(idx)
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

else:
    _V4I32 = ir.VectorType(ir.IntType(32), 4)

    def _vec_ptr(context, builder, arrty, arr, idxty, idx, space=1):
        # <4 x i32> pointer to arr[idx] in address space ``space`` (1 global, 3 shared).
        ary = context.make_array(arrty)(context, builder, value=arr)
        i = context.cast(builder, idx, idxty, types.intp)
        ptr = builder.gep(ary.data, [i])
        sptr = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, space))
        return builder.bitcast(sptr, ir.PointerType(_V4I32, space))

    def _check_words(arr, idx):
        return (isinstance(arr, types.Array) and arr.dtype == types.uint32 and arr.layout == "C"
                and isinstance(idx, types.Integer))

    def _load16(space):
        # arr[idx : idx + 4] of a uint32 array as one 16-byte load (idx a multiple of
        # 4): ld.global.v4 (space 1) or, from a 16-byte aligned shared array, ld.shared.v4
        # (space 3).
        @intrinsic
        def op(typingctx, arr, idx):
            if not _check_words(arr, idx):
                return None
            sig = types.UniTuple(types.uint32, 4)(arr, idx)

            def codegen(context, builder, signature, args):
                vp = _vec_ptr(context, builder, signature.args[0], args[0],
                              signature.args[1], args[1], space)
                vec = builder.load(vp, align=16)
                vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), i))
                        for i in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return op

    _ld16 = _load16(1)
    _lds16 = _load16(3)

    @intrinsic
    def _st16(typingctx, arr, idx, v0, v1, v2, v3):
        if not _check_words(arr, idx):
            return None
        if not all(isinstance(v, types.Integer) for v in (v0, v1, v2, v3)):
            return None
        sig = types.void(arr, idx, v0, v1, v2, v3)

        def codegen(context, builder, signature, args):
            vp = _vec_ptr(context, builder, signature.args[0], args[0],
                          signature.args[1], args[1])
            vec = ir.Constant(_V4I32, ir.Undefined)
            for i, v in enumerate(args[2:]):
                vec = builder.insert_element(vec, ir_i32(builder, v),
                                             ir.Constant(ir.IntType(32), i))
            builder.store(vec, vp, align=16)
            return context.get_dummy_value()

        return sig, codegen


_Z4 = (np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0))
_Z8 = _Z4 + _Z4


@inline_device
def _ld_h(a, q):
    # The word index in 64 bits: the address is then one IMAD.WIDE of q, where a 32-bit
    # shift first cost a SHF per access (v17).
    return _ld16(a, np.uint64(q) << np.uint64(2))


@inline_device
def _st_h(a, q, w):
    _st16(a, np.uint64(q) << np.uint64(2), w[0], w[1], w[2], w[3])


@inline_device
def _ld_f(a, q):
    i = np.uint32(q << np.uint32(3))
    w0, w1, w2, w3 = _ld16(a, i)
    w4, w5, w6, w7 = _ld16(a, np.uint32(i + np.uint32(4)))
    return w0, w1, w2, w3, w4, w5, w6, w7


@inline_device
def _st_f(a, q, w):
    i = np.uint32(q << np.uint32(3))
    _st16(a, i, w[0], w[1], w[2], w[3])
    _st16(a, np.uint32(i + np.uint32(4)), w[4], w[5], w[6], w[7])


@inline_device
def _unpack_f16_8(w):
    v0, v1 = _unpack_h2(w[0])
    v2, v3 = _unpack_h2(w[1])
    v4, v5 = _unpack_h2(w[2])
    v6, v7 = _unpack_h2(w[3])
    return v0, v1, v2, v3, v4, v5, v6, v7


@inline_device
def _pack_f16_8(v):
    return (_pack_h2(v[0], v[1]), _pack_h2(v[2], v[3]), _pack_h2(v[4], v[5]),
            _pack_h2(v[6], v[7]))


@inline_device
def _bf_lo(w):
    return u32_as_f32(np.uint32((np.uint32(w) & _LO16) << np.uint32(16)))


@inline_device
def _bf_hi(w):
    return u32_as_f32(np.uint32(w) & _HI16)


@inline_device
def _unpack_bf16_8(w):
    return (_bf_lo(w[0]), _bf_hi(w[0]), _bf_lo(w[1]), _bf_hi(w[1]),
            _bf_lo(w[2]), _bf_hi(w[2]), _bf_lo(w[3]), _bf_hi(w[3]))


@inline_device
def _pack_bf16_8(v):
    return (_pack_bf2(v[0], v[1]), _pack_bf2(v[2], v[3]), _pack_bf2(v[4], v[5]),
            _pack_bf2(v[6], v[7]))


@inline_device
def _unpack_f32_8(w):
    return (u32_as_f32(w[0]), u32_as_f32(w[1]), u32_as_f32(w[2]), u32_as_f32(w[3]),
            u32_as_f32(w[4]), u32_as_f32(w[5]), u32_as_f32(w[6]), u32_as_f32(w[7]))


@inline_device
def _pack_f32_8(v):
    return (f32_as_u32(v[0]), f32_as_u32(v[1]), f32_as_u32(v[2]), f32_as_u32(v[3]),
            f32_as_u32(v[4]), f32_as_u32(v[5]), f32_as_u32(v[6]), f32_as_u32(v[7]))


# dtype -> (load chunk words, store chunk words, unpack to 8 float32, pack, zero words)
_VEC = {
    "float32": (_ld_f, _st_f, _unpack_f32_8, _pack_f32_8, _Z8),
    "float16": (_ld_h, _st_h, _unpack_f16_8, _pack_f16_8, _Z4),
    "bfloat16": (_ld_h, _st_h, _unpack_bf16_8, _pack_bf16_8, _Z4),
}


TILE_REDUCES = ("shuffle", "direct")


@functools.lru_cache(maxsize=None)
def _tile_reducer(store, how="shuffle"):
    """Device function ``reduce(tile, stride, per, out, out_base, col0, n_cols)``.

    The block's ``(bx, by) = (blockDim.x, blockDim.y)`` threads (powers of two, ``bx *
    by`` a multiple of 32) hold a shared float32 tile of ``by`` rows with row stride
    ``stride``; position ``p < per * bx`` of row ``y`` holds the partial sum that thread
    ``(p % bx, y)`` made for its column ``(p % bx) * per + p // bx``. For each position,
    the ``L = min(by, 32)`` lanes of a warp that share it sum rows ``yl, yl + L, ...``
    and combine by ``shfl_down``; lane ``yl == 0`` stores the column sum with ``store``
    at ``out[out_base + col0 + column]`` when ``col0 + column < n_cols``. Every thread
    of the block must call it (it contains warp shuffles).

    ``how="direct"`` (thirteenth-session candidate): thread ``t`` of the block sums the
    ``by`` rows of positions ``t, t + bx * by, ...`` itself, in row order: one pass of
    ``by`` shared loads where the shuffle form takes ``per * bx * L / (bx * by)`` passes
    of dependent shuffles (8 at fp16's (32, 8) block). A fixed order: deterministic, with
    other bits than "shuffle"'s. ptxas (sm_90, fp16 'none' backward): 48 registers
    against 40 (loading four rows at a time: 55).
    """
    if how not in TILE_REDUCES:
        raise ValueError(f"how must be one of {TILE_REDUCES}, got {how!r}")
    if how == "direct":
        return _direct_tile_reducer(store)

    @inline_device
    def reduce(tile, stride, per, out, out_base, col0, n_cols):
        # Block dimensions are powers of two: shifts and masks instead of the 64-bit
        # divisions numba would emit for // and %.
        bx = cuda.blockDim.x
        rows = cuda.blockDim.y
        bx_bits = cuda.popc(bx - 1)
        lanes = min(rows, 32)
        lane_bits = cuda.popc(lanes - 1)
        t = cuda.threadIdx.y * bx + cuda.threadIdx.x
        lane = t & 31
        yl = lane & (lanes - 1)
        cs = lane >> lane_bits
        first = ((t >> 5) << (5 - lane_bits)) + cs
        per_pass = ((bx * rows) >> 5) << (5 - lane_bits)
        n_pos = per * bx
        base = 0
        while base < n_pos:
            pos = base + first
            s = _F0
            if pos < n_pos:
                y = yl
                while y < rows:
                    s += tile[y * stride + pos]
                    y += lanes
            off = lanes >> 1
            while off > 0:
                s += cuda.shfl_down_sync(FULL_MASK, s, off)
                off >>= 1
            if yl == 0 and pos < n_pos:
                col = col0 + (pos & (bx - 1)) * per + (pos >> bx_bits)
                if col < n_cols:
                    store(out, out_base + col, s)
            base += per_pass

    return reduce


def _direct_tile_reducer(store):
    @inline_device
    def reduce(tile, stride, per, out, out_base, col0, n_cols):
        bx = cuda.blockDim.x
        rows = cuda.blockDim.y
        bx_bits = cuda.popc(bx - 1)
        n_pos = per * bx
        pos = cuda.threadIdx.y * bx + cuda.threadIdx.x
        while pos < n_pos:
            s = _F0
            y = 0
            while y < rows:
                s += tile[y * stride + pos]
                y += 1
            col = col0 + (pos & (bx - 1)) * per + (pos >> bx_bits)
            if col < n_cols:
                store(out, out_base + col, s)
            pos += bx * rows

    return reduce


# How a backward block publishes its bias-grad partial row before counting itself in
# (and how the last block acquires the others'): "block", thread (0, 0) alone fences
# (fence.acq_rel.gpu) after the block's barrier, cumulative over the block's writes
# (v3); "thread", every thread fences (cuda.threadfence: membar.gl, sequentially
# consistent) before the barrier (v2).
FENCES = ("block", "thread")
# Who sums the backward's bias-grad partial rows: "last_block", the last block of each
# strip to arrive (v2, v3); "kernel", a reduction kernel of its own launched after
# (v4 candidate, opt-in until measured: the backward then ends its blocks without the
# count and the last block's sum, on the two-wave grid, and the reduction reads the
# partial rows with 1024-thread blocks); "kernel_pdl", that kernel as a dependent
# launch (v14, sm_90: the backward's blocks trigger it as they start, its blocks wait
# in griddepcontrol.wait for the partial rows; no fence, no counter). Both stay opt-in:
# H200, fp16 16384 x 4096, 'none' / gelu backward, us: last block 75.1-75.5 /
# 109.6; "kernel" 83.4 / 120.5; "kernel_pdl" 81.7 / 120.0, at one wave 76.8 / 110.8.
BIAS_REDUCES = ("last_block", "kernel", "kernel_pdl")
# Threads of the v4 reduction's blocks (32 columns x 32 row slices; the simulator's
# threads are Python threads: 64 there).
_REDUCE_THREADS = 64 if SIMULATOR else 1024


@functools.lru_cache(maxsize=None)
def _bias_epilogue(dtype, vec, fence="block", final_step=_FINAL_STEP, tile_reduce="shuffle"):
    """Device function ``epilogue(tile, stride, acc, partial, part_row, n_cols,
    counters, n_parts, final, grad_bias, flag)`` ending the backward kernel.

    acc: the thread's 8 per-column float32 sums (columns 8 tx .. 8 tx + 7 of the block's
    strip of 8 blockDim.x columns). The block reduces them over threadIdx.y through the
    padded tile (LightSeq) into partial row ``part_row`` (float32, one per row block:
    xformers' N_BLOCKS_M partials). With ``final``, the block then counts itself in
    ``counters[blockIdx.x]`` (fence first); the last of the ``gridDim.y`` blocks of the
    strip to arrive sums partial rows 0 .. n_parts - 1 of the strip in a fixed order
    (thread rows ty, ty + blockDim.y, ..., then the tile and shuffles again), writes
    grad_bias (in ``dtype``) and resets the counter to 0 for the next launch. No block
    waits for another (the simulator runs blocks one after another). The result does
    not depend on which block is last: deterministic. ``fence``: one of :data:`FENCES`;
    ``final_step``: one of :data:`FINAL_STEPS`, partial rows a thread loads per round
    of that sum (the vector path; the scalar path loads one); ``tile_reduce``: one of
    :data:`TILE_REDUCES`, how both tile reductions sum the tile's rows
    (:func:`_tile_reducer`).
    """
    if fence not in FENCES:
        raise ValueError(f"fence must be one of {FENCES}, got {fence!r}")
    if final_step not in FINAL_STEPS:
        raise ValueError(f"final_step must be one of {FINAL_STEPS}, got {final_step!r}")
    per_thread = fence == "thread"
    to_partial = _tile_reducer(dtypes.storer("float32"), tile_reduce)
    to_bias = _tile_reducer(dtypes.storer(dtype), tile_reduce)
    f2, f4 = final_step >= 2, final_step >= 4

    @inline_device
    def to_tile(tile, stride, a0, a1, a2, a3, a4, a5, a6, a7):
        # Position k * blockDim.x + tx holds column 8 tx + k: each write is 32
        # consecutive floats of one tile row for a full-width warp.
        bx = cuda.blockDim.x
        base = cuda.threadIdx.y * stride + cuda.threadIdx.x
        tile[base] = a0
        tile[base + bx] = a1
        tile[base + 2 * bx] = a2
        tile[base + 3 * bx] = a3
        tile[base + 4 * bx] = a4
        tile[base + 5 * bx] = a5
        tile[base + 6 * bx] = a6
        tile[base + 7 * bx] = a7

    @inline_device
    def col_sums(partial, n_parts, n_cols, c):
        # Column sums of partial rows ty, ty + blockDim.y, ... for columns c .. c + 7.
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = _F0
        if vec:
            # final_step rows per step: 2 per row of independent 16-byte loads in flight
            # per thread (this runs once per strip, at the end of the kernel: its latency
            # is the tail; its registers may set the kernel's count).
            i = cuda.threadIdx.y
            by = cuda.blockDim.y
            while i < n_parts:
                e = i * n_cols + c
                p0, p1, p2, p3 = _ld_cg4(partial, e)
                p4, p5, p6, p7 = _ld_cg4(partial, e + 4)
                r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = _F0
                u0 = u1 = u2 = u3 = u4 = u5 = u6 = u7 = _F0
                v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = _F0
                if f2 and i + by < n_parts:
                    e1 = e + by * n_cols
                    r0, r1, r2, r3 = _ld_cg4(partial, e1)
                    r4, r5, r6, r7 = _ld_cg4(partial, e1 + 4)
                if f4 and i + 2 * by < n_parts:
                    e2 = e + 2 * by * n_cols
                    u0, u1, u2, u3 = _ld_cg4(partial, e2)
                    u4, u5, u6, u7 = _ld_cg4(partial, e2 + 4)
                if f4 and i + 3 * by < n_parts:
                    e3 = e + 3 * by * n_cols
                    v0, v1, v2, v3 = _ld_cg4(partial, e3)
                    v4, v5, v6, v7 = _ld_cg4(partial, e3 + 4)
                # Rows in order i, i + by, i + 2 by, i + 3 by (absent rows add 0).
                s0 += p0
                s1 += p1
                s2 += p2
                s3 += p3
                s4 += p4
                s5 += p5
                s6 += p6
                s7 += p7
                s0 += r0
                s1 += r1
                s2 += r2
                s3 += r3
                s4 += r4
                s5 += r5
                s6 += r6
                s7 += r7
                s0 += u0
                s1 += u1
                s2 += u2
                s3 += u3
                s4 += u4
                s5 += u5
                s6 += u6
                s7 += u7
                s0 += v0
                s1 += v1
                s2 += v2
                s3 += v3
                s4 += v4
                s5 += v5
                s6 += v6
                s7 += v7
                i += final_step * by
        else:
            nv = min(8, n_cols - c)
            i = cuda.threadIdx.y
            while i < n_parts:
                e = i * n_cols + c
                s0 += _ld_cg1(partial, e)
                if nv > 1:
                    s1 += _ld_cg1(partial, e + 1)
                if nv > 2:
                    s2 += _ld_cg1(partial, e + 2)
                if nv > 3:
                    s3 += _ld_cg1(partial, e + 3)
                if nv > 4:
                    s4 += _ld_cg1(partial, e + 4)
                if nv > 5:
                    s5 += _ld_cg1(partial, e + 5)
                if nv > 6:
                    s6 += _ld_cg1(partial, e + 6)
                if nv > 7:
                    s7 += _ld_cg1(partial, e + 7)
                i += cuda.blockDim.y
        return s0, s1, s2, s3, s4, s5, s6, s7

    @inline_device
    def epilogue(tile, stride, acc, partial, part_row, n_cols, counters, n_parts, final,
                 grad_bias, flag):
        col0 = cuda.blockIdx.x * cuda.blockDim.x * GROUP
        to_tile(tile, stride, acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7])
        cuda.syncthreads()
        to_partial(tile, stride, GROUP, partial, part_row * n_cols, col0, n_cols)
        if final:
            # Publish this block's partial row, then count the block in. With the block
            # fence, the barrier orders every thread's partial-row stores before thread
            # (0, 0)'s fence, which orders them (cumulativity) before its atomic; after
            # the atomic, the same thread's fence and the next barrier order the last
            # block's reads of the other partial rows after it.
            if per_thread:
                cuda.threadfence()
            cuda.syncthreads()
            if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
                if not per_thread:
                    fence_acq_rel_gpu()
                old = cuda.atomic.add(counters, cuda.blockIdx.x, np.uint32(1))
                last = old == np.uint32(cuda.gridDim.y - 1)
                if last and not per_thread:
                    fence_acq_rel_gpu()
                flag[0] = np.int32(last)
            cuda.syncthreads()
            if flag[0] != 0:
                if per_thread:
                    cuda.threadfence()
                c = col0 + GROUP * cuda.threadIdx.x
                s = (_F0, _F0, _F0, _F0, _F0, _F0, _F0, _F0)
                if c < n_cols:
                    s = col_sums(partial, n_parts, n_cols, c)
                to_tile(tile, stride, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
                cuda.syncthreads()
                to_bias(tile, stride, GROUP, grad_bias, 0, col0, n_cols)
                if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
                    counters[cuda.blockIdx.x] = np.uint32(0)

    return epilogue


# ---------------------------------------------------------------------------
# Host-side geometry
# ---------------------------------------------------------------------------

def _conflict_degree(addresses):
    """Shared-memory wavefronts of one warp access: the most distinct 4-byte words
    that fall in one of the 32 banks."""
    banks = {}
    for a in set(addresses):
        banks[a % 32] = banks.get(a % 32, 0) + 1
    return max(banks.values())


@functools.lru_cache(maxsize=None)
def tile_stride(bx, by, per):
    """Row stride (floats) of the ``[by][per * bx]`` shared tile of a ``(bx, by)`` block.

    The smallest stride >= ``per * bx`` minimising the bank conflicts of the tile's
    writes (thread ``(x, y)`` writes ``y * S + k * bx + x`` for each ``k < per``) plus
    those of the reduction's reads (lane ``cs * L + yl`` reads ``yl * S + p + cs``,
    ``L = min(by, 32)``). For ``bx = 32, by = 8, per = 4`` this is 132: LightSeq's
    ``tile[8][129]`` idea, padded for our access pattern.
    """
    n_pos = per * bx
    lanes = min(by, 32)
    warp_threads = min(32, bx * by)
    best = None
    for stride in range(n_pos, n_pos + 33):
        writes = [((t // bx) * stride + (t % bx)) for t in range(warp_threads)]
        reads = [yl * stride + cs for cs in range(32 // lanes) for yl in range(lanes)]
        cost = _conflict_degree(writes) + _conflict_degree(reads)
        if best is None or cost < best[0]:
            best = (cost, stride)
    return best[1]


def _block_x_choices(threads):
    return [1 << i for i in range(6) if (1 << i) <= min(32, threads)]


def _tile_floats(threads, per):
    """Compile-time tile size covering every block shape a kernel may be launched with."""
    if per == 1:
        return (threads // 32) * tile_stride(32, threads // 32, 1)
    return max((threads // bx) * tile_stride(bx, threads // bx, per)
               for bx in _block_x_choices(threads))


def _default_unroll(dtype, backward, activation):
    """Rows per batch of the vector path (the next batch's loads are issued before a
    batch is computed): 2, but at 16-bit 4 for the backward of activation 'none' and
    1 for gelu's forward.

    v5 (H100, 16384 x 4096, bench/notes_dropout.md): two rows a batch put 32-64 bytes
    per thread and array in flight. float32 at 512 threads (:func:`_default_threads`):
    fwd none / gelu 260 / 261 -> 190 / 211 us, bwd 222 / 303 -> 203 / 298. 16-bit at
    256 threads: fwd 103 / 103 -> 98 / 100 us, bwd gelu 162 -> 154; the backward of
    'none' with grad_bias went from 108.5 to 113.5 us (its bias epilogue rounds), so it
    kept one row until v8. v8 (H200, 16384 x 4096, tune_dropout.py, us, shipped /
    this, two runs; bench/NOTES.md): 16-bit backward of 'none' 81.1-81.5 -> 78.2-78.4
    at 4 rows (93 registers; 1 row: 48); gelu's forward 88.1-90.0 -> 86.2-86.9 at one
    row (32 registers against 64: the Philox + gelu instruction stream is the limit,
    more warps hide it). v10: silu (v9's fast form) takes the 2 rows of the rest:
    fp16 / bf16 bwd 115.3-115.6 at one row -> 108.2-108.4, fwd 74.8-75.3 at 1, 2 or
    4. float32 keeps 2 everywhere (4 rows: 'none' bwd 146.5 -> 174.7; 1 row: gelu fwd
    141.3 -> 145.6). Measure others with LaunchConfig.unroll (bench/tune_dropout.py)."""
    if dtype == "float32":
        return 2
    if activation == "gelu" and not backward:
        return 1
    if backward and activation == "none":
        return 4
    return 2


def _default_fill(dtype, bias_grad, by_kernel, staged=False):
    """The backward's grid in whole waves of its kernel's resident blocks (v10; see
    LaunchConfig.fill): one wave with a bias grad summed by the last block, two
    without; 0 (the nominal ``_WAVES_BIAS_GRAD`` / ``_WAVES`` plan) for the opt-in
    reduction kernel, which was not measured. The nominal plan assumes ``2048 //
    threads`` blocks an SM; at 93 registers (16-bit 'none' at four rows a batch) 2 fit,
    so it ran 1.9-2.2 waves. H200, fp16, tune_dropout.py, us, nominal / fill:
    'none' bwd 16384 x 4096 78.2 / 76.1, 4096 x 16384 83.0-83.4 / 77.0, 1024 x 65536
    77.0-77.3 / 76.4; gelu bwd 111.8-112.1 / 109.5, 120.9-121.2 / 109.0, 113.0-113.2 /
    109.4; without the bias grad at two waves 73.1-73.5 / 73.5, 71.8, 71.6 ('none'),
    109.4-111.4 / 106.4-107.6 (gelu). The forward keeps the nominal plan (one wave:
    'none' 72 -> 78, gelu 86 -> 91; two: even). float32 keeps the nominal plan (16384
    x 4096, nominal / fill: gelu bwd 201.5 / 211.9, 214.6; 'none' bwd 147.1 / 141.2,
    146.9; without the bias grad 137.8 / 138.5, 137.1 and 194.5 / 199.1, 198.4). The
    16-bit sweep against v8 (bench/RESULTS.md): gelu bwd 2-11.5 us faster at every N
    but 12288 (+5: 48 column strips x 5 row blocks fill 240 of 264 slots), 'none' bwd
    N = 16384 82.7 -> 77.1, 5120 +3.5. v13 (staged: the ring of :func:`_default_stages`,
    40 registers, 6 blocks an SM): three waves (fp16 16384 x 4096 without a bias grad,
    stages 3, fill 2 / 3 / 0: 'none' 72.8 / 71.1 / 71.4 us, gelu 105.7 / 103.5 /
    104.4)."""
    if by_kernel or dtype == "float32":
        return 0
    if staged:
        return 3
    return 1 if bias_grad else 2


# The widest rows whose gelu forward takes _default_fwd_fill's four waves (64 column
# strips of 256 threads x 8 columns).
_FWD_FILL_MAX_N = 16384


def _default_fwd_fill(dtype, activation, vec, n_cols, draws, unroll, stages, return_mask):
    """The forward's grid in whole waves of its kernel's resident blocks (dropout v15;
    see LaunchConfig.fill): 4 for the 16-bit gelu forward with Philox draws (one row
    a batch, 32 registers, 8 blocks an SM) on rows of at most ``_FWD_FILL_MAX_N``
    columns; 0 (the nominal plan, about two waves of 8 blocks an SM) otherwise.

    H200, tune_dropout.py, fp16, M x N = 2^26, gelu forward, us, nominal (two passes) /
    fill 4 (bench/notes_dropout.md, v15): N = 512 86.1, 86.4 / 85.2; 768 86.2, 86.5 /
    85.2; 1024 86.1, 86.3 / 84.9; 2048 86.2, 86.4 / 85.3; 4096 86.0, 86.0 / 84.9 (bf16
    86.8, 87.0 / 85.8); 5120 86.3, 86.3 / 84.6; 8192 86.6, 86.0 / 84.9; 12288 86.1,
    86.4 / 83.5; 16384 86.3, 86.2 / 84.7; but 65536 83.2, 83.5 / 85.0 (bf16 84.1, 83.9
    / 85.8), where the nominal plan's 2304 blocks of 120 rows beat 4096 of 64, so rows
    that long keep it. The other activations hold 63-64 registers, 4 blocks an SM,
    where fill 4 is about the nominal plan: within 0.5 us at every measured N.
    Unmeasured, so left on the nominal plan: p = 0 (no draws), a returned mask, an
    explicit unroll, the cp.async ring, the scalar path, float32."""
    if (dtype == "float32" or activation != "gelu" or not vec or not draws or unroll
            or stages or return_mask or n_cols > _FWD_FILL_MAX_N):
        return 0
    return 4


# v24: the block size of the forward that _default_fwd_fill plans in whole waves.
_FWD_FILL_THREADS = 128


def _default_fwd_threads(dtype, vec, fill):
    """The forward's threads a block: ``_FWD_FILL_THREADS`` where it is planned in whole
    waves of resident blocks (``fill`` from :func:`_default_fwd_fill`: the 16-bit gelu
    forward, rows up to ``_FWD_FILL_MAX_N``), else :func:`_default_threads`.

    v24, H200, tune_dropout.py, gelu forward, gpu us, 256 / 128 threads (fill 4, 32
    registers either way: 8 blocks of 256 or 16 of 128 an SM), three alternating
    passes each: 16384 x 4096 fp16 74.2-74.3 / 73.6-73.7, bf16 74.3-74.5 / 73.8-74.0;
    131072 x 512 fp16 74.4-74.7 / 73.0-73.3, bf16 74.6 / 73.1-73.2; 8192 x 8192 fp16
    73.9-74.0 / 73.3-73.8, bf16 74.0-74.2 / 73.5-73.8. At 1024 x 65536 (the nominal
    plan, fill 0) 128 threads lost 0.8-1.2 us, so that plan keeps 256."""
    if fill:
        return _FWD_FILL_THREADS
    return _default_threads(dtype, vec)


def _default_threads(dtype, vec):
    """Threads per block: 512 for float32 on the vector path, else 256 (v5, H100, fp32
    16384 x 4096 at two rows a batch, 80-128 registers: forward of 'none' 190 us at 512
    threads against 225 at 256; 256 threads stay best for 16-bit, bench/notes_dropout.md)."""
    return 512 if vec and dtype == "float32" else 256


def _jit_bounds(threads):
    """jit options for a kernel launched with ``threads`` threads a block: above 256,
    launch bounds, so ptxas keeps it within 65536 / threads registers (unroll 2 at
    1024 threads asked for 128 and failed to launch). At 256 or fewer any count fits,
    and bounds only raise ptxas's register target (16-bit backward of 'none': 40 -> 59
    registers, 10-18% slower at N = 5120-16384 on the H100), so none are given."""
    return {} if SIMULATOR or threads <= 256 else {"launch_bounds": (int(threads), 1)}


STAGES = (0, 2, 3, 4)
_STATIC_SMEM = 48 * 1024  # a kernel's static shared memory, at most
# cp.async needs 16-byte slots (the simulator takes no alignment argument).
_RING_ALIGN = None if SIMULATOR else 16


def _default_stages(dtype, activation, vec, mode, bias_grad):
    """The backward's ring slots when LaunchConfig.stages is None (v13): 3 for the
    16-bit vector backward with Philox draws and no bias grad, except silu's; else 0.

    H200, fp16, tune_dropout.py, gpu us, shipped (v10) / stages 3 at three waves
    (:func:`_default_fill`), without a bias grad, M x N = 2^26: 'none' 72.5 / 72.1
    (N = 512), 74.2-74.4 / 71.6 (768), 72.4-72.6 / 71.7 (1024), 72.6-73.6 / 71.2
    (4096), 72.5 / 71.6 (5120), 72.1-72.2 / 70.7 (12288), 71.0-71.1 / 70.3 (65536);
    gelu 107.5 / 103.3, 108.7-108.9 / 104.1, 107.2-107.4 / 103.2, 107.4-107.8 / 103.4,
    106.9-107.3 / 103.3, 106.1-106.2 / 102.9, 106.9-107.0 / 104.0. With the bias grad
    the ring lost at every fill, reduction and step tried: fp16 16384 x 4096 'none'
    75-77 -> 81-85, gelu 110 -> 113.6-118.9; its trace put the kernel at 82 us behind
    a predecessor's dirty L2 and 72 after a 512 MB read (shipped: 74 and 69;
    bench/notes_dropout.md). The forward's ring lost too (gelu 86 -> 87.4-89.3 us).
    The other activations at 16384 x 4096 without a bias grad, stages 0 / 3 (fp16, bf16):
    relu 102.9 / 101.7-102.1, 102.8 / 101.2-101.6; gelu_tanh 104.3 / 103.9-104.1, 104.0
    / 103.9-104.2; squared_relu 102.9 / 102.2-102.4, 102.9 / 101.4-102.0; leaky_relu
    102.6 / 101.6-101.8, 102.5 / 101.4-101.6; silu 103.6 / 104.2, 103.4 / 104.2-104.3:
    silu keeps its register batches (two rows a batch, :func:`_default_unroll`)."""
    if bias_grad or mode != MODE_PHILOX or activation == "silu":
        return 0
    return 3 if vec and dtype != "float32" else 0


def _ring_stages(stages, dtype, vec, mode=MODE_PHILOX):
    """The ring's slots for a kernel asked for ``stages``: those where it applies (the
    16-bit vector path, without a stored mask), else 0."""
    if stages not in STAGES:
        raise ValueError(f"stages must be one of {STAGES}, got {stages!r}")
    return int(stages) if vec and dtype != "float32" and mode != MODE_MASK else 0


class _Ring(NamedTuple):
    words: int  # the shared ring, uint32 words
    prime: object
    fetch: object
    read: object
    next: object


@functools.lru_cache(maxsize=None)
def _ring(stages, threads, two, other_bytes=0):
    """The cp.async ring of ``stages`` slots, one row of a thread's 16 bytes from one
    array (two: then 16 more from a second) a slot; ``stages - 1`` rows in flight.

    Row r + i step is in slot (r's slot + i) mod stages. Each thread reads only the
    bytes it copied, so waiting on its own commit groups suffices (no barrier).
    ``prime`` copies the first ``stages - 1`` rows; each step then ``fetch`` es row r +
    (stages - 1) step into slot ``far`` and waits for row r, ``read`` returns row r's
    words from slot ``cur`` (the second array's too), ``next`` advances a slot offset.
    other_bytes: the kernel's other static shared memory, for the 48 KB check."""
    second = 4 * threads
    slot = (2 if two else 1) * second
    words = stages * slot
    if 4 * words + other_bytes > _STATIC_SMEM:
        raise ValueError(
            f"config.stages={stages} at {threads} threads a block needs "
            f"{(4 * words + other_bytes) // 1024} KB of shared memory, over "
            f"{_STATIC_SMEM // 1024} KB: fewer stages or threads")
    ahead = stages - 1  # cp.async.wait_group takes it as an immediate

    @inline_device
    def copy(ring, o, a, b, q):
        g = np.uint64(4) * q
        cp_async_16(ring, o, a, g, 16)
        if two:
            cp_async_16(ring, np.uint32(o + second), b, g, 16)

    @inline_device
    def prime(ring, me, a, b, r, q, step, gstep, row_end):
        for i in range(ahead):
            if np.uint32(r + np.uint32(i) * step) < row_end:
                copy(ring, np.uint32(i * slot) + me, a, b, np.uint32(q + np.uint32(i) * gstep))
            cp_async_commit()
        return np.uint32(ahead * slot)

    @inline_device
    def fetch(ring, me, a, b, r, q, step, gstep, row_end, far):
        if np.uint32(r + np.uint32(ahead) * step) < row_end:
            copy(ring, far + me, a, b, np.uint32(q + np.uint32(ahead) * gstep))
        cp_async_commit()
        cp_async_wait(ahead)

    @inline_device
    def read(ring, cur, me):
        w = _lds16(ring, cur + me)
        v = w
        if two:
            v = _lds16(ring, np.uint32(cur + second) + me)
        return w, v

    @inline_device
    def advance(o):
        o = np.uint32(o + slot)
        return np.uint32(0) if o == words else o

    return _Ring(words, prime, fetch, read, advance)


def _check_threads(threads):
    if threads not in (32, 64, 128, 256, 512, 1024):
        raise ValueError(f"threads must be a power of two in [32, 1024], got {threads!r}")


# ---------------------------------------------------------------------------
# Kernel factories
# ---------------------------------------------------------------------------

_WORDS = types.Array(types.uint32, 1, "C")
_MASK_VEC = types.Array(types.uint64, 1, "C")
_MASK_SCALAR = types.Array(types.uint8, 1, "C")
_F32_ARRAY = types.Array(types.float32, 1, "C")
_U32_ARRAY = types.Array(types.uint32, 1, "C")
# 20 round keys, offset_lo, offset_hi, keep threshold.
_RNG_ARGS = (types.uint32,) * 23


def _storage(dtype_name):
    return types.Array(dtypes.numba_storage_type(dtype_name), 1, "C")


def _check_unroll(unroll):
    if unroll not in (1, 2, 4):
        raise ValueError(f"unroll must be 1, 2 or 4, got {unroll!r}")
    return unroll


@functools.lru_cache(maxsize=None)
def _bias_loader(dtype):
    """Device function ``bias8(bias, c, n_cols, has_bias)``: bias[c .. c + 7] as float32
    (0 past n_cols or without bias)."""
    load = dtypes.loader(dtype)

    @inline_device
    def bias8(bias, c, n_cols, has_bias):
        b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = _F0
        if has_bias:
            nv = min(8, n_cols - c)
            b0 = load(bias, c)
            b1 = load(bias, c + 1) if nv > 1 else _F0
            b2 = load(bias, c + 2) if nv > 2 else _F0
            b3 = load(bias, c + 3) if nv > 3 else _F0
            b4 = load(bias, c + 4) if nv > 4 else _F0
            b5 = load(bias, c + 5) if nv > 5 else _F0
            b6 = load(bias, c + 6) if nv > 6 else _F0
            b7 = load(bias, c + 7) if nv > 7 else _F0
        return b0, b1, b2, b3, b4, b5, b6, b7

    return bias8


_ALL_KEPT = (True, True, True, True, True, True, True, True)
_ALL_KEPT_WORD = np.uint64(0x0101010101010101)


@inline_device
def _scalar_flags(e0, nv, keys, off_lo, off_hi, thr):
    """Keep flags of elements e0 .. e0 + 7 (any e0, int64): groups e0 // 8 and, when the
    chunk straddles it, e0 // 8 + 1."""
    s = e0 & 7
    g = e0 >> 3
    a = _philox_group(g, keys, off_lo, off_hi)
    if s == 0:
        return (_lo_kept(a[0], thr), _hi_kept(a[0], thr), _lo_kept(a[1], thr),
                _hi_kept(a[1], thr), _lo_kept(a[2], thr), _hi_kept(a[2], thr),
                _lo_kept(a[3], thr), _hi_kept(a[3], thr))
    b = a
    if s + nv > 8:
        b = _philox_group(g + 1, keys, off_lo, off_hi)
    return (_flag_at(s, a, b, thr), _flag_at(s + 1, a, b, thr), _flag_at(s + 2, a, b, thr),
            _flag_at(s + 3, a, b, thr), _flag_at(s + 4, a, b, thr), _flag_at(s + 5, a, b, thr),
            _flag_at(s + 6, a, b, thr), _flag_at(s + 7, a, b, thr))


@inline_device
def _scalar_mask_flags(mask, e0, nv):
    return (mask[e0] != 0, mask[e0 + 1] != 0 if nv > 1 else False,
            mask[e0 + 2] != 0 if nv > 2 else False, mask[e0 + 3] != 0 if nv > 3 else False,
            mask[e0 + 4] != 0 if nv > 4 else False, mask[e0 + 5] != 0 if nv > 5 else False,
            mask[e0 + 6] != 0 if nv > 6 else False, mask[e0 + 7] != 0 if nv > 7 else False)


def _scalar_io(dtype):
    """(load8, store8) of the scalar path: elements e0 .. e0 + nv - 1 (nv <= 8)."""
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)

    @inline_device
    def load8(a, e0, nv):
        return (load(a, e0), load(a, e0 + 1) if nv > 1 else _F0,
                load(a, e0 + 2) if nv > 2 else _F0, load(a, e0 + 3) if nv > 3 else _F0,
                load(a, e0 + 4) if nv > 4 else _F0, load(a, e0 + 5) if nv > 5 else _F0,
                load(a, e0 + 6) if nv > 6 else _F0, load(a, e0 + 7) if nv > 7 else _F0)

    @inline_device
    def store8(a, e0, nv, v):
        store(a, e0, v[0])
        if nv > 1:
            store(a, e0 + 1, v[1])
        if nv > 2:
            store(a, e0 + 2, v[2])
        if nv > 3:
            store(a, e0 + 3, v[3])
        if nv > 4:
            store(a, e0 + 4, v[4])
        if nv > 5:
            store(a, e0 + 5, v[5])
        if nv > 6:
            store(a, e0 + 6, v[6])
        if nv > 7:
            store(a, e0 + 7, v[7])

    return load8, store8


@functools.lru_cache(maxsize=None)
def make_forward_kernel(dtype, activation, vec, threads=256, unroll=None, write_mask=False,
                        fixed_dropout=-1, stages=0, g64=False):
    """Forward kernel: ``y = dropout(act(x + bias), p)`` (and optionally the uint8 mask).

    dtype: 'float32' | 'float16' | 'bfloat16'; activation: one of ``ACTIVATIONS``;
    vec: vector path (``N % 8 == 0``, data arrays 16-byte aligned and viewed as uint32
    words, the mask as uint64 words) or scalar path; threads: block size the kernel is
    compiled for; unroll: rows per batch on the vector path (1, 2 or 4; None: the
    default for the dtype; the next batch's loads are in flight while a batch is
    computed). The scalar path always uses 1. write_mask: also write the uint8 keep mask
    (a compile-time flag: the flags would otherwise be saved across a branch per chunk).
    fixed_dropout: 0 or 1 compiles the ``dropout`` argument in as that constant (-1:
    read at run time). The launchers compile it in on the vector path: the run-time
    switch cost 4-5 registers (36 against 31 at fp16, ptxas 13.0), i.e. 6 instead of 8
    resident blocks; the scalar path reads it.
    stages: 0, or 2-4 (v13, :attr:`LaunchConfig.stages`, opt-in: 0.5-3 us slower than
    the register batches at 16-bit 16384 x 4096 on the H200): the 16-bit vector path
    reads its rows through a ring of ``stages`` shared-memory slots (16 bytes a thread
    each) filled by cp.async, ``stages - 1`` rows ahead of the one computed, one row a
    batch (unroll is then 1): rows in flight without registers held for them. Ignored
    at float32 and on the scalar path.
    g64: the vector path adds its ``g_base`` argument to every Philox counter (the
    launchers' row pieces after the first); False (v23): the launch's first element is
    group 0 and g_base is not read (:func:`_group_of`). Ignored on the scalar path.
    """
    activations.check_activation(activation)
    _check_threads(threads)
    g64 = bool(g64) and bool(vec)
    group = _group_of(g64)
    unroll = _check_unroll(_default_unroll(dtype, False, activation) if unroll is None else unroll)
    if not vec:
        unroll = 1
    stages = _ring_stages(stages, dtype, vec)
    staged = stages > 0
    if staged:
        unroll = 1
        ring = _ring(stages, threads, False)
    ring_words = ring.words if staged else 1
    # v22: the 16-bit vector path's gelu is z sigmoid(z f(z^2)) with the scale in its
    # reciprocal (213 -> 172 SASS instructions per 8 elements; v17 had the scale in
    # the other form's exponential, 223 -> 213). The scalar path keeps act(z) * scale
    # (c's register would cost it a block an SM), and so does float32 (v11 folded it
    # there too and lost 17-19 us, unexplained; _scaled_act folds 16-bit dtypes only).
    prep, act_s = _scaled_act(activation, dtype, bool(vec))
    bias8 = _bias_loader(dtype)
    u2, u4 = unroll >= 2, unroll >= 4

    @inline_device
    def math8(v, b, k, sc):
        # A select, not a multiply by a 0/1 mask: dropped elements are exact zeros
        # even where act(x + b) is inf or NaN. The activation is computed for every
        # element first: branching around it per element costs more than it saves.
        # sc = (scale, prep(scale)).
        scale, c = sc
        a0 = act_s(v[0] + b[0], scale, c)
        a1 = act_s(v[1] + b[1], scale, c)
        a2 = act_s(v[2] + b[2], scale, c)
        a3 = act_s(v[3] + b[3], scale, c)
        a4 = act_s(v[4] + b[4], scale, c)
        a5 = act_s(v[5] + b[5], scale, c)
        a6 = act_s(v[6] + b[6], scale, c)
        a7 = act_s(v[7] + b[7], scale, c)
        return ((a0 if k[0] else _F0), (a1 if k[1] else _F0), (a2 if k[2] else _F0),
                (a3 if k[3] else _F0), (a4 if k[4] else _F0), (a5 if k[5] else _F0),
                (a6 if k[6] else _F0), (a7 if k[7] else _F0))

    if vec:
        ldc, stc, unpack, pack, zero = _VEC[dtype]

        @inline_device
        def ld_if(x, q, ok):
            if ok:
                return ldc(x, q)
            return zero

        @inline_device
        def chunk(y, mask, g_base, q, words, b, keys, off_lo, off_hi, thr, sc, dropout):
            # Whole bodies per branch: no keep flag lives across a branch.
            v = unpack(words)
            if (dropout if fixed_dropout < 0 else fixed_dropout > 0):
                k = _keep8(group(g_base, q), keys, off_lo, off_hi, thr)
                stc(y, q, pack(math8(v, b, k, sc)))
                if write_mask:
                    mask[q] = _mask_word8(k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7])
            else:
                stc(y, q, pack(math8(v, b, _ALL_KEPT, sc)))
                if write_mask:
                    mask[q] = _ALL_KEPT_WORD

        def kernel(x, bias, y, mask, n_rows, n_cols, rows_per_block, g_base,
                   k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, dropout):
            """Vector-path forward of rows [by * rows_per_block, ...) of a column strip.

            x, y: [M * N * itemsize / 4] uint32 words of the flattened input / output;
            bias: [N] (storage dtype; read iff has_bias); mask: [M * N / 8] uint64
            words, byte i of word q = keep flag of element 8 q + i (written iff the
            kernel is made with write_mask); n_rows: rows of this launch, n_cols = N
            (N % 8 == 0); g_base: element group (8 elements) of the launch's first
            element (row pieces, see _pieces; read iff made with g64, else 0); k0..k19:
            Philox round keys (round_keys(seed)); off_lo, off_hi: counter words 2-3;
            thr = 65536 t16 - 1 (keep_threshold): element kept iff its 16-bit draw,
            moved to the top half of a word, is > thr; scale = 1 / (1 - p); dropout:
            draw Philox (False: every element kept).
            Thread (tx, ty) of block (bx, by) owns chunk j = bx * blockDim.x + tx, i.e.
            columns 8 j .. 8 j + 7, of rows by * rows_per_block + ty + i * blockDim.y;
            the chunk of row r is element group g_base + r * N / 8 + j.
            """
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            sc = (scale, prep(scale))
            # Every index of one launch is below 2^31: 32-bit arithmetic throughout.
            chunks = np.uint32(n_cols >> 3)
            j = np.uint32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
            if j >= chunks:
                return
            b = bias8(bias, GROUP * j, n_cols, has_bias)
            step = np.uint32(cuda.blockDim.y)
            gstep = np.uint32(step * chunks)
            row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
            row_end = np.uint32(min(n_rows, row0 + rows_per_block))
            r = np.uint32(row0 + cuda.threadIdx.y)
            q = np.uint32(r * chunks + j)
            if staged:
                sm = cuda.shared.array(ring_words, np.uint32, alignment=_RING_ALIGN)
                me = np.uint32(4 * (cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x))
                cur = np.uint32(0)
                far = ring.prime(sm, me, x, x, r, q, step, gstep, row_end)
                while r < row_end:
                    ring.fetch(sm, me, x, x, r, q, step, gstep, row_end, far)
                    words, _ = ring.read(sm, cur, me)
                    chunk(y, mask, g_base, q, words, b, keys, off_lo, off_hi, thr, sc,
                          dropout)
                    cur = ring.next(cur)
                    far = ring.next(far)
                    r = np.uint32(r + step)
                    q = np.uint32(q + gstep)
                return
            # Batch of rows r, r + step, ...: loaded one batch ahead.
            wa = ld_if(x, q, r < row_end)
            wb = wc = wd = zero
            if u2:
                wb = ld_if(x, np.uint32(q + gstep), np.uint32(r + step) < row_end)
            if u4:
                wc = ld_if(x, np.uint32(q + 2 * gstep), np.uint32(r + 2 * step) < row_end)
                wd = ld_if(x, np.uint32(q + 3 * gstep), np.uint32(r + 3 * step) < row_end)
            while r < row_end:
                rn = np.uint32(r + unroll * step)
                qn = np.uint32(q + unroll * gstep)
                na = ld_if(x, qn, rn < row_end)
                nb = nc = nd = zero
                if u2:
                    nb = ld_if(x, np.uint32(qn + gstep), np.uint32(rn + step) < row_end)
                if u4:
                    nc = ld_if(x, np.uint32(qn + 2 * gstep), np.uint32(rn + 2 * step) < row_end)
                    nd = ld_if(x, np.uint32(qn + 3 * gstep), np.uint32(rn + 3 * step) < row_end)
                chunk(y, mask, g_base, q, wa, b, keys, off_lo, off_hi, thr, sc, dropout)
                if u2:
                    if np.uint32(r + step) < row_end:
                        chunk(y, mask, g_base, np.uint32(q + gstep), wb, b, keys, off_lo,
                              off_hi, thr, sc, dropout)
                if u4:
                    if np.uint32(r + 2 * step) < row_end:
                        chunk(y, mask, g_base, np.uint32(q + 2 * gstep), wc, b, keys, off_lo,
                              off_hi, thr, sc, dropout)
                    if np.uint32(r + 3 * step) < row_end:
                        chunk(y, mask, g_base, np.uint32(q + 3 * gstep), wd, b, keys, off_lo,
                              off_hi, thr, sc, dropout)
                r = rn
                q = qn
                wa = na
                wb = nb
                wc = nc
                wd = nd

        mask_t = _MASK_VEC
        data = _WORDS
    else:
        load8, store8 = _scalar_io(dtype)

        def kernel(x, bias, y, mask, n_rows, n_cols, rows_per_block,
                   k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, dropout):
            """Scalar-path forward (any N, any alignment).

            x, y: [M * N] elements; bias: [N] (read iff has_bias); mask: [M * N] uint8,
            1 = kept (written iff made with write_mask); other arguments as the vector path. Thread
            (tx, ty) owns columns c = 8 j .. 8 j + 7 (those < N) of its rows; the chunk
            e0 = r * N + 8 j .. e0 + 7 may straddle two Philox groups.
            """
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            sc = (scale, prep(scale))
            chunks = (n_cols + 7) >> 3
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            if j >= chunks:
                return
            c = GROUP * j
            nv = min(8, n_cols - c)
            b = bias8(bias, c, n_cols, has_bias)
            row0 = cuda.blockIdx.y * rows_per_block
            row_end = min(n_rows, row0 + rows_per_block)
            r = row0 + cuda.threadIdx.y
            while r < row_end:
                e0 = r * n_cols + c
                v = load8(x, e0, nv)
                k = _ALL_KEPT
                if dropout:
                    k = _scalar_flags(e0, nv, keys, off_lo, off_hi, thr)
                store8(y, e0, nv, math8(v, b, k, sc))
                if write_mask:
                    mask[e0] = np.uint8(k[0])
                    if nv > 1:
                        mask[e0 + 1] = np.uint8(k[1])
                    if nv > 2:
                        mask[e0 + 2] = np.uint8(k[2])
                    if nv > 3:
                        mask[e0 + 3] = np.uint8(k[3])
                    if nv > 4:
                        mask[e0 + 4] = np.uint8(k[4])
                    if nv > 5:
                        mask[e0 + 5] = np.uint8(k[5])
                    if nv > 6:
                        mask[e0 + 6] = np.uint8(k[6])
                    if nv > 7:
                        mask[e0 + 7] = np.uint8(k[7])
                r += cuda.blockDim.y

        mask_t = _MASK_SCALAR
        data = _storage(dtype)

    base = (types.uint64,) if vec else ()
    argtypes = (data, _storage(dtype), data, mask_t, types.int64, types.int64, types.int64,
                *base, *_RNG_ARGS, types.float32, types.boolean, types.boolean)
    path = f"v16u{unroll}" if vec else "scalar"
    tag = ("_mask" if write_mask else "") + {-1: "_rt", 0: "_p0", 1: ""}[fixed_dropout]
    tag += "_g64" if g64 else ""
    bounds = _jit_bounds(threads)
    if staged:
        path += f"st{stages}"
    # Full occupancy for one row a batch at 16 bits: v12's two-slot ring fit 32
    # registers under these bounds (40 without); v23's forward without g_base took 34
    # without them (32 with g_base), no spills with them (ptxas 13.0, fp16 gelu).
    if not SIMULATOR and (staged or (vec and unroll == 1 and dtype != "float32"
                                     and not write_mask)):
        bounds = {"launch_bounds": (int(threads), 2048 // int(threads))}
    return Kernel(f"dropout_fwd_{dtype}_{activation}_{path}_t{threads}{tag}", kernel, argtypes,
                  **bounds)


@functools.lru_cache(maxsize=None)
def make_backward_kernel(dtype, activation, vec, threads=256, unroll=None, fixed_mode=-1,
                         fence="block", final_step=_FINAL_STEP, tile_reduce="shuffle",
                         stages=0, trigger=False, g64=False):
    """Backward kernel: grad_x, and (bias_grad) grad_bias through per-row-block float32
    partial sums reduced by the last block of each column strip (:func:`_bias_epilogue`).

    Arguments as :func:`make_forward_kernel`. For activation 'none' the kernel never
    reads x (nor bias: act' = 1). fixed_mode: 0, 1 or 2 compiles the ``mode`` argument
    in as that constant (-1: read at run time). The launchers compile it in on the
    vector path (the run-time switch cost 13 registers at fp16: 52 against 39, 4 instead
    of 6 resident blocks); the scalar path reads it. fence: how blocks publish their
    bias-grad partial rows (:data:`FENCES`); final_step: partial rows a thread loads per
    round of the last block's sum (:data:`FINAL_STEPS`); tile_reduce: how the epilogue's
    tiles are summed (:data:`TILE_REDUCES`); stages: as the forward's (v13; the
    default without a bias grad, :func:`_default_stages`), grad_out's and (activation
    not 'none') x's 16 bytes a row through the ring, at fixed_mode 0 or 1 (the
    stored-mask kernels keep the register batches); trigger (v14, opt-in,
    ``bias_reduce="kernel_pdl"``): each block first lets the dependent launch of the
    bias-grad reduction proceed (:func:`~numba_fused.intrinsics.grid_dependents_launch`),
    so its blocks take SM slots as this kernel's leave; g64: as the forward's.
    """
    activations.check_activation(activation)
    _check_threads(threads)
    g64 = bool(g64) and bool(vec)
    group = _group_of(g64)
    need_x = activation != "none"
    unroll = _check_unroll(_default_unroll(dtype, True, activation) if unroll is None else unroll)
    if not vec:
        unroll = 1
    # The run-time mode (-1) may be the stored mask: no ring then.
    stages = _ring_stages(stages, dtype, vec, MODE_MASK if fixed_mode < 0 else fixed_mode)
    staged = stages > 0
    _, act_grad = kernel_act(activation, dtype)
    bias8 = _bias_loader(dtype)
    tile_n = _tile_floats(threads, GROUP)
    if staged:
        unroll = 1
        # A slot: grad_out's 16 bytes a thread, then x's (activation not 'none').
        ring = _ring(stages, threads, need_x, 4 * tile_n + 4)
    ring_words = ring.words if staged else 1
    u2, u4 = unroll >= 2, unroll >= 4
    epilogue = _bias_epilogue(dtype, vec, fence, final_step, tile_reduce)

    @inline_device
    def grad1(go, v, b, keep, scale):
        # Computed, then selected (see the forward's math8).
        g = go * scale
        if need_x:
            g = g * act_grad(v + b)
        return g if keep else _F0

    @inline_device
    def grad8(d, v, b, k, scale):
        return (grad1(d[0], v[0], b[0], k[0], scale), grad1(d[1], v[1], b[1], k[1], scale),
                grad1(d[2], v[2], b[2], k[2], scale), grad1(d[3], v[3], b[3], k[3], scale),
                grad1(d[4], v[4], b[4], k[4], scale), grad1(d[5], v[5], b[5], k[5], scale),
                grad1(d[6], v[6], b[6], k[6], scale), grad1(d[7], v[7], b[7], k[7], scale))

    @inline_device
    def add8(acc, a):
        return (acc[0] + a[0], acc[1] + a[1], acc[2] + a[2], acc[3] + a[3],
                acc[4] + a[4], acc[5] + a[5], acc[6] + a[6], acc[7] + a[7])

    _ACC0 = (_F0, _F0, _F0, _F0, _F0, _F0, _F0, _F0)

    if vec:
        ldc, stc, unpack, pack, zero = _VEC[dtype]

        @inline_device
        def ld_if(grad, x, mask, q, ok, mode):
            if fixed_mode >= 0:
                mode = fixed_mode
            gw = xw = zero
            mw = _U0
            if ok:
                gw = ldc(grad, q)
                if need_x:
                    xw = ldc(x, q)
                if mode == MODE_MASK:
                    mw = mask[q]
            return gw, xw, mw

        @inline_device
        def chunk(grad_x, g_base, q, words, b, keys, off_lo, off_hi, thr, scale, mode):
            if fixed_mode >= 0:
                mode = fixed_mode
            gw, xw, mw = words
            d = unpack(gw)
            v = d
            if need_x:
                v = unpack(xw)
            # Whole bodies per mode: no keep flag lives across a branch.
            if mode == MODE_PHILOX:
                a = grad8(d, v, b, _keep8(group(g_base, q), keys, off_lo, off_hi, thr), scale)
            elif mode == MODE_MASK:
                a = grad8(d, v, b, (_mask_byte(mw, 0), _mask_byte(mw, 1), _mask_byte(mw, 2),
                                    _mask_byte(mw, 3), _mask_byte(mw, 4), _mask_byte(mw, 5),
                                    _mask_byte(mw, 6), _mask_byte(mw, 7)), scale)
            else:
                a = grad8(d, v, b, _ALL_KEPT, scale)
            stc(grad_x, q, pack(a))
            return a

        def kernel(grad, x, bias, grad_x, mask, partial, counters, grad_bias, n_rows, n_cols,
                   rows_per_block, tile_stride, g_base, part0, n_parts,
                   k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, mode, bias_grad, final):
            """Vector-path backward of rows [by * rows_per_block, ...) of a column strip.

            grad, x, grad_x: [M * N * itemsize / 4] uint32 words of grad_out, x (read iff
            the activation is not 'none') and grad_x; bias: [N] (read iff has_bias and
            the activation is not 'none'); mask: [M * N / 8] uint64 words (read iff mode
            == 2); with bias_grad: partial: [n_parts * N] float32, row part0 + by of it
            receives the sum over this block's rows of grad_x; counters: [>= gridDim.x]
            uint32 arrival counters, zero on entry and on exit; grad_bias: [N] (written,
            with final, by the last block of each strip from partial rows 0 .. n_parts -
            1); final: this launch ends the tensor (the earlier row pieces' partial rows
            are written). tile_stride: tile_stride(blockDim.x, blockDim.y, 8); mode: 0
            keep all, 1 Philox mask, 2 stored mask; other arguments as the forward kernel.
            """
            tile = cuda.shared.array(tile_n, np.float32)
            flag = cuda.shared.array(1, np.int32)
            if trigger:
                grid_dependents_launch()
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            chunks = np.uint32(n_cols >> 3)
            j = np.uint32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
            acc = _ACC0
            if j < chunks:
                b = bias8(bias, GROUP * j, n_cols, need_x and has_bias)
                step = np.uint32(cuda.blockDim.y)
                gstep = np.uint32(step * chunks)
                row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
                row_end = np.uint32(min(n_rows, row0 + rows_per_block))
                r = np.uint32(row0 + cuda.threadIdx.y)
                q = np.uint32(r * chunks + j)
                if staged:
                    sm = cuda.shared.array(ring_words, np.uint32, alignment=_RING_ALIGN)
                    me = np.uint32(4 * (cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x))
                    cur = np.uint32(0)
                    far = ring.prime(sm, me, grad, x, r, q, step, gstep, row_end)
                    while r < row_end:
                        ring.fetch(sm, me, grad, x, r, q, step, gstep, row_end, far)
                        gw, xw = ring.read(sm, cur, me)
                        acc = add8(acc, chunk(grad_x, g_base, q, (gw, xw, _U0), b, keys, off_lo,
                                              off_hi, thr, scale, mode))
                        cur = ring.next(cur)
                        far = ring.next(far)
                        r = np.uint32(r + step)
                        q = np.uint32(q + gstep)
                else:
                    wa = ld_if(grad, x, mask, q, r < row_end, mode)
                    wb = wc = wd = wa
                    if u2:
                        wb = ld_if(grad, x, mask, np.uint32(q + gstep),
                                   np.uint32(r + step) < row_end, mode)
                    if u4:
                        wc = ld_if(grad, x, mask, np.uint32(q + 2 * gstep),
                                   np.uint32(r + 2 * step) < row_end, mode)
                        wd = ld_if(grad, x, mask, np.uint32(q + 3 * gstep),
                                   np.uint32(r + 3 * step) < row_end, mode)
                    while r < row_end:
                        rn = np.uint32(r + unroll * step)
                        qn = np.uint32(q + unroll * gstep)
                        na = ld_if(grad, x, mask, qn, rn < row_end, mode)
                        nb = nc = nd = na
                        if u2:
                            nb = ld_if(grad, x, mask, np.uint32(qn + gstep),
                                       np.uint32(rn + step) < row_end, mode)
                        if u4:
                            nc = ld_if(grad, x, mask, np.uint32(qn + 2 * gstep),
                                       np.uint32(rn + 2 * step) < row_end, mode)
                            nd = ld_if(grad, x, mask, np.uint32(qn + 3 * gstep),
                                       np.uint32(rn + 3 * step) < row_end, mode)
                        acc = add8(acc, chunk(grad_x, g_base, q, wa, b, keys, off_lo, off_hi, thr,
                                              scale, mode))
                        if u2:
                            if np.uint32(r + step) < row_end:
                                acc = add8(acc, chunk(grad_x, g_base, np.uint32(q + gstep), wb, b,
                                                      keys, off_lo, off_hi, thr, scale, mode))
                        if u4:
                            if np.uint32(r + 2 * step) < row_end:
                                acc = add8(acc, chunk(grad_x, g_base, np.uint32(q + 2 * gstep), wc,
                                                      b, keys, off_lo, off_hi, thr, scale, mode))
                            if np.uint32(r + 3 * step) < row_end:
                                acc = add8(acc, chunk(grad_x, g_base, np.uint32(q + 3 * gstep), wd,
                                                      b, keys, off_lo, off_hi, thr, scale, mode))
                        r = rn
                        q = qn
                        wa = na
                        wb = nb
                        wc = nc
                        wd = nd
            if bias_grad:
                epilogue(tile, tile_stride, acc, partial, part0 + cuda.blockIdx.y, n_cols,
                         counters, n_parts, final, grad_bias, flag)

        mask_t = _MASK_VEC
        data = _WORDS
    else:
        load8, store8 = _scalar_io(dtype)

        def kernel(grad, x, bias, grad_x, mask, partial, counters, grad_bias, n_rows, n_cols,
                   rows_per_block, tile_stride, part0, n_parts,
                   k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, mode, bias_grad, final):
            """Scalar-path backward (any N, any alignment).

            grad, x, grad_x: [M * N] elements; bias: [N]; mask: [M * N] uint8 (read iff
            mode == 2); other arguments as the vector path. Thread (tx, ty) owns columns
            8 j .. 8 j + 7 (those < N) of its rows.
            """
            tile = cuda.shared.array(tile_n, np.float32)
            flag = cuda.shared.array(1, np.int32)
            if trigger:
                grid_dependents_launch()
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            chunks = (n_cols + 7) >> 3
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            acc = _ACC0
            if j < chunks:
                c = GROUP * j
                nv = min(8, n_cols - c)
                b = bias8(bias, c, n_cols, need_x and has_bias)
                row0 = cuda.blockIdx.y * rows_per_block
                row_end = min(n_rows, row0 + rows_per_block)
                r = row0 + cuda.threadIdx.y
                while r < row_end:
                    e0 = r * n_cols + c
                    d = load8(grad, e0, nv)
                    v = d
                    if need_x:
                        v = load8(x, e0, nv)
                    k = _ALL_KEPT
                    if mode == MODE_PHILOX:
                        k = _scalar_flags(e0, nv, keys, off_lo, off_hi, thr)
                    elif mode == MODE_MASK:
                        k = _scalar_mask_flags(mask, e0, nv)
                    a = grad8(d, v, b, k, scale)
                    store8(grad_x, e0, nv, a)
                    # Columns past N hold exact zeros (loaded as 0, selected or scaled).
                    acc = add8(acc, a)
                    r += cuda.blockDim.y
            if bias_grad:
                epilogue(tile, tile_stride, acc, partial, part0 + cuda.blockIdx.y, n_cols,
                         counters, n_parts, final, grad_bias, flag)

        mask_t = _MASK_SCALAR
        data = _storage(dtype)

    base = (types.uint64,) if vec else ()
    argtypes = (data, data, _storage(dtype), data, mask_t, _F32_ARRAY, _U32_ARRAY,
                _storage(dtype), types.int64, types.int64, types.int64, types.int64, *base,
                types.int64, types.int64, *_RNG_ARGS, types.float32, types.boolean,
                types.int32, types.boolean, types.boolean)
    path = f"v16u{unroll}" if vec else "scalar"
    tag = {-1: "_rt", 0: "_p0", 1: "", 2: "_mask"}[fixed_mode]
    tag += "" if fence == "block" else f"_fence_{fence}"
    tag += "" if final_step == _FINAL_STEP else f"_step{final_step}"
    tag += "" if tile_reduce == "shuffle" else f"_tile_{tile_reduce}"
    tag += "_trig" if trigger else ""
    tag += "_g64" if g64 else ""
    if staged:
        path += f"st{stages}"
    return Kernel(f"dropout_bwd_{dtype}_{activation}_{path}_t{threads}{tag}", kernel, argtypes,
                  **_jit_bounds(threads))


@functools.lru_cache(maxsize=None)
def make_bias_grad_kernel(dtype, threads=256, dependent=False):
    """Reduction ``grad_bias[c] = sum_i partial[i, c]`` as a kernel of its own.

    The backward kernel reduces its partials itself (last block per strip) by default;
    this kernel writes grad_bias of an empty grad_out (n_parts = 0 writes zeros) and
    sums the partial rows for ``LaunchConfig(bias_reduce="kernel")``. Launched with
    blocks of (32, threads // 32); block bx covers columns 32 bx .. 32 bx + 31.
    dependent (``bias_reduce="kernel_pdl"``, v14, opt-in): a dependent launch
    (:class:`~numba_fused.launch.Kernel`'s ``dependent``) whose blocks wait for the
    backward kernel's partial rows (griddepcontrol.wait) before their first load.
    """
    _check_threads(threads)
    store = dtypes.storer(dtype)
    reduce = _tile_reducer(store)
    tile_n = _tile_floats(threads, 1)

    def kernel(partial, grad_bias, n_parts, n_cols, tile_stride):
        """partial: [n_parts * N] float32 (row-major [n_parts, N]); grad_bias: [N] in the
        output dtype; tile_stride: tile_stride(32, blockDim.y, 1). Thread (tx, ty) sums
        rows ty, ty + blockDim.y, ... of column 32 bx + tx in float32, then the block
        combines the blockDim.y sums per column through the padded tile and shfl_down.
        n_parts = 0 writes zeros."""
        tile = cuda.shared.array(tile_n, np.float32)
        if dependent:
            grid_dependency_wait()
        col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        s = _F0
        if col < n_cols:
            i = cuda.threadIdx.y
            while i < n_parts:
                s += partial[i * n_cols + col]
                i += cuda.blockDim.y
        tile[cuda.threadIdx.y * tile_stride + cuda.threadIdx.x] = s
        cuda.syncthreads()
        reduce(tile, tile_stride, 1, grad_bias, 0, cuda.blockIdx.x * cuda.blockDim.x, n_cols)

    out = types.Array(dtypes.numba_storage_type(dtype), 1, "C")
    argtypes = (_F32_ARRAY, out, types.int64, types.int64, types.int64)
    return Kernel(f"dropout_bias_grad_{dtype}_t{threads}" + ("_dep" if dependent else ""),
                  kernel, argtypes, dependent=bool(dependent))


def shipped_kernels():
    """Every kernel the launchers pick with the default configuration, and the
    selectable schemes' (v4's bias-grad reduction)."""
    for dt in dtypes.DTYPES:
        threads = _default_threads(dt, True)
        for act in activations.ACTIVATIONS:
            for write_mask in (False, True):
                for draw in (1, 0):
                    yield make_forward_kernel(dt, act, True, threads, write_mask=write_mask,
                                              fixed_dropout=draw)
                # Row pieces after the first (tensors of 2^31 elements or more).
                yield make_forward_kernel(dt, act, True, threads, write_mask=write_mask,
                                          fixed_dropout=1, g64=True)
                yield make_forward_kernel(dt, act, False, write_mask=write_mask)
            # v24: the blocks of the forward planned in waves (rows it plans so).
            fill_threads = _default_fwd_threads(dt, True, _default_fwd_fill(
                dt, act, True, _FWD_FILL_MAX_N, True, None, 0, False))
            if fill_threads != threads:
                for g64 in (False, True):
                    yield make_forward_kernel(dt, act, True, fill_threads, fixed_dropout=1,
                                              g64=g64)
            for tile_reduce in TILE_REDUCES:  # with and without a bias grad
                for mode in (MODE_PHILOX, MODE_NONE, MODE_MASK):
                    yield make_backward_kernel(dt, act, True, threads, fixed_mode=mode,
                                               tile_reduce=tile_reduce)
                yield make_backward_kernel(dt, act, True, threads, fixed_mode=MODE_PHILOX,
                                           tile_reduce=tile_reduce, g64=True)
                yield make_backward_kernel(dt, act, False, tile_reduce=tile_reduce)
            stages = _default_stages(dt, act, True, MODE_PHILOX, False)
            if stages:  # without a bias grad: the shuffle tile, never run
                for g64 in (False, True):
                    yield make_backward_kernel(dt, act, True, threads, fixed_mode=MODE_PHILOX,
                                               tile_reduce=_tile_reduce_for(LaunchConfig(),
                                                                            False),
                                               stages=stages, g64=g64)
        yield make_bias_grad_kernel(dt)
        yield make_bias_grad_kernel(dt, _REDUCE_THREADS)
    yield _ZERO_U32


# ---------------------------------------------------------------------------
# Host side: thresholds, references
# ---------------------------------------------------------------------------

def keep_threshold(p):
    """``t16 = ceil(2**16 float32(p) - 1/2)`` (float32(p) rounded to a multiple of 2^-16):
    an element is kept iff its 16-bit draw ``h >= t16``, i.e. iff its uniform ``(h + 1/2)
    / 2**16 >= float32(p)``. 0 keeps everything (p < 2^-17, no draws needed), 65536 (p = 1)
    nothing. The keep rate ``1 - t16 / 2**16`` is within 2^-17 (7.7e-6) of ``1 - p``."""
    p32 = float(np.float32(p))
    return int(math.ceil(p32 * 65536.0 - 0.5))


def _dropout_scale(p):
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


def dropout_keep_mask(shape, p, seed=0, offset=0):
    """Host (NumPy) keep mask of the op: bool array of ``shape`` (the input's shape;
    the element index is the C-order linear index), True where kept."""
    shape = tuple(int(s) for s in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    numel = int(np.prod(shape, dtype=np.int64))
    t16 = keep_threshold(p)
    if p <= 0.0 or t16 == 0:
        return np.ones(shape, dtype=bool)
    n_groups = cdiv(numel, GROUP)
    g = np.arange(n_groups, dtype=np.uint64)
    seed_lo, seed_hi = split_u64(seed)
    off_lo, off_hi = split_u64(offset)
    counter = np.empty((n_groups, 4), dtype=np.uint32)
    counter[:, 0] = (g & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    counter[:, 1] = (g >> np.uint64(32)).astype(np.uint32)
    counter[:, 2] = off_lo
    counter[:, 3] = off_hi
    words = philox4x32_np(counter, (seed_lo, seed_hi))
    # Element 8 g + 2 i draws the low half of word i, 8 g + 2 i + 1 its high half.
    halves = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=-1)
    h = halves.reshape(-1)[:numel]
    return (h >= t16).reshape(shape)


def _host_bool(a):
    if hasattr(a, "detach"):
        return a.detach().to("cpu").numpy().astype(bool)
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return np.asarray(a.get()).astype(bool)
    if hasattr(a, "copy_to_host"):
        return np.asarray(a.copy_to_host()).astype(bool)
    return np.asarray(a).astype(bool)


def dropout_bias_act_ref(x, bias=None, p=0.0, seed=0, offset=0, activation="none",
                         grad_out=None, mask=None):
    """float64 reference of the op, on the host.

    x, bias, grad_out: arrays holding values (torch tensors of any device and dtype,
    CuPy, numba device or NumPy arrays; bfloat16 as torch tensors); mask: optional
    keep mask (nonzero = kept) used instead of the Philox mask. Returns ``y`` or, with
    ``grad_out``, ``(y, grad_x, grad_bias)`` (grad_bias None without bias); grad_bias
    sums the float64 grad_x over every leading dimension.
    """
    activations.check_activation(activation)
    x64 = dtypes.to_float64(x, "x")
    b64 = dtypes.to_float64(bias, "bias")
    z = x64 if b64 is None else x64 + b64
    keep = dropout_keep_mask(x64.shape, p, seed, offset) if mask is None else _host_bool(mask)
    scale = _dropout_scale(p)
    y = np.where(keep, activations.act_ref(activation, z) * scale, 0.0)
    if grad_out is None:
        return y
    g64 = dtypes.to_float64(grad_out, "grad_out")
    gx = np.where(keep, g64 * scale * activations.act_grad_ref(activation, z), 0.0)
    gb = None
    if b64 is not None:
        gb = gx.reshape(-1, x64.shape[-1]).sum(axis=0)
    return y, gx, gb


# ---------------------------------------------------------------------------
# Launch configuration
# ---------------------------------------------------------------------------

class LaunchConfig(NamedTuple):
    """Launch geometry (None = heuristic). For tuning and tests; results do not depend on it.

    threads: threads per block (power of two, 32..1024; None: 512 for float32 on the
    vector path, 128 for the 16-bit gelu forward planned in four waves (v24,
    ``_default_fwd_threads``), else 256); block_x: threads along a row,
    each owning 8 columns (power of two <= min(32, threads)); rows_per_block: rows of
    one block (the backward pass writes one bias-grad partial row per row-block);
    unroll: rows per batch on the vector path (1, 2 or 4; the next batch's loads are
    issued before a batch is computed); fence: how the backward's blocks publish their
    bias-grad partial rows, one of :data:`FENCES` (None: "block"); bias_reduce: who sums
    the partial rows, one of :data:`BIAS_REDUCES` (None: "last_block"; "kernel_pdl" on
    a GPU older than sm_90 launches the kernel plainly); final_step:
    partial rows a thread of that last block loads per round, one of :data:`FINAL_STEPS`
    (None: 2); tile_reduce: how the bias-grad epilogue sums its shared tiles, one of
    :data:`TILE_REDUCES` (None: :func:`_tile_reduce_for`'s choice); fill: the grid as
    about this many whole waves (1-8) of the compiled kernel's resident blocks (the
    driver's occupancy calculator): ``max(1, fill x SMs x resident // column strips)``
    row blocks, then rounded to whole batches; 0: the nominal plan, ``_WAVES`` /
    ``_WAVES_BIAS_GRAD`` waves of ``2048 // threads`` blocks an SM, which
    overestimates residency when registers bind (None: the forward's
    :func:`_default_fwd_fill`, the backward's :func:`_default_fill`; rows_per_block,
    where set, wins); stages: slots of
    the 16-bit vector passes' cp.async ring (v13, :func:`make_forward_kernel`,
    :func:`make_backward_kernel`; not with a stored mask), one of :data:`STAGES` (0:
    off, the register-prefetched batches; None: the backward's :func:`_default_stages`
    unless unroll is set, 3 without a bias grad, and off in the forward, where the ring
    measured slower).
    """

    threads: int = None
    block_x: int = None
    rows_per_block: int = None
    unroll: int = None
    fence: str = None
    bias_reduce: str = None
    final_step: int = None
    tile_reduce: str = None
    fill: int = None
    stages: int = None


def _tile_reduce_for(cfg, bias_grad):
    """The backward's tile reducer: ``cfg.tile_reduce``, else "direct" (v7) when the
    call reduces a bias grad and "shuffle" when it does not. H100, 16384 x 4096 (bench/
    notes_dropout.md, v7): with the bias grad, direct is 5-7 us faster (fp16 'none'
    108.2 -> 103.3 us, fp32 204.2 -> 196.9); without it the epilogue never runs and
    only its registers count (48 against 40 at fp16 'none': 100.2 -> 102.8 us)."""
    if cfg.tile_reduce:
        return cfg.tile_reduce
    return "direct" if bias_grad else "shuffle"


def _pow2_ceil(n):
    return 1 << max(0, int(n - 1).bit_length())


class _Plan(NamedTuple):
    grid: tuple
    block: tuple
    rows_per_block: int
    n_row_blocks: int


def _plan(n_rows, n_cols, vec, unroll, cfg, device, waves=_WAVES, kernel=None, fill=0):
    """Grid of a launch over ``n_rows`` x ``n_cols``: cfg's geometry where set, else
    the heuristic (``waves`` waves of a nominal ``2048 // threads`` blocks an SM, or
    with ``fill`` > 0, that many whole waves of ``kernel``'s resident blocks; cfg.fill,
    where set, wins)."""
    fill = fill if cfg.fill is None else cfg.fill
    threads = cfg.threads
    chunks = cdiv(n_cols, GROUP)
    if cfg.block_x is None:
        bx = min(32, threads, _pow2_ceil(chunks))
    else:
        bx = cfg.block_x
        if bx not in _block_x_choices(threads):
            raise ValueError(
                f"config.block_x must be a power of two <= min(32, threads), got {bx!r}")
    by = threads // bx
    n_cb = cdiv(chunks, bx)
    batch = by * (unroll if vec else 1)
    if cfg.rows_per_block is None:
        if fill:
            resident = kernel.resident_blocks(threads, 0, device)
            n_rb = max(1, min(cdiv(n_rows, batch), fill * sm_count(device) * resident // n_cb))
        else:
            target = max(1, int(sm_count(device) * max(1, 2048 // threads) * waves))
            n_rb = max(1, min(cdiv(n_rows, batch), cdiv(target, n_cb)))
        rpb = cdiv(cdiv(n_rows, n_rb), batch) * batch
    else:
        rpb = checks.check_int(cfg.rows_per_block, "config.rows_per_block", lo=1)
    rpb = max(rpb, cdiv(n_rows, _MAX_GRID_Y))
    n_rb = cdiv(n_rows, rpb)
    return _Plan((n_cb, n_rb), (bx, by), rpb, n_rb)


def _config(config):
    if config is None:
        return LaunchConfig()
    if not isinstance(config, LaunchConfig):
        raise TypeError(
            f"config must be a numba_fused.dropout.LaunchConfig, got {type(config).__name__}")
    if config.threads is not None:
        _check_threads(config.threads)
    if config.unroll not in (None, 1, 2, 4):
        raise ValueError(f"config.unroll must be 1, 2 or 4, got {config.unroll!r}")
    if config.fence not in (None, *FENCES):
        raise ValueError(f"config.fence must be one of {FENCES} or None, got {config.fence!r}")
    if config.bias_reduce not in (None, *BIAS_REDUCES):
        raise ValueError(f"config.bias_reduce must be one of {BIAS_REDUCES} or None, got "
                         f"{config.bias_reduce!r}")
    if config.final_step not in (None, *FINAL_STEPS):
        raise ValueError(f"config.final_step must be one of {FINAL_STEPS} or None, got "
                         f"{config.final_step!r}")
    if config.tile_reduce not in (None, *TILE_REDUCES):
        raise ValueError(f"config.tile_reduce must be one of {TILE_REDUCES} or None, got "
                         f"{config.tile_reduce!r}")
    if config.fill is not None:
        checks.check_int(config.fill, "config.fill", lo=0, hi=8)
    if config.stages not in (None, *STAGES):
        raise ValueError(f"config.stages must be one of {STAGES} or None, got "
                         f"{config.stages!r}")
    return config


# ---------------------------------------------------------------------------
# Array plumbing
# ---------------------------------------------------------------------------

def _address(arr):
    return arr.ptr if arr.ptr is not None else arr.host.ctypes.data


def _aligned(arr, nbytes):
    return arr is None or _address(arr) % nbytes == 0


def _flat(arr):
    return arr.reshape((arr.size,))


def _words(arr, dtype, count, offset=0):
    """``count`` elements of ``dtype`` (a NumPy name) starting ``offset`` elements into
    the memory of C-contiguous ``arr``."""
    host = None
    if arr.host is not None:
        host = arr.host.reshape(-1).view(np.dtype(dtype))[offset:offset + count]
    ptr = None if arr.ptr is None else arr.ptr + offset * np.dtype(dtype).itemsize
    return KernelArray(arr.owner, arr.lib, dtype, (count,), (1,), ptr, host, arr.device)


def _placeholder(like, dtype):
    """A zero-length ``dtype`` array for a parameter the kernel will not touch."""
    host = None if like.host is None else np.empty(0, dtype=np.dtype(dtype))
    return KernelArray(like.owner, like.lib, dtype, (0,), (1,), like.ptr, host, like.device)


# Eight-element groups per vector-path launch: below 2^28, every index a kernel forms
# (uint32 words: 8 per group for float32) stays below 2^31 in 32-bit arithmetic.
# Larger tensors are launched in row pieces.
_MAX_GROUPS = 2 ** 28


def _pieces(n_rows, n_cols, vec):
    """(first row, rows) of each launch."""
    if not vec:
        return [(0, n_rows)]
    per = (_MAX_GROUPS - 1) // (n_cols // GROUP)
    if per < 1:
        raise ValueError(
            f"the last dimension must be below {GROUP * (_MAX_GROUPS - 1)}, got {n_cols}")
    return [(r, min(per, n_rows - r)) for r in range(0, n_rows, per)]


def _rows_arg(arr, dtype, vec, like, row0, rows, n_cols):
    """Kernel argument for rows [row0, row0 + rows) of a [M, N] data array (None ->
    placeholder): uint32 words on the vector path, the whole flat array otherwise."""
    if vec:
        if arr is None:
            return _placeholder(like, "uint32")
        per_row = n_cols * arr.itemsize // 4
        return _words(arr, "uint32", rows * per_row, row0 * per_row)
    if arr is None:
        return _placeholder(like, dtypes.STORAGE[dtype].name)
    return _flat(arr)


def _bias_arg(b, dtype, like):
    if b is None:
        return _placeholder(like, dtypes.STORAGE[dtype].name)
    return _flat(b)


def _mask_rows(arr, vec, like, row0, rows, n_cols):
    if vec:
        if arr is None:
            return _placeholder(like, "uint64")
        return _words(arr, "uint64", rows * n_cols // GROUP, row0 * n_cols // GROUP)
    return _placeholder(like, "uint8") if arr is None else _words(arr, "uint8", arr.size)


def _vec_ok(n_cols, data, mask):
    """The vector path: whole 8-element groups per row, 16-byte aligned data (the mask,
    8 bytes per group, 8-byte aligned)."""
    return (n_cols % GROUP == 0 and all(_aligned(a, 16) for a in data)
            and _aligned(mask, 8))


def _check_devices(ref, ref_name, *others):
    for arr, name in others:
        if arr is not None and arr.device is not None and ref.device is not None \
                and arr.device != ref.device:
            raise ValueError(f"{name} is on device {arr.device} but {ref_name} is on {ref.device}")


def _check_bias(bias, x):
    if bias is None:
        return None
    b = checks.floating_array(bias, "bias")
    checks.check_same_dtype(x, "x", (b, "bias"))
    n = x.shape[-1]
    if b.ndim != 1 or b.shape[0] != n:
        raise ValueError(f"bias must have shape ({n},) (the last dimension of x), got {b.shape}")
    _require_contiguous(b, "bias")
    return b


def _require_contiguous(arr, name):
    # An empty array is contiguous whatever its strides (KernelArray.is_contiguous
    # says otherwise for torch's (3, 0) with strides (1, 1)).
    if arr.size:
        checks.require_contiguous(arr, name)
    return arr


def _check_common(x_name, x_obj, p, seed, offset, activation):
    x = checks.floating_array(x_obj, x_name)
    if x.ndim < 1:
        raise ValueError(f"{x_name} must have at least one dimension, got a 0-d array")
    _require_contiguous(x, x_name)
    p = checks.check_probability(p, "p")
    seed = checks.check_int(seed, "seed")
    offset = checks.check_int(offset, "offset")
    activations.check_activation(activation)
    return x, p, seed, offset


# The rng arguments' leading _N_DYNAMIC values (round keys, offset words) change call
# to call; a plan takes them from rng_values().
_N_DYNAMIC = 22


@functools.lru_cache(maxsize=64)
def _round_keys(seed):
    return tuple(round_keys(seed))


def rng_values(seed, offset):
    """The per-call scalars of a dropout plan (:func:`forward_plan`,
    :func:`backward_plan`): the 20 round keys of ``seed`` and ``offset``'s two words."""
    return _round_keys(seed) + split_u64(offset)


def _rng_args(seed, offset, p):
    """(draws needed, [20 round keys, offset_lo, offset_hi, thr]): the kernels keep an
    element iff its 16-bit draw h, moved to the top half of a word, is > thr = 65536 t16 - 1
    (t16 = keep_threshold(p) >= 1 whenever draws are made)."""
    off_lo, off_hi = split_u64(offset)
    t16 = keep_threshold(p)
    draw = p > 0.0 and t16 > 0
    return draw, [*_round_keys(seed), off_lo, off_hi, (65536 * t16 - 1) if draw else 0]


# Arrival counters of the backward kernels' last-block bias-grad reduction:
# ``_COUNTERS(like, stream, n)``, a uint32 array of at least n zeros, one per
# (library, device, stream); the last block of each strip resets its counter.
_COUNTERS = StreamZeros(clear_u32_counters)


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------

def dropout_bias_act_forward(x, bias=None, p=0.0, seed=0, offset=0, activation="none", *,
                             return_mask=False, config=None):
    """``y = dropout(act(x + bias), p)`` over the last dimension of ``x``.

    x: [..., N] float32 / float16 / bfloat16, C-contiguous, on the GPU; bias: [N] of the
    same dtype or None; p: drop probability in [0, 1]; seed, offset: integers in
    [0, 2**64) keying the Philox mask (module docstring); activation: 'none', 'relu',
    'gelu', 'gelu_tanh', 'squared_relu', 'leaky_relu' or 'silu'.
    return_mask: also return the uint8 keep mask (1 = kept, shape of x) for
    :func:`dropout_bias_act_backward`'s ``mask=`` (LightSeq's variant: memory instead
    of recomputation; the mask is the same one the Philox path regenerates).
    config: optional :class:`LaunchConfig`.

    Returns y (same shape, dtype and library as x), or ``(y, mask)``.
    """
    y, mask = _forward(x, bias, p, seed, offset, activation, return_mask, config)
    return (y.owner, mask.owner) if return_mask else y.owner


def _forward(x, bias, p, seed, offset, activation, return_mask, config, ex=NOW):
    x, p, seed, offset = _check_common("x", x, p, seed, offset, activation)
    b = _check_bias(bias, x)
    _check_devices(x, "x", (b, "bias"))
    cfg = _config(config)
    if x.size == 0:
        y = empty_like_lib(x, x.shape, x.dtype)
        return y, (empty_like_lib(x, x.shape, "uint8") if return_mask else None)
    if ex.recording:
        x, b = ex.inputs
    y = ex.alloc(x, x.shape, x.dtype)
    mask = ex.alloc(x, x.shape, "uint8") if return_mask else None
    n_cols = x.shape[-1]
    n_rows = x.size // n_cols
    vec = _vec_ok(n_cols, (x, y), mask)
    unroll = (cfg.unroll or _default_unroll(x.dtype, False, activation)) if vec else 1
    stages = _ring_stages(cfg.stages or 0, x.dtype, vec)
    if stages:
        unroll = 1
    draw, rng = _rng_args(seed, offset, p)
    fill = _default_fwd_fill(x.dtype, activation, vec, n_cols, draw, cfg.unroll, stages,
                             return_mask)
    cfg = cfg._replace(threads=cfg.threads or _default_fwd_threads(x.dtype, vec, fill))
    stream = stream_handle(x)
    tail = [*rng, _dropout_scale(p), b is not None, draw]
    bias_arg = _bias_arg(b, x.dtype, x)
    for row0, rows in _pieces(n_rows, n_cols, vec):
        # v23: only a row piece after the first adds its first group to the counters.
        kernel = make_forward_kernel(x.dtype, activation, vec, cfg.threads, unroll,
                                     bool(return_mask), int(draw) if vec else -1, stages,
                                     g64=draw and row0 > 0)
        plan = _plan(rows, n_cols, vec, unroll, cfg, x.device, kernel=kernel, fill=fill)
        args = [_rows_arg(x, x.dtype, vec, x, row0, rows, n_cols), bias_arg,
                _rows_arg(y, x.dtype, vec, x, row0, rows, n_cols),
                _mask_rows(mask, vec, x, row0, rows, n_cols), rows, n_cols, plan.rows_per_block]
        if vec:
            args.append(row0 * (n_cols // GROUP))
        dynamic = range(len(args), len(args) + _N_DYNAMIC) if draw else ()
        ex.launch(kernel, plan.grid, plan.block, stream, args + tail, dynamic=dynamic)
    return y, mask


def dropout_bias_act_backward(grad_out, x, bias=None, p=0.0, seed=0, offset=0, activation="none",
                              need_bias_grad=True, *, mask=None, config=None):
    """Gradients of :func:`dropout_bias_act_forward`: ``(grad_x, grad_bias_or_None)``.

    grad_out: [..., N] (dtype and shape of the forward's x); x: the forward's input
    (may be None when activation is 'none': it is not read then); bias: the forward's
    bias or None; p, seed, offset, activation: as in the forward (the mask is
    regenerated from seed and offset), unless ``mask`` (uint8 or bool, shape of
    grad_out, nonzero = kept, e.g. the forward's ``return_mask`` output) is given: then
    the mask is read instead and seed/offset are unused. grad_bias (bias's shape and
    dtype) is computed iff bias is given and need_bias_grad.
    config: optional :class:`LaunchConfig`.
    """
    grad_x, grad_bias = _backward(grad_out, x, bias, p, seed, offset, activation, need_bias_grad,
                                  mask, config)
    return grad_x.owner, (None if grad_bias is None else grad_bias.owner)


def _backward(grad_out, x, bias, p, seed, offset, activation, need_bias_grad, mask, config,
              ex=NOW):
    g, p, seed, offset = _check_common("grad_out", grad_out, p, seed, offset, activation)
    need_x = activation != "none"
    if x is None:
        if need_x:
            raise TypeError(f"x is required for activation {activation!r} (act' needs x + bias)")
        xa = None
    else:
        xa = checks.floating_array(x, "x")
        checks.check_same_dtype(g, "grad_out", (xa, "x"))
        if xa.shape != g.shape:
            raise ValueError(f"x has shape {xa.shape} but grad_out has {g.shape}")
        _require_contiguous(xa, "x")
    b = _check_bias(bias, g)
    m = None
    if mask is not None:
        m = as_kernel_array(mask, "mask")
        if m.dtype not in ("uint8", "bool"):
            raise TypeError(f"mask must have dtype uint8 or bool, got {m.dtype}")
        if m.shape != g.shape:
            raise ValueError(f"mask has shape {m.shape} but grad_out has {g.shape}")
        _require_contiguous(m, "mask")
    if not isinstance(need_bias_grad, (bool, np.bool_)):
        raise TypeError(f"need_bias_grad must be a bool, got {type(need_bias_grad).__name__}")
    _check_devices(g, "grad_out", (xa, "x"), (b, "bias"), (m, "mask"))
    cfg = _config(config)
    bias_grad = b is not None and bool(need_bias_grad)
    n_cols = g.shape[-1]
    n_rows = g.size // n_cols if n_cols else 0
    if g.size == 0:
        grad_x = empty_like_lib(g, g.shape, g.dtype)
        grad_bias = empty_like_lib(g, (n_cols,), g.dtype) if bias_grad else None
        if bias_grad and n_cols:
            # Sum over zero rows: the reduction kernel writes the zeros.
            _launch_bias_grad(None, grad_bias, 0, n_cols, g, cfg)
        return grad_x, grad_bias
    if ex.recording:
        # Stand-ins from here on: the counters' factory (kept by a plan) must not
        # keep the caller's tensor alive.
        g, xa, b, m = ex.inputs
    grad_x = ex.alloc(g, g.shape, g.dtype)
    grad_bias = ex.alloc(g, (n_cols,), g.dtype) if bias_grad else None
    x_used = xa if need_x else None
    b_used = b if need_x else None
    vec = _vec_ok(n_cols, [a for a in (g, grad_x, x_used) if a is not None], m)
    cfg = cfg._replace(threads=cfg.threads or _default_threads(g.dtype, vec))
    unroll = (cfg.unroll or _default_unroll(g.dtype, True, activation)) if vec else 1
    draw, rng = _rng_args(seed, offset, p)
    mode = MODE_MASK if m is not None else (MODE_PHILOX if draw else MODE_NONE)
    stages = cfg.stages
    if stages is None:
        # An explicit unroll asks for the register batches.
        stages = 0 if cfg.unroll else _default_stages(g.dtype, activation, vec, mode,
                                                      bias_grad)
    stages = _ring_stages(stages, g.dtype, vec, mode)
    if stages:
        unroll = 1
    by_kernel = bias_grad and cfg.bias_reduce in ("kernel", "kernel_pdl")
    # The reduction as a dependent launch (v14, opt-in): every row piece's kernel
    # triggers; only the last one's trigger reaches it (the pieces launch plainly).
    pdl = by_kernel and cfg.bias_reduce == "kernel_pdl" and dependent_launch_ok(g.device)
    pieces = _pieces(n_rows, n_cols, vec)
    # v23: only a row piece after the first adds its first group to the counters.
    kernels = [make_backward_kernel(g.dtype, activation, vec, cfg.threads, unroll,
                                    mode if vec else -1, cfg.fence or "block",
                                    cfg.final_step or _FINAL_STEP,
                                    _tile_reduce_for(cfg, bias_grad), stages, pdl,
                                    g64=mode == MODE_PHILOX and row0 > 0)
               for row0, _ in pieces]
    waves = _WAVES_BIAS_GRAD if bias_grad and not by_kernel else _WAVES
    fill = _default_fill(g.dtype, bias_grad, by_kernel, stages > 0)
    plans = [_plan(rows, n_cols, vec, unroll, cfg, g.device, waves, kernel, fill)
             for (_, rows), kernel in zip(pieces, kernels)]
    n_parts = sum(plan.n_row_blocks for plan in plans)
    stream = stream_handle(g)
    partial = _placeholder(g, "float32")
    counters = _placeholder(g, "uint32")
    gb_arg = _placeholder(g, dtypes.STORAGE[g.dtype].name)
    if bias_grad:
        partial = ex.alloc(g, (n_parts * n_cols,), "float32")
        if not by_kernel:
            counters = ex.stream_buffer(
                functools.partial(_COUNTERS, g, n=max(plan.grid[0] for plan in plans)),
                stream)
        gb_arg = grad_bias
    bias_arg = _bias_arg(b_used, g.dtype, g)
    part0 = 0
    for i, ((row0, rows), plan, kernel) in enumerate(zip(pieces, plans, kernels)):
        args = [_rows_arg(g, g.dtype, vec, g, row0, rows, n_cols),
                _rows_arg(x_used, g.dtype, vec, g, row0, rows, n_cols), bias_arg,
                _rows_arg(grad_x, g.dtype, vec, g, row0, rows, n_cols),
                _mask_rows(m, vec, g, row0, rows, n_cols), partial, counters, gb_arg, rows,
                n_cols, plan.rows_per_block, tile_stride(plan.block[0], plan.block[1], GROUP)]
        if vec:
            args.append(row0 * (n_cols // GROUP))
        args += [part0, n_parts]
        dynamic = range(len(args), len(args) + _N_DYNAMIC) if mode == MODE_PHILOX else ()
        args += [*rng, _dropout_scale(p), b_used is not None, mode, bias_grad,
                 i == len(pieces) - 1 and not by_kernel]
        ex.launch(kernel, plan.grid, plan.block, stream, args, dynamic=dynamic)
        part0 += plan.n_row_blocks
    if by_kernel:
        by = _REDUCE_THREADS // 32
        ex.launch(make_bias_grad_kernel(g.dtype, _REDUCE_THREADS, pdl), (cdiv(n_cols, 32),),
                  (32, by), stream, [partial, grad_bias, n_parts, n_cols, tile_stride(32, by, 1)])
    return grad_x, grad_bias


def forward_plan(x, bias, p, activation, return_mask=False):
    """A :class:`~numba_fused.plan.Plan` of :func:`dropout_bias_act_forward` for inputs
    of the signature of ``x`` / ``bias`` (validated here as there) at drop probability
    ``p``: inputs ``(x, bias)``, outputs ``(y, mask or None)``, per-call values
    :func:`rng_values` ``(seed, offset)``. GPU only; x must not be empty."""
    rec = Recorder(_plan_inputs(x, bias))
    return rec.plan(_forward(x, bias, p, 0, 0, activation, return_mask, None, ex=rec))


def backward_plan(grad_out, x, bias, p, activation, need_bias_grad, mask=None):
    """A :class:`~numba_fused.plan.Plan` of :func:`dropout_bias_act_backward` for inputs
    of this signature: inputs ``(grad_out, x, bias, mask)`` (None where absent),
    outputs ``(grad_x, grad_bias or None)``, per-call values :func:`rng_values`
    ``(seed, offset)`` (unused with a mask). GPU only; grad_out must not be empty."""
    rec = Recorder(_plan_inputs(grad_out, x, bias, mask))
    return rec.plan(_backward(grad_out, x, bias, p, 0, 0, activation, need_bias_grad, mask,
                              None, ex=rec))


def _plan_inputs(*objs):
    return [None if o is None else as_kernel_array(o, "input") for o in objs]


def _launch_bias_grad(partial, grad_bias, n_parts, n_cols, like, cfg):
    threads = cfg.threads or _default_threads(grad_bias.dtype, False)
    kernel = make_bias_grad_kernel(grad_bias.dtype, threads)
    by = threads // 32
    if partial is None:
        partial = _placeholder(like, "float32")
    kernel.launch((cdiv(n_cols, 32),), (32, by), stream_handle(like),
                  [partial, grad_bias, n_parts, n_cols, tile_stride(32, by, 1)])
