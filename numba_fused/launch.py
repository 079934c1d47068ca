"""Kernel specialisations and the launch path every op uses.

A :class:`Kernel` is one specialisation: a Python kernel function (a closure made
by an op's ``make_<op>_kernel`` factory, its flags baked in) plus the explicit
numba signature it is compiled for. Giving the signature up front means numba
never types arguments at call time, and lets CI compile every shipped kernel to
PTX on a machine with no GPU (:meth:`Kernel.ptx`).

Launching on the GPU skips numba's dispatcher: the compiled function is launched
with the driver's ``cuLaunchKernel`` (through ctypes) with arguments flattened the
way numba's ABI lays them out (for an array: meminfo, parent, nitems, itemsize,
data, shape, strides in bytes), written into a parameter buffer that is allocated
once per kernel and thread. That avoids per-call typing, device-array construction
and per-argument conversion objects, which are nearly all of numba's host cost with
torch tensors (measured: 83 us per call through the dispatcher, 56 us through
``cuda.core.launch``; bench/NOTES.md has the figures). ``NUMBA_FUSED_LAUNCH=core``
launches through ``cuda.core.launch`` and ``NUMBA_FUSED_LAUNCH=dispatcher`` through
numba's dispatcher (for comparison and as fallbacks). Under the simulator, kernels
are called through numba's simulated dispatcher with host (NumPy) arrays.
"""

import contextlib
import ctypes
import functools
import numbers
import os
import threading

from numba import config, cuda, types

from . import _compat, kernel_cache

__all__ = ["Kernel", "PreparedLaunch", "SIMULATOR", "launch_mode", "set_launch_mode", "cdiv", "sm_count",
           "smem_optin", "smem_per_sm", "carveout_percent", "pointer_device", "memset_zero"]

SIMULATOR = bool(config.ENABLE_CUDASIM)


@functools.lru_cache(maxsize=None)
def sm_count(device=None):
    """Multiprocessors of CUDA device ``device`` (None: the current one); 1 under the
    simulator. Cached: launch heuristics call it on every op call."""
    if SIMULATOR:
        return 1
    if device is None:
        return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    with cuda.gpus[device]:
        return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


@functools.lru_cache(maxsize=None)
def dependent_launch_ok(device=None):
    """Whether CUDA device ``device`` (an ordinal; None: the current one) runs
    griddepcontrol (sm_90 and later); the simulator takes the same code path."""
    if SIMULATOR:
        return True
    dev = cuda.get_current_device() if device is None else cuda.gpus[device]
    return dev.compute_capability >= (9, 0)


