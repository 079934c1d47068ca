"""The device-function decorator of the kernels' helpers."""

from numba import config, cuda


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
    """
    if config.ENABLE_CUDASIM:
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)
