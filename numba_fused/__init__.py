"""numba-fused: fused GPU kernels written with numba.cuda.jit.

Array-level API (inputs: torch tensors, CuPy arrays, numba device arrays, or any
``__cuda_array_interface__`` / ``__dlpack__`` producer on the GPU; outputs are
allocated in the library of the first input):

- ``dropout_bias_act_forward`` / ``dropout_bias_act_backward``
- ``layer_norm_forward`` / ``layer_norm_backward``, ``rms_norm_forward`` / ``rms_norm_backward``
- ``attention_forward`` / ``attention_backward``
- ``linear_act_forward`` / ``linear_act_dgrad`` / ``linear_act_backward``
- ``gated_linear_forward`` / ``gated_linear_dgrad`` / ``gated_linear_backward`` /
  ``gated_act_backward`` (SwiGLU / GeGLU, the gate fused in the GEMM epilogues)

Ops are imported on first use, so ``import numba_fused`` compiles nothing and
imports neither torch nor CuPy.
"""

from numba import config as _config

from . import _compat

__version__ = "0.1.0"

# Before any numba compile: numba-cuda 0.30.4 vs NumPy 2.5 (see _compat).
_compat.ensure_numpy_row_stack()

if _config.ENABLE_CUDASIM:
    from . import sim_support as _sim_support

    _sim_support.install()

_LAZY = {
    "dropout_bias_act_forward": "dropout",
    "dropout_bias_act_backward": "dropout",
    "dropout_bias_act_ref": "dropout",
    "layer_norm_forward": "layer_norm",
    "layer_norm_backward": "layer_norm",
    "layer_norm_ref": "layer_norm",
    "rms_norm_forward": "layer_norm",
    "rms_norm_backward": "layer_norm",
    "rms_norm_ref": "layer_norm",
    "attention_forward": "attention",
    "attention_backward": "attention",
    "attention_ref": "attention",
    "linear_act_forward": "linear_act",
    "linear_act_dgrad": "linear_act",
    "linear_act_backward": "linear_act",
    "linear_act_ref": "linear_act",
    "linear_weight_grad": "linear_act",
    "activation_backward": "linear_act",
    "gated_linear_forward": "gated_linear",
    "gated_linear_dgrad": "gated_linear",
    "gated_linear_backward": "gated_linear",
    "gated_act_backward": "gated_linear",
    "gated_linear_ref": "gated_linear",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'numba_fused' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
