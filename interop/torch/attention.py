"""PyTorch front end of the memory-efficient attention kernels.

``scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
is_causal=False, scale=None, window=0)`` takes torch's layout ``[..., heads, seq, dim]``
(4-D ``[B, H, S, D]`` or 3-D ``[B, S, D]``) and hands the kernels transposed views
(``[B, S, H, D]``, no copy). ``is_causal`` is torch's (top-left aligned); ``window > 0``
adds a sliding window to it. ``attn_mask``: a bool mask (True = take part) becomes an
additive 0 / -inf bias; a float mask is added to the scores, and gets a gradient when
it requires one. Rows that see no key give 0 (torch gives NaN there). Dropout seeds
come from torch's generator (``torch.manual_seed`` reproduces a run) and the backward
regenerates the same mask. ``FusedAttention`` is the module form.

Under ``torch.compile`` the function takes the custom ops ``numba_fused::attention_fwd``
/ ``attention_bwd`` (on the ``[B, S, H, D]`` views; dropout seeds as
:mod:`interop.torch._compiled` says).
"""

import math
import os
from typing import List, Optional

import torch

from numba_fused import attention as _at
from numba_fused.attention import attention_backward, attention_forward

from ._compiled import compiled_seed, seed_pair
from ._fast import ENABLED, PlanCache, function_apply, run_plan
from ._rng import next_seed_offset

__all__ = ["scaled_dot_product_attention", "FusedAttention", "AttentionFunction"]


# Per-signature launch plans (interop.torch._fast, numba_fused.plan): the first call of
# a signature runs the array-level function, which validates and raises; later calls
# replay its allocations and launches with the call's dropout seed and offset. Keys
# hold every tensor's shape, strides and address modulo 16 (the kernels bake strides
# in and pick their copy path by alignment) and the kernel-choice switch.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def _sig(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16)


def _ptrs(*tensors):
    return tuple(0 if t is None else t.data_ptr() for t in tensors)


def _plannable(*tensors):
    return ENABLED[0] and all(t.numel() for t in tensors)


def _run_forward(q, k, v, bias, **options):
    """(out, lse) of ``attention_forward`` with ``bias`` in any broadcastable shape;
    ``options``: causal, window, dropout_p, seed, offset, scale."""
    bias4 = None if bias is None else _expand_bias(bias, q, k)
    o = options
    key = (_sig(q), _sig(k), _sig(v), _sig(bias4), o["causal"], o["window"], o["dropout_p"],
           o["scale"], os.environ.get(_at.TC_ENV))
    plan = _FWD_PLANS.get(key)
    if plan is not None:
        return run_plan(plan, q, _ptrs(q, k, v, bias4), _at.rng_values(o["seed"], o["offset"]))
    res = attention_forward(q, k, v, bias=bias4, **options)
    if _plannable(q, k, v):
        _FWD_PLANS.put(key, _at.forward_plan(q, k, v, bias4, o["causal"], o["window"],
                                             o["dropout_p"], o["scale"]))
    return res


def _run_backward(grad_out, q, k, v, out, lse, bias, need_bias, **options):
    """(grad_q, grad_k, grad_v, grad_bias in bias's shape or None) in the ``[B, S, H, D]``
    layout; ``options``: the forward's (causal, window, dropout_p, seed, offset, scale)."""
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()
    bias4 = None if bias is None else _expand_bias(bias, q, k)
    o = options
    key = (_sig(q), _sig(k), _sig(v), _sig(bias4), _sig(grad_out), _sig(out), _sig(lse),
           need_bias, o["causal"], o["window"], o["dropout_p"], o["scale"],
           os.environ.get(_at.TC_ENV))
    plan = _BWD_PLANS.get(key)
    if plan is not None:
        gq, gk, gv, gb = run_plan(plan, q, _ptrs(q, k, v, bias4, grad_out, out, lse),
                                  _at.rng_values(o["seed"], o["offset"]))
    else:
        gq, gk, gv, gb = attention_backward(grad_out, q, k, v, out, lse, bias=bias4,
                                            need_bias_grad=need_bias, **options)
        if _plannable(q, k, v):
            _BWD_PLANS.put(key, _at.backward_plan(
                grad_out, q, k, v, out, lse, bias4, o["causal"], o["window"], o["dropout_p"],
                o["scale"], need_bias_grad=need_bias))
    if gb is not None:
        gb = gb.reshape(bias.shape)
    return gq, gk, gv, gb


