"""Record-and-replay launch plans: an op's host work done once per signature.

An op's launcher validates its inputs, views them, picks kernels and grids,
allocates outputs and workspaces and launches: tens of microseconds of Python per
call (issue #20 measured ~750 us of host time per LayerNorm forward + backward at
[8192, 1024] against ~60 us of GPU time). For one *signature* (shapes, dtypes,
device, flags, the 16-byte alignment of each input) every decision comes out the
same, so a launcher written against an *executor* can be run once with a
:class:`Recorder`: it sees stand-in arrays whose pointers name their buffer (an
input, or the n-th allocation), and instead of launching it prepares each launch
(:meth:`numba_fused.launch.Kernel.prepare`) and notes which buffer feeds each array
argument. The resulting :class:`Plan` replays the call: allocate the outputs
(through the caller's library) and one workspace holding every allocation that is
not an output (zero-filled parts cleared by a driver memset), patch their pointers
and the inputs' into the prepared launches, launch.

Scalars are fixed by the signature, except those a launcher names ``dynamic`` (a
dropout's seed and offset): every call supplies them (``Plan.run``'s ``values``).
Buffers that outlive a call and belong to the launch stream (dropout's self-resetting
arrival counters) come from :meth:`Executor.stream_buffer`: a plan looks them up for
the stream of each replay. Arrays made from another buffer's address (a TMA tensor
map, which holds its operand's address) come from :meth:`Executor.derived`: a plan
makes (or looks up) them from each replay's pointers.

:data:`NOW` is the executor that simply runs (the array-level API). Plans need the
driver (GPU only); the simulator always runs the launcher.
"""

from typing import NamedTuple

import numpy as np

from interop.dlpack import _ITEMSIZE, KernelArray, c_strides, empty_like_lib

from .launch import memset_zero

__all__ = ["Executor", "NOW", "Recorder", "Plan", "PlanCache"]

# A stand-in pointer is (buffer index + 1) << _SHIFT plus the real array's address
# modulo 16, so alignment checks in the launcher see what the real call would.
_SHIFT = 40
_ALIGN = 16
# Workspace parts start on this boundary (as an allocator's blocks would).
_WS_ALIGN = 256


class Executor:
    """Runs a launcher's steps at once."""

    recording = False

    def alloc(self, like, shape, dtype, zero=None):
        """A new array of ``shape`` / ``dtype`` in ``like``'s library and device;
        ``zero``: None, or a function that fills it with zeros on the launch stream."""
        a = empty_like_lib(like, shape, dtype)
        if zero is not None:
            zero(a)
        return a

    def stream_buffer(self, factory, stream):
        """A buffer tied to launch stream ``stream``: ``factory(stream)`` -> KernelArray
        (the factory caches it; a plan calls it again for each replay's stream)."""
        return factory(stream)

    def derived(self, src, make, shape, dtype, stream):
        """An array made from array ``src`` (its address included) for launches on
        ``stream``: ``make(src, stream)`` -> KernelArray of ``shape`` / ``dtype`` (make
        caches; a plan calls it for each replay with ``src`` at that call's address)."""
        return make(src, stream)

    def launch(self, kernel, grid, block, stream, args, shared=0, dynamic=()):
        """Launch ``kernel``; ``dynamic``: indices of the scalar arguments that differ
        call to call (a plan takes them from each call, in this order)."""
        kernel.launch(grid, block, stream, args, shared=shared)


NOW = Executor()


