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

__all__ = ["FULL_MASK", "warp_sum", "warp_max", "block_sum", "block_max", "WARP"]

FULL_MASK = 0xFFFFFFFF
WARP = 32


@inline_device
def warp_sum(v):
    """Sum of float32 ``v`` over the 32 lanes of the warp, returned to every lane."""
    for k in range(5):
        v += cuda.shfl_xor_sync(FULL_MASK, v, 16 >> k)
    return v


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
