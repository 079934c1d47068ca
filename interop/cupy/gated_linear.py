"""CuPy front end of the gated linear units (SwiGLU / GeGLU): the array-level functions
of ``numba_fused.gated_linear`` taking and returning CuPy arrays, launched on CuPy's
current stream. CuPy has no bfloat16: float32 and float16 only."""

from numba_fused import gated_linear as _gl

from .linear_act import _require_cupy

__all__ = ["gated_linear_forward", "gated_linear_dgrad", "gated_act_backward",
           "gated_linear_backward", "interleave"]

interleave = _gl.interleave


def gated_linear_forward(x, weight, bias=None, activation="silu", save_preact=False):
    """As :func:`numba_fused.gated_linear_forward`: ``h`` or ``(h, preact)``."""
    _require_cupy([(x, "x"), (weight, "weight"), (bias, "bias")])
    return _gl.gated_linear_forward(x, weight, bias, activation, save_preact)


def gated_linear_dgrad(grad_out, weight, preact, activation="silu"):
    """As :func:`numba_fused.gated_linear_dgrad`: the pairs' gradient ``dz``."""
    _require_cupy([(grad_out, "grad_out"), (weight, "weight"), (preact, "preact")])
    return _gl.gated_linear_dgrad(grad_out, weight, preact, activation)


def gated_act_backward(grad_h, preact, activation="silu"):
    """As :func:`numba_fused.gated_act_backward`."""
    _require_cupy([(grad_h, "grad_h"), (preact, "preact")])
    return _gl.gated_act_backward(grad_h, preact, activation)


def gated_linear_backward(grad_h, x, weight, preact, activation="silu"):
    """As :func:`numba_fused.gated_linear_backward`: ``(grad_x, grad_weight, grad_bias)``."""
    _require_cupy([(grad_h, "grad_h"), (x, "x"), (weight, "weight"), (preact, "preact")])
    return _gl.gated_linear_backward(grad_h, x, weight, preact, activation)
