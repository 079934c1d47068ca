"""PyTorch front end: ``torch.nn.functional``-style functions with autograd, and
``nn.Module`` classes, built on the array-level kernels of ``numba_fused``.

Each function is a ``torch.autograd.Function`` underneath; dropout seeds come from
torch's generators, so ``torch.manual_seed`` reproduces runs.
"""

from .attention import AttentionFunction, FusedAttention, scaled_dot_product_attention
from .dropout import DropoutBiasActFunction, FusedDropoutBiasAct, dropout_bias_act
from .layer_norm import FusedLayerNorm, FusedRMSNorm, layer_norm, rms_norm
from .linear_act import FusedLinearAct, FusedMLP, linear_act

__all__ = [
    "scaled_dot_product_attention", "FusedAttention", "AttentionFunction",
    "dropout_bias_act", "FusedDropoutBiasAct", "DropoutBiasActFunction",
    "layer_norm", "rms_norm", "FusedLayerNorm", "FusedRMSNorm",
    "linear_act", "FusedLinearAct", "FusedMLP",
]
