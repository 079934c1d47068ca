"""Per-signature launch plans: the host-cost fast path of the torch front ends.

An op's array-level function validates its inputs, views them, picks a kernel and a
grid, allocates its outputs and launches: 40-80 us of Python per call (bench/NOTES.md,
"Host launch cost"). For a given *signature* (shapes, dtypes, devices, flags and the
16-byte alignment of each input) every one of those decisions comes out the same, so
the front ends run the array-level function once per signature, which validates and
raises as usual, and then cache a plan from the op module (e.g.
:func:`numba_fused.linear_act.forward_plan`, built on
:class:`numba_fused.launch.PreparedLaunch`). A later call with the same signature
allocates its outputs with ``torch.empty`` and launches the plan with the tensors'
data pointers on torch's current stream.

A signature that fails validation is never cached, so it raises again on every
call; the simulator (CPU tensors, no driver) always takes the array-level path.
"""

import functools

import torch

from interop.dlpack import _torch_dtype, _torch_dtype_name, _torch_raw_stream
from numba_fused.launch import SIMULATOR
from numba_fused.plan import PlanCache

__all__ = ["PlanCache", "raw_stream", "dtype_name", "aligned16", "residue16", "allocator",
           "data_ptr", "tensor_sig", "run_plan", "ENABLED", "FAST_APPLY", "function_apply"]

# The fast path can be switched off (tests compare both; a debugging aid).
ENABLED = [not SIMULATOR]
# function_apply's shortcut past torch's Python Function.apply (benchmarks compare both).
FAST_APPLY = [True]

dtype_name = _torch_dtype_name


def raw_stream(device):
    """Handle of torch's current stream on ``device`` (a torch.device)."""
    return _torch_raw_stream()(device.index)


def run_plan(plan, t, ptrs, values=()):
    """``plan.run`` on CUDA tensor ``t``'s device and torch's current stream there.

    The hot path of every front end (issue #20: in a back-to-back loop each Python
    step costs about twice what it costs alone), so the device is ``t``'s ordinal
    (``get_device``: no torch.device object), and the stream getter and allocator
    are looked up once per device."""
    d = t.get_device()
    try:
        stream, new = _PER_DEVICE[d]
    except KeyError:
        stream, new = _PER_DEVICE.setdefault(d, (_torch_raw_stream(), allocator(d)))
    return plan.run(stream(d), ptrs, new, d, values)


# device ordinal -> (raw stream getter, allocator), filled by run_plan.
_PER_DEVICE = {}


def aligned16(t):
    """Whether tensor ``t`` (or None) starts 16-byte aligned (None counts as aligned)."""
    return t is None or t.data_ptr() % 16 == 0


def residue16(t):
    """``t``'s data pointer modulo 16 (None: -1): a plan key part for launchers whose
    choices depend on finer alignment than 16 bytes (dropout's 8-byte masks)."""
    return -1 if t is None else t.data_ptr() % 16


def data_ptr(t):
    """Data pointer of tensor ``t``, 0 for None."""
    return 0 if t is None else t.data_ptr()


def tensor_sig(t):
    """(shape, dtype, device) of an optional tensor, for plan keys."""
    return None if t is None else (t.shape, t.dtype, t.device)


@functools.lru_cache(maxsize=None)
def allocator(device):
    """``new(shape, dtype name, zero) -> (tensor, pointer)`` on ``device`` (a
    torch.device or a CUDA ordinal): how :meth:`numba_fused.plan.Plan.run` allocates
    through torch's caching allocator."""
    dtypes = {}
    empty, zeros = torch.empty, torch.zeros

    def new(shape, dtype, zero):
        dt = dtypes.get(dtype)
        if dt is None:
            dt = dtypes[dtype] = _torch_dtype(dtype)
        t = (zeros if zero else empty)(shape, dtype=dt, device=device)
        return t, t.data_ptr()
    return new


def function_apply(function_cls):
    """``function_cls.apply`` (a ``torch.autograd.Function`` whose ``forward`` takes
    ``ctx``, no ``setup_context``) without the Python layer torch wraps around it.

    ``Function.apply`` is Python: it checks for functorch transforms, walks the
    arguments with pytree to unwrap dead functorch wrappers, then calls the C
    ``_FunctionBase.apply`` that builds the graph node. Outside functorch transforms
    the first two do nothing for plain tensors, and the C call is all that is left;
    under a transform (``torch.func.grad``, ``vmap``) this calls ``Function.apply``.
    """
    generic = function_cls.apply
    c_apply = getattr(torch._C._FunctionBase, "__dict__", {}).get("apply")
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    if c_apply is None or active is None or not hasattr(c_apply, "__get__"):
        return generic
    c_apply = c_apply.__get__(None, function_cls)

    def apply(*args):
        if FAST_APPLY[0] and not active():
            return c_apply(*args)
        return generic(*args)

    return apply