@functools.lru_cache(maxsize=None)
def smem_optin(device=None):
    """Bytes of shared memory (static and dynamic) a block of CUDA device ``device``
    (None: the current one) may opt in to: 227 KiB on an H100 or H200, 163 KiB on an
    A100, 99 KiB on Ada. Under the simulator an H100's. Cached."""
    if SIMULATOR:
        return 227 * 1024
    if device is None:
        return int(cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    with cuda.gpus[device]:
        return int(cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)


@functools.lru_cache(maxsize=None)
def smem_per_sm(device=None):
    """(shared memory bytes an SM of CUDA device ``device`` has, bytes the driver
    reserves in it per block): (233472, 1024) on an H100 or H200. Cached."""
    if SIMULATOR:
        return 228 * 1024, 1024
    dev = cuda.get_current_device() if device is None else cuda.gpus[device]
    return int(dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR), int(dev.RESERVED_SHARED_MEMORY_PER_BLOCK)


def carveout_percent(blocks, block_bytes, per_sm):
    """The L1 / shared carveout preference (percent of ``per_sm``, the SM's shared
    memory) that holds ``blocks`` blocks of ``block_bytes`` each (dynamic, static
    and the driver's reserve), rounded up; at most 100. The driver maps it to a
    configuration it supports (sm_90: 0, 8, 16, 32, 64, 100, 132, 164, 196 or 228
    KB) and gives the rest of the 256 KB to L1; not to the nearest one above the
    percent of the SM's shared memory: ncu on the H200 read 32 KB for 1 %, 132 KB
    for 5 % and all 228 KB from 10 % up (:meth:`Kernel.prefer_carveout`), so the
    preference holds the blocks and leaves L1 less than the percent suggests."""
    _count(blocks, "blocks", 0)
    _count(block_bytes, "block_bytes", 0)
    _count(per_sm, "per_sm", 1)
    return min(100, cdiv(100 * int(blocks) * int(block_bytes), int(per_sm)))


def _count(value, name, lo):
    # launch cannot use checks.check_int: checks imports interop.dlpack, which imports
    # this module.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {value!r}")


def cdiv(a, b):
    """Ceiling division of non-negative ints."""
    return -(-a // b)


_MODES = ("direct", "core", "dispatcher")
_DEFAULT_DYNAMIC_SMEM = 48 * 1024


_MODE = [None]


def launch_mode():
    """'simulator', 'direct' (ctypes cuLaunchKernel), 'core' (cuda.core.launch) or
    'dispatcher' (numba's own launch). Read from $NUMBA_FUSED_LAUNCH on first use
    (default 'direct'); :func:`set_launch_mode` changes it."""
    if SIMULATOR:
        return "simulator"
    if _MODE[0] is None:
        set_launch_mode(os.environ.get("NUMBA_FUSED_LAUNCH", "direct"))
    return _MODE[0]


def set_launch_mode(mode):
    """Pick how kernels are launched on the GPU; returns the previous mode."""
    if mode not in _MODES:
        raise ValueError(f"launch mode must be one of {_MODES}, got {mode!r}")
    old = _MODE[0]
    _MODE[0] = mode
    return old


@functools.lru_cache(maxsize=None)
def _libcuda():
    """The driver library with cuLaunchKernel's C signature declared, or None."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    u = ctypes.c_uint
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_void_p]
    lib.cuLaunchKernel.restype = ctypes.c_int
    lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.cuCtxGetCurrent.restype = ctypes.c_int
    lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    lib.cuCtxSetCurrent.restype = ctypes.c_int
    lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    lib.cuPointerGetAttribute.restype = ctypes.c_int
    lib.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
    lib.cuMemsetD8Async.restype = ctypes.c_int
    lib.cuKernelGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.cuKernelGetFunction.restype = ctypes.c_int
    if hasattr(lib, "cuLaunchKernelEx"):
        lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                                         ctypes.c_void_p, ctypes.c_void_p]
        lib.cuLaunchKernelEx.restype = ctypes.c_int
    return lib


class _LaunchAttribute(ctypes.Structure):
    # CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte value union.
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class _LaunchConfig(ctypes.Structure):
    # CUlaunchConfig (ctypes aligns hStream at 32, as C does).
    _fields_ = [("dims", ctypes.c_uint * 6), ("sharedMemBytes", ctypes.c_uint),
                ("hStream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)),
                ("numAttrs", ctypes.c_uint)]


_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _DependentLaunch(threading.local):
    """A thread's launch configuration carrying the programmatic-stream-serialization
    attribute (see :class:`Kernel`'s ``dependent``)."""

    def __init__(self):
        self.attr = _LaunchAttribute()
        self.attr.id = _CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        self.attr.value[0] = 1
        self.cfg = _LaunchConfig()
        self.cfg.attrs = ctypes.pointer(self.attr)
        self.cfg.numAttrs = 1
        self.ref = ctypes.byref(self.cfg)


@functools.lru_cache(maxsize=None)
def _dependent_launch_tls():
    return _DependentLaunch()


def _launch_dependent(lib, handle, dims, shared, stream, params):
    """cuLaunchKernelEx of ``handle`` with programmatic stream serialization allowed:
    the launch may begin while the previous kernel in ``stream`` runs, and the
    kernel's ``grid_dependency_wait`` holds it until that kernel is done. Drivers
    without cuLaunchKernelEx get a plain launch, which the wait also serves."""
    if not hasattr(lib, "cuLaunchKernelEx"):
        gx, gy, gz, bx, by, bz = dims
        return lib.cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, shared, stream or None,
                                  params, None)
    tls = _dependent_launch_tls()
    cfg = tls.cfg
    cfg.dims[:] = dims
    cfg.sharedMemBytes = shared
    cfg.hStream = stream or None
    return lib.cuLaunchKernelEx(tls.ref, handle, params, None)


def _context_function(kernel_handle):
    """The current context's CUfunction of library kernel ``kernel_handle`` (a
    CUkernel), or the CUkernel itself where that lookup fails. Launching a CUkernel
    makes the driver resolve it for the current context on every launch; the
    resolved CUfunction skips that."""
    lib = _libcuda()
    if lib is None:
        return kernel_handle
    func = ctypes.c_void_p()
    if lib.cuKernelGetFunction(ctypes.byref(func), kernel_handle) or not func.value:
        return kernel_handle
    return func.value


_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


def pointer_device(ptr):
    """CUDA device ordinal that owns device pointer ``ptr``, or None (host memory, a null
    pointer, the simulator, or no driver). For arrays that do not say where they live
    (numba device arrays, CUDA Array Interface producers)."""
    if SIMULATOR or not ptr:
        return None
    lib = _libcuda()
    if lib is None:
        return None
    dev = ctypes.c_int(-1)
    if lib.cuPointerGetAttribute(ctypes.byref(dev), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr):
        return None
    return dev.value


@functools.lru_cache(maxsize=None)
def _primary_context(device):
    """Raw handle of device ``device``'s primary context: numba's context for it, and
    the one torch and CuPy use, so memory they allocate there is valid in it."""
    with cuda.gpus[device]:
        return int(cuda.current_context().handle)


class _ContextTLS(threading.local):
    def __init__(self):
        self.cur = ctypes.c_void_p()


_CTX = _ContextTLS()


def _enter(lib, device):
    """Make ``device``'s primary context current for a launch; returns the context to
    restore afterwards (None: nothing to restore). ``device`` None (arrays that could
    not say where they live) keeps the caller's context, or numba's where a thread
    has none yet (e.g. one of autograd's worker threads)."""
    cur = _CTX.cur
    lib.cuCtxGetCurrent(ctypes.byref(cur))
    prev = cur.value
    if device is None:
        if not prev:
            cuda.current_context()
        return None
    want = _primary_context(device)
    if prev == want:
        return None
    lib.cuCtxSetCurrent(want)
    # A thread with no context keeps the one it was given (as torch leaves it).
    return prev or None


def memset_zero(ptr, nbytes, stream, device):
    """Enqueue zero-filling ``nbytes`` bytes at device pointer ``ptr`` on stream handle
    ``stream`` of CUDA device ``device`` (a driver memset: no kernel, no allocation)."""
    lib = _libcuda()
    prev = _enter(lib, device)
    err = lib.cuMemsetD8Async(ptr, 0, nbytes, stream or None)
    if prev is not None:
        lib.cuCtxSetCurrent(prev)
    if err:
        raise _driver_error(lib, err)


def _unload_each_library_once():
    """Leave one unloading finalizer per loaded library across numba's contexts.

    numba-cuda (0.30) compiles a kernel once per compute capability into one library
    (``cuLibraryLoad``: not tied to a context) and, on each device the kernel first
    runs on, registers that library as a module of the device's context with a
    finalizer that unloads it. A kernel used on two devices therefore has its library
    unloaded twice when the modules are finalized (at interpreter exit), and the second
    ``cuLibraryUnload`` frees freed memory: the process aborts with "double free or
    corruption" after every test passed. Of the modules sharing a library, the first
    whose finalizer is still armed keeps it; the others give theirs up. Called after
    each first load of a kernel on a device, so it stays off the launch path.
    """
    from numba.cuda.cudadrv.driver import driver

    armed = set()
    for dev in list(driver.devices.values()):
        ctx = dev.primary_context
        if ctx is None:
            continue
        for key, module in list(ctx.modules.items()):
            fin = getattr(module, "_finalizer", None)
            if fin is None or not fin.alive:
                continue
            lib = int(key)
            if lib in armed:
                fin.detach()
            else:
                armed.add(lib)


def _device_of(args, array_idx):
    """Device ordinal of the first array argument that knows its device, else None."""
    for i in array_idx:
        dev = args[i].device
        if dev is not None:
            return dev
    return None


def _driver_error(lib, code):
    msg = ctypes.c_char_p()
    lib.cuGetErrorString(code, ctypes.byref(msg))
    text = msg.value.decode() if msg.value else "unknown error"
    return RuntimeError(f"CUDA driver call failed: CUDA error {code} ({text})")


# Per flat parameter: (ctypes view name, element index multiplier). Every
# parameter gets its own 8-byte slot; a 4-byte value sits in the slot's low half
# (little-endian), as the driver reads it through the slot's pointer.
_SLOT_VIEWS = {
    "f32": (ctypes.c_float, 2), "f64": (ctypes.c_double, 1),
    "i64": (ctypes.c_int64, 1), "u64": (ctypes.c_uint64, 1),
    "i32": (ctypes.c_int32, 2), "u32": (ctypes.c_uint32, 2),
    "i16": (ctypes.c_int16, 4), "u16": (ctypes.c_uint16, 4),
    "i8": (ctypes.c_int8, 8), "u8": (ctypes.c_uint8, 8), "b": (ctypes.c_uint8, 8),
}


def _slot_kind(ty):
    if ty == types.float32:
        return "f32"
    if ty == types.float64:
        return "f64"
    if ty == types.boolean:
        return "b"
    if isinstance(ty, types.Integer):
        return ("i" if ty.signed else "u") + str(ty.bitwidth)
    raise TypeError(f"unsupported scalar kernel argument type {ty}")


def _dim3(d):
    if isinstance(d, tuple):
        return (d + (1, 1))[:3]
    return int(d), 1, 1


class _ParamBuffer:
    """One thread's parameter block for one kernel: slots + the pointer array."""

    __slots__ = ("slots", "views", "ptrs", "address")

    def __init__(self, nslots):
        self.slots = (ctypes.c_int64 * nslots)()
        base = ctypes.addressof(self.slots)
        self.ptrs = (ctypes.c_void_p * nslots)(*(base + 8 * i for i in range(nslots)))
        self.address = ctypes.addressof(self.ptrs)
        self.views = {k: (c * (nslots * m)).from_buffer(self.slots)
                      for k, (c, m) in _SLOT_VIEWS.items()}


def _scalar_converter(ty):
    # Matches numba's own _prepare_args: ctypes scalars of the exact width,
    # so the kernel reads each parameter at the offset numba's ABI gives it.
    if ty == types.float32:
        return ctypes.c_float
    if ty == types.float64:
        return ctypes.c_double
    if ty == types.boolean:
        return bool
    if isinstance(ty, types.Integer):
        return getattr(ctypes, f"c_{ty}")
    raise TypeError(f"unsupported scalar kernel argument type {ty}")


@functools.lru_cache(maxsize=None)
def _core_stream(handle):
    from cuda.core import Stream

    return Stream.from_handle(int(handle))


class Kernel:
    """One compiled-on-demand kernel specialisation.

    name: a readable identifier (used in reports and PTX file names).
    pyfunc: the Python kernel function.
    argtypes: tuple of numba types, one per kernel parameter.
    jit_options: passed to ``cuda.jit`` / ``cuda.compile_ptx`` (``fastmath``,
    ``lineinfo``, ``launch_bounds``).
    dependent: the kernel calls :func:`intrinsics.grid_dependency_wait` before it
    reads anything the previous kernel in its stream wrote, so the direct and
    prepared launches give it programmatic stream serialization (sm_90's dependent
    launch): its blocks may be scheduled while that kernel finishes. The other
    launch modes launch it plainly, which is as correct.
    """

    def __init__(self, name, pyfunc, argtypes, dependent=False, **jit_options):
        self.name = name
        self.dependent = bool(dependent)
        self.pyfunc = pyfunc
        self.argtypes = tuple(argtypes)
        self.jit_options = jit_options
        self._configs = {}
        self._convert = tuple(
            None if isinstance(t, types.Array) else _scalar_converter(t) for t in self.argtypes
        )
        # Direct launch plan: per argument, (first slot, slot count, view, multiplier);
        # view None marks an array (its ABI ints go in as one slice).
        plan = []
        slot = 0
        for t in self.argtypes:
            if isinstance(t, types.Array):
                n = 5 + 2 * t.ndim
                plan.append((slot, n, None, 1))
                slot += n
            else:
                kind = _slot_kind(t)
                plan.append((slot, 1, kind, _SLOT_VIEWS[kind][1]))
                slot += 1
        self._plan = tuple(plan)
        self._array_idx = tuple(i for i, t in enumerate(self.argtypes) if isinstance(t, types.Array))
        self._smem_limit = {}  # device -> dynamic shared memory bytes allowed there
        self._smem_cap = {}    # device -> dynamic bytes launchable without opting in
        self._on_device = {}  # device -> (numba function, raw kernel handle)
        self._occupancy = {}  # (device, threads, shared) -> resident blocks per SM
        self._carveout = {}   # device -> carveout percent fit_carveout / prefer_carveout set
        self._preferred = {}  # (device, threads, shared, percent) -> prefer_carveout's answer
        self._nslots = slot
        self._tls = threading.local()

    def __repr__(self):
        return f"Kernel({self.name})"

    @functools.cached_property
    def dispatcher(self):
        _compat.ensure_numpy_row_stack()
        if SIMULATOR:
            # The simulator's jit takes none of the code-generation options.
            opts = {k: v for k, v in self.jit_options.items() if k not in ("launch_bounds", "lineinfo",
                                                                       "fastmath", "max_registers")}
            return cuda.jit(**opts)(self.pyfunc)
        return cuda.jit(self.argtypes, **self.jit_options)(self.pyfunc)

    @functools.cached_property
    def _compiled(self):
        """numba's compiled kernel for the signature (loaded per device by
        :meth:`function`): from the on-disk cache (:func:`kernel_cache.cache_dir`, on
        unless turned off) where it holds this kernel for the current device, else
        compiled now (and stored there)."""
        root = kernel_cache.cache_dir()
        digest = None
        if root is not None:
            _compat.ensure_numpy_row_stack()
            cc = cuda.get_current_device().compute_capability
            digest = kernel_cache.key(self.pyfunc, self.argtypes, self.jit_options, cc)
            if digest is not None:
                kernel = kernel_cache.load(root, self.name, digest, self.argtypes)
                if kernel is not None:
                    return kernel
        kernel = self.dispatcher.overloads[self.argtypes]
        if digest is not None:
            kernel_cache.store(root, self.name, digest, kernel)
        return kernel

    def function(self, device):
        """(numba function object, raw CUfunction handle in that device's context) of
        the kernel loaded for CUDA device ``device`` (an ordinal; None: the current
        one). The module is loaded into each device's context on first use there."""
        hit = self._on_device.get(device)
        if hit is None:
            kernel = self._compiled
            if device is None:
                cufunc = kernel._codelibrary.get_cufunc()
                handle = _context_function(int(cufunc.handle))
            else:
                with cuda.gpus[device]:
                    cufunc = kernel._codelibrary.get_cufunc()
                    handle = _context_function(int(cufunc.handle))
            _unload_each_library_once()
            hit = self._on_device[device] = (cufunc, handle)
        return hit

    def resident_blocks(self, threads, shared, device):
        """Blocks of ``threads`` threads with ``shared`` bytes of dynamic shared memory
        one SM of ``device`` holds at once (the driver's occupancy calculator). Cached:
        launch heuristics ask on every call. 1 under the simulator.

        A request over the driver's default cap first raises the kernel's
        shared-memory limit and carveout (:meth:`_ensure_smem`, as a launch of that
        size does); smaller ones leave both as the driver set them."""
        if SIMULATOR:
            return 1
        key = (device, int(threads), int(shared))
        n = self._occupancy.get(key)
        if n is None:
            self._ensure_smem(int(shared), device)
            fitted = self._carveout.get(device, 100)
            if fitted < 100:
                # Answer as under the whole carveout, which a larger request would get.
                self._set_carveout(device, 100)
            n = self._max_active(threads, shared, device)
            if fitted < 100:
                self._set_carveout(device, fitted)
            self._occupancy[key] = n
        return n

    def fit_carveout(self, threads, shared, blocks, device):
        """Prefer the smallest L1 / shared carveout that still holds ``blocks``
        resident blocks of ``threads`` threads and ``shared`` dynamic bytes on
        ``device``, where a request over the default cap made the kernel prefer all
        shared memory (:meth:`_ensure_smem`): the rest stays L1. A persistent grid of
        one 1024-thread block an SM with 48 KB of dW accumulators otherwise runs with
        ~23 KB of L1 and its row's second read misses there (fifty-first session, ncu
        of the float32 LayerNorm backward at 5461 x 12288: L1 hit rate 0.5%, bench/
        NOTES.md). The preference never drops below what an earlier call for another
        plan of this kernel asked, and goes back to 100 where the occupancy calculator
        then holds fewer than ``blocks``. Returns the percent in effect (100 where
        nothing was lowered); no-op under the simulator and at or under the cap.
        ValueError for threads or blocks under 1 or negative shared, checked first."""
        _count(threads, "threads", 1)
        _count(shared, "shared", 0)
        _count(blocks, "blocks", 1)
        if SIMULATOR or int(shared) <= self._dynamic_cap(device):
            return 100
        self._ensure_smem(int(shared), device)
        per_sm, reserved = smem_per_sm(device)
        static = int(self.function(device)[0].attrs.shared)
        want = max(self._carveout.get(device, 0),
                   carveout_percent(blocks, int(shared) + static + reserved, per_sm))
        self._set_carveout(device, want)
        if want < 100 and self._max_active(threads, shared, device) < blocks:
            want = 100
            self._set_carveout(device, want)
        self._carveout[device] = want
        return want

    def prefer_carveout(self, percent, threads, shared, device):
        """Prefer the L1 / shared carveout ``percent`` (CU_FUNC_ATTRIBUTE_PREFERRED_
        SHARED_MEMORY_CARVEOUT) for this kernel on ``device`` (an ordinal; None: the
        current one), where blocks of ``threads`` threads with ``shared`` dynamic bytes
        keep the residency they have without it (the occupancy calculator, before and
        after); else leave the kernel's preference as it was. The driver maps the
        percent to a configuration its own way: ncu on the H200 (sixty-second
        session) read 8 KB of shared memory for none and 0, 32 KB for 1, 64 for 2-3,
        100 for 4, 132 for 5-6, 164 for 7-8, 196 for 9 and 228 from 10 up (not the
        percent of 228 KB), the rest of the 256 KB being L1. The plain forward row
        kernels over rows of 8 KB and more ran up to 2.7 us faster at 5 or 7 than at
        the driver's default (bench/NOTES.md). Once per (device, threads, shared,
        percent): later calls cost a dict lookup. Returns the percent in effect
        (None where the preference was left); no-op (None) under the simulator.
        ValueError for percent outside [0, 100], threads under 1 or negative shared."""
        _count(percent, "percent", 0)
        if percent > 100:
            raise ValueError(f"percent must be an int in [0, 100], got {percent!r}")
        _count(threads, "threads", 1)
        _count(shared, "shared", 0)
        if SIMULATOR:
            return None
        key = (device, int(threads), int(shared), int(percent))
        if key in self._preferred:
            return self._preferred[key]
        prior = self._carveout.get(device)
        before = self._max_active(threads, shared, device)
        self._set_carveout(device, percent)
        if self._max_active(threads, shared, device) < before:
            self._set_carveout(device, -1 if prior is None else prior)
            percent = prior
        else:
            self._carveout[device] = percent
        self._preferred[key] = percent
        return percent

    def _max_active(self, threads, shared, device):
        from numba.cuda.cudadrv.driver import driver

        cufunc = self.function(device)[0]
        with cuda.gpus[cufunc.device.id]:
            return max(1, int(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                cufunc.handle, int(threads), int(shared))))

    def _set_carveout(self, device, percent):
        from numba.cuda.cudadrv.driver import binding, driver

        cufunc = self.function(device)[0]
        driver.cuKernelSetAttribute(
            binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            int(percent), cufunc.handle, cufunc.device.id)

    def compile(self):
        """Compile now (GPU) or prepare the simulated dispatcher; returns self."""
        if SIMULATOR:
            self.dispatcher
        else:
            self._compiled
        return self

    def ptx(self, cc=(9, 0)):
        """PTX text for compute capability ``cc``; needs NVVM, not a GPU."""
        _compat.ensure_numpy_row_stack()
        opts = {k: v for k, v in self.jit_options.items()
                if k in ("fastmath", "lineinfo", "launch_bounds")}
        ptx, _ = cuda.compile_ptx(self.pyfunc, self.argtypes, cc=cc, **opts)
        return ptx

    @property
    def regs_per_thread(self):
        return self._compiled.regs_per_thread

    def launch(self, grid, block, stream, args, shared=0):
        """Launch on ``grid`` x ``block`` on stream handle ``stream`` (int, 0 = default).

        args: one entry per parameter; an array parameter takes a
        :class:`interop.dlpack.KernelArray`, a scalar a Python number.
        """
        if SIMULATOR:
            # Wrapped as simulated device arrays, kernels work on the callers' memory in
            # place: given plain ndarrays the simulator copies each argument in and back
            # out, so an array passed twice would have one copy's writes overwrite the
            # other's.
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            host = [FakeCUDAArray(a.host) if t is None else a for a, t in zip(args, self._convert)]
            self.dispatcher[grid, block, 0, shared](*host)
            return
        if shared:
            self._ensure_smem(shared, _device_of(args, self._array_idx))
        mode = _MODE[0] or launch_mode()
        if mode == "direct":
            lib = _libcuda()
            if lib is not None:
                self._launch_direct(lib, grid, block, stream, args, shared)
                return
            mode = "core"
        device = _device_of(args, self._array_idx)
        if mode == "dispatcher":
            self.function(device)
            if device is None:
                self._launch_dispatcher(grid, block, stream, args, shared)
            else:
                with cuda.gpus[device]:
                    self._launch_dispatcher(grid, block, stream, args, shared)
            return
        from cuda.core import launch

        flat = []
        for a, conv in zip(args, self._convert):
            if conv is None:
                flat.extend(a.abi_args)
            else:
                flat.append(conv(a))
        with contextlib.ExitStack() as on_device:
            if device is not None:
                on_device.enter_context(cuda.gpus[device])
            launch(_core_stream(stream), self._config(grid, block, shared),
                   self.function(device)[0].kernel, *flat)

    def _launch_direct(self, lib, grid, block, stream, args, shared):
        device = _device_of(args, self._array_idx)
        handle = self.function(device)[1]
        buf = getattr(self._tls, "buf", None)
        if buf is None:
            buf = self._tls.buf = _ParamBuffer(self._nslots)
        slots = buf.slots
        views = buf.views
        for a, (first, n, kind, mult) in zip(args, self._plan):
            if kind is None:
                slots[first:first + n] = a.abi_args
            else:
                views[kind][first * mult] = a
        if type(grid) is int:
            gx, gy, gz = grid, 1, 1
        else:
            gx, gy, gz = _dim3(grid)
        if type(block) is int:
            bx, by, bz = block, 1, 1
        else:
            bx, by, bz = _dim3(block)
        # The launch runs in the context of the arrays' device, whatever device the
        # caller has current (issue #21: another device's pointers are garbage in the
        # current one's context); the caller's context is put back afterwards.
        prev = _enter(lib, device)
        if self.dependent:
            err = _launch_dependent(lib, handle, (gx, gy, gz, bx, by, bz), shared, stream,
                                    buf.ptrs)
        else:
            err = lib.cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, shared, stream or None,
                                     buf.ptrs, None)
        if prev is not None:
            lib.cuCtxSetCurrent(prev)
        if err:
            raise _driver_error(lib, err)

    def prepare(self, grid, block, shared, args, dynamic=(), device=None):
        """A :class:`PreparedLaunch` of this kernel: geometry and every argument fixed
        as in ``args`` (as :meth:`launch` takes them) except the arrays' data pointers
        and the scalar arguments at the indices in ``dynamic``, which each call
        supplies. For hot paths that already validated their inputs (the torch front
        ends' per-signature plans): a call costs one driver launch plus a few slot
        writes. ``device``: the CUDA device it launches on (None: the first template
        array's, else the caller's current context). GPU only."""
        if SIMULATOR:
            raise RuntimeError("prepared launches need a GPU (the simulator has no driver)")
        return PreparedLaunch(self, grid, block, shared, args, dynamic, device)

    def _dynamic_cap(self, device):
        """Dynamic shared memory a launch may ask for without the opt-in attribute:
        the driver's 48 KiB default applies to static and dynamic shared memory
        together, so it is 48 KiB less the kernel's static arrays (a kernel with 516
        static bytes failed to launch with exactly 48 KiB of dynamic ones)."""
        cap = self._smem_cap.get(device)
        if cap is None:
            static = int(self.function(device)[0].attrs.shared)
            cap = self._smem_cap[device] = _DEFAULT_DYNAMIC_SMEM - static
        return cap

    def _ensure_smem(self, nbytes, device):
        """Allow ``nbytes`` of dynamic shared memory on ``device`` where that is over
        the driver's default cap (:meth:`_dynamic_cap`; numba has no API for this), and
        then prefer the whole L1/shared carveout as shared. The attributes are per
        device. Requests under the cap change nothing: a carveout preferring all
        shared memory leaves ~23 KB of L1 on an H200, too little for a streaming
        kernel's loads in flight (forty-eighth session: the 16-bit LayerNorm backward
        with w and b at 16384 x 4096, 16 KB a block, ran 114 -> 107 us without it,
        bench/NOTES.md)."""
        if nbytes <= self._dynamic_cap(device) or nbytes <= self._smem_limit.get(device, 0):
            return
        from numba.cuda.cudadrv.driver import binding, driver

        cufunc = self.function(device)[0]
        attrs = binding.CUfunction_attribute
        dev = cufunc.device.id
        nbytes = max(nbytes, _DEFAULT_DYNAMIC_SMEM)
        driver.cuKernelSetAttribute(attrs.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    nbytes, cufunc.handle, dev)
        driver.cuKernelSetAttribute(attrs.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                    100, cufunc.handle, dev)
        self._smem_limit[device] = nbytes

    def _config(self, grid, block, shared):
        key = (grid, block, shared)
        cfg = self._configs.get(key)
        if cfg is None:
            from cuda.core import LaunchConfig

            cfg = self._configs[key] = LaunchConfig(grid=grid, block=block, shmem_size=shared)
        return cfg

    def _launch_dispatcher(self, grid, block, stream, args, shared):
        vals = [a.to_numba() if t is None else a for a, t in zip(args, self._convert)]
        nb_stream = cuda.external_stream(stream) if stream else 0
        self.dispatcher[grid, block, nb_stream, shared](*vals)


