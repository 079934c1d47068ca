"""PyTorch front end of the fused ``dropout(act(x + bias), p)``: an autograd Function,
a ``torch.nn.functional``-style function and an ``nn.Module``.

The dropout mask is keyed by a (seed, offset) pair taken from torch's generator
(:func:`interop.torch._rng.next_seed_offset`), so ``torch.manual_seed`` reproduces
runs; backward regenerates the same mask from the pair saved in the context (or, with
``store_mask=True``, reads the uint8 mask the forward saved).
"""

import torch
from torch.autograd.function import once_differentiable

from interop.torch._rng import next_seed_offset
from numba_fused import activations, checks
from numba_fused.dropout import dropout_bias_act_backward, dropout_bias_act_forward

__all__ = ["DropoutBiasActFunction", "dropout_bias_act", "FusedDropoutBiasAct"]


class DropoutBiasActFunction(torch.autograd.Function):
    """``y = dropout(act(input + bias), p)`` with the mask keyed by (seed, offset).

    apply(input, bias, p, activation, seed, offset, store_mask): input [..., N], bias
    [N] or None, both of one floating dtype on one CUDA device.
    """

    @staticmethod
    def forward(ctx, input, bias, p, activation, seed, offset, store_mask):
        x = input.contiguous()
        bias = None if bias is None else bias.contiguous()
        mask = None
        if store_mask:
            y, mask = dropout_bias_act_forward(x, bias, p, seed, offset, activation,
                                               return_mask=True)
        else:
            y = dropout_bias_act_forward(x, bias, p, seed, offset, activation)
        # act' needs x; for activation 'none' nothing of x is kept alive.
        ctx.save_for_backward(x if activation != "none" else None, bias, mask)
        ctx.p, ctx.activation, ctx.seed, ctx.offset = p, activation, seed, offset
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, bias, mask = ctx.saved_tensors
        grad_x, grad_bias = dropout_bias_act_backward(
            grad_out.contiguous(), x, bias, ctx.p, ctx.seed, ctx.offset, ctx.activation,
            need_bias_grad=bias is not None and ctx.needs_input_grad[1], mask=mask)
        return grad_x, grad_bias, None, None, None, None, None


def dropout_bias_act(input, bias=None, p=0.5, activation="none", training=True, generator=None,
                     *, store_mask=False):
    """``dropout(act(input + bias), p)`` over the last dimension, differentiable.

    input: [..., N] CUDA tensor (float32, float16 or bfloat16); bias: [N] of the same
    dtype or None; p: drop probability in [0, 1]; activation: 'none', 'relu', 'gelu',
    'gelu_tanh', 'squared_relu' or 'leaky_relu'; training: False (or p = 0) applies no
    dropout; generator: a torch.Generator to draw the seed from (default: the device's
    default generator). store_mask: keep the uint8 mask for backward instead of
    regenerating it (LightSeq's variant; one byte per element of memory).
    """
    p = checks.check_probability(p, "p")
    activations.check_activation(activation)
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
    if not training or p == 0.0:
        p, seed, offset = 0.0, 0, 0
    else:
        seed, offset = next_seed_offset(input.device, (input.numel() + 3) // 4, generator)
    return DropoutBiasActFunction.apply(input, bias, p, activation, seed, offset,
                                        bool(store_mask))


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
