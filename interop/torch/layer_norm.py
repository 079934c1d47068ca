"""PyTorch front end for LayerNorm and RMSNorm.

``layer_norm`` / ``rms_norm`` take ``torch.nn.functional``'s arguments and run the
numba kernels through ``torch.autograd.Function`` wrappers; ``FusedLayerNorm`` /
``FusedRMSNorm`` subclass ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm``, so they have
the same constructor, parameters, ``state_dict`` keys and repr, and replace them in a
model as is (``FusedLayerNorm.from_torch(module)`` converts an existing one).

Differences from torch, by design:
- ``deterministic=`` (keyword only) picks the backward's dW/dB scheme; None follows
  ``torch.are_deterministic_algorithms_enabled()``.
- weight/bias of another dtype than the input are cast to the input's dtype (the
  kernels take one dtype; the cast is differentiable, so the parameters' gradients
  come back in their own dtype).
- autocast does not change the dtype the kernels run in.

Two routes to the same kernels and launch plans:
- eager calls go through ``torch.autograd.Function`` (one graph node per call);
- under ``torch.compile`` (``torch.compiler.is_compiling()``) the functions call the
  custom ops ``torch.ops.numba_fused.layer_norm_fwd`` / ``layer_norm_bwd`` /
  ``rms_norm_fwd`` / ``rms_norm_bwd`` (``torch.library.custom_op`` with fake
  implementations and ``register_autograd``), which Dynamo and AOTAutograd trace
  without a graph break.

Where nothing needs a gradient (``torch.no_grad``, inference mode, or no input that
requires grad) both routes run the forward without its statistics
(``stats=False``; under torch.compile the ops ``layer_norm_infer`` /
``rms_norm_infer``): y alone is written, as inductor's own kernel does there. Eager keeps the Function because an empty custom op costs
  more host time per forward + backward than an empty Function (137-160 against
  98-113 us on the lent H100's host, bench/NOTES.md, issue #20).
"""

import math
import numbers
from typing import List, Optional

import torch

from numba_fused import layer_norm as _ln
from numba_fused.layer_norm import (layer_norm_backward, layer_norm_forward, rms_norm_backward,
                                    rms_norm_forward)

from ._fast import ENABLED, PlanCache, aligned16, data_ptr, function_apply, run_plan

__all__ = ["layer_norm", "rms_norm", "FusedLayerNorm", "FusedRMSNorm"]


# Per-signature launch plans (see interop.torch._fast and numba_fused.plan): the first
# call of a signature runs the array-level function (which validates and raises), later
# ones replay its allocations and launches.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def _dev(t):
    return -2 if t is None else t.get_device()


def _norm_forward(x, weight, bias, eps, rms, stats=True):
    """(y, mean or None, rstd) of contiguous ``[..., N]`` x through a cached plan;
    ``stats`` False: (y, None, None), the statistics not kept (inference).

    The key holds the parameters' devices, so parameters on another device than x
    miss the cache and reach the array-level check, which raises."""
    key = (x.shape, x.dtype, x.get_device(), _dev(weight), _dev(bias), eps, rms, stats,
           aligned16(x), aligned16(weight), aligned16(bias))
    plan = _FWD_PLANS.get(key)
    if plan is not None:
        return run_plan(plan, x, (x.data_ptr(), data_ptr(weight), data_ptr(bias)))
    if rms:
        y, rstd = rms_norm_forward(x, weight, eps, stats=stats)
        out = (y, None, rstd)
    else:
        out = layer_norm_forward(x, weight, bias, eps, stats=stats)
    if ENABLED[0]:
        _FWD_PLANS.put(key, _ln.forward_plan(x, weight, bias, eps, rms, stats))
    return out


def _norm_backward(g, x, weight, bias, mean, rstd, deterministic, rms):
    """(grad_x, grad_weight or None, grad_bias or None) through a cached plan."""
    key = (g.shape, g.dtype, g.get_device(), weight is None, bias is None, deterministic, rms,
           aligned16(g), aligned16(x), aligned16(weight))
    plan = _BWD_PLANS.get(key)
    if plan is not None:
        return run_plan(plan, g, (g.data_ptr(), x.data_ptr(), data_ptr(weight),
                                  data_ptr(bias), data_ptr(mean), rstd.data_ptr()))
    if rms:
        gx, gw = rms_norm_backward(g, x, weight, rstd, deterministic=deterministic)
        out = (gx, gw, None)
    else:
        out = layer_norm_backward(g, x, weight, bias, mean, rstd, deterministic=deterministic)
    if ENABLED[0]:
        _BWD_PLANS.put(key, _ln.backward_plan(g, x, weight, bias, mean, rstd, deterministic,
                                              rms))
    return out


