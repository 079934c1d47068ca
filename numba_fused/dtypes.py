"""Element types the kernels take, and device helpers to load and store them.

Every kernel computes in float32. Storage is float32, float16 or bfloat16; numba
has no bfloat16 array type, so bfloat16 data travel as uint16 arrays of the raw
bits and are converted in-kernel: widening is exact (the bits become the high half
of a float32) and narrowing rounds to nearest even, as torch and CUDA's
``__float2bfloat16_rn`` do, keeping NaN a NaN.

``loader(dtype)`` / ``storer(dtype)`` return the device functions for a dtype name;
kernel factories call them once and close over the result, so the choice costs
nothing at run time.
"""

import numpy as np

from .intrinsics import f32_as_u32, u32_as_f32
from .jit import inline_device

__all__ = [
    "DTYPES", "STORAGE", "canonical_dtype", "loader", "storer",
    "bf16_bits_to_f32", "f32_to_bf16_bits", "numba_storage_type", "to_float64",
]

# Public dtype name -> NumPy dtype of the array the kernel sees.
STORAGE = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),
}
DTYPES = tuple(STORAGE)

_ALIASES = {
    "float32": "float32", "float": "float32", "fp32": "float32", "f4": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16", "f2": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
}


def canonical_dtype(dtype):
    """Name ('float32' | 'float16' | 'bfloat16') for a dtype-like, or None."""
    name = str(dtype)
    for prefix in ("torch.", "numpy.", "<class 'numpy."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    name = name.rstrip("'>")
    return _ALIASES.get(name)


def numba_storage_type(dtype):
    """numba scalar type of the array elements a kernel sees for ``dtype``."""
    from numba import types

    return {"float32": types.float32, "float16": types.float16,
            "bfloat16": types.uint16}[dtype]


def to_float64(a, name="array"):
    """float64 NumPy copy of ``a`` for the float64 references (``<op>_ref``), or None
    for None: a torch tensor (any device), a CuPy array, a numba device array or
    anything NumPy reads. uint16 data are bfloat16 raw bits (:data:`STORAGE`), so a
    kernel's own bfloat16 array reads as its values. ``name`` goes into the
    TypeError raised for what cannot be read as numbers."""
    if a is None:
        return None
    kind = type(a).__name__
    if hasattr(a, "detach"):
        return a.detach().cpu().double().numpy()
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        a = a.get()
    elif hasattr(a, "copy_to_host"):
        a = a.copy_to_host()
    try:
        a = np.asarray(a)
        if a.dtype == np.uint16:
            return (a.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
        return a.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: cannot read {kind} as float64") from exc


_ROUND_BIAS = np.uint32(0x7FFF)
_ONE = np.uint32(1)
_QNAN_BF16 = np.uint16(0x7FC0)


@inline_device
def bf16_bits_to_f32(bits):
    """float32 value of bfloat16 raw ``bits`` (exact)."""
    return u32_as_f32(np.uint32(bits) << np.uint32(16))


@inline_device
def f32_to_bf16_bits(x):
    """bfloat16 raw bits of float32 ``x``, rounded to nearest even; NaN stays NaN."""
    if x != x:
        return _QNAN_BF16
    u = f32_as_u32(x)
    u = u + _ROUND_BIAS + ((u >> np.uint32(16)) & _ONE)
    return np.uint16(u >> np.uint32(16))


@inline_device
def _load_f32(a, idx):
    return a[idx]


@inline_device
def _load_f16(a, idx):
    return np.float32(a[idx])


@inline_device
def _load_bf16(a, idx):
    return bf16_bits_to_f32(a[idx])


@inline_device
def _store_f32(a, idx, v):
    a[idx] = v


@inline_device
def _store_f16(a, idx, v):
    a[idx] = np.float16(v)


@inline_device
def _store_bf16(a, idx, v):
    a[idx] = f32_to_bf16_bits(v)


_LOADERS = {"float32": _load_f32, "float16": _load_f16, "bfloat16": _load_bf16}
_STORERS = {"float32": _store_f32, "float16": _store_f16, "bfloat16": _store_bf16}


def loader(dtype):
    """Device function ``load(a, idx) -> float32`` for arrays holding ``dtype``."""
    return _LOADERS[dtype]


def storer(dtype):
    """Device function ``store(a, idx, value_f32)`` rounding into ``dtype``."""
    return _STORERS[dtype]
