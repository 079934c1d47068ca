"""Zero-copy exchange between callers' arrays and the kernels.

:func:`as_kernel_array` accepts torch tensors, CuPy arrays, numba device arrays and
any object with ``__cuda_array_interface__`` or ``__dlpack__``, and returns a
:class:`KernelArray`: pointer, shape, strides and dtype name, plus the owner it
came from. Nothing is copied; bfloat16 tensors are seen as their uint16 bits. The
library of the first input decides where outputs are allocated
(:func:`empty_like_lib`) and which stream kernels run on (:func:`stream_handle`):
torch's current stream for torch, CuPy's current stream for CuPy, the default
stream otherwise, so no host synchronisation is needed and work stays ordered.

Under the CUDA simulator the same entry points take host data instead (NumPy
arrays and CPU torch tensors), so the test-suite runs unchanged on CPU-only CI.

Torch and CuPy are never imported here unless the caller's object comes from them.
"""

import contextlib
import functools
import sys

import numpy as np

from numba_fused.dtypes import STORAGE, canonical_dtype
from numba_fused.launch import SIMULATOR, pointer_device

__all__ = [
    "KernelArray", "as_kernel_array", "empty_like_lib", "cupy_empty", "stream_handle",
    "poison_outputs", "library_of", "c_strides",
]

_POISON = [False]
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4,
             "uint32": 4, "int64": 8, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2,
             "bool": 1}


@contextlib.contextmanager
def poison_outputs(enabled=True):
    """Fill every output allocated inside the block with NaN (a test aid: an
    element a kernel forgot to write then fails any numeric comparison)."""
    old = _POISON[0]
    _POISON[0] = enabled
    try:
        yield
    finally:
        _POISON[0] = old


def library_of(obj):
    """'torch', 'cupy', 'numpy', 'numba' or 'cai' for a caller's array."""
    mod = type(obj).__module__ or ""
    root = mod.split(".", 1)[0]
    if root in ("torch", "cupy", "numpy"):
        return root
    if root in ("numba", "numba_cuda"):
        return "numba"
    return "cai"


class KernelArray:
    """A caller's array as kernels take it.

    owner: the caller's object (kept alive while the view is used).
    lib: its library ('torch', 'cupy', 'numba', 'cai', or 'numpy' under the simulator).
    dtype: 'float32' | 'float16' | 'bfloat16' (or another NumPy name for index arrays).
    shape, strides: tuples; strides in elements.
    ptr: device address (GPU) or None; host: NumPy view (simulator) or None.
    device: CUDA device ordinal (GPU) or None.
    """

    __slots__ = ("owner", "lib", "dtype", "shape", "strides", "ptr", "host", "device",
                 "itemsize", "_abi", "_size")

    def __init__(self, owner, lib, dtype, shape, strides, ptr=None, host=None, device=None):
        # shape / strides: tuples of Python ints (callers convert: this is per-call code,
        # so nothing here is computed before it is needed).
        self.owner = owner
        self.lib = lib
        self.dtype = dtype
        self.shape = shape
        self.strides = strides
        self.ptr = ptr
        self.host = host
        self.device = device
        self.itemsize = _ITEMSIZE.get(dtype) or _np_storage(dtype).itemsize
        self._abi = None
        self._size = None

    def __repr__(self):
        return f"KernelArray({self.lib}, {self.dtype}, shape={self.shape}, strides={self.strides})"

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = self._size
        if n is None:
            n = 1
            for s in self.shape:
                n *= s
            self._size = n
        return n

    def is_contiguous(self):
        shape = self.shape
        if len(shape) == 1:
            return self.strides[0] == 1 or shape[0] <= 1
        if self.size == 0:
            return True
        expect = 1
        for dim, stride in zip(reversed(shape), reversed(self.strides)):
            if dim != 1 and stride != expect:
                return False
            expect *= dim
        return True

    def reshape(self, shape):
        """Same memory under ``shape`` (a tuple of ints); only for C-contiguous arrays."""
        if not self.is_contiguous():
            raise ValueError("reshape of a non-contiguous KernelArray")
        shape = tuple(shape)
        host = None if self.host is None else self.host.reshape(shape)
        out = KernelArray(self.owner, self.lib, self.dtype, shape, c_strides(shape),
                          self.ptr, host, self.device)
        out._size = self._size
        return out

    def flat2d(self):
        """``[prod(leading dims), last dim]`` view of a C-contiguous array."""
        n = self.shape[-1] if self.shape else 1
        m = self.size // n if n else 0
        return self.reshape((m, n))

    @property
    def abi_args(self):
        """The array flattened as numba's kernel ABI takes it."""
        abi = self._abi
        if abi is None:
            item = self.itemsize
            strides = self.strides
            if len(strides) == 1:
                sb = (strides[0] * item,)
            elif len(strides) == 2:
                sb = (strides[0] * item, strides[1] * item)
            else:
                sb = tuple(st * item for st in strides)
            abi = self._abi = (0, 0, self.size, item, self.ptr, *self.shape, *sb)
        return abi

    def to_numba(self):
        """A numba device array over the same memory (numba's own launch path)."""
        from numba import cuda

        item = self.itemsize
        cai = {
            "shape": self.shape,
            "strides": tuple(s * item for s in self.strides),
            "typestr": _np_storage(self.dtype).str,
            "data": (self.ptr, False),
            "version": 3,
        }
        return cuda.from_cuda_array_interface(cai, owner=self.owner, sync=False)