# The Functions take the caller's tensors as they are and do every reshape, copy and
# cast inside forward/backward, where autograd records nothing: each view or cast
# made outside would be one more graph node, and each node costs the backward pass
# host time (issue #20: four such nodes per call cost more than the kernels).

def _rows(t, n):
    """Contiguous ``t`` as ``[..., n]`` (itself when it already is)."""
    t = t.contiguous()
    return t if t.shape[-1] == n else t.view(-1, n)


def _vector(p, n, dtype):
    """Parameter ``p`` (any shape of n elements) as a contiguous ``[n]`` of ``dtype``."""
    if p is None:
        return None
    if p.dtype != dtype:
        p = p.to(dtype)
    p = p.contiguous()
    return p if p.dim() == 1 else p.view(n)


def _meta(p, v):
    """None where parameter ``p`` went to the kernel as is (``v is p``), else the shape
    and dtype its gradient must be given back in."""
    return None if v is p else (p.shape, p.dtype)


def _param_grad(grad, meta):
    """grad_weight / grad_bias (of the kernels' ``[n]``) in the parameter's shape and
    dtype (``meta`` from :func:`_meta`)."""
    if grad is None or meta is None:
        return grad
    shape, dtype = meta
    if grad.dtype != dtype:
        grad = grad.to(dtype)
    return grad.view(shape)


def _grad_input(gx, input_shape):
    return gx if gx.shape == input_shape else gx.view(input_shape)


class _LayerNormFunction(torch.autograd.Function):
    """y = layer_norm(input, weight, bias) over input's trailing n elements.

    input: tensor ``[..., *normalized_shape]`` (any strides); weight, bias: tensors
    of normalized_shape (any float dtype; cast to input's) or None; n: the product
    of normalized_shape."""

    @staticmethod
    def forward(ctx, input, weight, bias, n, eps, deterministic):
        x = _rows(input, n)
        w = _vector(weight, n, x.dtype)
        b = _vector(bias, n, x.dtype)
        y, mean, rstd = _norm_forward(x, w, b, eps, False)
        ctx.save_for_backward(x, w, b, mean, rstd)
        ctx.deterministic = deterministic
        ctx.shapes = (input.shape, _meta(weight, w), _meta(bias, b))
        return _grad_input(y, input.shape)

    @staticmethod
    def backward(ctx, grad_y):
        x, w, b, mean, rstd = ctx.saved_tensors
        input_shape, w_meta, b_meta = ctx.shapes
        # A bias that needs no gradient costs nothing: without it no dB is reduced.
        b = b if ctx.needs_input_grad[2] else None
        g = grad_y.contiguous()
        if g.shape != x.shape:
            g = g.view(x.shape)
        gx, gw, gb = _norm_backward(g, x, w, b, mean, rstd, ctx.deterministic, False)
        return (_grad_input(gx, input_shape), _param_grad(gw, w_meta), _param_grad(gb, b_meta),
                None, None, None)


_layer_norm_apply = function_apply(_LayerNormFunction)


class _RMSNormFunction(torch.autograd.Function):
    """y = rms_norm(input, weight) over input's trailing n elements (arguments as
    :class:`_LayerNormFunction`)."""

    @staticmethod
    def forward(ctx, input, weight, n, eps, deterministic):
        x = _rows(input, n)
        w = _vector(weight, n, x.dtype)
        y, _, rstd = _norm_forward(x, w, None, eps, True)
        ctx.save_for_backward(x, w, rstd)
        ctx.deterministic = deterministic
        ctx.shapes = (input.shape, _meta(weight, w))
        return _grad_input(y, input.shape)

    @staticmethod
    def backward(ctx, grad_y):
        x, w, rstd = ctx.saved_tensors
        input_shape, w_meta = ctx.shapes
        g = grad_y.contiguous()
        if g.shape != x.shape:
            g = g.view(x.shape)
        gx, gw, _ = _norm_backward(g, x, w, None, None, rstd, ctx.deterministic, True)
        return _grad_input(gx, input_shape), _param_grad(gw, w_meta), None, None, None