class Recorder(Executor):
    """Records a launcher's allocations and launches for a :class:`Plan`.

    ``inputs``: the call's KernelArrays (None for absent ones); :attr:`inputs` holds
    their stand-ins, to pass to the launcher in their place. Allocations are taken
    to be 16-byte aligned (torch's and CuPy's allocators give far more). Array
    arguments may be views into a buffer at any byte offset.
    """

    recording = True

    def __init__(self, inputs):
        self._allocs = []  # (shape, dtype name, zero-filled), or a stream buffer's factory
        self._steps = []  # (PreparedLaunch, (buffer index, byte offset) per array, dynamic?)
        self._n_inputs = len(inputs)
        self._residue = {i: (a.ptr or 0) % _ALIGN
                         for i, a in enumerate(inputs) if a is not None}
        self.inputs = [None if a is None else
                       KernelArray(None, a.lib, a.dtype, a.shape, a.strides,
                                   ptr=self._pointer(i, a.ptr), device=a.device)
                       for i, a in enumerate(inputs)]

    @staticmethod
    def _pointer(index, real=0):
        return ((index + 1) << _SHIFT) | ((real or 0) % _ALIGN)

    def _source(self, ptr):
        """(buffer index, byte offset) of stand-in pointer ``ptr``."""
        index = (ptr >> _SHIFT) - 1
        if index not in self._residue:
            raise ValueError("a launch argument is neither an input, an allocation nor a "
                             "stream buffer of this recording")
        return index, (ptr & ((1 << _SHIFT) - 1)) - self._residue[index]

    def _new_buffer(self, entry):
        index = self._n_inputs + len(self._allocs)
        self._allocs.append(entry)
        self._residue[index] = 0
        return index

    def alloc(self, like, shape, dtype, zero=None):
        shape = tuple(int(s) for s in shape)
        index = self._new_buffer((shape, dtype, zero is not None))
        return KernelArray(None, like.lib, dtype, shape, c_strides(shape),
                           ptr=self._pointer(index), device=like.device)

    def stream_buffer(self, factory, stream):
        real = factory(stream)
        index = self._new_buffer(factory)
        return KernelArray(None, real.lib, real.dtype, real.shape, real.strides,
                           ptr=self._pointer(index), device=real.device)

    def derived(self, src, make, shape, dtype, stream):
        shape = tuple(int(v) for v in shape)
        where = self._source(src.ptr)
        index = self._new_buffer(_Derived(where, make, src.lib, src.dtype, src.shape,
                                          src.strides, src.device))
        return KernelArray(None, src.lib, dtype, shape, c_strides(shape),
                           ptr=self._pointer(index), device=src.device)

    def launch(self, kernel, grid, block, stream, args, shared=0, dynamic=()):
        prepared = kernel.prepare(grid, block, shared, args, dynamic=tuple(dynamic))
        srcs = tuple(self._source(args[i].ptr) for i in kernel._array_idx)
        self._steps.append((prepared, srcs, bool(dynamic)))

    def plan(self, outputs):
        """The :class:`Plan` of what was recorded; ``outputs``: the launcher's results
        (stand-ins returned by :meth:`alloc`, or None)."""
        n_in = self._n_inputs
        out_idx = [None if o is None else (o.ptr >> _SHIFT) - 1 - n_in for o in outputs]
        kept = sorted({i for i in out_idx if i is not None})
        streamed = [i for i, a in enumerate(self._allocs) if callable(a)]
        made = [i for i, a in enumerate(self._allocs) if isinstance(a, _Derived)]
        # Buffer numbering at replay: inputs, outputs (in allocation order), stream
        # buffers, workspace, derived arrays (made from any of the others).
        number = {}
        for j, i in enumerate(kept + streamed):
            number[n_in + i] = n_in + j
        ws_buffer = n_in + len(kept) + len(streamed)
        for j, i in enumerate(made):
            number[n_in + i] = ws_buffer + 1 + j
        ws_parts = {}  # buffer index -> byte offset in the workspace
        zero = []
        nbytes = 0
        for i, entry in enumerate(self._allocs):
            if i in kept or callable(entry) or isinstance(entry, _Derived):
                continue
            shape, dtype, z = entry
            size = _ITEMSIZE.get(dtype) or np.dtype(dtype).itemsize
            for d in shape:
                size *= d
            ws_parts[n_in + i] = nbytes
            if z:
                zero.append((nbytes, size))
            nbytes += -(-size // _WS_ALIGN) * _WS_ALIGN

        def replay_source(s, off):
            return ((s, off) if s < n_in else (number[s], off) if s in number
                    else (ws_buffer, ws_parts[s] + off))

        steps = []
        for prepared, srcs, dynamic in self._steps:
            steps.append((prepared, tuple(replay_source(s, off) for s, off in srcs), dynamic))
        allocs = tuple(self._allocs[i] for i in kept)
        factories = tuple(self._allocs[i] for i in streamed)
        derived = tuple(self._allocs[i]._replace(where=replay_source(*self._allocs[i].where))
                        for i in made)
        return Plan(n_in, allocs, nbytes, tuple(zero), tuple(steps),
                    tuple(None if i is None else kept.index(i) for i in out_idx), factories,
                    derived)


class _Derived(NamedTuple):
    """A recorded :meth:`Executor.derived` array: ``make(src, stream)`` with src the
    array (lib, dtype, shape, strides, device) at buffer ``where`` = (index, byte
    offset)."""

    where: tuple
    make: object
    lib: str
    dtype: str
    shape: tuple
    strides: tuple
    device: object


class Plan:
    """A recorded call: ``run(stream, input_ptrs, new, device, values)`` allocates each
    output with ``new(shape, dtype_name, zero) -> (array, pointer)`` and the workspace
    with ``new((nbytes,), "uint8", False)``, zero-fills the workspace's zeroed parts,
    makes the derived arrays (:meth:`Executor.derived`) from this call's pointers,
    launches every step on stream handle ``stream`` of CUDA device ``device`` (the
    steps recorded with dynamic scalars take ``values``) and returns the outputs (None
    where the launcher returned None). ``input_ptrs``: the inputs' data pointers in
    recording order (0 for absent ones). The workspace lives as long as the caller's
    allocator keeps it: stream-ordered allocators (torch's, CuPy's) make its reuse
    safe once ``run`` returns."""

    __slots__ = ("n_inputs", "allocs", "ws_bytes", "ws_zero", "steps", "outputs", "streamed",
                 "derived")

    def __init__(self, n_inputs, allocs, ws_bytes, ws_zero, steps, outputs, streamed=(),
                 derived=()):
        self.n_inputs = n_inputs
        self.allocs = allocs
        self.ws_bytes = ws_bytes
        self.ws_zero = ws_zero
        self.steps = steps
        self.outputs = outputs
        self.streamed = streamed
        self.derived = derived

    def run(self, stream, input_ptrs, new, device, values=()):
        ptrs = list(input_ptrs)
        arrays = []
        for shape, dtype, zero in self.allocs:
            arr, ptr = new(shape, dtype, zero)
            arrays.append(arr)
            ptrs.append(ptr)
        for factory in self.streamed:
            ptrs.append(factory(stream).ptr)
        ws = 0
        if self.ws_bytes:
            _, ws = new((self.ws_bytes,), "uint8", False)
            for off, n in self.ws_zero:
                memset_zero(ws + off, n, stream, device)
        ptrs.append(ws)
        for d in self.derived:
            src, off = d.where
            at = KernelArray(None, d.lib, d.dtype, d.shape, d.strides, ptr=ptrs[src] + off,
                             device=d.device)
            ptrs.append(d.make(at, stream).ptr)
        for prepared, srcs, dynamic in self.steps:
            prepared.launch(stream, [ptrs[i] + off for i, off in srcs],
                            values if dynamic else ())
        return tuple(None if i is None else arrays[i] for i in self.outputs)


class PlanCache(dict):
    """signature -> plan, bounded: a model sees few signatures, a shape sweep many,
    and plans hold compiled-kernel references, so the oldest half goes when full."""

    def __init__(self, limit=256):
        super().__init__()
        self.limit = limit

    def put(self, key, plan):
        if len(self) >= self.limit:
            for k in list(self)[: self.limit // 2]:
                del self[k]
        self[key] = plan