def _np_storage(dtype):
    return STORAGE.get(dtype) or np.dtype(dtype)


_TORCH_DTYPE_NAMES = {}


def _torch_dtype_name(dt):
    name = _TORCH_DTYPE_NAMES.get(dt)
    if name is None:
        name = canonical_dtype(dt) or str(dt).replace("torch.", "")
        _TORCH_DTYPE_NAMES[dt] = name
    return name


@functools.lru_cache(maxsize=None)
def _torch_dtype(name):
    import torch

    return {"float32": torch.float32, "float16": torch.float16,
            "bfloat16": torch.bfloat16}.get(name) or getattr(torch, name)


def _torch_empty_like(t):
    import torch

    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _from_torch(t, name):
    dtype = _torch_dtype_name(t.dtype)
    if SIMULATOR:
        import torch

        if t.device.type != "cpu":
            raise TypeError(f"{name}: under the CUDA simulator pass CPU tensors, got device {t.device}")
        d = t.detach()
        if dtype == "bfloat16":
            host = d.view(torch.int16).numpy().view(np.uint16)
        else:
            host = d.numpy()
        return KernelArray(t, "torch", dtype, tuple(t.shape), t.stride(), host=host)
    if not t.is_cuda:
        raise TypeError(f"{name} must be a CUDA tensor, got a tensor on {t.device}")
    return KernelArray(t, "torch", dtype, tuple(t.shape), t.stride(), ptr=t.data_ptr(),
                       device=t.get_device())


