"""CuPy front end for LayerNorm and RMSNorm: the array-level functions of
``numba_fused.layer_norm`` restricted to CuPy arrays (float32/float16; CuPy has no
bfloat16). Outputs are CuPy arrays on the inputs' device, computed on CuPy's
current stream. CuPy itself is only needed by the caller's arrays."""

from numba_fused import layer_norm as _ln

__all__ = ["layer_norm", "layer_norm_forward", "layer_norm_backward",
           "rms_norm", "rms_norm_forward", "rms_norm_backward"]


def _check(**arrays):
    for name, a in arrays.items():
        if a is not None and (type(a).__module__ or "").split(".", 1)[0] != "cupy":
            raise TypeError(f"{name} must be a CuPy array, got {type(a).__name__}")


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """LayerNorm over the last axis of ``x`` ``[..., N]``; weight, bias ``[N]`` or None.
    Returns y alone (the forward's ``stats=False``: no statistics kept)."""
    _check(x=x, weight=weight, bias=bias)
    return _ln.layer_norm_forward(x, weight, bias, eps, stats=False)[0]


def layer_norm_forward(x, weight=None, bias=None, eps=1e-5, *, stats=True):
    """``(y, mean, rstd)``; mean/rstd float32 of shape ``x.shape[:-1]`` (None with
    ``stats=False``)."""
    _check(x=x, weight=weight, bias=bias)
    return _ln.layer_norm_forward(x, weight, bias, eps, stats=stats)


def layer_norm_backward(grad_out, x, weight, bias, mean, rstd, deterministic=False):
    """``(grad_x, grad_weight or None, grad_bias or None)``."""
    _check(grad_out=grad_out, x=x, weight=weight, bias=bias, mean=mean, rstd=rstd)
    return _ln.layer_norm_backward(grad_out, x, weight, bias, mean, rstd,
                                   deterministic=deterministic)


def rms_norm(x, weight=None, eps=1e-6):
    """RMSNorm over the last axis of ``x`` ``[..., N]``; weight ``[N]`` or None.
    Returns y alone (``stats=False``)."""
    _check(x=x, weight=weight)
    return _ln.rms_norm_forward(x, weight, eps, stats=False)[0]


def rms_norm_forward(x, weight=None, eps=1e-6, *, stats=True):
    """``(y, rstd)``; rstd float32 of shape ``x.shape[:-1]`` (None with
    ``stats=False``)."""
    _check(x=x, weight=weight)
    return _ln.rms_norm_forward(x, weight, eps, stats=stats)


def rms_norm_backward(grad_out, x, weight, rstd, deterministic=False):
    """``(grad_x, grad_weight or None)``."""
    _check(grad_out=grad_out, x=x, weight=weight, rstd=rstd)
    return _ln.rms_norm_backward(grad_out, x, weight, rstd, deterministic=deterministic)
