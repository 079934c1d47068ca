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
"""

import functools
import math
import numbers

import torch

from interop.dlpack import _torch_dtype
from numba_fused import layer_norm as _ln
from numba_fused.layer_norm import (layer_norm_backward, layer_norm_forward, rms_norm_backward,
                                    rms_norm_forward)

from ._fast import ENABLED, PlanCache, aligned16, raw_stream

__all__ = ["layer_norm", "rms_norm", "FusedLayerNorm", "FusedRMSNorm"]


# Per-signature launch plans (see interop.torch._fast and numba_fused.plan): the first
# call of a signature runs the array-level function (which validates and raises), later
# ones replay its allocations and launches.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


@functools.lru_cache(maxsize=None)
def _allocator(device):
    """``new(shape, dtype name, zero) -> (tensor, pointer)`` on ``device`` for plans."""
    def new(shape, dtype, zero):
        t = (torch.zeros if zero else torch.empty)(shape, dtype=_torch_dtype(dtype), device=device)
        return t, t.data_ptr()
    return new


def _ptr(t):
    return 0 if t is None else t.data_ptr()


def _norm_forward(x, weight, bias, eps, rms):
    """(y, mean or None, rstd) of contiguous ``[M, N]`` x through a cached plan."""
    key = (x.shape, x.dtype, x.device, weight is None, bias is None, eps, rms,
           aligned16(x), aligned16(weight), aligned16(bias))
    plan = _FWD_PLANS.get(key)
    if plan is not None:
        return plan.run(raw_stream(x.device), (x.data_ptr(), _ptr(weight), _ptr(bias)),
                        _allocator(x.device), x.device.index)
    if rms:
        y, rstd = rms_norm_forward(x, weight, eps)
        out = (y, None, rstd)
    else:
        out = layer_norm_forward(x, weight, bias, eps)
    if ENABLED[0]:
        _FWD_PLANS.put(key, _ln.forward_plan(x, weight, bias, eps, rms))
    return out


def _norm_backward(g, x, weight, bias, mean, rstd, deterministic, rms):
    """(grad_x, grad_weight or None, grad_bias or None) through a cached plan."""
    key = (g.shape, g.dtype, g.device, weight is None, bias is None, deterministic, rms,
           aligned16(g), aligned16(x), aligned16(weight))
    plan = _BWD_PLANS.get(key)
    if plan is not None:
        return plan.run(raw_stream(g.device), (g.data_ptr(), x.data_ptr(), _ptr(weight),
                                               _ptr(bias), _ptr(mean), rstd.data_ptr()),
                        _allocator(g.device), g.device.index)
    if rms:
        gx, gw = rms_norm_backward(g, x, weight, rstd, deterministic=deterministic)
        out = (gx, gw, None)
    else:
        out = layer_norm_backward(g, x, weight, bias, mean, rstd, deterministic=deterministic)
    if ENABLED[0]:
        _BWD_PLANS.put(key, _ln.backward_plan(g, x, weight, bias, mean, rstd, deterministic,
                                              rms))
    return out


class _LayerNormFunction(torch.autograd.Function):
    """y = layer_norm(x, weight, bias) over the last dim of a contiguous ``[M, N]`` x."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, deterministic):
        y, mean, rstd = _norm_forward(x, weight, bias, eps, False)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.deterministic = deterministic
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        # A bias that needs no gradient costs nothing: without it no dB is reduced.
        bias = bias if ctx.needs_input_grad[2] else None
        gx, gw, gb = _norm_backward(grad_y.contiguous(), x, weight, bias, mean, rstd,
                                    ctx.deterministic, False)
        return gx, gw, gb, None, None


class _RMSNormFunction(torch.autograd.Function):
    """y = rms_norm(x, weight) over the last dim of a contiguous ``[M, N]`` x."""

    @staticmethod
    def forward(ctx, x, weight, eps, deterministic):
        y, _, rstd = _norm_forward(x, weight, None, eps, True)
        ctx.save_for_backward(x, weight, rstd)
        ctx.deterministic = deterministic
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, rstd = ctx.saved_tensors
        gx, gw, _ = _norm_backward(grad_y.contiguous(), x, weight, None, None, rstd,
                                   ctx.deterministic, True)
        return gx, gw, None, None


def _normalized(input, normalized_shape):
    """(shape tuple, N = its product); checks input ends with it, as torch does."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
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
    if input.dim() < len(shape) or tuple(input.shape[input.dim() - len(shape):]) != shape:
        raise ValueError(f"Given normalized_shape={list(shape)}, expected input with shape "
                         f"[*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    return shape, math.prod(shape)


def _param(p, name, shape, n, dtype):
    if p is None:
        return None
    if not isinstance(p, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(p).__name__}")
    if tuple(p.shape) != shape:
        raise ValueError(f"{name} must have shape {list(shape)} (normalized_shape), got "
                         f"{list(p.shape)}")
    p = p.reshape(n)
    if p.dtype != dtype:
        p = p.to(dtype)
    return p.contiguous()


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
    det = _deterministic(deterministic)
    if input.numel() == 0:
        return torch.nn.functional.layer_norm(input, shape, weight, bias, eps)
    x = input.contiguous().reshape(-1, n)
    w = _param(weight, "weight", shape, n, input.dtype)
    b = _param(bias, "bias", shape, n, input.dtype)
    y = _LayerNormFunction.apply(x, w, b, eps, det)
    return y.reshape(input.shape)


def rms_norm(input, normalized_shape, weight=None, eps=1e-6, *, deterministic=None):
    """``torch.nn.functional.rms_norm`` on the numba kernels (autograd included).

    eps: as SPEC's default 1e-6; None means ``torch.finfo(input.dtype).eps``, as
    torch's rms_norm does. Other arguments as :func:`layer_norm`.
    """
    shape, n = _normalized(input, normalized_shape)
    det = _deterministic(deterministic)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    if input.numel() == 0:
        if hasattr(torch.nn.functional, "rms_norm"):
            return torch.nn.functional.rms_norm(input, shape, weight, eps)
        return input.clone()
    x = input.contiguous().reshape(-1, n)
    w = _param(weight, "weight", shape, n, input.dtype)
    y = _RMSNormFunction.apply(x, w, eps, det)
    return y.reshape(input.shape)


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
