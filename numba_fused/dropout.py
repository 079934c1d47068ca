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
Element ``e`` of the flattened ``[M, N]`` array belongs to group ``g = e // 4``::

    (w0, w1, w2, w3) = Philox4x32-10(counter=(g_lo, g_hi, offset_lo, offset_hi),
                                     key=(seed_lo, seed_hi))
    word     = w[e % 4]
    u(e)     = uniform_from_bits(word) = (word >> 8) * 2**-24      (exact float32)
    keep[e]  = u(e) >= float32(p)

where ``x_lo``/``x_hi`` are the low/high 32-bit halves of the 64-bit integers ``g``,
``seed`` and ``offset``. The mask depends only on ``(seed, offset, e, p)``, never on
the launch configuration. The kernels evaluate ``u(e) >= float32(p)`` exactly as the
integer test ``(word >> 8) >= ceil(float32(p) * 2**24)`` (:func:`keep_threshold`);
:func:`dropout_keep_mask` is the host twin.

Design
------
The kernels are bound by instruction issue about as much as by memory: one Philox
call (ten rounds of two 32x32->64 multiplies) serves four elements. Philox is
emitted as 32-bit LLVM IR (:func:`philox_ir`; numba would widen it to 64-bit) with
its 20 round keys passed as kernel parameters (uniform registers); gelu and
gelu_tanh use branch-free forms (see "Activations" below); 16-bit data are unpacked
and packed two at a time (cvt.f32.f16 on both halves, cvt.rn.{f16x2,bf16x2}.f32).

A block is ``(block_x, block_y)`` threads over a strip of ``4 * block_x`` columns
and a range of ``rows_per_block`` rows. Each thread owns 4 consecutive columns
(one Philox call gives their 4 uniforms when ``N % 4 == 0``) and walks its rows
with stride ``block_y``, keeping ``unroll`` rows' loads in flight. On the vector
path (``N % 4 == 0``, 8-byte aligned data) the 4 elements travel as one uint64
(16-bit dtypes) or two (float32) and the uint8 mask as one uint32; otherwise a
scalar path loads element by element and draws the (at most two) Philox groups a
row-straddling chunk touches.

