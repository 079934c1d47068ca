"""Swap a model's normalisation layers for ours, in place, with one call (issue #19).

``patch(model)`` walks ``model.named_modules()`` and replaces:

- every ``torch.nn.LayerNorm`` (GPT-2's, BERT's, ...) by :class:`FusedLayerNorm`;
- every ``torch.nn.RMSNorm`` and every Llama-style RMSNorm of Hugging Face
  transformers (``y = weight * x / sqrt(mean(x^2) + eps)``: the classes named in
  ``LLAMA_STYLE_RMSNORMS``) by :class:`FusedRMSNorm`.

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

from .layer_norm import FusedLayerNorm, FusedRMSNorm

__all__ = ["patch", "PatchReport", "LLAMA_STYLE_RMSNORMS"]

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


def patch(model, *, layer_norm=True, rms_norm=True):
    """Replace ``model``'s LayerNorm / RMSNorm modules by ours, in place (module
    docstring). ``layer_norm`` / ``rms_norm``: which kinds to replace. Returns a
    :class:`PatchReport`; ``str(report)`` lists every change and every module left
    alone with its reason."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    report = PatchReport()
    # Collect first: replacing while iterating named_modules would visit new modules.
    todo = []
    for name, module in model.named_modules():
        new, reason = _replacement(module)
        if new is None:
            if reason is not None:
                report.skipped.append((name, type(module).__name__, reason))
            continue
        kind_ok = layer_norm if isinstance(new, FusedLayerNorm) else rms_norm
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
    return report
