"""Argument checks shared by the ops' launchers. Each raises before any launch or
allocation, with a message naming the argument and what was expected."""

import numbers

from interop.dlpack import as_kernel_array

from .dtypes import DTYPES

__all__ = ["floating_array", "optional_array", "check_same_dtype", "check_same_device",
           "check_probability", "check_int", "require_contiguous"]


def floating_array(obj, name, dtypes=DTYPES):
    """KernelArray of ``obj`` whose dtype is one of ``dtypes``."""
    if obj is None:
        raise TypeError(f"{name} is required, got None")
    arr = as_kernel_array(obj, name)
    if arr.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype in {dtypes}, got {arr.dtype}")
    return arr


def optional_array(obj, name, dtypes=DTYPES):
    return None if obj is None else floating_array(obj, name, dtypes)


def check_same_dtype(ref, ref_name, *others):
    """others: (KernelArray or None, name) pairs that must share ref's dtype."""
    for arr, name in others:
        if arr is not None and arr.dtype != ref.dtype:
            raise TypeError(f"{name} has dtype {arr.dtype} but {ref_name} has {ref.dtype}")


def check_same_device(ref, ref_name, *others):
    for arr, name in others:
        # device is None for arrays that do not say (numba / CUDA Array Interface).
        if arr is None or arr.device is None or ref.device is None:
            continue
        if arr.device != ref.device:
            raise ValueError(f"{name} is on device {arr.device} but {ref_name} is on {ref.device}")


def check_probability(p, name="p"):
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def check_int(value, name, lo=0, hi=2**64 - 1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return int(value)


def require_contiguous(arr, name):
    if not arr.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major), got strides {arr.strides} "
                         f"for shape {arr.shape}; call .contiguous() first")
    return arr
