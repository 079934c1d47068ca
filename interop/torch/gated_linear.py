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
GEMMs. Where ``gated_pair_ok`` allows (16-bit, 16-byte aligned rows; in training or
on wgmma only with ``linear_act.GATED_PAIRS_EVERYWHERE``, on by default) every GEMM
uses the gate and up weights in place: the forward and grad_x read
row 2j of the interleaved weight from ``w_gate`` and 2j + 1 from ``w_up``, and the
weight-gradient GEMM writes its rows to the two gradients. Otherwise the interleaved
weight is built in each forward (a copy of both weights, kept for the backward) and
the gradient is split back into the two projections' (strided views).

Both passes replay per-signature launch plans after a signature's first call, as
``interop.torch.linear_act``'s do (``interop.torch._fast``). Without autograd (no
input needs a gradient: inference, generation) the forward skips the autograd
Function and keeps no pairs.

Eager only: under ``torch.compile`` the same math runs as three ``linear_act`` custom
ops and a torch product (no graph break; the gate is then not fused).
"""

import torch

import numba_fused as nf
from numba_fused import gated_linear as _gl
from numba_fused import linear_act as _la
from numba_fused.activations import check_activation
from numba_fused.gated_linear import interleave

from ._fast import ENABLED, PlanCache, function_apply, run_plan, tensor_sig
from .linear_act import _forward as _linear_forward
from .linear_act import _needs_grad, _wanted, linear_act, planned_grads

__all__ = ["gated_mlp", "FusedGatedMLP"]


def _pair(gate, up, what):
    if (gate is None) != (up is None):
        raise ValueError(f"{what}: give both the gate's and the up projection's, or neither")
    return None if gate is None else interleave(gate, up)


_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()
_BWD_PAIR_PLANS = PlanCache()


def _gated_forward(x, w, b, activation, save):
    """(h, pairs or None) of ``gated_linear_forward`` on contiguous tensors, through a
    cached per-signature plan after the first call."""
    key = (x.shape, x.dtype, x.device, tensor_sig(w), tensor_sig(b), activation, save,
           x.data_ptr() % 16, w.data_ptr() % 16, None if b is None else b.data_ptr() % 16)
    plan = _FWD_PLANS.get(key)
    if plan is not None:
        return run_plan(plan, x, (x.data_ptr(), w.data_ptr(), 0 if b is None else b.data_ptr()))
    if save:
        h, z = nf.gated_linear_forward(x, w, b, activation, save_preact=True)
    else:
        h, z = nf.gated_linear_forward(x, w, b, activation), None
    if ENABLED[0] and x.numel() and w.numel():
        _FWD_PLANS.put(key, _gl.forward_plan(x, w, b, activation, save))
    return h, z


_PAIR_PLANS = PlanCache()


def _in_place(x, wg, wu, b, activation, save):
    """(h, pairs or None) of ``gated_linear_forward_pair`` (the gate and up weights
    read in place, no interleaved copy) through a cached plan, or None where this
    signature's weights cannot be used in place (with ``save``: by the backward's
    GEMMs too; cached as well: the caller then interleaves)."""
    key = (x.shape, x.dtype, x.device, tensor_sig(wg), tensor_sig(wu), tensor_sig(b),
           activation, save, x.data_ptr() % 16, wg.data_ptr() % 16, wu.data_ptr() % 16,
           None if b is None else b.data_ptr() % 16, _la.GATED_PAIRS_EVERYWHERE)
    plan = _PAIR_PLANS.get(key)
    if plan is False:
        return None
    if plan is not None:
        return run_plan(plan, x, (x.data_ptr(), wg.data_ptr(), wu.data_ptr(),
                                  0 if b is None else b.data_ptr()))
    if not _gl.pair_in_place(x, wg, wu, backward=save):
        if ENABLED[0]:
            _PAIR_PLANS.put(key, False)
        return None
    if save:
        h, z = _gl.gated_linear_forward_pair(x, wg, wu, b, activation, save_preact=True)
    else:
        h, z = _gl.gated_linear_forward_pair(x, wg, wu, b, activation), None
    if ENABLED[0] and x.numel():
        _PAIR_PLANS.put(key, _gl.forward_pair_plan(x, wg, wu, b, activation, save))
    return h, z


def _forward(x, wg, wu, bg, bu, wd, bd, activation, save):
    """(y, interleaved weight or None, h, pairs or None) of the gated MLP: the gate and
    up weights used in place where they can be (then no interleaved weight), pairs
    kept for the backward when ``save``."""
    b = _pair(bg, bu, "biases")
    hz = _in_place(x, wg, wu, b, activation, save)
    w = None
    if hz is None:
        w = interleave(wg, wu)
        hz = _gated_forward(x, w, b, activation, save)
    h, z = hz
    y, _ = _linear_forward(h, wd, bd, "none", False)
    return y, w, h, z


def _down_array(gy, wd, h, z, activation, need_x, need_w, need_b, need_wd, need_bd):
    """(grad_w_down, grad_b_down, dz) by the array-level functions: the down
    projection's weight gradient and the pairs' gradient (None where not needed)."""
    gwd = gbd = dz = None
    if need_wd or need_bd:
        gwd, gbd = nf.linear_weight_grad(gy, h, need_bias_grad=need_bd)
    if need_x or need_w or need_b:
        dz = nf.gated_linear_dgrad(gy, wd, z, activation)
    return gwd, gbd, dz


def _grads_array(gy, x, w, wd, h, z, activation, need_x, need_w, need_b, need_wd, need_bd):
    """The gradients asked for (in the order x, w, b, wd, bd) by the array-level
    functions."""
    gwd, gbd, dz = _down_array(gy, wd, h, z, activation, need_x, need_w, need_b, need_wd,
                               need_bd)
    gx = gw = gb = None
    if dz is not None:
        if need_x:
            gx = nf.linear_act_dgrad(dz, w, "none")
        if need_w or need_b:
            gw, gb = nf.linear_weight_grad(dz, x, need_bias_grad=need_b)
    grads = (gx, gw, gb, gwd, gbd)
    return [g for g, need in zip(grads, (need_x, need_w, need_b, need_wd, need_bd)) if need]


def _grads(gy, x, w, wd, h, z, activation, *needs):
    """The gradients asked for (``needs``: x, w, b, wd, bd), in that order, through a
    cached plan after a signature's first call."""
    tensors = (gy, x, w, wd, h, z)
    return planned_grads(_BWD_PLANS, activation, needs, tensors,
                         lambda: _grads_array(gy, x, w, wd, h, z, activation, *needs),
                         lambda: _gl.mlp_backward_plan(*tensors, activation, needs))


