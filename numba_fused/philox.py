"""Counter-based Philox4x32-10 (Salmon et al., SC'11; Random123) for dropout masks.

A draw is a pure function of a 128-bit counter and a 64-bit key, so any thread can
regenerate the random numbers of any element: forward and backward agree, and the
mask does not depend on the grid shape. Ops key Philox by ``(seed, offset)``
(key = seed, counter words 2-3 = offset) and put the element's position in counter
words 0-1, each draw serving four consecutive elements.

``philox4x32`` is the device function; ``philox4x32_np`` is the same function
vectorised in NumPy for tests and host references.
"""

import numpy as np
from numba import cuda

from .jit import inline_device

__all__ = [
    "philox4x32", "philox4x32_np", "uniform_from_bits", "uniform_from_bits_np",
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


def uniform_from_bits_np(r):
    """Host twin of ``uniform_from_bits``."""
    return (np.asarray(r, dtype=np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(
        1.0 / (1 << 24)
    )
