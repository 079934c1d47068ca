"""Warp and block reductions of float32 values by register shuffles.

Warp reductions use the xor butterfly, so every lane ends with the result (no
broadcast step). Block reductions reduce within each warp, pass one partial per
warp through a small shared-memory scratch, and reduce those in warp 0; they must
be called by every thread of the block (they contain ``syncthreads``).
"""

import math

import numpy as np
from numba import cuda

from .jit import inline_device

__all__ = ["FULL_MASK", "warp_sum", "warp_sum_halves", "warp_sum2", "warp_max", "block_sum",
           "block_max", "WARP"]

FULL_MASK = 0xFFFFFFFF
WARP = 32


@inline_device
def warp_sum(v):
    """Sum of float32 ``v`` over the 32 lanes of the warp, returned to every lane."""
    for k in range(5):
        v += cuda.shfl_xor_sync(FULL_MASK, v, 16 >> k)
    return v


@inline_device
def warp_sum_halves(a, b):
    """Sums of float32 ``a`` and ``b`` over the warp in five shuffles, not the ten of
    two :func:`warp_sum` calls: lanes 0-15 end with the sum of ``a``, lanes 16-31 with
    that of ``b``. The first step (lanes 16 apart) sends the value the partner keeps,
    so each half-warp goes on with one value alone. Every lane adds the same pairs in
    the same order as warp_sum's butterfly (its own value first), so each sum has
    warp_sum's bits."""
    hi = (cuda.laneid & 16) != 0
    keep = b if hi else a
    send = a if hi else b
    v = keep + cuda.shfl_xor_sync(FULL_MASK, send, 16)
    for k in range(1, 5):
        v += cuda.shfl_xor_sync(FULL_MASK, v, 16 >> k)
    return v


@inline_device
def warp_sum2(a, b):
    """``(warp_sum(a), warp_sum(b))`` to every lane, with warp_sum's bits, in six
    shuffles (:func:`warp_sum_halves` and one swap of the halves) instead of ten.
    They form one dependent chain six deep where two warp_sums are two chains of five
    that interleave: fewer instructions, more latency (slower where nothing else
    hides the chain, e.g. LayerNorm's one-warp rows)."""
    v = warp_sum_halves(a, b)
    other = cuda.shfl_xor_sync(FULL_MASK, v, 16)
    if (cuda.laneid & 16) != 0:
        return other, v
    return v, other


@inline_device
def warp_max(v):
    """Maximum of float32 ``v`` over the 32 lanes of the warp, returned to every lane."""
    for k in range(5):
        v = max(v, cuda.shfl_xor_sync(FULL_MASK, v, 16 >> k))
    return v


@inline_device
def block_sum(v, scratch):
    """Sum of ``v`` over a 1-D block, returned to every thread.

    scratch: float32 shared array of at least 32 elements, free for this call.
    The block size must be a multiple of 32 (all warps full).
    """
    lane = cuda.threadIdx.x % WARP
    warp = cuda.threadIdx.x // WARP
    nwarps = cuda.blockDim.x // WARP
    v = warp_sum(v)
    if lane == 0:
        scratch[warp] = v
    cuda.syncthreads()
    t = scratch[lane] if lane < nwarps else np.float32(0.0)
    t = warp_sum(t)
    # Second barrier: scratch may be reused by the caller right after return.
    cuda.syncthreads()
    return t


@inline_device
def block_max(v, scratch):
    """Maximum of ``v`` over a 1-D block (block size a multiple of 32), to every thread."""
    lane = cuda.threadIdx.x % WARP
    warp = cuda.threadIdx.x // WARP
    nwarps = cuda.blockDim.x // WARP
    v = warp_max(v)
    if lane == 0:
        scratch[warp] = v
    cuda.syncthreads()
    t = scratch[lane] if lane < nwarps else np.float32(-math.inf)
    t = warp_max(t)
    cuda.syncthreads()
    return t
