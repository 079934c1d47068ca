"""Branch-free float32 activations for kernels whose cost is the activation's
instruction count: the dropout kernels (every dtype) and the 16-bit tensor-core
GEMMs' epilogues (``linear_act``, the wgmma tiling's ``epi`` 1). :func:`kernel_act`
picks ``(act, act_grad)`` by name and storage dtype; the forms and their errors are
below. :mod:`numba_fused.activations` keeps the libdevice forms (torch's formulas)
and the float64 references.
"""

import functools
import math

import numpy as np
from numba import types

from . import activations
from .jit import inline_device
from .launch import SIMULATOR

__all__ = ["kernel_act"]

# ---------------------------------------------------------------------------
# Activations. gelu and gelu_tanh dominate the instruction count of the RNG-bound
# dropout kernels when taken from libdevice (erff evaluates two polynomials and
# selects, tanhf similar): these branch-free forms need about half the instructions.
#   gelu:      Phi(z) = 1 - q (z >= 0) or q (z < 0), q = erfc(|z|/sqrt 2) / 2, with
#              erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a/2) (Numerical Recipes'
#              erfcc form; a shorter fit for 16-bit outputs): relative error of gelu
#              below 3e-6 (float32) / 1.1e-5 (16-bit) for z in [-6, 10] (below -6 the
#              exponent's float32 rounding adds about z^2 2^-25: 8e-6 / 1.9e-5 at
#              z = -13 / -12), where the textbook z/2 (1 + erf(z/sqrt 2)) cancels
#              for z < 0;
#              gelu'(z) = Phi(z) + z phi(z), phi(z) = exp(-z^2/2) / sqrt(2 pi).
#              The 16-bit vector forward instead takes Phi(z) = sigmoid(z f(z^2))
#              (v22, _GELU16_LOGIT: fewer instructions, an error still well inside
#              the outputs' tolerances, not below their rounding).
#   gelu_tanh: z (1 + tanh u) / 2 = z sigmoid(2u), u = sqrt(2/pi) (z + 0.044715 z^3).
#   silu:      z s, s = sigmoid(z) from exp(-|z|) (v9: libdevice's expf and an IEEE
#              divide took 23 of the 16-bit forward's 38 SASS instructions an
#              element); silu'(z) = s (1 + z (1 - s)).
# exp and 1/x are single ex2.approx.ftz / rcp.approx.ftz instructions (relative error
# ~2^-22; arguments here are never denormal, but silu's exp(-|z|) for |z| > 87.3,
# flushed to 0: silu(z) = -0 there where torch's float32 z / (1 + exp(-z)) keeps a
# normal below 1e-36 down to z = -88.7).
# ---------------------------------------------------------------------------
_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_SQRT1_2 = np.float32(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))
# P(t) coefficients, constant term first. Float32 outputs: Numerical Recipes' erfcc
# (degree 9, erfc relative error < 1.2e-7).
_ERFCC_F32 = tuple(np.float32(c) for c in (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
    -1.13520398, 1.48851587, -0.82215223, 0.17087277))
# 16-bit outputs, whose rounding step is 2^-12 .. 2^-9: R(t') = log2(q / t') + log2(e)
# z^2 / 2 fitted directly in the folded form below (degree 5, near-minimax by Lawson's
# iteration on t' = 1 / (2 + |z| / sqrt 2), |z| <= 14): relative error of gelu below
# 1.1e-5 for z in [-6, 10], |gelu' error| < 3.8e-6 (v1 used a degree-7 fit: 2 FMAs
# more per element for errors below the outputs' rounding either way).
_GELU16_FOLDED = tuple(np.float32(c) for c in (
    -1.8272148370742798, 2.9370667934417725, 1.4700390100479126, 5.4720916748046875,
    -16.365564346313477, 10.56059455871582))
