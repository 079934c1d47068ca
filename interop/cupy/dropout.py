"""CuPy front end of the fused ``dropout(act(x + bias), p)``: the array-level functions
of :mod:`numba_fused.dropout` taking and returning CuPy arrays, launched on CuPy's
current stream. CuPy has no bfloat16: float32 and float16 only.

After a signature's first call (which validates, see :mod:`interop.cupy._fast`), calls
of that signature replay a cached launch plan with the call's seed and offset: the
same kernels and bits, without the array-level path's host work."""

import cupy

from numba_fused import dropout as _dropout

from ._fast import PlanCache, cached, seeded

__all__ = ["dropout_bias_act_forward", "dropout_bias_act_backward"]


def _require_cupy(obj, name, optional=False):
    if obj is None and optional:
        return
    if not isinstance(obj, cupy.ndarray):
        raise TypeError(f"{name} must be a cupy.ndarray, got {type(obj).__name__}")


# Plans per signature (interop.cupy._fast): the forward's inputs are (x, bias), the
# backward's (grad_out, x, bias, mask), as numba_fused.dropout records them.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def dropout_bias_act_forward(x, bias=None, p=0.0, seed=0, offset=0, activation="none", *,
                             return_mask=False):
    """``y = dropout(act(x + bias), p)`` (see :func:`numba_fused.dropout_bias_act_forward`);
    returns y, or ``(y, mask)`` with ``return_mask``, as CuPy arrays."""
    def slow():
        _require_cupy(x, "x")
        _require_cupy(bias, "bias", optional=True)
        out = _dropout.dropout_bias_act_forward(x, bias, p, seed, offset, activation,
                                                return_mask=return_mask)
        return out if return_mask else (out, None)

    y, mask = cached(_FWD_PLANS, (x, bias), (p, activation, return_mask), slow,
                     lambda: _dropout.forward_plan(x, bias, p, activation, return_mask),
                     values=seeded(_dropout.rng_values, seed, offset))
    return (y, mask) if return_mask else y


def dropout_bias_act_backward(grad_out, x, bias=None, p=0.0, seed=0, offset=0, activation="none",
                              need_bias_grad=True, *, mask=None):
    """``(grad_x, grad_bias_or_None)`` as CuPy arrays (see
    :func:`numba_fused.dropout_bias_act_backward`)."""
    def slow():
        _require_cupy(grad_out, "grad_out")
        _require_cupy(x, "x", optional=True)
        _require_cupy(bias, "bias", optional=True)
        _require_cupy(mask, "mask", optional=True)
        return _dropout.dropout_bias_act_backward(grad_out, x, bias, p, seed, offset,
                                                  activation, need_bias_grad, mask=mask)

    return cached(_BWD_PLANS, (grad_out, x, bias, mask), (p, activation, need_bias_grad),
                  slow, lambda: _dropout.backward_plan(grad_out, x, bias, p, activation,
                                                       need_bias_grad, mask),
                  values=seeded(_dropout.rng_values, seed, offset))