The backward pass sums each thread's grad_x per column over its rows, then the
block reduces them the way LightSeq does: a padded shared tile ``[block_y][4 *
block_x + pad]`` (pad chosen against bank conflicts of both its writes and reads),
per-column sums by ``shfl_down`` over the lanes holding one column, and one float32
partial row per row-block (xformers' ``N_BLOCKS_M`` partials), which a second small
kernel reduces into grad_bias.
"""

import functools
import math
from typing import NamedTuple

import numpy as np
from numba import cuda, types

from interop.dlpack import KernelArray, as_kernel_array, empty_like_lib, stream_handle

from . import activations, checks, dtypes
from .intrinsics import f32_as_u32, u32_as_f32
from .launch import SIMULATOR, Kernel, cdiv, sm_count
from .philox import philox4x32, philox4x32_np, split_u64, uniform_from_bits_np
from .reductions import FULL_MASK

__all__ = [
    "dropout_bias_act_forward", "dropout_bias_act_backward", "dropout_bias_act_ref",
    "dropout_keep_mask", "keep_threshold", "LaunchConfig", "make_forward_kernel",
    "make_backward_kernel", "make_bias_grad_kernel", "shipped_kernels", "tile_stride",
]

# ---------------------------------------------------------------------------
# Bit-level helpers with exact simulator twins. numba types every uint32 operation
# as 64-bit, so a Philox written in numba Python keeps its state and keys in 64-bit
# registers and multiplies with mul.lo.u64; ``philox_ir`` emits the rounds on i32
# values instead (mul.wide.u32 and 32-bit xors), which is what the RNG-bound
# kernels need. The kernels take the 20 round keys as parameters: ptxas then keeps
# them in uniform registers instead of 18 per-thread ones. numba keeps float16 as an
# i16 in LLVM.
# ---------------------------------------------------------------------------
_PHILOX_M0 = 0xD2511F53
_PHILOX_M1 = 0xCD9E8D57
_PHILOX_W0 = 0x9E3779B9
_PHILOX_W1 = 0xBB67AE85


def round_keys(seed):
    """The 20 Philox4x32-10 round keys of a 64-bit ``seed``, as Python ints:
    ``(k0 + i W0, k1 + i W1) mod 2**32`` for rounds i = 0..9, interleaved."""
    k0, k1 = split_u64(seed)
    out = []
    for i in range(10):
        out += [(k0 + i * _PHILOX_W0) & 0xFFFFFFFF, (k1 + i * _PHILOX_W1) & 0xFFFFFFFF]
    return out


def philox_ir(builder, counter, keys):
    """Emit Philox4x32-10 with llvmlite ``builder``: counter is four i32 values, keys the
    20 i32 round keys (:func:`round_keys`); returns the four i32 outputs. Used by the
    kernels' intrinsic and, in the tests, JIT-compiled for the host CPU and checked
    against the known answers."""
    from llvmlite import ir

    i32, i64 = ir.IntType(32), ir.IntType(64)
    m0, m1 = ir.Constant(i64, _PHILOX_M0), ir.Constant(i64, _PHILOX_M1)
    s32 = ir.Constant(i64, 32)
    c0, c1, c2, c3 = counter
    for r in range(10):
        k0, k1 = keys[2 * r], keys[2 * r + 1]
        # zext(i32) * constant in i64: NVPTX selects mul.wide.u32.
        p0 = builder.mul(builder.zext(c0, i64), m0)
        p1 = builder.mul(builder.zext(c2, i64), m1)
        hi0 = builder.trunc(builder.lshr(p0, s32), i32)
        hi1 = builder.trunc(builder.lshr(p1, s32), i32)
        c0, c1, c2, c3 = (builder.xor(builder.xor(hi1, c1), k0), builder.trunc(p1, i32),
                          builder.xor(builder.xor(hi0, c3), k1), builder.trunc(p0, i32))
    return c0, c1, c2, c3


if SIMULATOR:

    def _philox_words(c0, c1, c2, c3, keys):
        # The GPU intrinsic takes the low 32 bits of each counter word.
        return philox4x32(int(c0) & 0xFFFFFFFF, int(c1) & 0xFFFFFFFF, c2, c3, keys[0], keys[1])

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

    def _to_i32(builder, value):
        width = value.type.width
        if width > 32:
            return builder.trunc(value, ir.IntType(32))
        if width < 32:
            return builder.zext(value, ir.IntType(32))
        return value

    @intrinsic
    def _philox_words(typingctx, c0, c1, c2, c3, keys):
        counter = (c0, c1, c2, c3)
        if not all(isinstance(a, types.Integer) for a in counter):
            return None
        if not (isinstance(keys, types.BaseTuple) and len(keys) == 20
                and all(isinstance(k, types.Integer) for k in keys)):
            return None
        ret = types.UniTuple(types.uint32, 4)

        def codegen(context, builder, signature, llargs):
            ks = [_to_i32(builder, builder.extract_value(llargs[4], i)) for i in range(20)]
            out = philox_ir(builder, [_to_i32(builder, v) for v in llargs[:4]], ks)
            return context.make_tuple(builder, ret, out)

        return ret(c0, c1, c2, c3, keys), codegen

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
            out = builder.call(asm, [_to_i32(builder, args[0])])
            return context.make_tuple(builder, ret, [builder.extract_value(out, 0),
                                                     builder.extract_value(out, 1)])

        return ret(w), codegen


_F0 = np.float32(0.0)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_M16 = np.uint64(0xFFFF)
_M32 = np.uint64(0xFFFFFFFF)
_S16 = np.uint64(16)
_S32 = np.uint64(32)
_S48 = np.uint64(48)
_BYTE = np.uint32(0xFF)

MODE_NONE, MODE_PHILOX, MODE_MASK = 0, 1, 2
# Aim for about this many resident-block waves: enough blocks that the last wave's
# imbalance is small, few enough that the bias-grad partials stay ~1% of traffic.
_WAVES = 4
_MAX_GRID_Y = 65535


# ---------------------------------------------------------------------------
# Activations. gelu and gelu_tanh dominate the instruction count of these RNG-bound
# kernels when taken from libdevice (erff evaluates two polynomials and selects,
# tanhf similar): these branch-free forms need about half the instructions.
#   gelu:      Phi(z) = 1 - q (z >= 0) or q (z < 0), q = erfc(|z|/sqrt 2) / 2, with
#              erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a/2) (Numerical Recipes'
#              erfcc form): relative error of gelu below 3e-6 for every z, where the
#              textbook z/2 (1 + erf(z/sqrt 2)) cancels for z < 0;
#              gelu'(z) = Phi(z) + z phi(z), phi(z) = exp(-z^2/2) / sqrt(2 pi).
#   gelu_tanh: z (1 + tanh u) / 2 = z sigmoid(2u), u = sqrt(2/pi) (z + 0.044715 z^3).
# exp and 1/x are single ex2.approx.ftz / rcp.approx.ftz instructions (relative error
# ~2^-22; arguments here are never denormal).
# ---------------------------------------------------------------------------
_F1 = np.float32(1.0)
_SQRT1_2 = np.float32(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))
# P(t) coefficients, constant term first. Float32 outputs: Numerical Recipes' erfcc
# (degree 9, erfc relative error < 1.2e-7). 16-bit outputs, whose rounding step is
# 2^-12 .. 2^-9: a degree-7 fit of log(erfc(a) / t) + a^2 on a in [0, 9.5] (erfc
# relative error < 6.3e-7, gelu relative error < 2.5e-6), two FMAs fewer per element.
_ERFCC_F32 = tuple(np.float32(c) for c in (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
    -1.13520398, 1.48851587, -0.82215223, 0.17087277))
_ERFCC_16 = tuple(np.float32(c) for c in (
    -1.2655423879623413, 0.9996035695075989, 0.38762950897216797, -0.019121306017041206,
    0.3119036853313446, -0.9608943462371826, 0.7289305329322815, -0.1825098991394043))
_TANH_C0 = np.float32(2.0 * math.sqrt(2.0 / math.pi))
_TANH_C1 = np.float32(2.0 * math.sqrt(2.0 / math.pi) * 0.044715)
_TANH_C1X3 = np.float32(3.0 * 2.0 * math.sqrt(2.0 / math.pi) * 0.044715)

_LOG2E = np.float32(1.0 / math.log(2.0))
_HALF_LOG2E = np.float32(0.5 / math.log(2.0))
_TWO = np.float32(2.0)

if SIMULATOR:

    def _ex2(x):
        # ex2.approx saturates to inf silently; so does this.
        with np.errstate(over="ignore"):
            return np.float32(np.exp2(np.float32(x)))

    def _fast_rcp(x):
        return np.float32(_F1 / np.float32(x))

else:

    def _approx_f32(instruction):
        # One MUFU op: libdevice's fast_expf / fast_fdividef wrap theirs in
        # denormal fix-ups that these arguments never need.
        @intrinsic
        def op(typingctx, x):
            if x != types.float32:
                return None

            def codegen(context, builder, signature, args):
                fnty = ir.FunctionType(ir.FloatType(), [ir.FloatType()])
                asm = ir.InlineAsm(fnty, f"{instruction} $0, $1;", "=f,f")
                return builder.call(asm, [args[0]])

            return types.float32(types.float32), codegen

        return op

    _ex2 = _approx_f32("ex2.approx.ftz.f32")
    _fast_rcp = _approx_f32("rcp.approx.ftz.f32")


@cuda.jit(device=True, inline=True)
def _fast_exp(x):
    return _ex2(x * _LOG2E)


@functools.lru_cache(maxsize=None)
def _make_gelu(coeffs):
    """(gelu, gelu') device functions from P's coefficients (constant term first).

    With t' = t / 2 = 1 / (2 + a) and P'(t') = log2(e) P(2 t') (coefficients folded
    here), erfc(a) / 2 = t' 2^(P'(t') - log2(e) z^2 / 2): one FMA gives the
    denominator, no multiply is left around the exponential.
    """
    folded = tuple(np.float32(c * 2.0 ** i / math.log(2.0)) for i, c in enumerate(coeffs))
    top, rest = folded[-1], tuple(reversed(folded[:-1]))

    @cuda.jit(device=True, inline=True)
    def t_poly(z):
        t = _fast_rcp(abs(z) * _SQRT1_2 + _TWO)
        p = top
        for c in rest:
            p = c + t * p
        return t, p

    @cuda.jit(device=True, inline=True)
    def gelu(z):
        t, p = t_poly(z)
        q = t * _ex2(p - z * z * _HALF_LOG2E)
        return z * (_F1 - q) if z >= _F0 else z * q

    @cuda.jit(device=True, inline=True)
    def gelu_grad(z):
        t, p = t_poly(z)
        e = _ex2(-(z * z) * _HALF_LOG2E)
        q = t * _ex2(p) * e
        cdf = _F1 - q if z >= _F0 else q
        return cdf + z * e * _INV_SQRT_2PI

    return gelu, gelu_grad


@cuda.jit(device=True, inline=True)
def _sigmoid_2u(z, zz):
    # exp(-w) may overflow to inf: rcp(inf) = 0 is then the right sigmoid.
    w = z * (_TANH_C0 + _TANH_C1 * zz)
    return _fast_rcp(_F1 + _fast_exp(-w))


@cuda.jit(device=True, inline=True)
def _gelu_tanh_fast(z):
    return z * _sigmoid_2u(z, z * z)


@cuda.jit(device=True, inline=True)
def _gelu_tanh_fast_grad(z):
    zz = z * z
    s = _sigmoid_2u(z, zz)
    return s + z * s * (_F1 - s) * (_TANH_C0 + _TANH_C1X3 * zz)


def kernel_act(activation, dtype):
    """``(act, act_grad)`` device functions the dropout kernels use for storage
    ``dtype``: the branch-free forms above for gelu / gelu_tanh,
    :func:`activations.device_act` otherwise."""
    activations.check_activation(activation)
    if activation == "gelu":
        return _make_gelu(_ERFCC_F32 if dtype == "float32" else _ERFCC_16)
    if activation == "gelu_tanh":
        return _gelu_tanh_fast, _gelu_tanh_fast_grad
    return activations.device_act(activation)


# ---------------------------------------------------------------------------
# Device helpers shared by every kernel
# ---------------------------------------------------------------------------

@cuda.jit(device=True, inline=True)
def _philox_group(g, keys, off_lo, off_hi):
    """Philox words of element group ``g`` (int64): counter (g_lo, g_hi, off_lo, off_hi)."""
    return _philox_words(g, g >> 32, off_lo, off_hi, keys)


@cuda.jit(device=True, inline=True)
def _philox_at(g_base, gl, keys, off_lo, off_hi):
    """Philox words of element group ``g_base + gl`` (uint64 base, uint32 local index)."""
    g = g_base + gl
    return _philox_words(g, g >> _S32, off_lo, off_hi, keys)


@cuda.jit(device=True, inline=True)
def _kept(word, thr):
    """keep iff uniform_from_bits(word) >= float32(p), i.e. (word >> 8) >= t with
    t = ceil(float32(p) * 2^24) >= 1, i.e. word > thr with thr = 256 t - 1 (p = 1:
    thr = 2^32 - 1, nothing kept). Only called when p > 0."""
    return np.uint32(word) > thr


@cuda.jit(device=True, inline=True)
def _pick4(i, r0, r1, r2, r3):
    if i == 0:
        return r0
    if i == 1:
        return r1
    if i == 2:
        return r2
    return r3


@cuda.jit(device=True, inline=True)
def _pick8(i, a, b):
    if i < 4:
        return _pick4(i, a[0], a[1], a[2], a[3])
    return _pick4(i - 4, b[0], b[1], b[2], b[3])


@cuda.jit(device=True, inline=True)
def _straddling_words(e0, keys, off_lo, off_hi):
    """Philox words of elements e0 .. e0+3 when e0 need not be a multiple of 4: the
    chunk then spans groups e0 // 4 and e0 // 4 + 1."""
    s = e0 & 3
    g = e0 >> 2
    a = _philox_group(g, keys, off_lo, off_hi)
    if s == 0:
        return a
    b = _philox_group(g + 1, keys, off_lo, off_hi)
    return _pick8(s, a, b), _pick8(s + 1, a, b), _pick8(s + 2, a, b), _pick8(s + 3, a, b)


@cuda.jit(device=True, inline=True)
def _mask_word(k0, k1, k2, k3):
    """Four keep flags as the little-endian bytes of a uint32 (byte i = element i)."""
    return (np.uint32(k0) | (np.uint32(k1) << np.uint32(8)) | (np.uint32(k2) << np.uint32(16))
            | (np.uint32(k3) << np.uint32(24)))


@cuda.jit(device=True, inline=True)
def _mask_byte(w, i):
    return ((np.uint32(w) >> np.uint32(8 * i)) & _BYTE) != np.uint32(0)


# Vector-path word access: a chunk of 4 elements is one uint64 (16-bit dtypes) or two
# (float32). ``g`` is a uint32 chunk index: an unsigned index skips numba's negative-
# index wrap-around, and a 32-bit one makes each address a single IMAD.WIDE.U32.

@cuda.jit(device=True, inline=True)
def _load_w1(a, g):
    return a[g], _U0


@cuda.jit(device=True, inline=True)
def _load_w2(a, g):
    i = g + g
    return a[i], a[i + _U1]


@cuda.jit(device=True, inline=True)
def _store_w1(a, g, w0, w1):
    a[g] = w0


@cuda.jit(device=True, inline=True)
def _store_w2(a, g, w0, w1):
    i = g + g
    a[i] = w0
    a[i + _U1] = w1


@cuda.jit(device=True, inline=True)
def _unpack_f32(w0, w1):
    return (u32_as_f32(w0 & _M32), u32_as_f32(w0 >> _S32),
            u32_as_f32(w1 & _M32), u32_as_f32(w1 >> _S32))


@cuda.jit(device=True, inline=True)
def _pack_f32(v0, v1, v2, v3):
    return (np.uint64(f32_as_u32(v0)) | (np.uint64(f32_as_u32(v1)) << _S32),
            np.uint64(f32_as_u32(v2)) | (np.uint64(f32_as_u32(v3)) << _S32))


@cuda.jit(device=True, inline=True)
def _unpack_f16(w0, w1):
    v0, v1 = _unpack_h2(w0 & _M32)
    v2, v3 = _unpack_h2(w0 >> _S32)
    return v0, v1, v2, v3


@cuda.jit(device=True, inline=True)
def _pack_f16(v0, v1, v2, v3):
    return np.uint64(_pack_h2(v0, v1)) | (np.uint64(_pack_h2(v2, v3)) << _S32), _U0


@cuda.jit(device=True, inline=True)
def _b2f(bits):
    return dtypes.bf16_bits_to_f32(bits & _M16)


@cuda.jit(device=True, inline=True)
def _unpack_bf16(w0, w1):
    return _b2f(w0), _b2f(w0 >> _S16), _b2f(w0 >> _S32), _b2f(w0 >> _S48)


@cuda.jit(device=True, inline=True)
def _pack_bf16(v0, v1, v2, v3):
    return np.uint64(_pack_bf2(v0, v1)) | (np.uint64(_pack_bf2(v2, v3)) << _S32), _U0


# dtype -> (load, store, unpack, pack) of one 4-element chunk
_VEC = {
    "float32": (_load_w2, _store_w2, _unpack_f32, _pack_f32),
    "float16": (_load_w1, _store_w1, _unpack_f16, _pack_f16),
    "bfloat16": (_load_w1, _store_w1, _unpack_bf16, _pack_bf16),
}


@functools.lru_cache(maxsize=None)
def _tile_reducer(store):
    """Device function ``reduce(tile, stride, per, out, out_base, col0, n_cols)``.

    The block's ``(bx, by) = (blockDim.x, blockDim.y)`` threads (powers of two, ``bx *
    by`` a multiple of 32) hold a shared float32 tile of ``by`` rows with row stride
    ``stride``; position ``p < per * bx`` of row ``y`` holds the partial sum that thread
    ``(p % bx, y)`` made for its column ``(p % bx) * per + p // bx``. For each position,
    the ``L = min(by, 32)`` lanes of a warp that share it sum rows ``yl, yl + L, ...``
    and combine by ``shfl_down``; lane ``yl == 0`` stores the column sum with ``store``
    at ``out[out_base + col0 + column]`` when ``col0 + column < n_cols``. Every thread
    of the block must call it (it contains warp shuffles).
    """

    @cuda.jit(device=True, inline=True)
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


def _default_unroll(dtype, backward, need_x):
    """Rows in flight per thread on the vector path: about 32 bytes of loads per
    thread (4 x 8-byte words for 16-bit data, fewer rows for float32 or when the
    backward pass also reads x)."""
    row_bytes = (16 if dtype == "float32" else 8) * (2 if backward and need_x else 1)
    return max(1, 32 // row_bytes)


def _check_threads(threads):
    if threads not in (32, 64, 128, 256, 512, 1024):
        raise ValueError(f"threads must be a power of two in [32, 1024], got {threads!r}")


# ---------------------------------------------------------------------------
# Kernel factories
# ---------------------------------------------------------------------------

def _array(dtype_name, vec):
    if vec:
        return types.Array(types.uint64, 1, "C")
    return types.Array(dtypes.numba_storage_type(dtype_name), 1, "C")


_MASK_VEC = types.Array(types.uint32, 1, "C")
_MASK_SCALAR = types.Array(types.uint8, 1, "C")
_F32_ARRAY = types.Array(types.float32, 1, "C")
# 20 round keys, offset_lo, offset_hi, keep threshold.
_RNG_ARGS = (types.uint32,) * 23


def _check_unroll(unroll):
    if unroll not in (1, 2, 4):
        raise ValueError(f"unroll must be 1, 2 or 4, got {unroll!r}")
    return unroll


@functools.lru_cache(maxsize=None)
def make_forward_kernel(dtype, activation, vec, threads=256, unroll=None):
    """Forward kernel: ``y = dropout(act(x + bias), p)`` (and optionally the uint8 mask).

    dtype: 'float32' | 'float16' | 'bfloat16'; activation: one of ``ACTIVATIONS``;
    vec: vector path (``N % 4 == 0``, 8-byte aligned arrays viewed as uint64 words, the
    mask as uint32 words) or scalar path; threads: block size the kernel is compiled
    for; unroll: rows in flight per thread on the vector path (1, 2 or 4; None: the
    default for the dtype). The scalar path always uses 1.
    """
    activations.check_activation(activation)
    _check_threads(threads)
    unroll = _check_unroll(_default_unroll(dtype, False, False) if unroll is None else unroll)
    if not vec:
        unroll = 1
    act, _ = kernel_act(activation, dtype)
    u2, u4 = unroll >= 2, unroll >= 4

    @cuda.jit(device=True, inline=True)
    def math4(v0, v1, v2, v3, b0, b1, b2, b3, k0, k1, k2, k3, scale):
        # A select, not a multiply by a 0/1 mask: dropped elements are exact zeros
        # even where act(x + b) is inf or NaN. The activation is computed for every
        # element first: branching around it per element costs more than it saves.
        a0 = act(v0 + b0) * scale
        a1 = act(v1 + b1) * scale
        a2 = act(v2 + b2) * scale
        a3 = act(v3 + b3) * scale
        return (a0 if k0 else _F0), (a1 if k1 else _F0), (a2 if k2 else _F0), (a3 if k3 else _F0)

    if vec:
        load_w, store_w, unpack, pack = _VEC[dtype]

        @cuda.jit(device=True, inline=True)
        def chunk(y, mask, g_base, g, xw0, xw1, b0, b1, b2, b3, keys, off_lo, off_hi, thr,
                  scale, dropout, write_mask):
            v0, v1, v2, v3 = unpack(xw0, xw1)
            k0 = k1 = k2 = k3 = True
            if dropout:
                w0, w1, w2, w3 = _philox_at(g_base, g, keys, off_lo, off_hi)
                k0 = _kept(w0, thr)
                k1 = _kept(w1, thr)
                k2 = _kept(w2, thr)
                k3 = _kept(w3, thr)
            a0, a1, a2, a3 = math4(v0, v1, v2, v3, b0, b1, b2, b3, k0, k1, k2, k3, scale)
            o0, o1 = pack(a0, a1, a2, a3)
            store_w(y, g, o0, o1)
            if write_mask:
                mask[g] = _mask_word(k0, k1, k2, k3)

        def kernel(x, bias, y, mask, n_rows, n_cols, rows_per_block, g_base,
                   k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, dropout, write_mask):
            """Vector-path forward of rows [by * rows_per_block, ...) of a column strip.

            x, y: [M * N * itemsize / 8] uint64 words of the flattened input / output;
            bias: [N * itemsize / 8] uint64 words (read iff has_bias); mask: [M * N / 4]
            uint32 words, byte i of word g = keep flag of element 4 g + i (written iff
            write_mask); n_rows: rows of this launch, n_cols = N (N % 4 == 0); g_base:
            element group of the launch's first element (row pieces of tensors with 2^31
            or more groups, see _pieces); k0..k19: Philox round keys (round_keys(seed));
            off_lo, off_hi: counter words 2-3; thr = 256 t - 1 with t = keep_threshold(p),
            an element is kept iff its Philox word > thr; scale = 1 / (1 - p); dropout:
            draw Philox (False: p = 0, every element kept).
            Thread (tx, ty) of block (bx, by) owns chunk j = bx * blockDim.x + tx, i.e.
            columns 4 j .. 4 j + 3, of rows by * rows_per_block + ty + i * blockDim.y;
            the chunk of row r is element group g_base + r * N / 4 + j.
            """
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            # Every index of one launch is below 2^31: 32-bit arithmetic throughout.
            chunks = np.uint32(n_cols >> 2)
            j = np.uint32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
            if j >= chunks:
                return
            b0 = b1 = b2 = b3 = _F0
            if has_bias:
                bw0, bw1 = load_w(bias, j)
                b0, b1, b2, b3 = unpack(bw0, bw1)
            step = np.uint32(cuda.blockDim.y)
            gstep = np.uint32(step * chunks)
            row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
            row_end = np.uint32(min(n_rows, row0 + rows_per_block))
            r = np.uint32(row0 + cuda.threadIdx.y)
            ga = np.uint32(r * chunks + j)
            while r < row_end:
                # All loads of the batch first: `unroll` loads in flight per thread.
                xa0, xa1 = load_w(x, ga)
                gb = gc = gd = ga
                lb = lc = ld = False
                xb0 = xb1 = xc0 = xc1 = xd0 = xd1 = _U0
                if u2:
                    lb = np.uint32(r + step) < row_end
                    gb = np.uint32(ga + gstep)
                    if lb:
                        xb0, xb1 = load_w(x, gb)
                if u4:
                    lc = np.uint32(r + 2 * step) < row_end
                    ld = np.uint32(r + 3 * step) < row_end
                    gc = np.uint32(gb + gstep)
                    gd = np.uint32(gc + gstep)
                    if lc:
                        xc0, xc1 = load_w(x, gc)
                    if ld:
                        xd0, xd1 = load_w(x, gd)
                chunk(y, mask, g_base, ga, xa0, xa1, b0, b1, b2, b3, keys, off_lo, off_hi, thr,
                      scale, dropout, write_mask)
                if lb:
                    chunk(y, mask, g_base, gb, xb0, xb1, b0, b1, b2, b3, keys, off_lo, off_hi,
                          thr, scale, dropout, write_mask)
                if lc:
                    chunk(y, mask, g_base, gc, xc0, xc1, b0, b1, b2, b3, keys, off_lo, off_hi,
                          thr, scale, dropout, write_mask)
                if ld:
                    chunk(y, mask, g_base, gd, xd0, xd1, b0, b1, b2, b3, keys, off_lo, off_hi,
                          thr, scale, dropout, write_mask)
                r = np.uint32(r + unroll * step)
                ga = np.uint32(ga + unroll * gstep)

        mask_t = _MASK_VEC
    else:
        load = dtypes.loader(dtype)
        store = dtypes.storer(dtype)

        def kernel(x, bias, y, mask, n_rows, n_cols, rows_per_block,
                   k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, dropout, write_mask):
            """Scalar-path forward (any N, any alignment).

            x, y: [M * N] elements; bias: [N] (read iff has_bias); mask: [M * N] uint8,
            1 = kept (written iff write_mask); other arguments as the vector path. Thread
            (tx, ty) owns columns c = 4 j .. 4 j + 3 (those < N) of its rows; the chunk
            e0 = r * N + 4 j .. e0 + 3 may straddle two Philox groups.
            """
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            chunks = (n_cols + 3) >> 2
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            if j >= chunks:
                return
            c = 4 * j
            nv = min(4, n_cols - c)
            b0 = b1 = b2 = b3 = _F0
            if has_bias:
                b0 = load(bias, c)
                b1 = load(bias, c + 1) if nv > 1 else _F0
                b2 = load(bias, c + 2) if nv > 2 else _F0
                b3 = load(bias, c + 3) if nv > 3 else _F0
            row0 = cuda.blockIdx.y * rows_per_block
            row_end = min(n_rows, row0 + rows_per_block)
            r = row0 + cuda.threadIdx.y
            while r < row_end:
                e0 = r * n_cols + c
                v0 = load(x, e0)
                v1 = load(x, e0 + 1) if nv > 1 else _F0
                v2 = load(x, e0 + 2) if nv > 2 else _F0
                v3 = load(x, e0 + 3) if nv > 3 else _F0
                m0 = m1 = m2 = m3 = True
                if dropout:
                    w0, w1, w2, w3 = _straddling_words(e0, keys, off_lo, off_hi)
                    m0 = _kept(w0, thr)
                    m1 = _kept(w1, thr)
                    m2 = _kept(w2, thr)
                    m3 = _kept(w3, thr)
                a0, a1, a2, a3 = math4(v0, v1, v2, v3, b0, b1, b2, b3, m0, m1, m2, m3, scale)
                store(y, e0, a0)
                if nv > 1:
                    store(y, e0 + 1, a1)
                if nv > 2:
                    store(y, e0 + 2, a2)
                if nv > 3:
                    store(y, e0 + 3, a3)
                if write_mask:
                    mask[e0] = np.uint8(m0)
                    if nv > 1:
                        mask[e0 + 1] = np.uint8(m1)
                    if nv > 2:
                        mask[e0 + 2] = np.uint8(m2)
                    if nv > 3:
                        mask[e0 + 3] = np.uint8(m3)
                r += cuda.blockDim.y

        mask_t = _MASK_SCALAR

    data = _array(dtype, vec)
    base = (types.uint64,) if vec else ()
    argtypes = (data, data, data, mask_t, types.int64, types.int64, types.int64, *base,
                *_RNG_ARGS, types.float32, types.boolean, types.boolean, types.boolean)
    path = f"vec{unroll}" if vec else "scalar"
    return Kernel(f"dropout_fwd_{dtype}_{activation}_{path}_t{threads}", kernel, argtypes)


@functools.lru_cache(maxsize=None)
def make_backward_kernel(dtype, activation, vec, threads=256, unroll=None):
    """Backward kernel: grad_x and per-row-block float32 partial sums of grad_x per column.

    Arguments as :func:`make_forward_kernel`. For activation 'none' the kernel never
    reads x (nor bias: act' = 1).
    """
    activations.check_activation(activation)
    _check_threads(threads)
    need_x = activation != "none"
    unroll = _check_unroll(_default_unroll(dtype, True, need_x) if unroll is None else unroll)
    if not vec:
        unroll = 1
    _, act_grad = kernel_act(activation, dtype)
    u2, u4 = unroll >= 2, unroll >= 4
    tile_n = _tile_floats(threads, 4)
    reduce = _tile_reducer(dtypes.storer("float32"))

    @cuda.jit(device=True, inline=True)
    def grad1(go, v, b, keep, scale):
        # Computed, then selected (see the forward's math4).
        g = go * scale
        if need_x:
            g = g * act_grad(v + b)
        return g if keep else _F0

    @cuda.jit(device=True, inline=True)
    def bias_partials(tile, stride, acc0, acc1, acc2, acc3, partial, n_cols):
        # Position k * blockDim.x + tx holds column 4 tx + k: each of the four writes
        # is then 32 consecutive floats of one tile row for a full-width warp.
        bx = cuda.blockDim.x
        base = cuda.threadIdx.y * stride + cuda.threadIdx.x
        tile[base] = acc0
        tile[base + bx] = acc1
        tile[base + 2 * bx] = acc2
        tile[base + 3 * bx] = acc3
        cuda.syncthreads()
        reduce(tile, stride, 4, partial, cuda.blockIdx.y * n_cols, cuda.blockIdx.x * 4 * bx,
               n_cols)

    if vec:
        load_w, store_w, unpack, pack = _VEC[dtype]

        @cuda.jit(device=True, inline=True)
        def load_row(grad, x, mask, g, mode):
            gw0, gw1 = load_w(grad, g)
            xw0 = xw1 = _U0
            if need_x:
                xw0, xw1 = load_w(x, g)
            mw = np.uint32(0)
            if mode == MODE_MASK:
                mw = mask[g]
            return gw0, gw1, xw0, xw1, mw

        @cuda.jit(device=True, inline=True)
        def chunk(grad_x, g_base, g, words, b0, b1, b2, b3, keys, off_lo, off_hi, thr, scale,
                  mode):
            gw0, gw1, xw0, xw1, mw = words
            d0, d1, d2, d3 = unpack(gw0, gw1)
            v0 = v1 = v2 = v3 = _F0
            if need_x:
                v0, v1, v2, v3 = unpack(xw0, xw1)
            k0 = k1 = k2 = k3 = True
            if mode == MODE_PHILOX:
                w0, w1, w2, w3 = _philox_at(g_base, g, keys, off_lo, off_hi)
                k0 = _kept(w0, thr)
                k1 = _kept(w1, thr)
                k2 = _kept(w2, thr)
                k3 = _kept(w3, thr)
            elif mode == MODE_MASK:
                k0 = _mask_byte(mw, 0)
                k1 = _mask_byte(mw, 1)
                k2 = _mask_byte(mw, 2)
                k3 = _mask_byte(mw, 3)
            a0 = grad1(d0, v0, b0, k0, scale)
            a1 = grad1(d1, v1, b1, k1, scale)
            a2 = grad1(d2, v2, b2, k2, scale)
            a3 = grad1(d3, v3, b3, k3, scale)
            o0, o1 = pack(a0, a1, a2, a3)
            store_w(grad_x, g, o0, o1)
            return a0, a1, a2, a3

        def kernel(grad, x, bias, grad_x, mask, partial, n_rows, n_cols, rows_per_block,
                   tile_stride, g_base, k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, mode, bias_grad):
            """Vector-path backward of rows [by * rows_per_block, ...) of a column strip.

            grad, x, grad_x: [M * N * itemsize / 8] uint64 words of grad_out, x (read iff
            the activation is not 'none') and grad_x; bias: [N * itemsize / 8] words (read
            iff has_bias and the activation is not 'none'); mask: [M * N / 4] uint32 words
            (read iff mode == 2); partial: [gridDim.y * N] float32, row by of it receives
            the sum over this block's rows of grad_x (written iff bias_grad); tile_stride:
            tile_stride(blockDim.x, blockDim.y, 4); mode: 0 keep all (p = 0), 1 Philox
            mask, 2 stored mask; other arguments as the forward kernel.
            """
            tile = cuda.shared.array(tile_n, np.float32)
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            chunks = np.uint32(n_cols >> 2)
            j = np.uint32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
            acc0 = acc1 = acc2 = acc3 = _F0
            if j < chunks:
                b0 = b1 = b2 = b3 = _F0
                if need_x and has_bias:
                    bw0, bw1 = load_w(bias, j)
                    b0, b1, b2, b3 = unpack(bw0, bw1)
                step = np.uint32(cuda.blockDim.y)
                gstep = np.uint32(step * chunks)
                row0 = np.uint32(cuda.blockIdx.y * rows_per_block)
                row_end = np.uint32(min(n_rows, row0 + rows_per_block))
                r = np.uint32(row0 + cuda.threadIdx.y)
                ga = np.uint32(r * chunks + j)
                while r < row_end:
                    wa = load_row(grad, x, mask, ga, mode)
                    gb = gc = gd = ga
                    lb = lc = ld = False
                    wb = wc = wd = wa
                    if u2:
                        lb = np.uint32(r + step) < row_end
                        gb = np.uint32(ga + gstep)
                        if lb:
                            wb = load_row(grad, x, mask, gb, mode)
                    if u4:
                        lc = np.uint32(r + 2 * step) < row_end
                        ld = np.uint32(r + 3 * step) < row_end
                        gc = np.uint32(gb + gstep)
                        gd = np.uint32(gc + gstep)
                        if lc:
                            wc = load_row(grad, x, mask, gc, mode)
                        if ld:
                            wd = load_row(grad, x, mask, gd, mode)
                    a0, a1, a2, a3 = chunk(grad_x, g_base, ga, wa, b0, b1, b2, b3, keys, off_lo,
                                           off_hi, thr, scale, mode)
                    acc0 += a0
                    acc1 += a1
                    acc2 += a2
                    acc3 += a3
                    if lb:
                        a0, a1, a2, a3 = chunk(grad_x, g_base, gb, wb, b0, b1, b2, b3, keys,
                                               off_lo, off_hi, thr, scale, mode)
                        acc0 += a0
                        acc1 += a1
                        acc2 += a2
                        acc3 += a3
                    if lc:
                        a0, a1, a2, a3 = chunk(grad_x, g_base, gc, wc, b0, b1, b2, b3, keys,
                                               off_lo, off_hi, thr, scale, mode)
                        acc0 += a0
                        acc1 += a1
                        acc2 += a2
                        acc3 += a3
                    if ld:
                        a0, a1, a2, a3 = chunk(grad_x, g_base, gd, wd, b0, b1, b2, b3, keys,
                                               off_lo, off_hi, thr, scale, mode)
                        acc0 += a0
                        acc1 += a1
                        acc2 += a2
                        acc3 += a3
                    r = np.uint32(r + unroll * step)
                    ga = np.uint32(ga + unroll * gstep)
            if bias_grad:
                bias_partials(tile, tile_stride, acc0, acc1, acc2, acc3, partial, n_cols)

        mask_t = _MASK_VEC
    else:
        load = dtypes.loader(dtype)
        store = dtypes.storer(dtype)

        def kernel(grad, x, bias, grad_x, mask, partial, n_rows, n_cols, rows_per_block,
                   tile_stride, k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                   k10, k11, k12, k13, k14, k15, k16, k17, k18, k19,
                   off_lo, off_hi, thr, scale, has_bias, mode, bias_grad):
            """Scalar-path backward (any N, any alignment).

            grad, x, grad_x: [M * N] elements; bias: [N]; mask: [M * N] uint8 (read iff
            mode == 2); other arguments as the vector path. Thread (tx, ty) owns columns
            4 j .. 4 j + 3 (those < N) of its rows.
            """
            tile = cuda.shared.array(tile_n, np.float32)
            keys = (k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
                    k10, k11, k12, k13, k14, k15, k16, k17, k18, k19)
            chunks = (n_cols + 3) >> 2
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            acc0 = acc1 = acc2 = acc3 = _F0
            if j < chunks:
                c = 4 * j
                nv = min(4, n_cols - c)
                b0 = b1 = b2 = b3 = _F0
                if need_x and has_bias:
                    b0 = load(bias, c)
                    b1 = load(bias, c + 1) if nv > 1 else _F0
                    b2 = load(bias, c + 2) if nv > 2 else _F0
                    b3 = load(bias, c + 3) if nv > 3 else _F0
                row0 = cuda.blockIdx.y * rows_per_block
                row_end = min(n_rows, row0 + rows_per_block)
                r = row0 + cuda.threadIdx.y
                while r < row_end:
                    e0 = r * n_cols + c
                    d0 = load(grad, e0)
                    d1 = load(grad, e0 + 1) if nv > 1 else _F0
                    d2 = load(grad, e0 + 2) if nv > 2 else _F0
                    d3 = load(grad, e0 + 3) if nv > 3 else _F0
                    v0 = v1 = v2 = v3 = _F0
                    if need_x:
                        v0 = load(x, e0)
                        v1 = load(x, e0 + 1) if nv > 1 else _F0
                        v2 = load(x, e0 + 2) if nv > 2 else _F0
                        v3 = load(x, e0 + 3) if nv > 3 else _F0
                    m0 = m1 = m2 = m3 = True
                    if mode == MODE_PHILOX:
                        w0, w1, w2, w3 = _straddling_words(e0, keys, off_lo, off_hi)
                        m0 = _kept(w0, thr)
                        m1 = _kept(w1, thr)
                        m2 = _kept(w2, thr)
                        m3 = _kept(w3, thr)
                    elif mode == MODE_MASK:
                        m0 = mask[e0] != 0
                        m1 = mask[e0 + 1] != 0 if nv > 1 else False
                        m2 = mask[e0 + 2] != 0 if nv > 2 else False
                        m3 = mask[e0 + 3] != 0 if nv > 3 else False
                    a0 = grad1(d0, v0, b0, m0, scale)
                    a1 = grad1(d1, v1, b1, m1, scale)
                    a2 = grad1(d2, v2, b2, m2, scale)
                    a3 = grad1(d3, v3, b3, m3, scale)
                    store(grad_x, e0, a0)
                    acc0 += a0
                    if nv > 1:
                        store(grad_x, e0 + 1, a1)
                        acc1 += a1
                    if nv > 2:
                        store(grad_x, e0 + 2, a2)
                        acc2 += a2
                    if nv > 3:
                        store(grad_x, e0 + 3, a3)
                        acc3 += a3
                    r += cuda.blockDim.y
            if bias_grad:
                bias_partials(tile, tile_stride, acc0, acc1, acc2, acc3, partial, n_cols)

        mask_t = _MASK_SCALAR

    data = _array(dtype, vec)
    base = (types.uint64,) if vec else ()
    argtypes = (data, data, data, data, mask_t, _F32_ARRAY, types.int64, types.int64,
                types.int64, types.int64, *base, *_RNG_ARGS, types.float32, types.boolean,
                types.int32, types.boolean)
    path = f"vec{unroll}" if vec else "scalar"
    return Kernel(f"dropout_bwd_{dtype}_{activation}_{path}_t{threads}", kernel, argtypes)


@functools.lru_cache(maxsize=None)
def make_bias_grad_kernel(dtype, threads=256):
    """Reduction of the backward kernel's partials: ``grad_bias[c] = sum_i partial[i, c]``.

    Launched with blocks of (32, threads // 32); block bx covers columns 32 bx .. 32 bx + 31.
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
    return Kernel(f"dropout_bias_grad_{dtype}_t{threads}", kernel, argtypes)


def shipped_kernels():
    """Every kernel the launchers pick with the default configuration."""
    for dt in dtypes.DTYPES:
        for act in activations.ACTIVATIONS:
            for vec in (True, False):
                yield make_forward_kernel(dt, act, vec)
                yield make_backward_kernel(dt, act, vec)
        yield make_bias_grad_kernel(dt)


# ---------------------------------------------------------------------------
# Host side: thresholds, references
# ---------------------------------------------------------------------------

def keep_threshold(p):
    """``ceil(float32(p) * 2**24)``: an element is kept iff ``(word >> 8) >= threshold``,
    which is exactly ``uniform_from_bits(word) >= float32(p)``. 2**24 for p = 1 (none kept)."""
    p32 = float(np.float32(p))
    return int(math.ceil(p32 * (1 << 24)))


def _dropout_scale(p):
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


def dropout_keep_mask(shape, p, seed=0, offset=0):
    """Host (NumPy) keep mask of the op: bool array of ``shape`` (the input's shape;
    the element index is the C-order linear index), True where kept."""
    shape = tuple(int(s) for s in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    numel = int(np.prod(shape, dtype=np.int64))
    if p <= 0.0:
        return np.ones(shape, dtype=bool)
    n_groups = cdiv(numel, 4)
    g = np.arange(n_groups, dtype=np.uint64)
    seed_lo, seed_hi = split_u64(seed)
    off_lo, off_hi = split_u64(offset)
    counter = np.empty((n_groups, 4), dtype=np.uint32)
    counter[:, 0] = (g & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    counter[:, 1] = (g >> np.uint64(32)).astype(np.uint32)
    counter[:, 2] = off_lo
    counter[:, 3] = off_hi
    words = philox4x32_np(counter, (seed_lo, seed_hi)).reshape(-1)[:numel]
    u = uniform_from_bits_np(words)
    return (u >= np.float32(p)).reshape(shape)


def _host64(a, name):
    """float64 NumPy copy of a torch tensor / CuPy / numba / NumPy array."""
    if a is None:
        return None
    if hasattr(a, "detach"):
        return a.detach().to("cpu").double().numpy()
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return np.asarray(a.get(), dtype=np.float64)
    if hasattr(a, "copy_to_host"):
        return np.asarray(a.copy_to_host(), dtype=np.float64)
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: cannot read {type(a).__name__} as float64") from exc


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
    x64 = _host64(x, "x")
    b64 = _host64(bias, "bias")
    z = x64 if b64 is None else x64 + b64
    keep = dropout_keep_mask(x64.shape, p, seed, offset) if mask is None else _host_bool(mask)
    scale = _dropout_scale(p)
    y = np.where(keep, activations.act_ref(activation, z) * scale, 0.0)
    if grad_out is None:
        return y
    g64 = _host64(grad_out, "grad_out")
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

    threads: threads per block (power of two, 32..1024); block_x: threads along a row,
    each owning 4 columns (power of two <= min(32, threads)); rows_per_block: rows of
    one block (the backward pass writes one bias-grad partial row per row-block);
    unroll: rows in flight per thread on the vector path (1, 2 or 4).
    """

    threads: int = 256
    block_x: int = None
    rows_per_block: int = None
    unroll: int = None


def _pow2_ceil(n):
    return 1 << max(0, int(n - 1).bit_length())


class _Plan(NamedTuple):
    grid: tuple
    block: tuple
    rows_per_block: int
    n_row_blocks: int


def _plan(n_rows, n_cols, vec, unroll, cfg, device):
    threads = cfg.threads
    chunks = cdiv(n_cols, 4)
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
        target = sm_count(device) * max(1, 2048 // threads) * _WAVES
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
    _check_threads(config.threads)
    if config.unroll not in (None, 1, 2, 4):
        raise ValueError(f"config.unroll must be 1, 2 or 4, got {config.unroll!r}")
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


# Four-element groups per vector-path launch: below 2^31, every index a kernel forms
# (words of float32 data are 2 per group) fits 32-bit arithmetic. Larger tensors are
# launched in row pieces.
_MAX_GROUPS = 2 ** 31


def _pieces(n_rows, n_cols, vec):
    """(first row, rows) of each launch."""
    if not vec:
        return [(0, n_rows)]
    per = (_MAX_GROUPS - 1) // (n_cols // 4)
    if per < 1:
        raise ValueError(f"the last dimension must be below {4 * (_MAX_GROUPS - 1)}, got {n_cols}")
    return [(r, min(per, n_rows - r)) for r in range(0, n_rows, per)]


def _rows_arg(arr, dtype, vec, like, row0, rows, n_cols):
    """Kernel argument for rows [row0, row0 + rows) of a [M, N] data array (None ->
    placeholder): uint64 words on the vector path, the whole flat array otherwise."""
    if vec:
        if arr is None:
            return _placeholder(like, "uint64")
        per_row = n_cols * arr.itemsize // 8
        return _words(arr, "uint64", rows * per_row, row0 * per_row)
    if arr is None:
        return _placeholder(like, dtypes.STORAGE[dtype].name)
    return _flat(arr)


def _bias_arg(b, dtype, vec, like):
    if b is None:
        return _placeholder(like, "uint64" if vec else dtypes.STORAGE[dtype].name)
    if vec:
        return _words(b, "uint64", b.size * b.itemsize // 8)
    return _flat(b)


def _mask_rows(arr, vec, like, row0, rows, n_cols):
    if vec:
        if arr is None:
            return _placeholder(like, "uint32")
        return _words(arr, "uint32", rows * n_cols // 4, row0 * n_cols // 4)
    return _placeholder(like, "uint8") if arr is None else _words(arr, "uint8", arr.size)


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


def _rng_args(seed, offset, p):
    off_lo, off_hi = split_u64(offset)
    # The kernels keep an element iff word > 256 t - 1 (t >= 1 whenever p > 0; unused at p = 0).
    return [*round_keys(seed), off_lo, off_hi, max(0, 256 * keep_threshold(p) - 1)]


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------

def dropout_bias_act_forward(x, bias=None, p=0.0, seed=0, offset=0, activation="none", *,
                             return_mask=False, config=None):
    """``y = dropout(act(x + bias), p)`` over the last dimension of ``x``.

    x: [..., N] float32 / float16 / bfloat16, C-contiguous, on the GPU; bias: [N] of the
    same dtype or None; p: drop probability in [0, 1]; seed, offset: integers in
    [0, 2**64) keying the Philox mask (module docstring); activation: 'none', 'relu',
    'gelu', 'gelu_tanh', 'squared_relu' or 'leaky_relu'.
    return_mask: also return the uint8 keep mask (1 = kept, shape of x) for
    :func:`dropout_bias_act_backward`'s ``mask=`` (LightSeq's variant: memory instead
    of recomputation; the mask is the same one the Philox path regenerates).
    config: optional :class:`LaunchConfig`.

    Returns y (same shape, dtype and library as x), or ``(y, mask)``.
    """
    x, p, seed, offset = _check_common("x", x, p, seed, offset, activation)
    b = _check_bias(bias, x)
    _check_devices(x, "x", (b, "bias"))
    cfg = _config(config)
    y = empty_like_lib(x, x.shape, x.dtype)
    mask = empty_like_lib(x, x.shape, "uint8") if return_mask else None
    if x.size == 0:
        return (y.owner, mask.owner) if return_mask else y.owner
    n_cols = x.shape[-1]
    n_rows = x.size // n_cols
    vec = (n_cols % 4 == 0 and _aligned(x, 8) and _aligned(y, 8) and _aligned(b, 8)
           and _aligned(mask, 4))
    unroll = (cfg.unroll or _default_unroll(x.dtype, False, False)) if vec else 1
    kernel = make_forward_kernel(x.dtype, activation, vec, cfg.threads, unroll)
    stream = stream_handle(x)
    tail = [*_rng_args(seed, offset, p), _dropout_scale(p), b is not None, p > 0.0, return_mask]
    bias_arg = _bias_arg(b, x.dtype, vec, x)
    for row0, rows in _pieces(n_rows, n_cols, vec):
        plan = _plan(rows, n_cols, vec, unroll, cfg, x.device)
        args = [_rows_arg(x, x.dtype, vec, x, row0, rows, n_cols), bias_arg,
                _rows_arg(y, x.dtype, vec, x, row0, rows, n_cols),
                _mask_rows(mask, vec, x, row0, rows, n_cols), rows, n_cols, plan.rows_per_block]
        if vec:
            args.append(row0 * (n_cols // 4))
        kernel.launch(plan.grid, plan.block, stream, args + tail)
    return (y.owner, mask.owner) if return_mask else y.owner


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
    grad_x = empty_like_lib(g, g.shape, g.dtype)
    grad_bias = empty_like_lib(g, (n_cols,), g.dtype) if bias_grad else None
    if g.size == 0:
        if bias_grad and n_cols:
            # Sum over zero rows: the reduction kernel writes the zeros.
            _launch_bias_grad(None, grad_bias, 0, n_cols, g, cfg)
        return grad_x.owner, (grad_bias.owner if bias_grad else None)
    x_used = xa if need_x else None
    b_used = b if need_x else None
    vec = (n_cols % 4 == 0 and _aligned(g, 8) and _aligned(grad_x, 8) and _aligned(x_used, 8)
           and _aligned(b_used, 8) and _aligned(m, 4))
    unroll = (cfg.unroll or _default_unroll(g.dtype, True, need_x)) if vec else 1
    kernel = make_backward_kernel(g.dtype, activation, vec, cfg.threads, unroll)
    pieces = _pieces(n_rows, n_cols, vec)
    plans = [_plan(rows, n_cols, vec, unroll, cfg, g.device) for _, rows in pieces]
    n_parts = sum(plan.n_row_blocks for plan in plans)
    partial = None
    if bias_grad:
        partial = _flat(empty_like_lib(g, (n_parts, n_cols), "float32"))
    mode = MODE_MASK if m is not None else (MODE_PHILOX if p > 0.0 else MODE_NONE)
    tail = [*_rng_args(seed, offset, p), _dropout_scale(p), b_used is not None, mode, bias_grad]
    bias_arg = _bias_arg(b_used, g.dtype, vec, g)
    stream = stream_handle(g)
    part0 = 0
    for (row0, rows), plan in zip(pieces, plans):
        part = _placeholder(g, "float32")
        if bias_grad:
            part = _words(partial, "float32", plan.n_row_blocks * n_cols, part0 * n_cols)
        args = [_rows_arg(g, g.dtype, vec, g, row0, rows, n_cols),
                _rows_arg(x_used, g.dtype, vec, g, row0, rows, n_cols), bias_arg,
                _rows_arg(grad_x, g.dtype, vec, g, row0, rows, n_cols),
                _mask_rows(m, vec, g, row0, rows, n_cols), part, rows, n_cols,
                plan.rows_per_block, tile_stride(plan.block[0], plan.block[1], 4)]
        if vec:
            args.append(row0 * (n_cols // 4))
        kernel.launch(plan.grid, plan.block, stream, args + tail)
        part0 += plan.n_row_blocks
    if bias_grad:
        _launch_bias_grad(partial, grad_bias, n_parts, n_cols, g, cfg)
    return grad_x.owner, (grad_bias.owner if bias_grad else None)


def _launch_bias_grad(partial, grad_bias, n_parts, n_cols, like, cfg):
    threads = cfg.threads
    kernel = make_bias_grad_kernel(grad_bias.dtype, threads)
    by = threads // 32
    if partial is None:
        partial = _placeholder(like, "float32")
    kernel.launch((cdiv(n_cols, 32),), (32, by), stream_handle(like),
                  [partial, grad_bias, n_parts, n_cols, tile_stride(32, by, 1)])
