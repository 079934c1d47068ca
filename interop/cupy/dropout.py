"""CuPy front end of the fused ``dropout(act(x + bias), p)``: the array-level functions
of :mod:`numba_fused.dropout` taking and returning CuPy arrays, launched on CuPy's
current stream. CuPy has no bfloat16: float32 and float16 only."""

import cupy

from numba_fused import dropout as _dropout

__all__ = ["dropout_bias_act_forward", "dropout_bias_act_backward"]


def _require_cupy(obj, name, optional=False):
    if obj is None and optional:
        return
    if not isinstance(obj, cupy.ndarray):
        raise TypeError(f"{name} must be a cupy.ndarray, got {type(obj).__name__}")


def dropout_bias_act_forward(x, bias=None, p=0.0, seed=0, offset=0, activation="none", *,
                             return_mask=False):
    """``y = dropout(act(x + bias), p)`` (see :func:`numba_fused.dropout_bias_act_forward`);
    returns y, or ``(y, mask)`` with ``return_mask``, as CuPy arrays."""
    _require_cupy(x, "x")
    _require_cupy(bias, "bias", optional=True)
    return _dropout.dropout_bias_act_forward(x, bias, p, seed, offset, activation,
                                             return_mask=return_mask)


def dropout_bias_act_backward(grad_out, x, bias=None, p=0.0, seed=0, offset=0, activation="none",
                              need_bias_grad=True, *, mask=None):
    """``(grad_x, grad_bias_or_None)`` as CuPy arrays (see
    :func:`numba_fused.dropout_bias_act_backward`)."""
    _require_cupy(grad_out, "grad_out")
    _require_cupy(x, "x", optional=True)
    _require_cupy(bias, "bias", optional=True)
    _require_cupy(mask, "mask", optional=True)
    return _dropout.dropout_bias_act_backward(grad_out, x, bias, p, seed, offset, activation,
                                              need_bias_grad, mask=mask)
