"""CuPy front end of the gated linear units (SwiGLU / GeGLU): the array-level functions
of ``numba_fused.gated_linear`` taking and returning CuPy arrays, launched on CuPy's
current stream. CuPy has no bfloat16: float32 and float16 only.

Every function replays a cached launch plan after a signature's first call (which
validates, see :mod:`interop.cupy._fast`): the same kernels and bits, without the
array-level path's host work."""

from numba_fused import gated_linear as _gl

from ._fast import PlanCache, cached
from .linear_act import _require_cupy

__all__ = ["gated_linear_forward", "gated_linear_dgrad", "gated_act_backward",
           "gated_linear_backward", "interleave"]

interleave = _gl.interleave

_FWD_PLANS = PlanCache()
_DGRAD_PLANS = PlanCache()
_ACT_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def gated_linear_forward(x, weight, bias=None, activation="silu", save_preact=False):
    """As :func:`numba_fused.gated_linear_forward`: ``h`` or ``(h, preact)``."""
    def slow():
        _require_cupy([(x, "x"), (weight, "weight"), (bias, "bias")])
        if save_preact:
            return _gl.gated_linear_forward(x, weight, bias, activation, save_preact)
        return _gl.gated_linear_forward(x, weight, bias, activation, save_preact), None

    h, z = cached(_FWD_PLANS, (x, weight, bias), (activation, save_preact), slow,
                  lambda: _gl.forward_plan(x, weight, bias, activation, save_preact))
    return (h, z) if save_preact else h


def gated_linear_dgrad(grad_out, weight, preact, activation="silu"):
    """As :func:`numba_fused.gated_linear_dgrad`: the pairs' gradient ``dz``."""
    def slow():
        _require_cupy([(grad_out, "grad_out"), (weight, "weight"), (preact, "preact")])
        return (_gl.gated_linear_dgrad(grad_out, weight, preact, activation),)

    return cached(_DGRAD_PLANS, (grad_out, weight, preact), (activation,), slow,
                  lambda: _gl.dgrad_plan(grad_out, weight, preact, activation))[0]


def gated_act_backward(grad_h, preact, activation="silu"):
    """As :func:`numba_fused.gated_act_backward`."""
    def slow():
        _require_cupy([(grad_h, "grad_h"), (preact, "preact")])
        return (_gl.gated_act_backward(grad_h, preact, activation),)

    return cached(_ACT_PLANS, (grad_h, preact), (activation,), slow,
                  lambda: _gl.act_backward_plan(grad_h, preact, activation))[0]


def gated_linear_backward(grad_h, x, weight, preact, activation="silu"):
    """As :func:`numba_fused.gated_linear_backward`: ``(grad_x, grad_weight, grad_bias)``."""
    def slow():
        _require_cupy([(grad_h, "grad_h"), (x, "x"), (weight, "weight"), (preact, "preact")])
        return _gl.gated_linear_backward(grad_h, x, weight, preact, activation)

    return cached(_BWD_PLANS, (grad_h, x, weight, preact), (activation,), slow,
                  lambda: _gl.backward_plan(grad_h, x, weight, preact, activation))
