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
           "gated_linear_backward", "gated_linear_forward_pair", "gated_linear_backward_pair",
           "interleave", "deinterleave"]

interleave = _gl.interleave
deinterleave = _gl.deinterleave

_FWD_PLANS = PlanCache()
_DGRAD_PLANS = PlanCache()
_ACT_PLANS = PlanCache()
_BWD_PLANS = PlanCache()
_FWD_PAIR_PLANS = PlanCache()
_BWD_PAIR_PLANS = PlanCache()


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


def gated_linear_forward_pair(x, w_gate, w_up, bias=None, activation="silu",
                              save_preact=False):
    """As :func:`numba_fused.gated_linear.gated_linear_forward_pair`: ``h`` or ``(h,
    preact)``, the gate and up weights read in place (a signature whose weights are
    not, e.g. float32, takes the array-level path, which makes their copy)."""
    def slow():
        _require_cupy([(x, "x"), (w_gate, "w_gate"), (w_up, "w_up"), (bias, "bias")])
        if save_preact:
            return _gl.gated_linear_forward_pair(x, w_gate, w_up, bias, activation, save_preact)
        return _gl.gated_linear_forward_pair(x, w_gate, w_up, bias, activation, False), None

    def record():
        if not _gl.pair_in_place(x, w_gate, w_up):
            return None
        return _gl.forward_pair_plan(x, w_gate, w_up, bias, activation, save_preact)

    h, z = cached(_FWD_PAIR_PLANS, (x, w_gate, w_up, bias), (activation, save_preact), slow,
                  record)
    return (h, z) if save_preact else h


def gated_linear_backward_pair(grad_h, x, w_gate, w_up, preact, activation="silu"):
    """As :func:`numba_fused.gated_linear.gated_linear_backward_pair`: ``(grad_x,
    grad_w_gate, grad_w_up, grad_bias)`` (a signature whose weights are not read in
    place takes the array-level path)."""
    def slow():
        _require_cupy([(grad_h, "grad_h"), (x, "x"), (w_gate, "w_gate"), (w_up, "w_up"),
                       (preact, "preact")])
        return _gl.gated_linear_backward_pair(grad_h, x, w_gate, w_up, preact, activation)

    def record():
        if not _gl.pair_in_place(x, w_gate, w_up, backward=True):
            return None
        return _gl.backward_pair_plan(grad_h, x, w_gate, w_up, preact, activation)

    return cached(_BWD_PAIR_PLANS, (grad_h, x, w_gate, w_up, preact), (activation,), slow,
                  record)
