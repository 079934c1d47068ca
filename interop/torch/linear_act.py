"""PyTorch front end of the fused linear + activation kernels.

- ``linear_act(input, weight, bias=None, activation="none")``: ``act(input @ weight^T +
  bias)`` with autograd (``torch.nn.functional.linear`` argument names and shapes).
- ``FusedLinearAct``: an ``nn.Linear`` with a fused activation.
- ``FusedMLP(in_features, hidden_features, out_features, activation)``: fc1 -> act ->
  fc2; its backward computes the gradient of fc1's pre-activation with the fused
  dgrad ``(grad_y @ W2) * act'(z1)`` (the seed's ``kernel_bwd``), so the hidden
  activation's gradient never takes a separate pass.

Forward saves the pre-activation (in the input dtype) when the activation needs it
for backward. Inputs are made contiguous; float32, float16 and bfloat16 CUDA tensors
are accepted (float16 / bfloat16 run on tensor cores, float32 on CUDA cores).

Under ``torch.compile`` both take the custom ops ``numba_fused::linear_act_fwd`` /
``linear_act_bwd`` and ``numba_fused::mlp_fwd`` / ``mlp_bwd`` (same kernels, same
plans); eager calls keep the autograd Functions, whose host cost is lower.
"""

import math
from typing import List, Optional

import torch

from numba_fused import linear_act as _la
from numba_fused.activations import ACTIVATIONS, check_activation
from numba_fused.plan import Plan

from ._fast import (ENABLED, PlanCache, aligned16, dtype_name, function_apply, raw_stream,
                    run_plan)

__all__ = ["linear_act", "FusedLinearAct", "FusedMLP", "ACTIVATIONS"]


def _contig(t):
    return None if t is None else t.contiguous()


_FWD_PLANS = PlanCache()


def _forward(x, weight, bias, activation, save):
    """``linear_act_forward`` on contiguous tensors, through a cached per-signature
    plan after the first call (see ``interop.torch._fast``)."""
    x_ok, w_ok, b_ok = aligned16(x), aligned16(weight), aligned16(bias)
    key = (x.shape, x.dtype, x.device, weight.shape, weight.dtype, weight.device,
           None if bias is None else (bias.shape, bias.dtype, bias.device),
           activation, save, x_ok, w_ok, b_ok)
    launch = _FWD_PLANS.get(key)
    if launch is None:
        res = _la.linear_act_forward(x, weight, bias, activation, save_preact=save)
        if ENABLED[0] and x.numel() and weight.numel():
            N, K = weight.shape
            launch = _la.forward_plan(x.numel() // K, N, K, dtype_name(x.dtype),
                                      bias is not None, save, activation, x_ok, w_ok,
                                      x.device.index, b_ok)
            if launch is None:  # x or weight is first copied to aligned rows
                launch = _la.forward_record_plan(x, weight, bias, activation, save)
            _FWD_PLANS.put(key, launch)
        return res if save else (res, None)
    if isinstance(launch, Plan):
        y, pre = run_plan(launch, x, (x.data_ptr(), weight.data_ptr(),
                                      0 if bias is None else bias.data_ptr()))
        return y, pre
    y = torch.empty(x.shape[:-1] + weight.shape[:1], dtype=x.dtype, device=x.device)
    pre = torch.empty_like(y) if save else None
    launch(raw_stream(x.device), x.data_ptr(), weight.data_ptr(),
           0 if bias is None else bias.data_ptr(), y.data_ptr(),
           0 if pre is None else pre.data_ptr())
    return y, pre


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _wanted(grads, needs):
    """The backward op's list spread back over the inputs, None where not needed."""
    it = iter(grads)
    return [next(it) if need else None for need in needs]


def _linear_backward(gz, x, weight, need_x, need_w, need_b):
    """[grad_x, grad_w, grad_b] (each present if needed) from grad_z = d loss / d preact."""
    out = []
    if need_x:
        out.append(_la.linear_act_dgrad(gz, weight, "none"))
    if need_w or need_b:
        gw, gb = _la.linear_weight_grad(gz, x, need_bias_grad=need_b)
        out += ([gw] if need_w else []) + ([gb] if need_b else [])
    return out


