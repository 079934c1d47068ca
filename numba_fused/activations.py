"""Activation functions and their derivatives as float32 device functions.

``ACTIVATIONS`` lists the names every op accepts. ``device_act(name)`` returns
``(act, act_grad)``: ``act(z)`` and ``act_grad(z) = d act / dz`` at the
pre-activation ``z``. Kernel factories pick the pair once and close over it.
``act_ref`` / ``act_grad_ref`` are the float64 NumPy references the tests and
benchmarks use. Derivatives at kinks follow torch (relu'(0) = 0, leaky'(0) = slope).
NaN passes through every activation as through torch's (relu(NaN) = NaN), and
act'(NaN) is what torch's backward gives (its relu backward zeroes only where z <= 0:
relu'(NaN) = 1, squared_relu'(NaN) = NaN, leaky_relu'(NaN) = slope).

    gelu(z)         = z/2 (1 + erf(z / sqrt 2))
    gelu'(z)        = (1 + erf(z / sqrt 2)) / 2 + z exp(-z^2 / 2) / sqrt(2 pi)
    gelu_tanh(z)    = z/2 (1 + tanh(u)),  u = sqrt(2/pi) (z + 0.044715 z^3)
    gelu_tanh'(z)   = (1 + t)/2 + z/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 z^2),  t = tanh(u)
    squared_relu(z) = max(z, 0)^2,   squared_relu'(z) = 2 max(z, 0)
    leaky_relu(z)   = z if z > 0 else 0.01 z
    silu(z)         = z / (1 + exp(-z)) = z s,  s = sigmoid(z)
    silu'(z)        = s (1 + z (1 - s))
"""

import math

import numpy as np

from .jit import inline_device

__all__ = ["ACTIVATIONS", "check_activation", "device_act", "act_ref", "act_grad_ref",
           "LEAKY_SLOPE"]

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "squared_relu", "leaky_relu", "silu")
LEAKY_SLOPE = 0.01

_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_HALF = np.float32(0.5)
_TWO = np.float32(2.0)
_INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))
_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))
_K = np.float32(0.044715)
_K3 = np.float32(3.0 * 0.044715)
_SLOPE = np.float32(LEAKY_SLOPE)


def check_activation(activation):
    """Validate an activation name (ValueError listing the choices)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    return activation


@inline_device
def _none(z):
    return z


@inline_device
def _none_grad(z):
    return _F1


@inline_device
def _relu(z):
    # Compared as z <= 0 so that NaN passes through, as torch's relu does (a
    # `z > 0` select maps NaN to 0).
    return _F0 if z <= _F0 else z


@inline_device
def _relu_grad(z):
    return _F0 if z <= _F0 else _F1


@inline_device
def _gelu(z):
    return _HALF * z * (_F1 + math.erf(z * _INV_SQRT2))


@inline_device
def _gelu_grad(z):
    return _HALF * (_F1 + math.erf(z * _INV_SQRT2)) + z * math.exp(-_HALF * z * z) * _INV_SQRT_2PI


@inline_device
def _gelu_tanh(z):
    t = math.tanh(_SQRT_2_OVER_PI * (z + _K * z * z * z))
    return _HALF * z * (_F1 + t)


@inline_device
def _gelu_tanh_grad(z):
    t = math.tanh(_SQRT_2_OVER_PI * (z + _K * z * z * z))
    return _HALF * (_F1 + t) + _HALF * z * (_F1 - t * t) * _SQRT_2_OVER_PI * (_F1 + _K3 * z * z)


@inline_device
def _squared_relu(z):
    r = _F0 if z <= _F0 else z
    return r * r


@inline_device
def _squared_relu_grad(z):
    return _F0 if z <= _F0 else _TWO * z


@inline_device
def _leaky_relu(z):
    return z if z > _F0 else _SLOPE * z


@inline_device
def _leaky_relu_grad(z):
    return _F1 if z > _F0 else _SLOPE


@inline_device
def _silu(z):
    # torch's form (x / (1 + exp(-x))): the same NaN / inf results (silu(-inf) = NaN).
    return z / (_F1 + math.exp(-z))


@inline_device
def _silu_grad(z):
    s = _F1 / (_F1 + math.exp(-z))
    return s * (_F1 + z * (_F1 - s))


_DEVICE = {
    "none": (_none, _none_grad),
    "relu": (_relu, _relu_grad),
    "gelu": (_gelu, _gelu_grad),
    "gelu_tanh": (_gelu_tanh, _gelu_tanh_grad),
    "squared_relu": (_squared_relu, _squared_relu_grad),
    "leaky_relu": (_leaky_relu, _leaky_relu_grad),
    "silu": (_silu, _silu_grad),
}


def device_act(activation):
    """``(act, act_grad)`` float32 device functions for ``activation``."""
    return _DEVICE[check_activation(activation)]


def _phi64(z):
    # The normal CDF as erfc(-z / sqrt 2) / 2: (1 + erf(z / sqrt 2)) / 2 cancels to 0
    # for z below about -8.3, where gelu(z) is still a normal float32 down to z = -13.
    return 0.5 * np.vectorize(math.erfc, otypes=[np.float64])(-z / math.sqrt(2.0))


def act_ref(activation, z):
    """float64 NumPy reference of ``act(z)``."""
    z = np.asarray(z, dtype=np.float64)
    if activation == "none":
        return z.copy()
    if activation == "relu":
        return np.maximum(z, 0.0)
    if activation == "gelu":
        return z * _phi64(z)
    if activation == "gelu_tanh":
        return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))
    if activation == "squared_relu":
        return np.maximum(z, 0.0) ** 2
    if activation == "leaky_relu":
        return np.where(z > 0, z, LEAKY_SLOPE * z)
    if activation == "silu":
        with np.errstate(over="ignore", invalid="ignore"):
            return z / (1.0 + np.exp(-z))
    raise ValueError(check_activation(activation))


def act_grad_ref(activation, z):
    """float64 NumPy reference of ``act'(z)``."""
    z = np.asarray(z, dtype=np.float64)
    if activation == "none":
        return np.ones_like(z)
    if activation == "relu":
        return np.where(z <= 0, 0.0, 1.0)
    if activation == "gelu":
        return _phi64(z) + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    if activation == "gelu_tanh":
        c = math.sqrt(2.0 / math.pi)
        t = np.tanh(c * (z + 0.044715 * z**3))
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * z * z)
    if activation == "squared_relu":
        return 2.0 * np.maximum(z, 0.0)
    if activation == "leaky_relu":
        return np.where(z > 0, 1.0, LEAKY_SLOPE)
    if activation == "silu":
        with np.errstate(over="ignore", invalid="ignore"):
            sig = 1.0 / (1.0 + np.exp(-z))
            return sig * (1.0 + z * (1.0 - sig))
    raise ValueError(check_activation(activation))
