"""Put a model on our kernels, in place, with one call (issue #19).

``patch(model)`` walks ``model.named_modules()`` and replaces:

- every ``torch.nn.LayerNorm`` (GPT-2's, BERT's, ...) by :class:`FusedLayerNorm`;
- every ``torch.nn.RMSNorm`` and every Llama-style RMSNorm of Hugging Face
  transformers (``y = weight * x / sqrt(mean(x^2) + eps)``: the classes named in
  ``LLAMA_STYLE_RMSNORMS``) by :class:`FusedRMSNorm`.

- GPT-2-style MLPs (``c_fc`` / ``act`` / ``c_proj`` Conv1D layers) by :class:`ConvMLP`
  and BERT-style ``*Intermediate`` modules (``act(dense(x))``) by
  :class:`LinearActIntermediate`, and Llama-style gated MLPs (SwiGLU / GeGLU) by
  :class:`GatedMLP` (the gate fused into the GEMM epilogues), where the activation is
  one of ours (gelu, gelu_tanh, relu, squared_relu, leaky_relu 0.01, silu); the GEMMs
  then run on
  ``linear_act`` (its speed: bench/NOTES.md; about half of cuBLAS today);

and, for Hugging Face models that run attention through transformers' attention
registry (``_supports_attention_backend``), registers :func:`hf_attention` as the
attention implementation ``"numba_fused"`` and switches the model to it: every
attention layer then calls our ``scaled_dot_product_attention`` with the model's
causal / padding mask (as an additive bias or ``is_causal``), dropout and scale.
Calls our kernels cannot serve (head dim above ``numba_fused.attention.max_head_dim``:
256 in float16 / bfloat16, 128 in float32; ``softcap``, T5-style
``position_bias``, ``output_attentions``) go to transformers' own SDPA path, so they
stay correct; ``hf_attention.fallbacks`` counts them.

The new modules share the old ones' parameter tensors and keep their names, so the
``state_dict`` (keys, tensors) and an optimizer built before the call are unchanged.
Modules it recognises but cannot serve are left alone and listed with the reason
(an RMSNorm variant with another formula, e.g. Gemma's ``(1 + weight)``, or one
without a weight); nothing is silently changed in meaning.

Numerics: our kernels compute in float32 and round once to the input's dtype, where
Hugging Face's RMSNorm rounds the normalised input to the dtype before multiplying by
the weight: the results agree within the dtype's rounding.
"""

from dataclasses import dataclass, field
from typing import List, Tuple

import torch

from .gated_linear import FusedGatedMLP
from .layer_norm import FusedLayerNorm, FusedRMSNorm
from .linear_act import _mlp, linear_act

__all__ = ["patch", "PatchReport", "LLAMA_STYLE_RMSNORMS", "hf_attention", "ATTN_NAME",
           "ConvMLP", "LinearActIntermediate", "GatedMLP"]

ATTN_NAME = "numba_fused"

# Hugging Face RMSNorm classes computing weight * x * rsqrt(mean(x^2) + eps), with the
# weight in ``.weight`` and eps in ``.variance_epsilon`` (or ``.eps``).
LLAMA_STYLE_RMSNORMS = frozenset({
    "LlamaRMSNorm", "MistralRMSNorm", "MixtralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm",
    "Qwen2MoeRMSNorm", "Qwen3MoeRMSNorm", "Phi3RMSNorm", "OlmoRMSNorm", "Olmo2RMSNorm",
    "GraniteRMSNorm", "StarcoderRMSNorm",
})


@dataclass
class PatchReport:
    """What :func:`patch` did: ``replaced`` (qualified name, old class, new class) and
    ``skipped`` (qualified name, class, reason), in module order."""

    replaced: List[Tuple[str, str, str]] = field(default_factory=list)
    skipped: List[Tuple[str, str, str]] = field(default_factory=list)

    def __str__(self):
        lines = [f"replaced {len(self.replaced)} module(s), left {len(self.skipped)} alone"]
        lines += [f"  {n}: {a} -> {b}" for n, a, b in self.replaced]
        lines += [f"  {n}: {c} kept ({why})" for n, c, why in self.skipped]
        return "\n".join(lines)