_BWD_PLANS = PlanCache()


def _bwd_key(activation, needs, *tensors):
    return (activation, needs) + tuple(
        None if t is None else (t.shape, t.dtype, t.device, t.data_ptr() % 16 == 0)
        for t in tensors)


def planned_grads(plans, activation, needs, tensors, array_grads, record):
    """The gradients asked for (a list, input order) of a backward whose inputs are
    ``tensors`` (None for absent ones): replayed from the plan ``plans`` holds for this
    signature, else computed by ``array_grads()`` (the validating array-level path)
    and the plan ``record()`` builds cached, unless a tensor is empty."""
    key = _bwd_key(activation, needs, *tensors)
    plan = plans.get(key)
    if plan is not None:
        grads = run_plan(plan, tensors[0], tuple(0 if t is None else t.data_ptr()
                                                 for t in tensors))
        return [g for g in grads if g is not None]
    out = array_grads()
    if ENABLED[0] and all(t is None or t.numel() for t in tensors):
        plans.put(key, record())
    return out


def _linear_act_grads(grad_y, x, weight, preact, activation, need_x, need_w, need_b):
    """Gradients of ``act(x @ weight^T + bias)`` asked for, in input order (contiguous
    tensors; a cached plan after a signature's first call)."""
    needs = (need_x, need_w, need_b)
    tensors = (grad_y, x, weight, preact if activation != "none" else None)

    def array_grads():
        gz = grad_y
        if activation != "none":
            gz = _la.activation_backward(gz, preact, activation)
        return _linear_backward(gz, x, weight, *needs)

    return planned_grads(_BWD_PLANS, activation, needs, tensors, array_grads,
                         lambda: _la.backward_plan(*tensors, activation, *needs))


def _mlp_grads(grad_y, x, w1, w2, h, z1, activation, need_x, need_w1, need_b1, need_w2,
               need_b2):
    """Gradients of ``fc2(act(fc1(x)))`` asked for, in input order (x, w1, b1, w2, b2)."""
    needs = (need_x, need_w1, need_b1, need_w2, need_b2)
    tensors = (grad_y, x, w1, w2, h, z1 if activation != "none" else None)
    return planned_grads(_BWD_PLANS, activation, needs, tensors,
                         lambda: _mlp_grads_array(grad_y, x, w1, w2, h, z1, activation, *needs),
                         lambda: _la.mlp_backward_plan(*tensors, activation, needs))


def _mlp_grads_array(grad_y, x, w1, w2, h, z1, activation, need_x, need_w1, need_b1, need_w2,
                     need_b2):
    out = []
    if need_w2 or need_b2:
        gw2, gb2 = _la.linear_weight_grad(grad_y, h, need_bias_grad=need_b2)
        out += ([gw2] if need_w2 else []) + ([gb2] if need_b2 else [])
    if need_x or need_w1 or need_b1:
        # d loss / d z1 in one GEMM: (grad_y @ W2) * act'(z1).
        gz1 = _la.linear_act_dgrad(grad_y, w2, activation, z1)
        out = _linear_backward(gz1, x, w1, need_x, need_w1, need_b1) + out
    return out


class _LinearActFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, activation):
        save = activation != "none"
        y, pre = _forward(x, weight, bias, activation, save)
        ctx.activation = activation
        ctx.save_for_backward(x, weight, pre)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, pre = ctx.saved_tensors
        needs = [bool(n) for n in ctx.needs_input_grad[:3]]
        grads = _linear_act_grads(grad_y.contiguous(), x, weight, pre, ctx.activation, *needs)
        return (*_wanted(grads, needs), None)


_linear_act_apply = function_apply(_LinearActFunction)


