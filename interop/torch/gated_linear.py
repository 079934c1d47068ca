"""PyTorch front end of the gated linear units (SwiGLU / GeGLU, ``numba_fused.gated_linear``).

- ``gated_mlp(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None,
  activation="silu")``: ``down(act(gate(x)) * up(x))`` with autograd, Llama's MLP.
- ``FusedGatedMLP(in_features, hidden_features, out_features=None, bias=False,
  activation="silu")``: the module, with ``gate_proj``, ``up_proj`` and ``down_proj``
  ``nn.Linear`` children (a Hugging Face ``LlamaMLP``'s state_dict keys).

The forward runs two GEMMs: gate and up as one over the interleaved weight, the
product ``act(g) * u`` written by its epilogue (the pairs ``(g, u)`` saved for the
backward), then the down projection. The backward's first GEMM (``grad_y @ W_down``)
writes the pairs' gradient in its epilogue; grad_x and the weight gradients are plain
GEMMs. The interleaved weight is built in each forward (a copy of the gate and up
weights: about 3% of the GEMMs' time at Llama-7B's MLP with 8192 tokens) and the
gradient is split back into the two projections' (strided views, no copy).

Eager only: under ``torch.compile`` the same math runs as three ``linear_act`` custom
ops and a torch product (no graph break; the gate is then not fused).
"""

import torch

import numba_fused as nf
from numba_fused.activations import check_activation
from numba_fused.gated_linear import interleave

from ._fast import function_apply
from .linear_act import linear_act

__all__ = ["gated_mlp", "FusedGatedMLP"]


def _pair(gate, up, what):
    if (gate is None) != (up is None):
        raise ValueError(f"{what}: give both the gate's and the up projection's, or neither")
    return None if gate is None else interleave(gate, up)


class _GatedMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wg, wu, bg, bu, wd, bd, activation):
        w = interleave(wg, wu)
        b = _pair(bg, bu, "biases")
        h, z = nf.gated_linear_forward(x, w, b, activation, save_preact=True)
        y = nf.linear_act_forward(h, wd, bd, "none")
        ctx.activation = activation
        ctx.save_for_backward(x, w, wd, h, z)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, w, wd, h, z = ctx.saved_tensors
        nx, nwg, nwu, nbg, nbu, nwd, nbd = ctx.needs_input_grad[:7]
        gy = grad_y.contiguous()
        gx = gwg = gwu = gbg = gbu = gwd = gbd = None
        if nwd or nbd:
            gwd, gbd = nf.linear_weight_grad(gy, h, need_bias_grad=bool(nbd))
        if nx or nwg or nwu or nbg or nbu:
            dz = nf.gated_linear_dgrad(gy, wd, z, ctx.activation)
            if nx:
                gx = nf.linear_act_dgrad(dz, w, "none")
            if nwg or nwu or nbg or nbu:
                gw, gb = nf.linear_weight_grad(dz, x, need_bias_grad=bool(nbg or nbu))
                gwg, gwu = gw[0::2], gw[1::2]
                if gb is not None:
                    gbg, gbu = gb[0::2], gb[1::2]
        return gx, gwg, gwu, gbg, gbu, gwd, (gbd if nbd else None), None


_gated_mlp_apply = function_apply(_GatedMLPFunction)


def gated_mlp(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None,
              activation="silu"):
    """``down(act(x @ w_gate^T + b_gate) * (x @ w_up^T + b_up))`` with autograd.

    x: ``[..., K]``; w_gate, w_up: ``[I, K]``; w_down: ``[N, I]``; biases ``[I]`` (both
    or neither), ``[N]`` or None; one dtype (float32, float16, bfloat16), one device.
    Returns ``[..., N]``.
    """
    check_activation(activation)
    for t, name in ((x, "x"), (w_gate, "w_gate"), (w_up, "w_up"), (w_down, "w_down")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if torch.compiler.is_compiling():
        g = linear_act(x, w_gate, b_gate, activation)
        u = linear_act(x, w_up, b_up, "none")
        return linear_act(g * u, w_down, b_down, "none")
    _pair(b_gate, b_up, "biases")
    args = [t if t is None else t.contiguous() for t in (x, w_gate, w_up, b_gate, b_up, w_down,
                                                         b_down)]
    return _gated_mlp_apply(*args, activation)


class FusedGatedMLP(torch.nn.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))`` (Llama's MLP with ``silu``;
    GeGLU with ``gelu_tanh``) on the gated kernels. Children ``gate_proj``,
    ``up_proj`` (``in -> hidden``) and ``down_proj`` (``hidden -> out``) are
    ``nn.Linear``, initialised as torch's."""

    def __init__(self, in_features, hidden_features, out_features=None, bias=False,
                 activation="silu", device=None, dtype=None):
        super().__init__()
        self.activation = check_activation(activation)
        out_features = in_features if out_features is None else out_features
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self.gate_proj = torch.nn.Linear(in_features, hidden_features, **kw)
        self.up_proj = torch.nn.Linear(in_features, hidden_features, **kw)
        self.down_proj = torch.nn.Linear(hidden_features, out_features, **kw)

    @classmethod
    def from_module(cls, mlp, activation):
        """A FusedGatedMLP sharing ``mlp``'s ``gate_proj`` / ``up_proj`` / ``down_proj``
        (``nn.Linear``; same parameters, same state_dict keys)."""
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.activation = check_activation(activation)
        new.gate_proj, new.up_proj, new.down_proj = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        return new

    def forward(self, x):
        g, u, d = self.gate_proj, self.up_proj, self.down_proj
        return gated_mlp(x, g.weight, u.weight, d.weight, g.bias, u.bias, d.bias,
                         self.activation)

    def extra_repr(self):
        return f"activation={self.activation!r}"
