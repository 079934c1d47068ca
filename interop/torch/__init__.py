"""PyTorch front end: ``torch.nn.functional``-style functions with autograd, and
``nn.Module`` classes, built on the array-level kernels of ``numba_fused``.

Eager calls run ``torch.autograd.Function``s (the cheaper route on the host); under
``torch.compile`` the same functions call ``torch.library.custom_op``s of the namespace
``numba_fused`` (forward and backward ops with fake implementations), so
``fullgraph=True`` compiles with no graph break. Dropout seeds come from torch's
generators, so ``torch.manual_seed`` reproduces runs. The reference: docs/API.md.
"""

from .attention import AttentionFunction, FusedAttention, scaled_dot_product_attention
from .dropout import DropoutBiasActFunction, FusedDropoutBiasAct, dropout_bias_act
from .gated_linear import FusedGatedMLP, gated_mlp
from .layer_norm import FusedLayerNorm, FusedRMSNorm, layer_norm, rms_norm
from .linear_act import FusedLinearAct, FusedMLP, linear_act
from .patch import PatchReport, patch

__all__ = [
    "scaled_dot_product_attention", "FusedAttention", "AttentionFunction",
    "dropout_bias_act", "FusedDropoutBiasAct", "DropoutBiasActFunction",
    "layer_norm", "rms_norm", "FusedLayerNorm", "FusedRMSNorm",
    "linear_act", "FusedLinearAct", "FusedMLP", "gated_mlp", "FusedGatedMLP",
    "patch", "PatchReport",
]