_rms_norm_apply = function_apply(_RMSNormFunction)


# ---------------------------------------------------------------------------
# Custom ops: the torch.compile route
# ---------------------------------------------------------------------------
# Inputs are what the Functions hand the kernels: x a contiguous [M, N], parameters
# contiguous [N] of x's dtype. Backward ops return a list: grad_x, then grad_weight
# if weight is given, then grad_bias if bias is given (a schema cannot return None).

@torch.library.custom_op("numba_fused::layer_norm_fwd", mutates_args=())
def _layer_norm_fwd(x: torch.Tensor, weight: Optional[torch.Tensor],
                    bias: Optional[torch.Tensor], eps: float,
                    deterministic: bool) -> List[torch.Tensor]:
    """[y, mean, rstd] of x [M, N]; ``deterministic`` is kept for the backward."""
    return list(_norm_forward(x, weight, bias, eps, False))


@_layer_norm_fwd.register_fake
def _(x, weight, bias, eps, deterministic):
    stats = x.new_empty(x.shape[:-1], dtype=torch.float32)
    return [torch.empty_like(x), stats, torch.empty_like(stats)]


@torch.library.custom_op("numba_fused::layer_norm_bwd", mutates_args=())
def _layer_norm_bwd(grad_y: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor],
                    bias: Optional[torch.Tensor], mean: torch.Tensor, rstd: torch.Tensor,
                    deterministic: bool) -> List[torch.Tensor]:
    gx, gw, gb = _norm_backward(grad_y, x, weight, bias, mean, rstd, deterministic, False)
    return [t for t in (gx, gw, gb) if t is not None]


@_layer_norm_bwd.register_fake
def _(grad_y, x, weight, bias, mean, rstd, deterministic):
    return [torch.empty_like(x)] + [torch.empty_like(p) for p in (weight, bias) if p is not None]


def _layer_norm_setup(ctx, inputs, output):
    x, weight, bias, _, deterministic = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, bias, mean, rstd)
    ctx.deterministic = deterministic


def _layer_norm_grad(ctx, grads):
    x, weight, bias, mean, rstd = ctx.saved_tensors
    # A bias that needs no gradient costs nothing: without it no dB is reduced.
    bias = bias if ctx.needs_input_grad[2] else None
    out = iter(_layer_norm_bwd(grads[0].contiguous(), x, weight, bias, mean, rstd,
                               ctx.deterministic))
    gx = next(out)
    gw = next(out) if weight is not None else None
    gb = next(out) if bias is not None else None
    return gx, gw, gb, None, None


_layer_norm_fwd.register_autograd(_layer_norm_grad, setup_context=_layer_norm_setup)


@torch.library.custom_op("numba_fused::rms_norm_fwd", mutates_args=())
def _rms_norm_fwd(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float,
                  deterministic: bool) -> List[torch.Tensor]:
    """[y, rstd] of x [M, N]; ``deterministic`` is kept for the backward."""
    y, _, rstd = _norm_forward(x, weight, None, eps, True)
    return [y, rstd]


@_rms_norm_fwd.register_fake
def _(x, weight, eps, deterministic):
    return [torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.float32)]


@torch.library.custom_op("numba_fused::rms_norm_bwd", mutates_args=())
def _rms_norm_bwd(grad_y: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor],
                  rstd: torch.Tensor, deterministic: bool) -> List[torch.Tensor]:
    gx, gw, _ = _norm_backward(grad_y, x, weight, None, None, rstd, deterministic, True)
    return [gx] if gw is None else [gx, gw]


@_rms_norm_bwd.register_fake
def _(grad_y, x, weight, rstd, deterministic):
    return [torch.empty_like(x)] + ([] if weight is None else [torch.empty_like(weight)])


def _rms_norm_setup(ctx, inputs, output):
    x, weight, _, deterministic = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.deterministic = deterministic


def _rms_norm_grad(ctx, grads):
    x, weight, rstd = ctx.saved_tensors
    out = _rms_norm_bwd(grads[0].contiguous(), x, weight, rstd, ctx.deterministic)
    return out[0], (out[1] if weight is not None else None), None, None


_rms_norm_fwd.register_autograd(_rms_norm_grad, setup_context=_rms_norm_setup)


