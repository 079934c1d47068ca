"""CuPy front end of the fused linear + activation kernels: the array-level
functions of ``numba_fused.linear_act`` taking and returning CuPy arrays, launched
on CuPy's current stream. CuPy has no bfloat16: float32 and float16 only.

Every function replays a cached launch plan after a signature's first call (which
validates, see :mod:`interop.cupy._fast`): the same kernels and bits, without the
array-level path's host work."""

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
# linear_act_dgrad's (grad_out, weight, preact or None), linear_weight_grad's (grad_z,
# x), activation_backward's (grad_out, preact).
_DGRAD_PLANS = PlanCache()
_WGRAD_PLANS = PlanCache()
_ACT_PLANS = PlanCache()


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
    def slow():
        _require_cupy([(grad_out, "grad_out"), (weight, "weight"), (preact, "preact")])
        return (_la.linear_act_dgrad(grad_out, weight, activation, preact),)

    # As in linear_act_backward: preact's pointer goes unused with 'none'.
    return cached(_DGRAD_PLANS, (grad_out, weight, preact), (activation,), slow,
                  lambda: _la.dgrad_plan(grad_out, weight, activation, preact))[0]


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
    def slow():
        _require_cupy([(grad_z, "grad_z"), (x, "x")])
        return _la.linear_weight_grad(grad_z, x, need_bias_grad)

    return cached(_WGRAD_PLANS, (grad_z, x), (need_bias_grad,), slow,
                  lambda: _la.weight_grad_plan(grad_z, x, need_bias_grad))


def activation_backward(grad_out, preact, activation):
    """As :func:`numba_fused.linear_act.activation_backward`: ``grad_out * act'(preact)``."""
    def slow():
        _require_cupy([(grad_out, "grad_out"), (preact, "preact")])
        return (_la.activation_backward(grad_out, preact, activation),)

    return cached(_ACT_PLANS, (grad_out, preact), (activation,), slow,
                  lambda: _la.activation_backward_plan(grad_out, preact, activation))[0]
