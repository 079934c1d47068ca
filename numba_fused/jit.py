"""The device-function decorator of the kernels' helpers."""

import numpy as np
from numba import config, cuda

# _intern_key(fn) -> dispatcher; see inline_device.
_INTERNED = {}


class _Same:
    """A closure value compared by identity; holds it so its id is never reused."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return type(other) is _Same and other.obj is self.obj


def _freeze(value):
    """A hashable key equal for two values exactly when numba would compile the same
    code from them: scalars by type and value (floats by their bits, so -0.0 != 0.0
    and NaN == NaN), tuples element-wise, anything else by identity."""
    kind = type(value)
    if value is None or kind in (bool, int, str, bytes):
        return (kind, value)
    if kind is float:
        return (kind, value.hex())
    if isinstance(value, np.generic):
        return (kind, value.tobytes())
    if kind is tuple:
        return (kind, tuple(_freeze(v) for v in value))
    return _Same(value)


def _intern_key(fn):
    """The key of ``fn``'s compiled form, or None where it cannot be told safely
    (an empty closure cell: a helper that refers to itself or to a later name)."""
    try:
        cells = tuple(_freeze(c.cell_contents) for c in fn.__closure__ or ())
    except ValueError:
        return None
    kwdefaults = tuple(sorted((k, _freeze(v)) for k, v in (fn.__kwdefaults__ or {}).items()))
    return (fn.__code__, _Same(fn.__globals__), cells, _freeze(fn.__defaults__ or ()),
            kwdefaults)


def inline_device(fn):
    """``cuda.jit(device=True)`` for a helper that NVVM always inlines into its callers.

    Helpers must be inlined: a call passes its local arrays (register tiles, 8-value
    groups) through a stack frame, and numba leaves plain device functions as calls
    when they return tuples. Two ways exist, with the same code after LLVM's inliner:

    - ``inline="always"`` (numba's IR inliner) deep-copies the callee's IR at every
      call site before typing. The dropout backward kernel spent ~30 of its 45 s of
      compile there (cProfile, 2-core host): a user's first call waited for it;
    - ``forceinline=True`` (the ``alwaysinline`` attribute, inlined by NVVM): the
      helper is typed and lowered once per signature.

    This is the second. ``tools/ptx_report.py`` shows each kernel's registers, spills
    and stack (0 B: no call frame) and its compile time. The simulator's jit has no
    ``forceinline`` option; it runs the Python function as is.

    Most helpers are closures made inside a kernel factory, so every kernel the factory
    makes would type and lower its own copy of each. A helper is therefore interned:
    two closures of the same code, globals, defaults and closure values (compared as
    ``_freeze`` says) share one dispatcher, so a process compiles each distinct helper
    once per signature, as it would a module-level one. The kernels' PTX is unchanged.
    """
    if config.ENABLE_CUDASIM:
        return cuda.jit(device=True)(fn)
    key = _intern_key(fn)
    if key is None:
        return cuda.jit(device=True, forceinline=True)(fn)
    found = _INTERNED.get(key)
    if found is None:
        found = _INTERNED[key] = cuda.jit(device=True, forceinline=True)(fn)
    return found