def _rms_from_hf(module):
    """A FusedRMSNorm sharing a Llama-style RMSNorm's weight, or the reason it cannot."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.nn.Parameter) or weight.dim() != 1:
        return None, "no 1-D weight parameter"
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if not isinstance(eps, (int, float)):
        return None, "no eps attribute (variance_epsilon or eps)"
    new = FusedRMSNorm.__new__(FusedRMSNorm)
    torch.nn.Module.__init__(new)
    new.normalized_shape = (weight.shape[0],)
    new.eps = float(eps)
    new.elementwise_affine = True
    new.register_parameter("weight", weight)
    new.deterministic = None
    return new, None


def _activation_name(act):
    """Our activation name for a transformers / torch activation module, or None."""
    name = type(act).__name__
    if name == "GELUActivation":
        return "gelu"
    if name in ("NewGELUActivation", "GELUTanh", "PytorchGELUTanh"):
        return "gelu_tanh"
    if name == "ReLUSquaredActivation":
        return "squared_relu"
    if type(act) is torch.nn.ReLU:
        return "relu"
    if type(act) is torch.nn.GELU:
        return "gelu_tanh" if act.approximate == "tanh" else "gelu"
    if type(act) is torch.nn.LeakyReLU and act.negative_slope == 0.01:
        return "leaky_relu"
    if name == "SiLUActivation" or type(act) is torch.nn.SiLU:
        return "silu"
    return None


class ConvMLP(torch.nn.Module):
    """GPT-2's MLP (``dropout(c_proj(act(c_fc(x))))``, Conv1D weights ``[in, out]``) on
    our fused linear + activation GEMMs; the old module's children, so the same
    state_dict. The weights go to the kernels transposed (a copy per call)."""

    def __init__(self, old, activation):
        super().__init__()
        self.c_fc, self.c_proj, self.dropout = old.c_fc, old.c_proj, old.dropout
        self.activation = activation

    def forward(self, x):
        y = _mlp(x, self.c_fc.weight.t(), self.c_fc.bias, self.c_proj.weight.t(),
                 self.c_proj.bias, self.activation)
        return self.dropout(y)

    def extra_repr(self):
        return f"activation={self.activation!r}"


class LinearActIntermediate(torch.nn.Module):
    """BERT-style ``act(dense(x))`` (an ``*Intermediate`` module) as one fused
    linear + activation GEMM; keeps ``dense``, so the same state_dict."""

    def __init__(self, old, activation):
        super().__init__()
        self.dense = old.dense
        self.activation = activation

    def forward(self, x):
        return linear_act(x, self.dense.weight, self.dense.bias, self.activation)

    def extra_repr(self):
        return f"activation={self.activation!r}"


class GatedMLP(FusedGatedMLP):
    """Llama-style gated MLP, ``down(act(gate(x)) * up(x))`` (SwiGLU with silu, GeGLU
    with gelu) on the gated kernels: ``GatedMLP.from_module(old, activation)`` shares
    the old module's three projections, so the same state_dict."""


def _mlp_replacement(module):
    """(new module or None, reason when None and the module is an MLP we know)."""
    name = type(module).__name__
    children = dict(module.named_children())
    if {"c_fc", "c_proj", "act"} <= children.keys() and \
            type(children["c_fc"]).__name__ == "Conv1D" == type(children["c_proj"]).__name__:
        act = _activation_name(children["act"])
        if act is None:
            return None, f"activation {type(children['act']).__name__} is not one of ours"
        if set(children) - {"c_fc", "c_proj", "act", "dropout"}:
            return None, "an MLP with more parts than c_fc, act, c_proj, dropout"
        if "dropout" not in children:
            return None, "no dropout child"
        return ConvMLP(module, act), None
    if {"gate_proj", "up_proj", "down_proj"} <= children.keys():
        projs = [children[k] for k in ("gate_proj", "up_proj", "down_proj")]
        act_mod = children.get("act_fn", getattr(module, "act_fn", None))
        if not all(type(m) is torch.nn.Linear for m in projs) or act_mod is None \
                or set(children) - {"gate_proj", "up_proj", "down_proj", "act_fn"}:
            return None, "a gated MLP of another shape than down(act(gate(x)) * up(x))"
        act = _activation_name(act_mod)
        if act is None:
            return None, f"activation {type(act_mod).__name__} is not one of ours"
        return GatedMLP.from_module(module, act), None
    if name.endswith("Intermediate") and isinstance(children.get("dense"), torch.nn.Linear) \
            and hasattr(module, "intermediate_act_fn") and set(children) <= {
                "dense", "intermediate_act_fn"}:
        act = _activation_name(module.intermediate_act_fn)
        if act is None:
            return None, (f"activation {type(module.intermediate_act_fn).__name__} is not "
                          "one of ours")
        return LinearActIntermediate(module, act), None
    return None, None


