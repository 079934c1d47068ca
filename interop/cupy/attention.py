"""CuPy front end of the memory-efficient attention kernels: the array-level
``attention_forward`` / ``attention_backward`` taking and returning CuPy arrays
(layout ``[batch, seq, heads, head_dim]``, strided views accepted), launched on CuPy's
current stream. CuPy has no bfloat16: float32 and float16 only.

Without ``cu_seqlens``, after a signature's first call (which validates, see
:mod:`interop.cupy._fast`) calls of that signature replay a cached launch plan with
the call's seed and offset: the same kernels and bits, without the array-level path's
host work. Packed sequences (``cu_seqlens_*``) take the array-level path every call
(their lengths are read on the host)."""

import os

from numba_fused import attention as _attention

from ._fast import PlanCache, cached, seeded

__all__ = ["attention_forward", "attention_backward"]


def _require_cupy(*named):
    import cupy

    for obj, name in named:
        if obj is not None and not isinstance(obj, cupy.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {type(obj).__name__}")


# Plans per signature (interop.cupy._fast): the forward's inputs are (q, k, v, bias),
# the backward's (q, k, v, bias, grad_out, out, lse), as numba_fused.attention records
# them. The keys also hold the kernel-choice switch (the environment variable
# numba_fused.attention.TC_ENV), as interop.torch's do.
_FWD_PLANS = PlanCache()
_BWD_PLANS = PlanCache()


def attention_forward(q, k, v, bias=None, causal=None, window=0, dropout_p=0.0, seed=0, offset=0,
                      scale=None, cu_seqlens_q=None, cu_seqlens_k=None):
    """``(out, lse)`` as :func:`numba_fused.attention.attention_forward`, CuPy arrays."""
    def slow():
        _require_cupy((q, "q"), (k, "k"), (v, "v"), (bias, "bias"),
                      (cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"))
        return _attention.attention_forward(q, k, v, bias=bias, causal=causal, window=window,
                                            dropout_p=dropout_p, seed=seed, offset=offset,
                                            scale=scale, cu_seqlens_q=cu_seqlens_q,
                                            cu_seqlens_k=cu_seqlens_k)

    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        return slow()
    return cached(_FWD_PLANS, (q, k, v, bias),
                  (causal, window, dropout_p, scale, os.environ.get(_attention.TC_ENV)), slow,
                  lambda: _attention.forward_plan(q, k, v, bias, causal, window, dropout_p,
                                                  scale),
                  values=seeded(_attention.rng_values, seed, offset))


def attention_backward(grad_out, q, k, v, out, lse, bias=None, causal=None, window=0,
                       dropout_p=0.0, seed=0, offset=0, scale=None, cu_seqlens_q=None,
                       cu_seqlens_k=None, deterministic=False):
    """``(grad_q, grad_k, grad_v, grad_bias_or_None)`` as
    :func:`numba_fused.attention.attention_backward`, CuPy arrays."""
    def slow():
        _require_cupy((grad_out, "grad_out"), (q, "q"), (k, "k"), (v, "v"), (out, "out"),
                      (lse, "lse"), (bias, "bias"), (cu_seqlens_q, "cu_seqlens_q"),
                      (cu_seqlens_k, "cu_seqlens_k"))
        return _attention.attention_backward(grad_out, q, k, v, out, lse, bias=bias,
                                             causal=causal, window=window,
                                             dropout_p=dropout_p, seed=seed, offset=offset,
                                             scale=scale, cu_seqlens_q=cu_seqlens_q,
                                             cu_seqlens_k=cu_seqlens_k,
                                             deterministic=deterministic)

    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        return slow()
    return cached(_BWD_PLANS, (q, k, v, bias, grad_out, out, lse),
                  (causal, window, dropout_p, scale, deterministic,
                   os.environ.get(_attention.TC_ENV)), slow,
                  lambda: _attention.backward_plan(grad_out, q, k, v, out, lse, bias, causal,
                                                   window, dropout_p, scale, deterministic),
                  values=seeded(_attention.rng_values, seed, offset))
