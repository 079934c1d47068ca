"""Per-signature launch plans for the CuPy front ends (``interop.torch._fast``'s
counterpart).

The array-level functions validate, view, plan, allocate and launch on every call:
for LayerNorm's backward that is ~180 us of Python a call on the lent H100's host
(bench/NOTES.md, seventy-sixth session), far more than its kernels at the sizes of
a model's step. For one *signature* every decision comes out the same, so a front
end runs the array-level function once per signature (it validates and raises as
usual) and then caches the op module's plan (:mod:`numba_fused.plan`). A later call
of that signature allocates its outputs with CuPy on the inputs' device and
launches the plan on CuPy's current stream there.

The signature of an input is its type (``cupy.ndarray`` exactly, else the call
takes the array-level path, which validates), shape, dtype, strides, device and
address modulo 16; scalar flags enter the key with their types, so a value the
array-level checks would refuse (``deterministic=1``) can never reach a plan cached
for an accepted one (``True``). A signature that fails validation is never cached:
it raises again on every call. A signature whose work has no plan (a gated unit's
weights that are not read in place: the array-level function makes their copy) is
cached as such and keeps the array-level path. Under the simulator nothing is
cached. A plan keeps
the kernels it was recorded with (as interop.torch's do): tuning contexts such as
``numba_fused.linear_act.use_wgmma`` or ``numba_fused.layer_norm.tuning`` entered later
do not change a signature already cached.
"""

import cupy

from interop.dlpack import cupy_empty
from numba_fused import checks
from numba_fused.launch import SIMULATOR
from numba_fused.plan import PlanCache

__all__ = ["ENABLED", "PlanCache", "cached", "seeded"]

# The fast path can be switched off (tests compare both; a debugging aid).
ENABLED = [not SIMULATOR]


def _signature(arrays):
    """(key part, data pointers) of ``arrays`` (CuPy arrays or None), or (None, None)
    where one is not exactly a ``cupy.ndarray``."""
    nd = cupy.ndarray
    sig, ptrs = [], []
    for a in arrays:
        if a is None:
            sig.append(None)
            ptrs.append(0)
            continue
        if type(a) is not nd:
            return None, None
        mem = a.data
        ptr = mem.ptr
        sig.append((a.shape, a.dtype, a.strides, ptr & 15, mem.device_id))
        ptrs.append(ptr)
    return tuple(sig), ptrs


def _new(shape, dtype, zero):
    """A plan's allocator: a CuPy array on the current device (poisoned as the
    array-level path's, :func:`interop.dlpack.cupy_empty`), and its pointer."""
    a = cupy.zeros(shape, dtype=dtype) if zero else cupy_empty(shape, dtype)
    return a, a.data.ptr


def _replay(plan, ptrs, device, values):
    if cupy.cuda.runtime.getDevice() == device:
        return plan.run(cupy.cuda.get_current_stream().ptr, ptrs, _new, device, values)
    with cupy.cuda.Device(device):
        return plan.run(cupy.cuda.get_current_stream().ptr, ptrs, _new, device, values)


def cached(cache, arrays, flags, slow, record, values=None):
    """One front-end call through ``cache`` (a :class:`PlanCache`).

    arrays: the plan's inputs in its recording order (CuPy arrays or None; the first
    one is never None and decides the device). flags: the call's other arguments that
    fix the plan (hashable). slow: runs the array-level function (validating) and
    returns its outputs as the plan does (a tuple, None where absent). record: builds
    the plan of this signature (called only after ``slow`` returned, and only where no
    array is empty), or returns None where the signature has none: its calls then
    always take ``slow`` (without calling ``record`` again). values: None, or a
    callable giving the call's dynamic scalars (a dropout's seed and offset words; it
    validates them, so an invalid seed raises as on the array-level path).
    """
    sig, ptrs = _signature(arrays)
    if sig is not None:
        key = (sig, tuple((type(f), f) for f in flags))
        plan = cache.get(key)
        if plan is False:
            return slow()
        if plan is not None:
            return _replay(plan, ptrs, arrays[0].data.device_id,
                           () if values is None else values())
    out = slow()
    if sig is not None and ENABLED[0] and all(a is None or a.size for a in arrays):
        plan = record()
        cache.put(key, False if plan is None else plan)
    return out


def seeded(rng_values, seed, offset):
    """A ``values`` callable for :func:`cached`: an op module's ``rng_values(seed,
    offset)`` (dropout's, attention's), ``seed`` and ``offset`` checked as the
    array-level path checks them."""
    return lambda: rng_values(checks.check_int(seed, "seed"), checks.check_int(offset, "offset"))
