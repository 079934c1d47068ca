"""CuPy front end of the fused linear + activation kernels: the array-level
functions of ``numba_fused.linear_act`` taking and returning CuPy arrays, launched
on CuPy's current stream. CuPy has no bfloat16: float32 and float16 only.

``linear_act`` / ``linear_act_forward`` and ``linear_act_backward`` replay a cached
launch plan after a signature's first call (which validates, see
:mod:`interop.cupy._fast`): the same kernels and bits, without the array-level path's
host work. The other functions take the array-level path every call."""

from numba_fused import linear_act as _la

from ._fast import PlanCache, cached

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


# Plans per signature (interop.cupy._fast): the forward's inputs are (x, weight, bias),
# the backward's (grad_out, x, weight, preact or None), as numba_fused.linear_act
# records them.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def linear_act_forward(x, weight, bias=None, activation="none", save_preact=False):
    """As :func:`numba_fused.linear_act_forward`: ``y`` or ``(y, preact)``."""
    def slow():
        _require_cupy([(x, "x"), (weight, "weight"), (bias, "bias")])
        out = _la.linear_act_forward(x, weight, bias, activation, save_preact)
        return out if isinstance(out, tuple) else (out, None)

    y, pre = cached(_FWD_PLANS, (x, weight, bias), (activation, save_preact), slow,
                    lambda: _la.forward_record_plan(x, weight, bias, activation, save_preact))
    return y if pre is None else (y, pre)


def linear_act_dgrad(grad_out, weight, activation="none", preact=None):
    """As :func:`numba_fused.linear_act_dgrad`: ``(grad_out @ weight) * act'(preact)``."""
    _require_cupy([(grad_out, "grad_out"), (weight, "weight"), (preact, "preact")])
    return _la.linear_act_dgrad(grad_out, weight, activation, preact)


def linear_act_backward(grad_out, x, weight, preact=None, activation="none"):
    """As :func:`numba_fused.linear_act_backward`: ``(grad_x, grad_weight, grad_bias)``."""
    def slow():
        _require_cupy([(grad_out, "grad_out"), (x, "x"), (weight, "weight"),
                       (preact, "preact")])
        return _la.linear_act_backward(grad_out, x, weight, preact, activation)

    # With 'none' the plan does not read preact (recorded as absent; a pointer given
    # for it goes unused), but its type still decides the path, as in the check above.
    used = None if activation == "none" else preact
    return cached(_BWD_PLANS, (grad_out, x, weight, preact), (activation,), slow,
                  lambda: _la.backward_plan(grad_out, x, weight, used, activation, True, True,
                                            True))


def linear_weight_grad(grad_z, x, need_bias_grad=True):
    """As :func:`numba_fused.linear_act.linear_weight_grad`."""
    _require_cupy([(grad_z, "grad_z"), (x, "x")])
    return _la.linear_weight_grad(grad_z, x, need_bias_grad)


def activation_backward(grad_out, preact, activation):
    """As :func:`numba_fused.linear_act.activation_backward`: ``grad_out * act'(preact)``."""
    _require_cupy([(grad_out, "grad_out"), (preact, "preact")])
    return _la.activation_backward(grad_out, preact, activation)
