"""CuPy front end of the fused linear + activation kernels: the array-level
functions of ``numba_fused.linear_act`` taking and returning CuPy arrays, launched
on CuPy's current stream. CuPy has no bfloat16: float32 and float16 only."""

from numba_fused import linear_act as _la

__all__ = ["linear_act", "linear_act_forward", "linear_act_dgrad", "linear_act_backward",
           "linear_weight_grad", "activation_backward"]


def _require_cupy(arrays):
    import cupy

    for arr, name in arrays:
        if arr is not None and not isinstance(arr, cupy.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {type(arr).__name__}")


def linear_act(x, weight, bias=None, activation="none"):
    """``act(x @ weight^T + bias)`` (``x [..., K]``, ``weight [N, K]``, ``bias [N]``)."""
    return linear_act_forward(x, weight, bias, activation)


def linear_act_forward(x, weight, bias=None, activation="none", save_preact=False):
    """As :func:`numba_fused.linear_act_forward`: ``y`` or ``(y, preact)``."""
    _require_cupy([(x, "x"), (weight, "weight"), (bias, "bias")])
    return _la.linear_act_forward(x, weight, bias, activation, save_preact)


def linear_act_dgrad(grad_out, weight, activation="none", preact=None):
    """As :func:`numba_fused.linear_act_dgrad`: ``(grad_out @ weight) * act'(preact)``."""
    _require_cupy([(grad_out, "grad_out"), (weight, "weight"), (preact, "preact")])
    return _la.linear_act_dgrad(grad_out, weight, activation, preact)


def linear_act_backward(grad_out, x, weight, preact=None, activation="none"):
    """As :func:`numba_fused.linear_act_backward`: ``(grad_x, grad_weight, grad_bias)``."""
    _require_cupy([(grad_out, "grad_out"), (x, "x"), (weight, "weight"), (preact, "preact")])
    return _la.linear_act_backward(grad_out, x, weight, preact, activation)


def linear_weight_grad(grad_z, x, need_bias_grad=True):
    """As :func:`numba_fused.linear_act.linear_weight_grad`."""
    _require_cupy([(grad_z, "grad_z"), (x, "x")])
    return _la.linear_weight_grad(grad_z, x, need_bias_grad)


def activation_backward(grad_out, preact, activation):
    """As :func:`numba_fused.linear_act.activation_backward`: ``grad_out * act'(preact)``."""
    _require_cupy([(grad_out, "grad_out"), (preact, "preact")])
    return _la.activation_backward(grad_out, preact, activation)
