"""CuPy front end: the numba_fused ops taking and returning CuPy arrays, launched
on CuPy's current stream."""

from .attention import attention_backward, attention_forward
from .dropout import dropout_bias_act_backward, dropout_bias_act_forward
from .gated_linear import (deinterleave, gated_act_backward, gated_linear_backward,
                           gated_linear_backward_pair, gated_linear_dgrad, gated_linear_forward,
                           gated_linear_forward_pair, interleave)
from .layer_norm import (layer_norm, layer_norm_backward, layer_norm_forward, rms_norm,
                         rms_norm_backward, rms_norm_forward)
from .linear_act import (activation_backward, linear_act, linear_act_backward,
                         linear_act_dgrad, linear_act_forward, linear_weight_grad)

__all__ = [
    "attention_forward", "attention_backward",
    "dropout_bias_act_forward", "dropout_bias_act_backward",
    "layer_norm", "rms_norm", "layer_norm_forward", "layer_norm_backward",
    "rms_norm_forward", "rms_norm_backward",
    "linear_act", "linear_act_forward", "linear_act_dgrad", "linear_act_backward",
    "linear_weight_grad", "activation_backward",
    "gated_linear_forward", "gated_linear_dgrad", "gated_act_backward", "gated_linear_backward",
    "gated_linear_forward_pair", "gated_linear_backward_pair", "interleave", "deinterleave",
]
