"""PyTorch front end of the fused ``dropout(act(x + bias), p)``: an autograd Function,
a ``torch.nn.functional``-style function and an ``nn.Module``.

The dropout mask is keyed by a (seed, offset) pair taken from torch's generator
(:func:`interop.torch._rng.next_seed_offset`), so ``torch.manual_seed`` reproduces
runs; backward regenerates the same mask from the pair saved in the context (or, with
``store_mask=True``, reads the uint8 mask the forward saved).

Under ``torch.compile`` the function takes the custom ops ``numba_fused::
dropout_bias_act_fwd`` / ``dropout_bias_act_bwd`` instead (:mod:`interop.torch._compiled`
says how seeds are drawn there).
"""

from typing import List, Optional

import torch
from torch.autograd.function import once_differentiable

from interop.torch._compiled import compiled_seed, seed_pair
from interop.torch._rng import next_seed_offset
from numba_fused import activations, checks
from numba_fused import dropout as _dr
from numba_fused.dropout import dropout_bias_act_backward, dropout_bias_act_forward

from ._fast import (ENABLED, PlanCache, data_ptr, function_apply, residue16, run_plan,
                    tensor_sig)

__all__ = ["DropoutBiasActFunction", "dropout_bias_act", "FusedDropoutBiasAct"]


# Per-signature launch plans (interop.torch._fast, numba_fused.plan): the first call of
# a signature runs the array-level function, which validates and raises; later calls
# replay its allocations and launches with the call's seed and offset. The keys hold
# each input's address modulo 16: the launcher picks its vector path by 16-byte
# (data) and 8-byte (mask) alignment.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def _forward(x, bias, p, seed, offset, activation, store_mask):
    """(y, mask or None) of contiguous x / bias through a cached plan."""
    key = (x.shape, x.dtype, x.device, tensor_sig(bias), p, activation, store_mask,
           residue16(x), residue16(bias))
    plan = _FWD_PLANS.get(key)
    if plan is not None:
        return run_plan(plan, x, (x.data_ptr(), data_ptr(bias)), _dr.rng_values(seed, offset))
    if store_mask:
        y, mask = dropout_bias_act_forward(x, bias, p, seed, offset, activation,
                                           return_mask=True)
    else:
        y, mask = dropout_bias_act_forward(x, bias, p, seed, offset, activation), None
    if ENABLED[0] and x.numel():
        _FWD_PLANS.put(key, _dr.forward_plan(x, bias, p, activation, store_mask))
    return y, mask


def _backward(g, x, bias, mask, p, seed, offset, activation, need_bias_grad):
    """(grad_x, grad_bias or None) of contiguous tensors through a cached plan."""
    key = (g.shape, g.dtype, g.device, tensor_sig(x), tensor_sig(bias), tensor_sig(mask), p,
           activation, need_bias_grad, residue16(g), residue16(x), residue16(bias),
           residue16(mask))
    plan = _BWD_PLANS.get(key)
    if plan is not None:
        return run_plan(plan, g, (g.data_ptr(), data_ptr(x), data_ptr(bias), data_ptr(mask)),
                        _dr.rng_values(seed, offset))
    out = dropout_bias_act_backward(g, x, bias, p, seed, offset, activation,
                                    need_bias_grad=need_bias_grad, mask=mask)
    if ENABLED[0] and g.numel():
        _BWD_PLANS.put(key, _dr.backward_plan(g, x, bias, p, activation, need_bias_grad, mask))
    return out


class DropoutBiasActFunction(torch.autograd.Function):
    """``y = dropout(act(input + bias), p)`` with the mask keyed by (seed, offset).

    apply(input, bias, p, activation, seed, offset, store_mask): input [..., N], bias
    [N] or None, both of one floating dtype on one CUDA device.
    """

    @staticmethod
    def forward(ctx, input, bias, p, activation, seed, offset, store_mask):
        x = input.contiguous()
        bias = None if bias is None else bias.contiguous()
        y, mask = _forward(x, bias, p, seed, offset, activation, store_mask)
        # act' needs x; for activation 'none' nothing of x is kept alive.
        ctx.save_for_backward(x if activation != "none" else None, bias, mask)
        ctx.p, ctx.activation, ctx.seed, ctx.offset = p, activation, seed, offset
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, bias, mask = ctx.saved_tensors
        grad_x, grad_bias = _backward(grad_out.contiguous(), x, bias, mask, ctx.p, ctx.seed,
                                      ctx.offset, ctx.activation,
                                      bias is not None and ctx.needs_input_grad[1])
        return grad_x, grad_bias, None, None, None, None, None


_dropout_apply = function_apply(DropoutBiasActFunction)