@torch.library.custom_op("numba_fused::layer_norm_infer", mutates_args=())
def _layer_norm_infer(x: torch.Tensor, weight: Optional[torch.Tensor],
                      bias: Optional[torch.Tensor], eps: float) -> torch.Tensor:
    """y of x [M, N] without the statistics: the route where nothing needs a gradient."""
    return _norm_forward(x, weight, bias, eps, False, stats=False)[0]


@_layer_norm_infer.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x)


@torch.library.custom_op("numba_fused::rms_norm_infer", mutates_args=())
def _rms_norm_infer(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float) -> torch.Tensor:
    """y of x [M, N] without rstd (as :func:`_layer_norm_infer`)."""
    return _norm_forward(x, weight, None, eps, True, stats=False)[0]


@_rms_norm_infer.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


def _compiled_norm(input, weight, bias, n, eps, deterministic, rms):
    """The custom-op route of :func:`layer_norm` / :func:`rms_norm` (under
    torch.compile): the same reshapes and casts as the Functions, as traced ops;
    where nothing needs a gradient, the ``*_infer`` ops (y alone, no statistics)."""
    x = input.contiguous().view(-1, n)
    w = None if weight is None else weight.to(x.dtype).contiguous().view(n)
    b = None if rms or bias is None else bias.to(x.dtype).contiguous().view(n)
    if not _needs_grad(input, weight, bias):
        y = _rms_norm_infer(x, w, eps) if rms else _layer_norm_infer(x, w, b, eps)
    elif rms:
        y = _rms_norm_fwd(x, w, eps, deterministic)[0]
    else:
        y = _layer_norm_fwd(x, w, b, eps, deterministic)[0]
    return y.view(input.shape)


# normalized_shape -> (shape tuple, N): the module passes the same tuple every call.
_SHAPES = {}


def _normalized(input, normalized_shape):
    """(shape tuple, N = its product); checks input ends with it, as torch does."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
    try:
        shape, n = _SHAPES[normalized_shape]
    except (KeyError, TypeError):
        shape, n = _parse_shape(normalized_shape)
        if isinstance(normalized_shape, (tuple, numbers.Integral)) and len(_SHAPES) < 256:
            _SHAPES[normalized_shape] = (shape, n)
    k = len(shape)
    if input.dim() < k or input.shape[input.dim() - k:] != shape:
        raise ValueError(f"Given normalized_shape={list(shape)}, expected input with shape "
                         f"[*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    return shape, n


def _parse_shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        shape = (int(normalized_shape),)
    elif isinstance(normalized_shape, (str, bytes)):
        raise TypeError("normalized_shape must be an int or a sequence of ints, got "
                        f"{type(normalized_shape).__name__}")
    else:
        try:
            shape = tuple(int(s) for s in normalized_shape)
        except TypeError:
            raise TypeError("normalized_shape must be an int or a sequence of ints, got "
                            f"{type(normalized_shape).__name__}") from None
    if not shape:
        raise ValueError("normalized_shape must have at least one dimension")
    return shape, math.prod(shape)


def _check_param(p, name, shape):
    if p is None:
        return
    if not isinstance(p, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(p).__name__}")
    if p.shape != shape:
        raise ValueError(f"{name} must have shape {list(shape)} (normalized_shape), got "
                         f"{list(p.shape)}")


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _deterministic(flag):
    if flag is None:
        return torch.are_deterministic_algorithms_enabled()
    if not isinstance(flag, bool):
        raise TypeError(f"deterministic must be a bool or None, got {type(flag).__name__}")
    return flag


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, *, deterministic=None):
    """``torch.nn.functional.layer_norm`` on the numba kernels (autograd included).

    input: CUDA tensor (float32/float16/bfloat16) whose trailing dims equal
    normalized_shape; weight, bias: tensors of shape normalized_shape or None.
    deterministic: dW/dB scheme of the backward (see module docstring).
    """
    shape, n = _normalized(input, normalized_shape)
    _check_param(weight, "weight", shape)
    _check_param(bias, "bias", shape)
    det = _deterministic(deterministic)
    if input.numel() == 0:
        return torch.nn.functional.layer_norm(input, shape, weight, bias, eps)
    if torch.compiler.is_compiling():
        return _compiled_norm(input, weight, bias, n, eps, det, False)
    if not _needs_grad(input, weight, bias):
        # Nothing to differentiate: skip the autograd Function's host cost, and the
        # statistics only a backward would read.
        x = _rows(input, n)
        y, _, _ = _norm_forward(x, _vector(weight, n, x.dtype), _vector(bias, n, x.dtype), eps,
                                False, stats=False)
        return _grad_input(y, input.shape)
    return _layer_norm_apply(input, weight, bias, n, eps, det)


def rms_norm(input, normalized_shape, weight=None, eps=1e-6, *, deterministic=None):
    """``torch.nn.functional.rms_norm`` on the numba kernels (autograd included).

    eps: default 1e-6 (docs/API.md); None means ``torch.finfo(input.dtype).eps``, as
    torch's rms_norm does. Other arguments as :func:`layer_norm`.
    """
    shape, n = _normalized(input, normalized_shape)
    _check_param(weight, "weight", shape)
    det = _deterministic(deterministic)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    if input.numel() == 0:
        if hasattr(torch.nn.functional, "rms_norm"):
            return torch.nn.functional.rms_norm(input, shape, weight, eps)
        return input.clone()
    if torch.compiler.is_compiling():
        return _compiled_norm(input, weight, None, n, eps, det, True)
    if not _needs_grad(input, weight, None):
        x = _rows(input, n)
        y, _, _ = _norm_forward(x, _vector(weight, n, x.dtype), None, eps, True, stats=False)
        return _grad_input(y, input.shape)
    return _rms_norm_apply(input, weight, n, eps, det)


class FusedLayerNorm(torch.nn.LayerNorm):
    """``torch.nn.LayerNorm`` computed by the numba kernels.

    Same arguments, parameters (``weight``, ``bias``) and state_dict as
    ``torch.nn.LayerNorm``; ``deterministic`` (not saved in the state_dict) picks
    the backward's dW/dB scheme, None following torch's deterministic-algorithms
    setting.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None, deterministic=None):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine,
                         bias=bias, device=device, dtype=dtype)
        self.deterministic = deterministic

    def forward(self, input):
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps,
                          deterministic=self.deterministic)

    @classmethod
    def from_torch(cls, module, deterministic=None):
        """A FusedLayerNorm with ``module``'s configuration and parameters (shared,
        not copied)."""
        if not isinstance(module, torch.nn.LayerNorm):
            raise TypeError(f"module must be a torch.nn.LayerNorm, got {type(module).__name__}")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.normalized_shape = module.normalized_shape
        new.eps = module.eps
        new.elementwise_affine = module.elementwise_affine
        new.register_parameter("weight", module.weight)
        new.register_parameter("bias", module.bias)
        new.deterministic = deterministic
        return new