def _attention_forward(ctx, q, k, v, bias, causal, window, dropout_p, seed, offset, scale):
    ctx.options = dict(causal=causal, window=window, dropout_p=dropout_p, seed=seed,
                       offset=offset, scale=scale)
    out, lse = _run_forward(q, k, v, bias, **ctx.options)
    ctx.save_for_backward(q, k, v, bias, out, lse)
    return out


def _attention_backward(ctx, grad_out):
    """(grad_q, grad_k, grad_v, grad_bias or None) in the ``[B, S, H, D]`` layout."""
    q, k, v, bias, out, lse = ctx.saved_tensors
    need_bias = bias is not None and ctx.needs_input_grad[3]
    return _run_backward(grad_out, q, k, v, out, lse, bias, need_bias, **ctx.options)


class AttentionFunction(torch.autograd.Function):
    """Autograd over ``numba_fused.attention_forward`` / ``attention_backward``.

    Inputs q, k, v ``[B, S, H, D]`` (any strides with a unit last stride); ``bias``: None
    or an additive bias in q's dtype of any shape that broadcasts to ``[B, H, Sq, Sk]``
    (the kernels see it expanded, stride 0 where broadcast; its gradient comes back
    summed over those dimensions, i.e. in the bias's own shape). Returns out
    ``[B, Sq, H, Dv]``.
    """

    @staticmethod
    def forward(ctx, q, k, v, bias, causal, window, dropout_p, seed, offset, scale):
        return _attention_forward(ctx, q, k, v, bias, causal, window, dropout_p, seed, offset,
                                  scale)

    @staticmethod
    def backward(ctx, grad_out):
        return (*_attention_backward(ctx, grad_out), None, None, None, None, None, None)


class _HeadsFirstAttention(torch.autograd.Function):
    """:class:`AttentionFunction` for torch's layout: query, key, value ``[B, H, S, D]``
    (or ``[B, S, D]``), out likewise. The transposes (and the 3-D case's unsqueeze) are
    made inside forward/backward, where autograd records nothing: made outside, each is
    one more graph node for the backward pass to run (issue #20)."""

    @staticmethod
    def forward(ctx, query, key, value, bias, causal, window, dropout_p, seed, offset, scale):
        three_d = query.dim() == 3
        if three_d:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        ctx.three_d = three_d
        out = _attention_forward(ctx, query.transpose(1, 2), key.transpose(1, 2),
                                 value.transpose(1, 2), bias, causal, window, dropout_p, seed,
                                 offset, scale).transpose(1, 2)
        return out.squeeze(1) if three_d else out

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.three_d:
            grad_out = grad_out.unsqueeze(1)
        gq, gk, gv, gb = _attention_backward(ctx, grad_out.transpose(1, 2))
        grads = [g.transpose(1, 2) for g in (gq, gk, gv)]
        if ctx.three_d:
            grads = [g.squeeze(1) for g in grads]
        return (*grads, gb, None, None, None, None, None, None)


_attention_apply = function_apply(_HeadsFirstAttention)


def _expand_bias(bias, q, k):
    """``bias`` viewed as ``[B, H, Sq, Sk]`` (leading 1s added, stride 0 where broadcast)."""
    B, Sq, H, _ = q.shape
    view = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    return view.expand(B, H, Sq, k.shape[1])