# The 16-bit vector forward's gelu (v22, :func:`_make_gelu_logit`): Phi(z) =
# sigmoid(h(z)) with h = logit(Phi) odd, h(z) = z f(z^2), f a degree-3 polynomial in
# u = z^2 (constant term first), the minimax of |z sigmoid(h) - gelu(z)| / max(|gelu|,
# 1e-3) over z in [-7, 0] (a linear program, bench/ab/gelu_logit.py's ``fit_coeffs``):
# 6.5e-4 there, before the output's rounding (2^-11 at fp16, 2^-8 at bf16; the tests'
# bounds are 2e-3 / 1e-2). For z > 0 the error is smaller (1 - Phi(z) = Phi(-z)).
# Stored times -log2(e), the exponential's own scale.
_GELU16_LOGIT = tuple(np.float32(-c / math.log(2.0)) for c in (
    1.5935247563558923, 0.07512564461102904, -0.0008717919136741322,
    4.0497826070070675e-06))
_TANH_C0 = np.float32(2.0 * math.sqrt(2.0 / math.pi))
_TANH_C1 = np.float32(2.0 * math.sqrt(2.0 / math.pi) * 0.044715)
_TANH_C1X3 = np.float32(3.0 * 2.0 * math.sqrt(2.0 / math.pi) * 0.044715)

_LOG2E = np.float32(1.0 / math.log(2.0))
_HALF_LOG2E = np.float32(0.5 / math.log(2.0))
_TWO = np.float32(2.0)

if SIMULATOR:

    def _ex2(x):
        # ex2.approx saturates to inf silently; so does this.
        with np.errstate(over="ignore"):
            return np.float32(np.exp2(np.float32(x)))

    def _fast_rcp(x):
        return np.float32(_F1 / np.float32(x))

else:
    from llvmlite import ir
    from numba.core.extending import intrinsic

    def _approx_f32(instruction):
        # One MUFU op: libdevice's fast_expf / fast_fdividef wrap theirs in
        # denormal fix-ups that these arguments never need.
        @intrinsic
        def op(typingctx, x):
            if x != types.float32:
                return None

            def codegen(context, builder, signature, args):
                fnty = ir.FunctionType(ir.FloatType(), [ir.FloatType()])
                asm = ir.InlineAsm(fnty, f"{instruction} $0, $1;", "=f,f")
                return builder.call(asm, [args[0]])

            return types.float32(types.float32), codegen

        return op

    _ex2 = _approx_f32("ex2.approx.ftz.f32")
    _fast_rcp = _approx_f32("rcp.approx.ftz.f32")


@inline_device
def _fast_exp(x):
    return _ex2(x * _LOG2E)


def _horner(coeffs):
    """Device function ``t -> coeffs[0] + t (coeffs[1] + t (...))``, unrolled at build
    time (a ``for`` over a coefficient tuple may compile to an indexed loop)."""
    c0 = coeffs[0]
    if len(coeffs) == 1:
        @inline_device
        def last(t):
            return c0

        return last
    inner = _horner(coeffs[1:])

    @inline_device
    def step(t):
        return c0 + t * inner(t)

    return step


def _fold_erfcc(coeffs):
    """P's coefficients (constant term first) in the folded form :func:`_make_gelu` takes."""
    return tuple(np.float32(c * 2.0 ** i / math.log(2.0)) for i, c in enumerate(coeffs))


@functools.lru_cache(maxsize=None)
def _make_gelu(folded):
    """(gelu, gelu') device functions from the folded coefficients (constant term first).

    With t' = t / 2 = 1 / (2 + a) and P'(t') = log2(e) P(2 t') (:func:`_fold_erfcc`),
    erfc(a) / 2 = t' 2^(P'(t') - log2(e) z^2 / 2): one FMA gives the denominator, no
    multiply is left around the exponential.
    """
    top, rest = folded[-1], tuple(reversed(folded[:-1]))

    @inline_device
    def t_poly(z):
        t = _fast_rcp(abs(z) * _SQRT1_2 + _TWO)
        p = top
        for c in rest:
            p = c + t * p
        return t, p

    @inline_device
    def gelu(z):
        t, p = t_poly(z)
        q = t * _ex2(p - z * z * _HALF_LOG2E)
        return z * (_F1 - q) if z >= _F0 else z * q

    @inline_device
    def gelu_grad(z):
        t, p = t_poly(z)
        e = _ex2(-(z * z) * _HALF_LOG2E)
        q = t * _ex2(p) * e
        cdf = _F1 - q if z >= _F0 else q
        return cdf + z * e * _INV_SQRT_2PI

    return gelu, gelu_grad


