"""Counter-based Philox4x32-10 (Salmon et al., SC'11; Random123) for dropout masks.

A draw is a pure function of a 128-bit counter and a 64-bit key, so any thread can
regenerate the random numbers of any element: forward and backward agree, and the
mask does not depend on the grid shape. Ops key Philox by ``(seed, offset)``
(key = seed, counter words 2-3 = offset) and put the element's position in counter
words 0-1, each draw serving four consecutive elements.

``philox4x32`` is the device function; ``philox4x32_np`` is the same function
vectorised in NumPy for tests and host references.

numba types every uint32 operation as 64-bit, so ``philox4x32`` keeps its state and
keys in 64-bit registers; kernels whose issue rate Philox bounds use the 32-bit forms
instead, emitted as LLVM IR (:func:`philox_ir`: ``mul.wide.u32`` and 32-bit xors):
``philox4x32_round_keys`` takes the 20 round keys (:func:`round_keys`, passed as
kernel parameters so that ptxas keeps them in uniform registers), ``philox4x32_i32``
the two key words (the round keys added in the kernel). Under the simulator both are
``philox4x32`` itself (the same bits).
"""

import numpy as np
from numba import config, cuda, types

from .jit import inline_device

__all__ = [
    "philox4x32", "philox4x32_np", "philox4x32_round_keys", "philox4x32_i32",
    "philox_ir", "round_keys", "uniform_from_bits", "uniform_from_bits_np",
    "split_u64", "PHILOX_ROUNDS",
]

PHILOX_ROUNDS = 10
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_LO32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


@inline_device
def _round(c0, c1, c2, c3, k0, k1):
    # 32x32->64 products; NVVM lowers these to mul.wide.u32 / mul.hi.u32.
    p0 = _M0 * np.uint64(c0)
    p1 = _M1 * np.uint64(c2)
    hi0 = np.uint32(p0 >> _S32)
    lo0 = np.uint32(p0 & _LO32)
    hi1 = np.uint32(p1 >> _S32)
    lo1 = np.uint32(p1 & _LO32)
    return hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0


