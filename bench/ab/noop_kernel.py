"""The kernel factories' no-op twins for the bound scripts (ln_dwdb_bound.py,
dropout_bias_bound.py): a kernel with the real one's name + "_noop", argument types,
launch mode and jit options, and a body that writes nothing, so a launch costs what the
real launch costs without its work."""

import functools


def noop_factory(real, body):
    """A cached factory taking ``real``'s arguments and returning the no-op twin (body
    ``body``, an empty Python function of the kernel's parameters) of ``real``'s
    kernel for them."""
    from numba_fused.launch import Kernel

    @functools.lru_cache(maxsize=None)
    def make(*args, **kwargs):
        k = real(*args, **kwargs)
        return Kernel(k.name + "_noop", body, k.argtypes, dependent=k.dependent,
                      **k.jit_options)

    return make