def linear_act(input, weight, bias=None, activation="none"):
    """``act(input @ weight^T + bias)`` with autograd.

    input: ``[..., in_features]``; weight: ``[out_features, in_features]``; bias:
    ``[out_features]`` or None; activation: one of ``ACTIVATIONS``.
    """
    check_activation(activation)
    for t, name in ((input, "input"), (weight, "weight"), (bias, "bias")):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    x, w, b = input.contiguous(), weight.contiguous(), _contig(bias)
    if torch.compiler.is_compiling():
        return _linear_act_fwd(x, w, b, activation)[0]
    if _needs_grad(x, w, b):
        return _linear_act_apply(x, w, b, activation)
    # No autograd node to record: skip Function.apply's host cost (bench/NOTES.md).
    return _forward(x, w, b, activation, False)[0]


class _MLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, activation):
        h, z1 = _forward(x, w1, b1, activation, activation != "none")
        y, _ = _forward(h, w2, b2, "none", False)
        ctx.activation = activation
        ctx.save_for_backward(x, w1, w2, h, z1)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, w1, w2, h, z1 = ctx.saved_tensors
        needs = [bool(n) for n in ctx.needs_input_grad[:5]]
        grads = _mlp_grads(grad_y.contiguous(), x, w1, w2, h, z1, ctx.activation, *needs)
        return (*_wanted(grads, needs), None)


_mlp_apply = function_apply(_MLPFunction)


# ---------------------------------------------------------------------------
# Custom ops: the torch.compile route
# ---------------------------------------------------------------------------
# Inputs contiguous, as the Functions hand them to the kernels. Forward ops return
# what backward needs beside the inputs (the pre-activation when the activation has a
# derivative to apply); backward ops take need flags (one per differentiable input) and
# return only the gradients asked for, in input order (a schema cannot return None).

@torch.library.custom_op("numba_fused::linear_act_fwd", mutates_args=())
def _linear_act_fwd(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                    activation: str) -> List[torch.Tensor]:
    """[y] or, when the activation needs it for backward, [y, preact]."""
    save = activation != "none"
    y, pre = _forward(x, weight, bias, activation, save)
    return [y, pre] if save else [y]


@_linear_act_fwd.register_fake
def _(x, weight, bias, activation):
    y = x.new_empty(x.shape[:-1] + weight.shape[:1])
    return [y, torch.empty_like(y)] if activation != "none" else [y]


@torch.library.custom_op("numba_fused::linear_act_bwd", mutates_args=())
def _linear_act_bwd(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    preact: Optional[torch.Tensor], activation: str, need_x: bool,
                    need_w: bool, need_b: bool) -> List[torch.Tensor]:
    return _linear_act_grads(grad_y, x, weight, preact, activation, need_x, need_w, need_b)


@_linear_act_bwd.register_fake
def _(grad_y, x, weight, preact, activation, need_x, need_w, need_b):
    return ([x.new_empty(x.shape)] if need_x else []) + \
        ([weight.new_empty(weight.shape)] if need_w else []) + \
        ([x.new_empty(weight.shape[:1])] if need_b else [])


def _linear_act_setup(ctx, inputs, output):
    x, weight, _, activation = inputs
    ctx.save_for_backward(x, weight, output[1] if activation != "none" else None)
    ctx.activation = activation


def _linear_act_grad(ctx, grads):
    x, weight, pre = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    res = _linear_act_bwd(grads[0].contiguous(), x, weight, pre, ctx.activation, *needs)
    return (*_wanted(res, needs), None)


_linear_act_fwd.register_autograd(_linear_act_grad, setup_context=_linear_act_setup)


@torch.library.custom_op("numba_fused::mlp_fwd", mutates_args=())
def _mlp_fwd(x: torch.Tensor, w1: torch.Tensor, b1: Optional[torch.Tensor], w2: torch.Tensor,
             b2: Optional[torch.Tensor], activation: str) -> List[torch.Tensor]:
    """[y, h = act(z1)] or, when the activation needs it for backward, [y, h, z1]."""
    save = activation != "none"
    h, z1 = _forward(x, w1, b1, activation, save)
    y, _ = _forward(h, w2, b2, "none", False)
    return [y, h, z1] if save else [y, h]


