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
and the inputs' into the prepared launches, launch. Scalars are fixed by the
signature.

:data:`NOW` is the executor that simply runs (the array-level API). Plans need the
driver (GPU only); the simulator always runs the launcher.
"""

import numpy as np

from interop.dlpack import _ITEMSIZE, KernelArray, c_strides, empty_like_lib

from .launch import memset_zero

__all__ = ["Executor", "NOW", "Recorder", "Plan"]

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

    def launch(self, kernel, grid, block, stream, args, shared=0):
        kernel.launch(grid, block, stream, args, shared=shared)


NOW = Executor()


class Recorder(Executor):
    """Records a launcher's allocations and launches for a :class:`Plan`.

    ``inputs``: the call's KernelArrays (None for absent ones); :attr:`inputs` holds
    their stand-ins, to pass to the launcher in their place. Allocations are taken
    to be 16-byte aligned (torch's and CuPy's allocators give far more).
    """

    recording = True

    def __init__(self, inputs):
        self._allocs = []  # (shape, dtype name, zero-filled)
        self._steps = []  # (PreparedLaunch, buffer index per array argument)
        self._n_inputs = len(inputs)
        self.inputs = [None if a is None else
                       KernelArray(None, a.lib, a.dtype, a.shape, a.strides,
                                   ptr=self._pointer(i, a.ptr), device=a.device)
                       for i, a in enumerate(inputs)]

    @staticmethod
    def _pointer(index, real=0):
        return ((index + 1) << _SHIFT) | ((real or 0) % _ALIGN)

    def alloc(self, like, shape, dtype, zero=None):
        shape = tuple(int(s) for s in shape)
        index = self._n_inputs + len(self._allocs)
        self._allocs.append((shape, dtype, zero is not None))
        return KernelArray(None, like.lib, dtype, shape, c_strides(shape),
                           ptr=self._pointer(index), device=like.device)

    def launch(self, kernel, grid, block, stream, args, shared=0):
        prepared = kernel.prepare(grid, block, shared, args)
        srcs = tuple((args[i].ptr >> _SHIFT) - 1 for i in kernel._array_idx)
        self._steps.append((prepared, srcs))

    def plan(self, outputs):
        """The :class:`Plan` of what was recorded; ``outputs``: the launcher's results
        (stand-ins returned by :meth:`alloc`, or None)."""
        n_in = self._n_inputs
        out_idx = [None if o is None else (o.ptr >> _SHIFT) - 1 - n_in for o in outputs]
        kept = sorted({i for i in out_idx if i is not None})
        # Buffer numbering at replay: inputs, outputs (in allocation order), workspace.
        number = {}
        for j, i in enumerate(kept):
            number[n_in + i] = n_in + j
        ws_buffer = n_in + len(kept)
        ws_parts = {}  # buffer index -> byte offset in the workspace
        zero = []
        nbytes = 0
        for i, (shape, dtype, z) in enumerate(self._allocs):
            if i in kept:
                continue
            size = _ITEMSIZE.get(dtype) or np.dtype(dtype).itemsize
            for d in shape:
                size *= d
            ws_parts[n_in + i] = nbytes
            if z:
                zero.append((nbytes, size))
            nbytes += -(-size // _WS_ALIGN) * _WS_ALIGN
        steps = []
        for prepared, srcs in self._steps:
            steps.append((prepared, tuple(
                (s, 0) if s < n_in else (number[s], 0) if s in number else (ws_buffer, ws_parts[s])
                for s in srcs)))
        allocs = tuple(self._allocs[i] for i in kept)
        return Plan(n_in, allocs, nbytes, tuple(zero), tuple(steps),
                    tuple(None if i is None else kept.index(i) for i in out_idx))


class Plan:
    """A recorded call: ``run(stream, input_ptrs, new, device)`` allocates each output
    with ``new(shape, dtype_name, zero) -> (array, pointer)`` and the workspace with
    ``new((nbytes,), "uint8", False)``, zero-fills the workspace's zeroed parts,
    launches every step on stream handle ``stream`` of CUDA device ``device`` and
    returns the outputs (None where the launcher returned None). ``input_ptrs``: the
    inputs' data pointers in recording order (0 for absent ones). The workspace lives
    as long as the caller's allocator keeps it: stream-ordered allocators (torch's,
    CuPy's) make its reuse safe once ``run`` returns."""

    __slots__ = ("n_inputs", "allocs", "ws_bytes", "ws_zero", "steps", "outputs")

    def __init__(self, n_inputs, allocs, ws_bytes, ws_zero, steps, outputs):
        self.n_inputs = n_inputs
        self.allocs = allocs
        self.ws_bytes = ws_bytes
        self.ws_zero = ws_zero
        self.steps = steps
        self.outputs = outputs

    def run(self, stream, input_ptrs, new, device):
        ptrs = list(input_ptrs)
        arrays = []
        for shape, dtype, zero in self.allocs:
            arr, ptr = new(shape, dtype, zero)
            arrays.append(arr)
            ptrs.append(ptr)
        if self.ws_bytes:
            _, ws = new((self.ws_bytes,), "uint8", False)
            ptrs.append(ws)
            for off, n in self.ws_zero:
                memset_zero(ws + off, n, stream, device)
        for prepared, srcs in self.steps:
            prepared.launch(stream, [ptrs[i] + off for i, off in srcs])
        return tuple(None if i is None else arrays[i] for i in self.outputs)