@cuda.jit(device=True)
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter ``(c0, c1, c2, c3)`` under key ``(k0, k1)``.

    All arguments and the four results are uint32. Ten rounds, the key bumped by
    the Weyl constants between rounds, as Random123's ``philox4x32_R(10, ...)``.
    """
    c0 = np.uint32(c0)
    c1 = np.uint32(c1)
    c2 = np.uint32(c2)
    c3 = np.uint32(c3)
    k0 = np.uint32(k0)
    k1 = np.uint32(k1)
    for _ in range(PHILOX_ROUNDS - 1):
        c0, c1, c2, c3 = _round(c0, c1, c2, c3, k0, k1)
        # Widen before adding: wraps mod 2^32 without NumPy overflow warnings
        # under the simulator, and is the same single add on the GPU.
        k0 = np.uint32((np.uint64(k0) + _W0) & _LO32)
        k1 = np.uint32((np.uint64(k1) + _W1) & _LO32)
    return _round(c0, c1, c2, c3, k0, k1)


_INV24 = np.float32(1.0 / (1 << 24))


@inline_device
def uniform_from_bits(r):
    """Uniform float32 in [0, 1) from uint32 ``r``: its top 24 bits times 2^-24 (exact)."""
    return np.float32(np.uint32(r) >> np.uint32(8)) * _INV24


def split_u64(x):
    """Host helper: a non-negative int below 2**64 as (low, high) uint32 words."""
    x = int(x)
    if x < 0 or x >= 1 << 64:
        raise ValueError(f"expected an integer in [0, 2**64), got {x}")
    return x & 0xFFFFFFFF, x >> 32


def philox4x32_np(counter, key):
    """Vectorised host Philox4x32-10.

    counter: uint32 array of shape [..., 4]; key: two uint32 (or array [..., 2]).
    Returns uint32 [..., 4].
    """
    c = np.asarray(counter, dtype=np.uint32)
    k = np.asarray(key, dtype=np.uint32)
    c0, c1, c2, c3 = (c[..., i].astype(np.uint64) for i in range(4))
    k0 = k[..., 0].astype(np.uint64)
    k1 = k[..., 1].astype(np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    for r in range(PHILOX_ROUNDS):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (
            (p1 >> np.uint64(32)) ^ c1 ^ k0,
            p1 & mask,
            (p0 >> np.uint64(32)) ^ c3 ^ k1,
            p0 & mask,
        )
        if r < PHILOX_ROUNDS - 1:
            k0 = (k0 + np.uint64(0x9E3779B9)) & mask
            k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def round_keys(seed):
    """The 20 Philox4x32-10 round keys of a 64-bit ``seed``, as Python ints:
    ``(k0 + i W0, k1 + i W1) mod 2**32`` for rounds i = 0..9, interleaved."""
    k0, k1 = split_u64(seed)
    out = []
    for i in range(PHILOX_ROUNDS):
        out += [(k0 + i * int(_W0)) & 0xFFFFFFFF, (k1 + i * int(_W1)) & 0xFFFFFFFF]
    return out


def philox_ir(builder, counter, keys):
    """Emit Philox4x32-10 with llvmlite ``builder``: counter is four i32 values, keys the
    20 i32 round keys (:func:`round_keys`); returns the four i32 outputs. Used by the
    kernels' intrinsics and, in the tests, JIT-compiled for the host CPU and checked
    against the known answers."""
    from llvmlite import ir

    i32, i64 = ir.IntType(32), ir.IntType(64)
    m0, m1 = ir.Constant(i64, int(_M0)), ir.Constant(i64, int(_M1))
    s32 = ir.Constant(i64, 32)
    c0, c1, c2, c3 = counter
    for r in range(PHILOX_ROUNDS):
        k0, k1 = keys[2 * r], keys[2 * r + 1]
        # zext(i32) * constant in i64: NVPTX selects mul.wide.u32.
        p0 = builder.mul(builder.zext(c0, i64), m0)
        p1 = builder.mul(builder.zext(c2, i64), m1)
        hi0 = builder.trunc(builder.lshr(p0, s32), i32)
        hi1 = builder.trunc(builder.lshr(p1, s32), i32)
        c0, c1, c2, c3 = (builder.xor(builder.xor(hi1, c1), k0), builder.trunc(p1, i32),
                          builder.xor(builder.xor(hi0, c3), k1), builder.trunc(p0, i32))
    return c0, c1, c2, c3


if config.ENABLE_CUDASIM:

    def philox4x32_round_keys(c0, c1, c2, c3, keys):
        """Philox4x32-10 of counter ``(c0, c1, c2, c3)`` (the low 32 bits of each word)
        under the 20 round keys ``keys`` (:func:`round_keys`); four uint32."""
        return philox4x32(int(c0) & 0xFFFFFFFF, int(c1) & 0xFFFFFFFF, c2, c3, keys[0], keys[1])

    def philox4x32_i32(c0, c1, c2, c3, k0, k1):
        """Philox4x32-10 of counter ``(c0, c1, c2, c3)`` under key ``(k0, k1)``, every
        word taken as uint32, on 32-bit IR; four uint32."""
        return philox4x32(c0, c1, c2, c3, k0, k1)

else:
    from llvmlite import ir
    from numba.core.errors import TypingError
    from numba.core.extending import intrinsic

    from .intrinsics import ir_i32

    @intrinsic
    def philox4x32_round_keys(typingctx, c0, c1, c2, c3, keys):
        counter = (c0, c1, c2, c3)
        if not all(isinstance(a, types.Integer) for a in counter):
            return None
        if not (isinstance(keys, types.BaseTuple) and len(keys) == 2 * PHILOX_ROUNDS
                and all(isinstance(k, types.Integer) for k in keys)):
            return None
        ret = types.UniTuple(types.uint32, 4)

        def codegen(context, builder, signature, llargs):
            ks = [ir_i32(builder, builder.extract_value(llargs[4], i))
                  for i in range(2 * PHILOX_ROUNDS)]
            out = philox_ir(builder, [ir_i32(builder, v) for v in llargs[:4]], ks)
            return context.make_tuple(builder, ret, out)

        return ret(c0, c1, c2, c3, keys), codegen

    @intrinsic
    def philox4x32_i32(typingctx, c0, c1, c2, c3, k0, k1):
        args = (c0, c1, c2, c3, k0, k1)
        if not all(isinstance(a, types.Integer) for a in args):
            raise TypingError("philox4x32_i32: counter and key words must be integers")
        ret = types.UniTuple(types.uint32, 4)

        def codegen(context, builder, signature, llargs):
            i32 = ir.IntType(32)
            vals = [context.cast(builder, v, t, types.uint32)
                    for v, t in zip(llargs, signature.args)]
            keys = []
            for r in range(PHILOX_ROUNDS):
                keys.append(builder.add(vals[4], ir.Constant(i32, (r * int(_W0)) & 0xFFFFFFFF)))
                keys.append(builder.add(vals[5], ir.Constant(i32, (r * int(_W1)) & 0xFFFFFFFF)))
            out = philox_ir(builder, vals[:4], keys)
            return context.make_tuple(builder, ret, out)

        return ret(*args), codegen


def uniform_from_bits_np(r):
    """Host twin of ``uniform_from_bits``."""
    return (np.asarray(r, dtype=np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(
        1.0 / (1 << 24)
    )