@_mlp_fwd.register_fake
def _(x, w1, b1, w2, b2, activation):
    h = x.new_empty(x.shape[:-1] + w1.shape[:1])
    y = x.new_empty(x.shape[:-1] + w2.shape[:1])
    return [y, h, torch.empty_like(h)] if activation != "none" else [y, h]


@torch.library.custom_op("numba_fused::mlp_bwd", mutates_args=())
def _mlp_bwd(grad_y: torch.Tensor, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
             h: torch.Tensor, z1: Optional[torch.Tensor], activation: str, need_x: bool,
             need_w1: bool, need_b1: bool, need_w2: bool, need_b2: bool) -> List[torch.Tensor]:
    return _mlp_grads(grad_y, x, w1, w2, h, z1, activation, need_x, need_w1, need_b1, need_w2,
                      need_b2)


@_mlp_bwd.register_fake
def _(grad_y, x, w1, w2, h, z1, activation, need_x, need_w1, need_b1, need_w2, need_b2):
    shapes = [(need_x, x.shape), (need_w1, w1.shape), (need_b1, w1.shape[:1]),
              (need_w2, w2.shape), (need_b2, w2.shape[:1])]
    return [x.new_empty(shape) for need, shape in shapes if need]


def _mlp_setup(ctx, inputs, output):
    x, w1, _, w2, _, activation = inputs
    ctx.save_for_backward(x, w1, w2, output[1], output[2] if activation != "none" else None)
    ctx.activation = activation


def _mlp_grad(ctx, grads):
    x, w1, w2, h, z1 = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:5]]
    res = _mlp_bwd(grads[0].contiguous(), x, w1, w2, h, z1, ctx.activation, *needs)
    return (*_wanted(res, needs), None)


_mlp_fwd.register_autograd(_mlp_grad, setup_context=_mlp_setup)


class FusedLinearAct(torch.nn.Module):
    """``act(x @ weight^T + bias)``: ``nn.Linear``'s parameters and initialisation,
    with the activation fused into the GEMM's epilogue."""

    def __init__(self, in_features, out_features, bias=True, activation="none", device=None,
                 dtype=None):
        super().__init__()
        self.activation = check_activation(activation)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        kw = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty(self.out_features, self.in_features, **kw))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(self.out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features else 0.0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return linear_act(x, self.weight, self.bias, self.activation)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, activation={self.activation!r}")


def _mlp(x, w1, b1, w2, b2, activation):
    """``fc2(act(fc1(x)))`` with weights ``[out, in]`` (any strides: made contiguous,
    differentiably); the two-GEMM MLP of :class:`FusedMLP`."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    args = (x.contiguous(), w1.contiguous(), _contig(b1), w2.contiguous(), _contig(b2))
    if torch.compiler.is_compiling():
        return _mlp_fwd(*args, activation)[0]
    if _needs_grad(*args):
        return _mlp_apply(*args, activation)
    h, _ = _forward(args[0], args[1], args[2], activation, False)
    return _forward(h, args[3], args[4], "none", False)[0]


class FusedMLP(torch.nn.Module):
    """``fc2(act(fc1(x)))`` with ``fc1: in -> hidden``, ``fc2: hidden -> out``
    (parameters ``fc1.weight``, ``fc1.bias``, ``fc2.weight``, ``fc2.bias`` as in a torch
    MLP). Forward saves fc1's pre-activation; backward fuses act' into the dgrad
    GEMM of fc2."""

    def __init__(self, in_features, hidden_features, out_features, activation="gelu_tanh",
                 bias1=True, bias2=True, device=None, dtype=None):
        super().__init__()
        self.activation = check_activation(activation)
        self.fc1 = FusedLinearAct(in_features, hidden_features, bias1, activation, device, dtype)
        self.fc2 = FusedLinearAct(hidden_features, out_features, bias2, "none", device, dtype)

    def forward(self, x):
        return _mlp(x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias,
                    self.activation)

    def extra_repr(self):
        return f"activation={self.activation!r}"