_RMSNormBase = getattr(torch.nn, "RMSNorm", None)
if _RMSNormBase is None:  # torch < 2.4

    class _RMSNormBase(torch.nn.Module):
        """torch.nn.RMSNorm's constructor, parameters and repr, for older torch."""

        def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                     dtype=None):
            super().__init__()
            if isinstance(normalized_shape, numbers.Integral):
                normalized_shape = (normalized_shape,)
            self.normalized_shape = tuple(normalized_shape)
            self.eps = eps
            self.elementwise_affine = elementwise_affine
            if elementwise_affine:
                self.weight = torch.nn.Parameter(
                    torch.empty(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("weight", None)
            self.reset_parameters()

        def reset_parameters(self):
            if self.weight is not None:
                torch.nn.init.ones_(self.weight)

        def extra_repr(self):
            return ("{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}"
                    .format(**self.__dict__))


class FusedRMSNorm(_RMSNormBase):
    """``torch.nn.RMSNorm`` computed by the numba kernels.

    Same arguments, parameter (``weight``) and state_dict as ``torch.nn.RMSNorm``
    (``eps=None`` means ``torch.finfo(input.dtype).eps``); ``deterministic`` as in
    :class:`FusedLayerNorm`.
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None, deterministic=None):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine,
                         device=device, dtype=dtype)
        self.deterministic = deterministic

    def forward(self, input):
        return rms_norm(input, self.normalized_shape, self.weight, self.eps,
                        deterministic=self.deterministic)

    @classmethod
    def from_torch(cls, module, deterministic=None):
        """A FusedRMSNorm with ``module``'s configuration and parameter (shared)."""
        if not isinstance(module, _RMSNormBase):
            raise TypeError(f"module must be a torch.nn.RMSNorm, got {type(module).__name__}")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.normalized_shape = module.normalized_shape
        new.eps = module.eps
        new.elementwise_affine = module.elementwise_affine
        new.register_parameter("weight", module.weight)
        new.deterministic = deterministic
        return new