def dropout_bias_act(input, bias=None, p=0.5, activation="none", training=True, generator=None,
                     *, store_mask=False):
    """``dropout(act(input + bias), p)`` over the last dimension, differentiable.

    input: [..., N] CUDA tensor (float32, float16 or bfloat16); bias: [N] of the same
    dtype or None; p: drop probability in [0, 1]; activation: 'none', 'relu', 'gelu',
    'gelu_tanh', 'squared_relu', 'leaky_relu' or 'silu'; training: False (or p = 0) applies no
    dropout; generator: a torch.Generator to draw the seed from (default: the device's
    default generator). store_mask: keep the uint8 mask for backward instead of
    regenerating it (LightSeq's variant; one byte per element of memory).
    """
    p = checks.check_probability(p, "p")
    activations.check_activation(activation)
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
    if torch.compiler.is_compiling():
        return _compiled_dropout(input, bias, p if training else 0.0, activation,
                                 bool(store_mask), generator)
    if not training or p == 0.0:
        p, seed, offset = 0.0, 0, 0
    else:
        seed, offset = next_seed_offset(input.device, (input.numel() + 3) // 4, generator)
    if not (torch.is_grad_enabled()
            and (input.requires_grad or (bias is not None and bias.requires_grad))):
        # Nothing to differentiate: skip the autograd Function's host cost.
        return _forward(input.contiguous(), None if bias is None else bias.contiguous(), p,
                        seed, offset, activation, False)[0]
    return _dropout_apply(input, bias, p, activation, seed, offset,
                                        bool(store_mask))


# ---------------------------------------------------------------------------
# Custom ops: the torch.compile route
# ---------------------------------------------------------------------------
# seed_offset: a CPU int64 tensor [seed, offset] (interop.torch._compiled); forward
# returns [y, the seed_offset it used, mask if store_mask]; backward [grad_x] or
# [grad_x, grad_bias].

@torch.library.custom_op("numba_fused::dropout_bias_act_fwd", mutates_args=())
def _dropout_fwd(x: torch.Tensor, bias: Optional[torch.Tensor], seed_offset: torch.Tensor,
                 p: float, activation: str, store_mask: bool) -> List[torch.Tensor]:
    seed, offset = seed_pair(seed_offset)
    y, mask = _forward(x, bias, p, seed, offset, activation, store_mask)
    return [y, seed_offset.clone()] + ([mask] if store_mask else [])


@_dropout_fwd.register_fake
def _(x, bias, seed_offset, p, activation, store_mask):
    out = [torch.empty(x.shape, dtype=x.dtype, device=x.device),
           torch.empty(2, dtype=torch.int64)]
    if store_mask:
        out.append(torch.empty(x.shape, dtype=torch.uint8, device=x.device))
    return out


@torch.library.custom_op("numba_fused::dropout_bias_act_bwd", mutates_args=())
def _dropout_bwd(grad_out: torch.Tensor, x: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                 mask: Optional[torch.Tensor], seed_offset: torch.Tensor, p: float,
                 activation: str, need_bias_grad: bool) -> List[torch.Tensor]:
    seed, offset = seed_pair(seed_offset)
    gx, gb = _backward(grad_out, x, bias, mask, p, seed, offset, activation,
                       need_bias_grad and bias is not None)
    return [gx] if gb is None else [gx, gb]


@_dropout_bwd.register_fake
def _(grad_out, x, bias, mask, seed_offset, p, activation, need_bias_grad):
    gx = torch.empty(grad_out.shape, dtype=grad_out.dtype, device=grad_out.device)
    if bias is None or not need_bias_grad:
        return [gx]
    return [gx, torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)]


def _dropout_setup(ctx, inputs, output):
    x, bias, seed_offset, p, activation, store_mask = inputs
    ctx.save_for_backward(x if activation != "none" else None, bias,
                          output[2] if store_mask else None, output[1])
    ctx.p, ctx.activation = p, activation


def _dropout_grad(ctx, grads):
    x, bias, mask, seed_offset = ctx.saved_tensors
    need_gb = bias is not None and ctx.needs_input_grad[1]
    out = _dropout_bwd(grads[0].contiguous(), x, bias, mask, seed_offset, ctx.p,
                       ctx.activation, need_gb)
    return out[0], (out[1] if need_gb else None), None, None, None, None


_dropout_fwd.register_autograd(_dropout_grad, setup_context=_dropout_setup)


def _compiled_dropout(input, bias, p, activation, store_mask, generator):
    """The custom-op route of :func:`dropout_bias_act` (under torch.compile)."""
    seed_offset = compiled_seed(p > 0.0, generator)
    x = input.contiguous()
    b = None if bias is None else bias.contiguous()
    return _dropout_fwd(x, b, seed_offset, p, activation, store_mask)[0]


class FusedDropoutBiasAct(torch.nn.Module):
    """``dropout(act(x + bias), p)`` as a module (xformers' ``FusedDropoutBias``).

    p: drop probability; activation: as :func:`dropout_bias_act`; bias_shape: length
    of a learnable bias (initialised to zero), or None for no bias; store_mask: see
    :func:`dropout_bias_act`. Dropout applies in training mode only.
    """

    def __init__(self, p=0.5, activation="none", bias_shape=None, store_mask=False,
                 device=None, dtype=None):
        super().__init__()
        self.p = checks.check_probability(p, "p")
        self.activation = activations.check_activation(activation)
        self.store_mask = bool(store_mask)
        if bias_shape is None:
            self.register_parameter("bias", None)
        else:
            self.bias = torch.nn.Parameter(torch.zeros(bias_shape, device=device, dtype=dtype))

    def forward(self, x):
        return dropout_bias_act(x, self.bias, self.p, self.activation, self.training,
                                store_mask=self.store_mask)

    def extra_repr(self):
        bias = None if self.bias is None else tuple(self.bias.shape)
        return (f"p={self.p}, activation={self.activation!r}, bias_shape={bias}, "
                f"store_mask={self.store_mask}")
