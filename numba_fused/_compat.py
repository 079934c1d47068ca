"""Compatibility shims applied before numba compiles anything.

numba-cuda 0.30.4 registers an overload for ``np.row_stack`` while it sets up its
typing context, so the first kernel compile under NumPy 2.5 (which removed the
alias) fails with ``AttributeError: module 'numpy' has no attribute 'row_stack'``.
This is numba-cuda issue #907, closed without a fix release. ``np.row_stack`` was
always an alias of ``np.vstack``, so restoring the alias is exact.
"""

import numpy as np


def ensure_numpy_row_stack(module=np):
    """Restore ``module.row_stack`` as ``module.vstack`` when it is missing.

    Returns True when the alias was added, False when it was already there (then
    nothing is touched, so NumPy versions that still have it keep their own).
    """
    try:
        getattr(module, "row_stack")
        return False
    except AttributeError:
        module.row_stack = module.vstack
        return True
