"""CuPy front end for LayerNorm and RMSNorm: the array-level functions of
``numba_fused.layer_norm`` restricted to CuPy arrays (float32/float16; CuPy has no
bfloat16). Outputs are CuPy arrays on the inputs' device, computed on CuPy's
current stream.

After a signature's first call (which validates, see :mod:`interop.cupy._fast`), calls
of that signature replay a cached launch plan: the same kernels and bits, without the
array-level path's host work."""

from numba_fused import layer_norm as _ln

from ._fast import PlanCache, cached

__all__ = ["layer_norm", "layer_norm_forward", "layer_norm_backward",
           "rms_norm", "rms_norm_forward", "rms_norm_backward"]


def _check(**arrays):
    for name, a in arrays.items():
        if a is not None and (type(a).__module__ or "").split(".", 1)[0] != "cupy":
            raise TypeError(f"{name} must be a CuPy array, got {type(a).__name__}")


# Plans per signature (interop.cupy._fast): the forward's inputs are (x, w, b), the
# backward's (dy, x, w, b, mean, rstd), as numba_fused.layer_norm records them.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def _forward(x, weight, bias, eps, rms, stats):
    """The forward's plan outputs ``(y, mean or None, rstd or None)``."""
    if rms:
        bias = None

    def slow():
        _check(x=x, weight=weight, bias=bias)
        if rms:
            y, rstd = _ln.rms_norm_forward(x, weight, eps, stats=stats)
            return y, None, rstd
        return _ln.layer_norm_forward(x, weight, bias, eps, stats=stats)

    return cached(_FWD_PLANS, (x, weight, bias), (eps, rms, stats), slow,
                  lambda: _ln.forward_plan(x, weight, bias, eps, rms, stats))


def _backward(grad_out, x, weight, bias, mean, rstd, deterministic, rms):
    """The backward's plan outputs ``(grad_x, grad_weight or None, grad_bias or None)``."""
    if rms:
        bias = mean = None

    def slow():
        _check(grad_out=grad_out, x=x, weight=weight, bias=bias, mean=mean, rstd=rstd)
        if rms:
            gx, gw = _ln.rms_norm_backward(grad_out, x, weight, rstd, deterministic)
            return gx, gw, None
        return _ln.layer_norm_backward(grad_out, x, weight, bias, mean, rstd, deterministic)

    return cached(_BWD_PLANS, (grad_out, x, weight, bias, mean, rstd), (deterministic, rms),
                  slow, lambda: _ln.backward_plan(grad_out, x, weight, bias, mean, rstd,
                                                  deterministic, rms))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """LayerNorm over the last axis of ``x`` ``[..., N]``; weight, bias ``[N]`` or None.
    Returns y alone (the forward's ``stats=False``: no statistics kept)."""
    return _forward(x, weight, bias, eps, False, False)[0]


def layer_norm_forward(x, weight=None, bias=None, eps=1e-5, *, stats=True):
    """``(y, mean, rstd)``; mean/rstd float32 of shape ``x.shape[:-1]`` (None with
    ``stats=False``)."""
    return _forward(x, weight, bias, eps, False, stats)


def layer_norm_backward(grad_out, x, weight, bias, mean, rstd, deterministic=False):
    """``(grad_x, grad_weight or None, grad_bias or None)``."""
    return _backward(grad_out, x, weight, bias, mean, rstd, deterministic, False)


def rms_norm(x, weight=None, eps=1e-6):
    """RMSNorm over the last axis of ``x`` ``[..., N]``; weight ``[N]`` or None.
    Returns y alone (``stats=False``)."""
    return _forward(x, weight, None, eps, True, False)[0]


def rms_norm_forward(x, weight=None, eps=1e-6, *, stats=True):
    """``(y, rstd)``; rstd float32 of shape ``x.shape[:-1]`` (None with
    ``stats=False``)."""
    y, _, rstd = _forward(x, weight, None, eps, True, stats)
    return y, rstd


def rms_norm_backward(grad_out, x, weight, rstd, deterministic=False):
    """``(grad_x, grad_weight or None)``."""
    return _backward(grad_out, x, weight, None, None, rstd, deterministic, True)[:2]
