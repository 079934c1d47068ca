"""Zero-filled int32 arrays that outlive a call, one per (library, device, stream).

Kernels that leave such an array zero on exit (dropout's arrival counters: their
last block clears them) need it cleared only once, when it is created; launches on
one stream never overlap, so one array a stream serves every launch there. Plans
take these as stream buffers (:meth:`numba_fused.plan.Executor.stream_buffer`).
"""

import threading

import numpy as np
from numba import cuda, types

from interop.dlpack import KernelArray, empty_like_lib

from .launch import Kernel, cdiv

__all__ = ["StreamZeros", "ZERO_U32", "clear_u32_counters"]


class StreamZeros:
    """``zeros(like, stream, n)``: an array of at least ``n`` zeros for launches on
    ``stream``, in the library and on the device of KernelArray ``like``; grown (to
    twice the size, or ``n``) when a launch needs more. ``clear(arr, stream)``
    launches the zero fill of a new int32 array on ``stream`` and returns the array the
    kernels take (the same, or a view of it)."""

    def __init__(self, clear):
        self._clear = clear
        self._arrays = {}
        self._lock = threading.Lock()

    def __call__(self, like, stream, n):
        key = (like.lib, like.device, stream)
        with self._lock:
            have = self._arrays.get(key)
            if have is not None and have.size >= n:
                return have
            size = max(n, 1024 if have is None else 2 * have.size)
            arr = self._clear(empty_like_lib(like, (size,), "int32"), stream)
            self._arrays[key] = arr
            return arr

    def values(self):
        """The arrays made so far (one a stream)."""
        with self._lock:
            return list(self._arrays.values())


def _zero_u32_fn(a, n):
    i = cuda.grid(1)
    if i < n:
        a[i] = np.uint32(0)


ZERO_U32 = Kernel("dropout_zero_counters", _zero_u32_fn,
                  (types.Array(types.uint32, 1, "C"), types.int64))


def clear_u32_counters(arr, stream):
    """A ``StreamZeros`` clear for uint32 arrival counters: ``arr`` is allocated as
    int32 (torch has few uint32 CUDA ops); the kernels take its words as uint32."""
    host = None if arr.host is None else arr.host.reshape(-1).view(np.uint32)
    words = KernelArray(arr.owner, arr.lib, "uint32", (arr.size,), (1,), arr.ptr, host,
                        arr.device)
    ZERO_U32.launch((cdiv(arr.size, 256),), (256,), stream, [words, arr.size])
    return words