def _mask_to_bias(attn_mask, query, B, H, Sq, Sk):
    """attn_mask (broadcastable to [B, H, Sq, Sk]) as an additive bias in query's dtype,
    in attn_mask's shape (autograd then routes the bias gradient to the mask)."""
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.device != query.device:
        raise ValueError(f"attn_mask is on {attn_mask.device} but query is on {query.device}")
    if attn_mask.dim() > 4:
        raise ValueError(f"attn_mask must have at most 4 dimensions, got shape {tuple(attn_mask.shape)}")
    try:
        target = tuple(torch.broadcast_shapes(tuple(attn_mask.shape), (B, H, Sq, Sk)))
    except RuntimeError:
        target = None
    if target != (B, H, Sq, Sk):
        raise ValueError(f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to "
                         f"[batch, heads, seq_q, seq_k] = {[B, H, Sq, Sk]}")
    if attn_mask.dtype == torch.bool:
        bias = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device)
        return bias.masked_fill_(~attn_mask, float("-inf"))
    if not attn_mask.is_floating_point():
        raise TypeError(f"attn_mask must be bool or floating point, got {attn_mask.dtype}")
    bias = attn_mask.to(query.dtype)
    # A stride-0 dimension the caller made is one position per index for autograd, but
    # the kernels sum the gradient over every stride-0 dimension: give it real memory
    # when a gradient is wanted.
    if bias.requires_grad and any(st == 0 and n > 1 for st, n in zip(bias.stride(), bias.shape)):
        bias = bias.contiguous()
    return bias


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, window=0):
    """``torch.nn.functional.scaled_dot_product_attention`` on the fused kernels (see
    the module docstring); returns ``[..., heads, seq_q, head_dim_v]``."""
    for t, name in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if query.dim() not in (3, 4) or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"query, key, value must all be 3-D [B, S, D] or 4-D [B, H, S, D], got "
                         f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if query.dim() == 3:
        (B, Sq, _), H, Sk = query.shape, 1, key.shape[1]
    else:
        B, H, Sq, _ = query.shape
        Sk = key.shape[2]
    if window and not is_causal:
        raise ValueError("window > 0 needs is_causal=True")
    bias = None
    if attn_mask is not None:
        bias = _mask_to_bias(attn_mask, query, B, H, Sq, Sk)
    causal = "top_left" if is_causal else None
    if torch.compiler.is_compiling():
        return _compiled_attention(query, key, value, bias, causal, window, dropout_p, scale)
    seed = offset = 0
    if dropout_p > 0.0:
        seed, offset = next_seed_offset(query.device, B * H * Sq * math.ceil(Sk / 4))
    if not (torch.is_grad_enabled()
            and any(t is not None and t.requires_grad for t in (query, key, value, bias))):
        # Nothing to differentiate: skip the autograd Function's host cost.
        q, k, v = (t.unsqueeze(1) if t.dim() == 3 else t for t in (query, key, value))
        out, _ = _run_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), bias,
                              causal=causal, window=window, dropout_p=dropout_p, seed=seed,
                              offset=offset, scale=scale)
        out = out.transpose(1, 2)
        return out.squeeze(1) if query.dim() == 3 else out
    return _attention_apply(query, key, value, bias, causal, window, dropout_p, seed,
                                      offset, scale)


# ---------------------------------------------------------------------------
# Custom ops: the torch.compile route
# ---------------------------------------------------------------------------
# q, k, v in the kernels' [B, S, H, D] layout (any strides with a unit last one);
# bias None or broadcastable to [B, H, Sq, Sk]; seed_offset a CPU int64 [seed, offset]
# (interop.torch._compiled). Forward returns [out [B, Sq, H, Dv], lse [B, H, Sq],
# the seed_offset it used]; backward [grad_q, grad_k, grad_v] plus grad_bias (in
# bias's shape) when need_bias_grad.