def _replacement(module):
    """(new module or None, reason when None and the module is one we know)."""
    if isinstance(module, (FusedLayerNorm, FusedRMSNorm)):
        return None, None
    if type(module) is torch.nn.LayerNorm:
        return FusedLayerNorm.from_torch(module), None
    if hasattr(torch.nn, "RMSNorm") and type(module) is torch.nn.RMSNorm:
        return FusedRMSNorm.from_torch(module), None
    name = type(module).__name__
    if name in LLAMA_STYLE_RMSNORMS:
        return _rms_from_hf(module)
    if name.endswith("RMSNorm") or name.endswith("LayerNorm"):
        return None, "a normalisation variant this package does not implement"
    return None, None


def hf_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                 is_causal=None, **kwargs):
    """A transformers attention function (the registry's signature) on our kernels.

    query ``[B, H, Sq, D]``, key / value ``[B, Hkv, Sk, D]`` (grouped-query heads are
    repeated), attention_mask None or ``[B, 1 or H, Sq, Sk]`` (bool: True attends;
    float: added to the scores). Returns ``(out [B, Sq, H, Dv], None)`` as
    transformers' SDPA path does."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    from numba_fused.attention import max_head_dim

    from .attention import scaled_dot_product_attention

    if (kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None
            or kwargs.get("output_attentions")
            or max(query.shape[-1], value.shape[-1]) > max_head_dim(query.dtype)):
        hf_attention.fallbacks += 1
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    q_len, kv_len = query.shape[2], key.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(q_len > 1 and attention_mask is None and causal)
    if causal and kv_len > q_len:
        # An empty cache's prefill: the keys past q_len are masked for every query.
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                       dropout_p=dropout, is_causal=causal, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


hf_attention.fallbacks = 0


def _use_hf_attention(model, report):
    """Switch a transformers model to :func:`hf_attention`; notes it in ``report``."""
    if not hasattr(model, "config") or not hasattr(model, "set_attn_implementation"):
        return
    name = type(model).__name__
    if not getattr(model, "_supports_attention_backend", False):
        report.skipped.append(("", name, "its attention does not go through transformers' "
                                         "attention registry"))
        return
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(ATTN_NAME, hf_attention)
    # The masks transformers builds for SDPA (None where is_causal suffices).
    AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)
    old = getattr(model.config, "_attn_implementation", None)
    model.set_attn_implementation(ATTN_NAME)
    report.replaced.append(("", f"attention {old}", f"attention {ATTN_NAME}"))


def patch(model, *, layer_norm=True, rms_norm=True, attention=True, mlp=True):
    """Replace ``model``'s LayerNorm / RMSNorm / MLP modules by ours and (Hugging Face
    models) route its attention to our kernels, in place (module docstring).
    ``layer_norm`` / ``rms_norm`` / ``attention`` / ``mlp``: which to do. Returns a :class:`PatchReport`;
    ``str(report)`` lists every change and everything left alone with its reason."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    report = PatchReport()
    # Collect first: replacing while iterating named_modules would visit new modules.
    todo = []
    for name, module in model.named_modules():
        new, reason = _replacement(module)
        if new is None and reason is None and mlp:
            new, reason = _mlp_replacement(module)
        if new is None:
            if reason is not None:
                report.skipped.append((name, type(module).__name__, reason))
            continue
        kind_ok = {FusedLayerNorm: layer_norm, FusedRMSNorm: rms_norm}.get(type(new), mlp)
        if kind_ok:
            todo.append((name, module, new))
    for name, old, new in todo:
        new.train(old.training)
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        if not attr:
            raise ValueError("patch() replaces submodules; the model itself is a norm layer")
        setattr(parent, attr, new)
        report.replaced.append((name, type(old).__name__, type(new).__name__))
    if attention:
        _use_hf_attention(model, report)
    return report