def _grads_pair_array(gy, x, wg, wu, wd, h, z, activation, need_x, need_w, need_b, need_wd,
                      need_bd):
    """The gradients asked for (in the order x, w_gate, w_up, b, wd, bd; the two
    weights' together) by the array-level functions, the gate and up weights used in
    place."""
    gwd, gbd, dz = _down_array(gy, wd, h, z, activation, need_x, need_w, need_b, need_wd,
                               need_bd)
    gx = gwg = gwu = gb = None
    if dz is not None:
        gx, gwg, gwu, gb = _gl.pair_grads(dz, x, wg, wu, need_x, need_w, need_b)
    grads = ((gx, need_x), (gwg, need_w), (gwu, need_w), (gb, need_b), (gwd, need_wd),
             (gbd, need_bd))
    return [g for g, need in grads if need]


def _grads_pair(gy, x, wg, wu, wd, h, z, activation, *needs):
    """As :func:`_grads` with the gate and up weights used in place: the gradients
    asked for in the order x, w_gate, w_up (both with ``needs[1]``), b, wd, bd."""
    tensors = (gy, x, wg, wu, wd, h, z)
    return planned_grads(_BWD_PAIR_PLANS, activation, needs, tensors,
                         lambda: _grads_pair_array(gy, x, wg, wu, wd, h, z, activation, *needs),
                         lambda: _gl.mlp_backward_pair_plan(*tensors, activation, needs))


class _GatedMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wg, wu, bg, bu, wd, bd, activation):
        y, w, h, z = _forward(x, wg, wu, bg, bu, wd, bd, activation, True)
        ctx.activation = activation
        # Without the interleaved weight (w None) the backward uses wg and wu in place.
        ctx.save_for_backward(x, w, wg, wu, wd, h, z)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, w, wg, wu, wd, h, z = ctx.saved_tensors
        nx, nwg, nwu, nbg, nbu, nwd, nbd = ctx.needs_input_grad[:7]
        needs = (bool(nx), bool(nwg or nwu), bool(nbg or nbu), bool(nwd), bool(nbd))
        gy = grad_y.contiguous()
        if w is None:
            gx, gwg, gwu, gb, gwd, gbd = _wanted(
                _grads_pair(gy, x, wg, wu, wd, h, z, ctx.activation, *needs),
                needs[:2] + needs[1:])
        else:
            gx, gw, gb, gwd, gbd = _wanted(_grads(gy, x, w, wd, h, z, ctx.activation, *needs),
                                           needs)
            gwg = gwu = None
            if gw is not None:
                gwg, gwu = gw[0::2], gw[1::2]
        gbg = gbu = None
        if gb is not None:
            gbg, gbu = gb[0::2], gb[1::2]
        return gx, gwg, gwu, gbg, gbu, gwd, gbd, None


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
    if _needs_grad(*args):
        return _gated_mlp_apply(*args, activation)
    # No autograd node to record: skip the Function's host cost and the pairs.
    return _forward(*args, activation, False)[0]


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