@torch.library.custom_op("numba_fused::attention_fwd", mutates_args=())
def _attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   bias: Optional[torch.Tensor], seed_offset: torch.Tensor,
                   causal: Optional[str], window: int, dropout_p: float,
                   scale: Optional[float]) -> List[torch.Tensor]:
    seed, offset = seed_pair(seed_offset)
    out, lse = _run_forward(q, k, v, bias, causal=causal, window=window, dropout_p=dropout_p,
                            seed=seed, offset=offset, scale=scale)
    return [out, lse, seed_offset.clone()]


@_attention_fwd.register_fake
def _(q, k, v, bias, seed_offset, causal, window, dropout_p, scale):
    B, Sq, H, _ = q.shape
    out = q.new_empty((B, Sq, H, v.shape[-1]))
    return [out, q.new_empty((B, H, Sq), dtype=torch.float32), torch.empty(2, dtype=torch.int64)]


@torch.library.custom_op("numba_fused::attention_bwd", mutates_args=())
def _attention_bwd(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   out: torch.Tensor, lse: torch.Tensor, bias: Optional[torch.Tensor],
                   seed_offset: torch.Tensor, causal: Optional[str], window: int,
                   dropout_p: float, scale: Optional[float],
                   need_bias_grad: bool) -> List[torch.Tensor]:
    seed, offset = seed_pair(seed_offset)
    gq, gk, gv, gb = _run_backward(grad_out, q, k, v, out, lse, bias,
                                   bias is not None and need_bias_grad, causal=causal,
                                   window=window, dropout_p=dropout_p, seed=seed,
                                   offset=offset, scale=scale)
    return [gq, gk, gv] + ([] if gb is None else [gb])


@_attention_bwd.register_fake
def _(grad_out, q, k, v, out, lse, bias, seed_offset, causal, window, dropout_p, scale,
      need_bias_grad):
    grads = [q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)]
    if bias is not None and need_bias_grad:
        grads.append(q.new_empty(bias.shape))
    return grads


def _attention_setup(ctx, inputs, output):
    q, k, v, bias, _, causal, window, dropout_p, scale = inputs
    out, lse, used = output
    ctx.save_for_backward(q, k, v, bias, out, lse, used)
    ctx.options = (causal, window, dropout_p, scale)


def _attention_grad(ctx, grads):
    q, k, v, bias, out, lse, used = ctx.saved_tensors
    need_bias = bias is not None and ctx.needs_input_grad[3]
    res = _attention_bwd(grads[0], q, k, v, out, lse, bias, used, *ctx.options, need_bias)
    return (res[0], res[1], res[2], res[3] if need_bias else None,
            None, None, None, None, None)


_attention_fwd.register_autograd(_attention_grad, setup_context=_attention_setup)


def _compiled_attention(query, key, value, bias, causal, window, dropout_p, scale):
    """The custom-op route of :func:`scaled_dot_product_attention` (under torch.compile):
    the same views as ``_HeadsFirstAttention``, as traced ops."""
    three_d = query.dim() == 3
    if three_d:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
    seed_offset = compiled_seed(dropout_p > 0.0)
    out = _attention_fwd(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                         bias, seed_offset, causal, window, float(dropout_p), scale)[0]
    out = out.transpose(1, 2)
    return out.squeeze(1) if three_d else out


class FusedAttention(torch.nn.Module):
    """Attention ``softmax(q k^T * scale + mask) v`` with dropout on the attention weights
    in training mode. Arguments as :func:`scaled_dot_product_attention`."""

    def __init__(self, dropout=0.0, causal=False, window=0, scale=None):
        super().__init__()
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {dropout}")
        self.dropout = dropout
        self.causal = causal
        self.window = window
        self.scale = scale

    def forward(self, query, key, value, attn_mask=None):
        return scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=self.causal, scale=self.scale, window=self.window)

    def extra_repr(self):
        return f"dropout={self.dropout}, causal={self.causal}, window={self.window}, scale={self.scale}"
