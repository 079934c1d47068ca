"""Zero-filled int32 arrays that outlive a call, one per (library, device, stream).

Kernels that leave such an array zero on exit (dropout's arrival counters: their
last block clears them) need it cleared only once, when it is created; launches on
one stream never overlap, so one array a stream serves every launch there. Plans
take these as stream buffers (:meth:`numba_fused.plan.Executor.stream_buffer`).
"""

import threading

from interop.dlpack import empty_like_lib

__all__ = ["StreamZeros"]


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
