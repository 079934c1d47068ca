"""CuPy front end of the memory-efficient attention kernels: the array-level
``attention_forward`` / ``attention_backward`` taking and returning CuPy arrays
(layout ``[batch, seq, heads, head_dim]``, strided views accepted), launched on CuPy's
current stream. CuPy has no bfloat16: float32 and float16 only."""

from numba_fused import attention as _attention

__all__ = ["attention_forward", "attention_backward"]


def _require_cupy(*named):
    import cupy

    for obj, name in named:
        if obj is not None and not isinstance(obj, cupy.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {type(obj).__name__}")


def attention_forward(q, k, v, bias=None, causal=None, window=0, dropout_p=0.0, seed=0, offset=0,
                      scale=None, cu_seqlens_q=None, cu_seqlens_k=None):
    """``(out, lse)`` as :func:`numba_fused.attention.attention_forward`, CuPy arrays."""
    _require_cupy((q, "q"), (k, "k"), (v, "v"), (bias, "bias"),
                  (cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"))
    return _attention.attention_forward(q, k, v, bias=bias, causal=causal, window=window,
                                        dropout_p=dropout_p, seed=seed, offset=offset,
                                        scale=scale, cu_seqlens_q=cu_seqlens_q,
                                        cu_seqlens_k=cu_seqlens_k)


def attention_backward(grad_out, q, k, v, out, lse, bias=None, causal=None, window=0,
                       dropout_p=0.0, seed=0, offset=0, scale=None, cu_seqlens_q=None,
                       cu_seqlens_k=None, deterministic=False):
    """``(grad_q, grad_k, grad_v, grad_bias_or_None)`` as
    :func:`numba_fused.attention.attention_backward`, CuPy arrays."""
    _require_cupy((grad_out, "grad_out"), (q, "q"), (k, "k"), (v, "v"), (out, "out"),
                  (lse, "lse"), (bias, "bias"), (cu_seqlens_q, "cu_seqlens_q"),
                  (cu_seqlens_k, "cu_seqlens_k"))
    return _attention.attention_backward(grad_out, q, k, v, out, lse, bias=bias, causal=causal,
                                         window=window, dropout_p=dropout_p, seed=seed,
                                         offset=offset, scale=scale, cu_seqlens_q=cu_seqlens_q,
                                         cu_seqlens_k=cu_seqlens_k, deterministic=deterministic)