def _from_cai(obj, name, lib):
    cai = obj.__cuda_array_interface__
    dt = np.dtype(cai["typestr"])
    dtype = canonical_dtype(dt.name) or dt.name
    shape = tuple(int(d) for d in cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        el = []
        acc = 1
        for d in reversed(shape):
            el.append(acc)
            acc *= d
        el = tuple(reversed(el))
    else:
        if any(s % dt.itemsize for s in strides):
            raise ValueError(f"{name}: strides {strides} are not a multiple of the item size")
        el = tuple(int(s) // dt.itemsize for s in strides)
    ptr = int(cai["data"][0])
    if lib == "cupy":
        device = obj.device.id
    else:
        # The CUDA Array Interface does not name the device: ask the driver, so
        # kernels launch where the memory is (issue #21).
        device = pointer_device(ptr)
    return KernelArray(obj, lib, dtype, shape, el, ptr=ptr, device=device)


def as_kernel_array(obj, name):
    """A zero-copy :class:`KernelArray` of ``obj``; ``name`` is the argument's name
    used in error messages. Raises TypeError for objects that are not GPU arrays
    (or host arrays under the simulator)."""
    if isinstance(obj, KernelArray):
        return obj
    lib = library_of(obj)
    if lib == "torch" and hasattr(obj, "data_ptr"):
        return _from_torch(obj, name)
    if lib == "numpy" and isinstance(obj, np.ndarray):
        if not SIMULATOR:
            raise TypeError(f"{name} is a host NumPy array; pass a GPU array (torch, CuPy, numba)")
        dtype = canonical_dtype(obj.dtype.name) or obj.dtype.name
        strides = tuple(s // obj.itemsize for s in obj.strides)
        return KernelArray(obj, "numpy", dtype, tuple(obj.shape), strides, host=obj)
    if SIMULATOR and lib == "numba" and hasattr(obj, "copy_to_host"):
        # numba's simulated device arrays wrap a host ndarray.
        host = getattr(obj, "_ary", None)
        if host is None:
            raise TypeError(f"{name}: unsupported simulator array {type(obj).__name__}")
        k = as_kernel_array(host, name)
        k.owner, k.lib = obj, "numba"
        return k
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, name, lib)
    if hasattr(obj, "__dlpack__"):
        return as_kernel_array(_import_dlpack(obj, name), name)
    raise TypeError(
        f"{name} must be a GPU array (torch tensor, CuPy array, numba device array, or an "
        f"object with __cuda_array_interface__ or __dlpack__), got {type(obj).__name__}"
    )


def _import_dlpack(obj, name):
    if "torch" in sys.modules or _importable("torch"):
        import torch

        return torch.from_dlpack(obj)
    if _importable("cupy"):
        import cupy

        return cupy.from_dlpack(obj)
    raise TypeError(f"{name} only offers __dlpack__; install torch or CuPy to import it")


def _importable(mod):
    import importlib.util

    return importlib.util.find_spec(mod) is not None


def cupy_empty(shape, dtype):
    """``cupy.empty`` on the current device, filled with NaN (floating) or the type's
    largest value (integer; CuPy refuses -1 for unsigned types) under
    :func:`poison_outputs`."""
    import cupy

    a = cupy.empty(shape, dtype=dtype)
    if _POISON[0]:
        a.fill(np.nan if a.dtype.kind == "f" else np.iinfo(a.dtype).max)
    return a


def empty_like_lib(like, shape, dtype):
    """A new array of ``shape`` / ``dtype`` in the library and on the device of
    ``like`` (a KernelArray, or a plan's stand-in for one: no owner, its library and
    device only); returned as a KernelArray whose owner is the caller-facing object."""
    shape = tuple(int(s) for s in shape)
    lib = like.lib
    poison = _POISON[0]
    if lib == "torch":
        src = like.owner
        if src is None:
            # A plan's stand-in (a stream buffer made for a stream the plan first
            # meets at replay, e.g. a CUDA graph's capture stream).
            import torch

            dev = torch.device("cpu") if SIMULATOR else torch.device("cuda", like.device)
            t = torch.empty(shape, dtype=_torch_dtype(dtype), device=dev)
        # The owner's own shape: ``like`` may be a reshaped view of it (same size,
        # another shape), and empty_like follows the owner.
        elif shape == tuple(src.shape) and dtype == like.dtype and src.is_contiguous():
            # empty_like is torch's cheapest allocation call (~1.8 us vs ~3.4 us
            # for torch.empty on the lent GPU's host).
            t = _torch_empty_like(src)
        else:
            t = src.new_empty(shape, dtype=_torch_dtype(dtype))
        if poison:
            t.fill_(float("nan") if t.is_floating_point() else -1)
        return _from_torch(t, "output")
    if lib == "cupy":
        import cupy

        if dtype == "bfloat16":
            raise TypeError("CuPy has no bfloat16 arrays")
        with cupy.cuda.Device(like.device):
            a = cupy_empty(shape, dtype)
        return as_kernel_array(a, "output")
    storage = _np_storage(dtype)
    if SIMULATOR:
        a = np.empty(shape, dtype=storage)
        if poison:
            a.fill(np.nan if storage.kind == "f" else np.iinfo(storage).max)
        return KernelArray(a, "numpy", dtype, shape, c_strides(shape), host=a)
    from numba import cuda

    with contextlib.ExitStack() as on_device:
        if like.device is not None:
            on_device.enter_context(cuda.gpus[like.device])
        if poison:
            fill = np.nan if storage.kind == "f" else np.iinfo(storage).max
            a = cuda.to_device(np.full(shape, fill, dtype=storage))
        else:
            a = cuda.device_array(shape, dtype=storage)
    k = _from_cai(a, "output", "numba")
    k.dtype = dtype
    return k


def c_strides(shape):
    """Element strides of a C-contiguous array of ``shape``."""
    out = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@functools.lru_cache(maxsize=None)
def _torch_raw_stream():
    """device index -> raw handle of torch's current stream. torch's private
    ``_cuda_getCurrentRawStream`` (what Triton's launcher uses) skips building a
    Stream object; the public call is the fallback."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


def stream_handle(arr):
    """Raw handle of the stream to launch on for work on ``arr`` (0 = default)."""
    if SIMULATOR:
        return 0
    if arr.lib == "torch":
        return _torch_raw_stream()(arr.device)
    if arr.lib == "cupy":
        import cupy

        if arr.device is None or arr.device == cupy.cuda.runtime.getDevice():
            return cupy.cuda.get_current_stream().ptr
        with cupy.cuda.Device(arr.device):
            return cupy.cuda.get_current_stream().ptr
    return 0