class PreparedLaunch:
    """One kernel launch with its geometry and fixed arguments baked into a parameter
    block; ``launch(stream, ptrs, values)`` writes the data pointers of the array
    arguments (``ptrs``, in argument order) and the dynamic scalars (``values``, in
    the order of ``dynamic``), then calls ``cuLaunchKernel``.

    The arrays' other ABI fields (sizes, shapes, strides) are those of the template
    arrays given to :meth:`Kernel.prepare`: a caller must only pass pointers to
    arrays of those shapes and strides, so plans are cached by shape.
    """

    __slots__ = ("kernel", "dims", "shared", "device", "_template", "_ptr_slots", "_val_slots",
                 "_tls", "_lib", "_handle", "_bind")

    def __init__(self, kernel, grid, block, shared, args, dynamic=(), device=None):
        kernel.compile()
        if device is None:
            device = _device_of(args, kernel._array_idx)
        self.device = device
        if shared:
            kernel._ensure_smem(shared, device)
        self.kernel = kernel
        self.dims = _dim3(grid) + _dim3(block)
        self.shared = int(shared)
        tmpl = _ParamBuffer(kernel._nslots)
        template, views = tmpl.slots, tmpl.views
        ptr_slots = []
        val_slots = {}
        for i, (a, (first, n, kind, mult)) in enumerate(zip(args, kernel._plan)):
            if kind is None:
                if i in dynamic:
                    raise ValueError(f"argument {i} is an array: its pointer is always dynamic")
                template[first:first + n] = a.abi_args
                ptr_slots.append(first + 4)  # meminfo, parent, nitems, itemsize, data
            else:
                views[kind][first * mult] = a
                val_slots[i] = (kind, first * mult)
        self._template = bytes(template)
        self._ptr_slots = tuple(ptr_slots)
        self._val_slots = tuple(val_slots[i] for i in dynamic)
        self._tls = threading.local()
        self._lib = _libcuda()
        if self._lib is None:
            raise RuntimeError("libcuda.so.1 not found: prepared launches need the CUDA driver")
        self._handle = kernel.function(device)[1]
        self._bind = None if kernel.dependent else _bindings_launch(self._handle)

    def _buffer(self):
        buf = _ParamBuffer(len(self._template) // 8)
        ctypes.memmove(buf.slots, self._template, len(self._template))
        self._tls.buf = buf
        return buf

    def launch(self, stream, ptrs, values=()):
        """Launch on stream handle ``stream`` (int) with the arrays at ``ptrs`` and the
        dynamic scalars ``values``."""
        buf = getattr(self._tls, "buf", None) or self._buffer()
        slots = buf.slots
        for i, p in zip(self._ptr_slots, ptrs):
            slots[i] = p
        if values:
            views = buf.views
            for (kind, idx), v in zip(self._val_slots, values):
                views[kind][idx] = v
        gx, gy, gz, bx, by, bz = self.dims
        prev = _enter(self._lib, self.device)
        if self.kernel.dependent:
            err = _launch_dependent(self._lib, self._handle, self.dims, self.shared, stream,
                                    buf.ptrs)
        elif self._bind is not None:
            launch, kern, streams = self._bind
            hs = streams.get(stream)
            if hs is None:
                hs = streams[stream] = _cu_stream(stream)
            err = launch(kern, gx, gy, gz, bx, by, bz, self.shared, hs, buf.address, 0)[0]
        else:
            err = self._lib.cuLaunchKernel(self._handle, gx, gy, gz, bx, by, bz,
                                           self.shared, stream or None, buf.ptrs, None)
        if prev is not None:
            self._lib.cuCtxSetCurrent(prev)
        if err:
            raise _driver_error(self._lib, int(err))


def _cu_stream(handle):
    from cuda.bindings import driver

    return driver.CUstream(int(handle or 0))


def _bindings_launch(handle):
    """(cuLaunchKernel, CUfunction of raw ``handle``, stream cache) through
    ``cuda.bindings`` (its Cython wrapper converts arguments faster than ctypes: 4.1
    against 5.4 us per launch on the lent H200's host), or None where it is missing."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver.cuLaunchKernel, driver.CUfunction(handle), {}