@functools.lru_cache(maxsize=None)
def _make_gelu_logit(folded):
    """Device function ``gelu_s(z, scale, c) = scale gelu(z)`` (v22) for the 16-bit
    forward's ``scale = 1 / (1 - p)`` and ``c = 1 / scale`` (computed once a thread by
    :func:`_scaled_act`): gelu(z) = z sigmoid(h(z)), h(z) = z f(z^2), and with
    ``g = z F(z^2)``, F = -log2(e) f (``folded``, constant term first):
    ``scale gelu(z) = z / (c + c 2^g)``. One multiply for u = z^2, deg(F) FMAs, one
    multiply, ex2, one FMA, rcp, one multiply (9 instructions at degree 3, against 15
    for :func:`_make_gelu`'s form times the scale), no select, no cancellation: for z
    -> +inf 2^g -> 0 and the result is z scale; for z -> -inf 2^g overflows to inf and
    the result is -0 (z = -inf: NaN, as the other form and torch's float32 formula);
    NaN stays NaN. Error: see :data:`_GELU16_LOGIT`."""
    poly = _horner(folded)

    @inline_device
    def gelu_s(z, scale, c):
        return z * _fast_rcp(_ex2(z * poly(z * z)) * c + c)

    return gelu_s


@inline_device
def _sigmoid_2u(z, zz):
    # exp(-w) may overflow to inf: rcp(inf) = 0 is then the right sigmoid.
    w = z * (_TANH_C0 + _TANH_C1 * zz)
    return _fast_rcp(_F1 + _fast_exp(-w))


@inline_device
def _gelu_tanh_fast(z):
    return z * _sigmoid_2u(z, z * z)


@inline_device
def _gelu_tanh_fast_grad(z):
    zz = z * z
    s = _sigmoid_2u(z, zz)
    return s + z * s * (_F1 - s) * (_TANH_C0 + _TANH_C1X3 * zz)


@inline_device
def _silu_parts(z):
    # s = sigmoid(z) and q = 1 - s from e = exp(-|z|) <= 1 (never overflows; for z >= 0
    # s = 1 / (1 + e), q = e s; for z < 0 the two swap), so q has no cancellation.
    # NaN stays NaN (z >= 0 is false: s = e r = NaN); z = -inf gives s = 0 and z s =
    # NaN, torch's silu(-inf).
    e = _fast_exp(-abs(z))
    r = _fast_rcp(_F1 + e)
    er = e * r
    pos = z >= _F0
    return (r if pos else er), (er if pos else r)


@inline_device
def _silu_fast(z):
    s, _ = _silu_parts(z)
    return z * s


@inline_device
def _silu_fast_grad(z):
    s, q = _silu_parts(z)
    return s * (_F1 + z * q)


def _gelu_coeffs(dtype):
    return _fold_erfcc(_ERFCC_F32) if dtype == "float32" else _GELU16_FOLDED


def kernel_act(activation, dtype):
    """``(act, act_grad)`` device functions the dropout kernels use for storage
    ``dtype``: the branch-free forms above for gelu / gelu_tanh / silu,
    :func:`activations.device_act` otherwise."""
    activations.check_activation(activation)
    if activation == "gelu":
        return _make_gelu(_gelu_coeffs(dtype))
    if activation == "gelu_tanh":
        return _gelu_tanh_fast, _gelu_tanh_fast_grad
    if activation == "silu":
        return _silu_fast, _silu_fast_grad
    return activations.device_act(activation)
