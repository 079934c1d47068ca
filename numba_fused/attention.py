"""Memory-efficient attention (forward and backward) after PyTorch's CUTLASS kernel.

Array-level API (layout ``[batch, seq, heads, head_dim]`` as the seed; strided views
such as torch's ``[B, H, S, D]`` transposed are taken without copies):

- ``attention_forward(q, k, v, bias=None, causal=None, window=0, dropout_p=0.0, seed=0,
  offset=0, scale=None, cu_seqlens_q=None, cu_seqlens_k=None)`` -> ``(out, lse)``
- ``attention_backward(grad_out, q, k, v, out, lse, ...same options...,
  deterministic=False)`` -> ``(grad_q, grad_k, grad_v, grad_bias_or_None)``
- ``attention_ref(...)``: the same math in float64 NumPy (tests, benchmarks);
  ``dropout_keep_ref``: the kernels' dropout decisions.

Math: ``s_ij = scale * q_i . k_j + bias_ij`` over the keys ``j`` query ``i`` sees
(causal ``"top_left"``: ``j <= i``; ``"bottom_right"``: ``j <= i + Sk - Sq``; with
``window > 0`` also ``j > i + shift - window``); ``P = softmax(s)``;
``out = (P * Z) v`` with ``Z = keep / (1 - dropout_p)`` (Philox, regenerated in the
backward; keying in :mod:`numba_fused.attention_fwd`); ``lse_i = log sum_j exp(s_ij)``
(float32 ``[batch, heads, seq_q]``). A query that sees no key gets out = 0, lse = -inf
and zero gradients. ``scale`` defaults to ``1 / sqrt(head_dim)``.

``bias``: additive, ``[batch, heads, seq_q, seq_k]`` with any strides (stride 0
broadcasts). Its gradient is ``dS`` summed over the dimensions where the bias has
stride 0 (and size > 1): ``grad_bias`` has the bias's shape with those dimensions
set to 1 (for a bias made by broadcasting, the gradient of what was broadcast).

Varlen: ``cu_seqlens_q`` / ``cu_seqlens_k`` int32 ``[num_seqs + 1]`` (non-decreasing
offsets into dim 1 of q and k, whose batch dimension is then 1); lse is
``[num_seqs, heads, max_seqlen_q]`` with -inf past each sequence's end. The offsets
are read on the host (for the checks and the grid), which synchronises with the
device once per call.

Checks (as the seed's ``check_supported``): q, k, v, out, grad_out need a unit stride
along head_dim and no negative strides; head dims 1..256 on the tensor-core kernels,
1..128 on the CUDA-core ones (float32 inputs; q/k and v may differ);
matching batch / heads / lengths; a window only with a causal mask; no bias with
varlen; dropout_p in [0, 1]; int32, non-decreasing cu_seqlens within the packed
lengths. There is no pointer-alignment requirement: the CUDA-core kernels load element
by element; the tensor-core kernels copy tiles by 16-byte ``cp.async`` when every row
of q, k, v (and grad_out) starts 16-byte aligned, else element by element.

Kernels. float16 / bfloat16 inputs run on tensor cores (:mod:`numba_fused.attention_tc`:
``mma.sync`` with float32 accumulation; P and dS rounded to the input dtype before
they feed a matmul, as flash-attention). float32 inputs run on the CUDA-core kernels
(:mod:`numba_fused.attention_fwd`, :mod:`numba_fused.attention_bwd`: float32 FMA), which
keep float32 accuracy. ``tensor_cores=False`` (or ``NUMBA_FUSED_ATTN_TC=0`` in the
environment, read per call) runs float16 / bfloat16 on the CUDA-core kernels too, for
comparison; ``tensor_cores=True`` insists on the tensor-core kernels (float16 /
bfloat16 only).

Keyword extras: ``tensor_cores`` (above); ``block`` (tile shape: on tensor cores an int
16/32/64 or ``(blk, query_subtile)``, on CUDA cores an int 8/16/32/64 or
``(blk, rows_per_thread, chunk)``; tests use small ones), and for the backward
``num_splits`` (key splits, the seed's ``num_splits_key``; default fills the GPU),
``need_bias_grad`` (False skips dBias) and ``dq_scheme`` (how splits add into dQ when
``deterministic=False``: ``"lock"``, the seed's per-tile spin lock, or ``"atomic"``,
float32 atomic adds as flash-attention; None = :data:`DQ_SCHEME`).
"""

import math
import numbers
import os

import numpy as np

from interop.dlpack import KernelArray, as_kernel_array, empty_like_lib, stream_handle

from . import checks, dtypes
from .attention_bwd import (DQ_ATOMIC, DQ_MODES, DQ_SLICES, make_attention_bwd_kernel,
                            make_attention_bwd_prep_kernel, make_bias_grad_reduce_kernel,
                            make_dq_store_kernel)
from .attention_fwd import (D_MAXES, MASK_BOTTOM_RIGHT, MASK_NONE, MASK_TOP_LEFT, TileConfig,
                            make_attention_fwd_kernel)
from .attention_tc import (TC_D_MAXES, TcConfig, bwd_col_parts, bwd_smem_bytes, fwd_smem_bytes,
                           make_attention_bwd_tc_kernel, make_attention_fwd_tc_kernel, tc_d_max)
from .dtypes import DTYPES
from .launch import SIMULATOR, cdiv, sm_count
from .philox import philox4x32_np, split_u64, uniform_from_bits_np
from .plan import NOW, Recorder

__all__ = ["attention_forward", "attention_backward", "attention_ref", "dropout_keep_ref",
           "shipped_kernels", "forward_plan", "backward_plan", "rng_values", "MAX_HEAD_DIM",
           "CUDA_CORE_MAX_HEAD_DIM", "max_head_dim"]

MAX_HEAD_DIM = 256
# The CUDA-core kernels (float32, or tensor_cores=False) keep a lane's output columns
# in registers: up to 128.
CUDA_CORE_MAX_HEAD_DIM = 128
# The backward's dQ scheme when deterministic=False (see attention_bwd).
DQ_SCHEME = "atomic"
_MASKS = {None: MASK_NONE, "top_left": MASK_TOP_LEFT, "bottom_right": MASK_BOTTOM_RIGHT}
# GPU tiles: 64 queries x 64 keys, 256 threads, 4x4 score / 4x(D/16) output registers.
GPU_TILE = TileConfig(64, 4, 16)
# Simulator default: 16 threads per block keeps CPU CI fast.
SIM_TILE = TileConfig(16, 4, 8)
_PRESETS = {8: TileConfig(8, 2, 8), 16: TileConfig(16, 4, 8), 32: TileConfig(32, 4, 8),
            64: GPU_TILE}


# Tensor-core tiles: 64 queries (forward) / keys (backward) per block, 4 warps. The
# backward's query sub-tile qn sets its score registers (qn / 2 for S, as many for
# dP) beside dK and dV (d_max / 2 each): the largest with which ptxas (sm_90) fits
# every variant in 255 registers without spilling, with some margin: 64 up to
# head_dim 32, 32 at 64 (64 spilled 12 bytes), 16 at 128 (32 spilled with dropout).
TC_BLK = 64
TC_ENV = "NUMBA_FUSED_ATTN_TC"


def _tc_qn(d_max):
    """Backward query sub-tile for padded head dim ``d_max``."""
    return {16: 64, 32: 64, 64: 32, 128: 16, 256: 16}[d_max]


def _tc_tiles():
    """(d_max, dropout, TcConfig) of every tensor-core backward the launchers pick on
    the GPU by default."""
    return [(d, drop, TcConfig(TC_BLK, _tc_qn(d))) for d in TC_D_MAXES
            for drop in (False, True)]


def _use_tensor_cores(dtype, tensor_cores):
    """Whether inputs of ``dtype`` take the tensor-core kernels."""
    if tensor_cores is None:
        env = os.environ.get(TC_ENV, "1").strip().lower()
        if env not in ("0", "1", "false", "true", "off", "on", ""):
            raise ValueError(f"${TC_ENV} must be 0 or 1, got {env!r}")
        return dtype != "float32" and env not in ("0", "false", "off")
    if not isinstance(tensor_cores, (bool, np.bool_)):
        raise TypeError(f"tensor_cores must be None or a bool, got {type(tensor_cores).__name__}")
    if tensor_cores and dtype == "float32":
        raise ValueError("tensor_cores=True needs float16 or bfloat16 inputs (float32 runs on "
                         "the CUDA-core kernels), got float32")
    return bool(tensor_cores)


def max_head_dim(dtype):
    """Largest head dim (q/k or v) the kernels a call with inputs of ``dtype`` (a
    NumPy / torch dtype or its name) would run on take: MAX_HEAD_DIM on the
    tensor-core kernels (float16 / bfloat16, unless $NUMBA_FUSED_ATTN_TC turns them
    off), CUDA_CORE_MAX_HEAD_DIM on the CUDA-core ones."""
    name = str(dtype).removeprefix("torch.")
    if name not in ("float16", "bfloat16", "float32"):
        raise TypeError(f"dtype must be float16, bfloat16 or float32, got {dtype!r}")
    return MAX_HEAD_DIM if _use_tensor_cores(name, None) else CUDA_CORE_MAX_HEAD_DIM


def _tc_tile(block, d_max):
    if block is None:
        # Simulator: one warp of 32 threads.
        block = 16 if SIMULATOR else TC_BLK
    try:
        if isinstance(block, numbers.Integral) and not isinstance(block, bool):
            blk = int(block)
            return TcConfig(blk, min(blk, _tc_qn(d_max))).validate()
        return TcConfig(*(int(x) for x in block)).validate()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"block must be 16, 32, 64 or a valid (blk, query_subtile) pair for the "
                         f"tensor-core kernels (float16 / bfloat16; tensor_cores=False runs the "
                         f"CUDA-core tiles), got {block!r}") from exc


def _address(arr):
    if arr.ptr is not None:
        return int(arr.ptr)
    return int(arr.host.__array_interface__["data"][0])


def _rows_aligned(*arrs):
    """Every [B, S, H, D] row of each array starts 16-byte aligned (16-bit elements):
    the tensor-core kernels then copy tiles by 16-byte cp.async."""
    for arr in arrs:
        if _address(arr) % 16:
            return False
        if any(st % 8 for n, st in zip(arr.shape[:3], arr.strides[:3]) if n > 1):
            return False
    return True


def _tile(block):
    if block is None:
        return SIM_TILE if SIMULATOR else GPU_TILE
    if isinstance(block, numbers.Integral) and not isinstance(block, bool):
        if int(block) not in _PRESETS:
            raise ValueError(f"block must be one of {sorted(_PRESETS)} or a (blk, rm, kc) "
                             f"tuple, got {block!r}")
        return _PRESETS[int(block)]
    try:
        return TileConfig(*(int(x) for x in block)).validate()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"block must be one of {sorted(_PRESETS)} or a valid (blk, rm, kc) "
                         f"tuple, got {block!r}") from exc


# ---------------------------------------------------------------- argument checks


def _host_ints(arr):
    """The values of a small int array as a host NumPy array (copies from the GPU)."""
    if arr.host is not None:
        return np.asarray(arr.host).astype(np.int64)
    if arr.lib == "torch":
        return arr.owner.detach().cpu().numpy().astype(np.int64)
    if arr.lib == "cupy":
        return arr.owner.get().astype(np.int64)
    return arr.to_numba().copy_to_host().astype(np.int64)


def _check_last_dim(arr, name):
    if arr.shape[-1] > 1 and arr.strides[-1] != 1:
        raise ValueError(f"{name} must have stride 1 along its last (head_dim) dimension, got "
                         f"strides {arr.strides} for shape {arr.shape}")


def _check_strides(arr, name):
    if any(st < 0 for st in arr.strides):
        raise ValueError(f"{name} has negative strides {arr.strides}; pass a copy")


def _flat(arr):
    """1-D view of the storage an array spans (the kernels add the strides)."""
    extent = 0 if arr.size == 0 else 1 + sum((n - 1) * st for n, st in zip(arr.shape, arr.strides))
    host = None
    if arr.host is not None:
        host = np.lib.stride_tricks.as_strided(arr.host, shape=(extent,),
                                               strides=(arr.host.itemsize,))
    return KernelArray(arr.owner, arr.lib, arr.dtype, (extent,), (1,), arr.ptr, host, arr.device)


def _bsh(arr):
    """Batch, seq and head strides of a [B, S, H, D] array."""
    return list(arr.strides[:3])


def _check_4d(arr, name, what):
    if arr.ndim != 4:
        raise ValueError(f"{name} must be 4-D {what}, got shape {arr.shape}")


class _Args:
    """Everything the launchers need, checked."""


def _prepare(q, k, v, bias, causal, window, dropout_p, seed, offset, scale,
             cu_seqlens_q, cu_seqlens_k, block, tensor_cores):
    a = _Args()
    Q = checks.floating_array(q, "q")
    K = checks.floating_array(k, "k")
    V = checks.floating_array(v, "v")
    checks.check_same_dtype(Q, "q", (K, "k"), (V, "v"))
    checks.check_same_device(Q, "q", (K, "k"), (V, "v"))
    _check_4d(Q, "q", "[batch, seq_q, heads, head_dim]")
    _check_4d(K, "k", "[batch, seq_k, heads, head_dim]")
    _check_4d(V, "v", "[batch, seq_k, heads, head_dim_v]")
    B, Sq, H, D = Q.shape
    if K.shape[0] != B or K.shape[2] != H or K.shape[3] != D:
        raise ValueError(f"k must be [batch={B}, seq_k, heads={H}, head_dim={D}] to match q "
                         f"{Q.shape}, got {K.shape}")
    Sk = K.shape[1]
    if V.shape[:3] != (B, Sk, H):
        raise ValueError(f"v must be [batch={B}, seq_k={Sk}, heads={H}, head_dim_v] to match "
                         f"k {K.shape}, got {V.shape}")
    Dv = V.shape[3]
    a.tc = _use_tensor_cores(Q.dtype, tensor_cores)
    limit = MAX_HEAD_DIM if a.tc else CUDA_CORE_MAX_HEAD_DIM
    for dim, name in ((D, "q/k head_dim"), (Dv, "v head_dim")):
        if not 1 <= dim <= limit:
            where = ("tensor-core kernels" if a.tc else
                     "CUDA-core kernels (float32 inputs or tensor_cores=False; float16 / "
                     f"bfloat16 on tensor cores take up to {MAX_HEAD_DIM})")
            raise ValueError(f"{name} must be in [1, {limit}] on the {where}, got {dim}")
    for arr, name in ((Q, "q"), (K, "k"), (V, "v")):
        _check_last_dim(arr, name)
        _check_strides(arr, name)
    if a.tc:
        a.d_max = tc_d_max(max(D, Dv))
        a.cfg = _tc_tile(block, a.d_max)
    else:
        a.cfg = _tile(block)
        a.d_max = a.cfg.d_max_for(max(D, Dv))
        if a.d_max is None:
            raise ValueError(f"head_dim {max(D, Dv)} has no kernel for block {tuple(a.cfg)}")

    if causal not in _MASKS:
        raise ValueError(f"causal must be None, 'top_left' or 'bottom_right', got {causal!r}")
    a.mask_kind = _MASKS[causal]
    a.window = checks.check_int(window, "window", 0, 2**31 - 1)
    if a.window > 0 and a.mask_kind == MASK_NONE:
        raise ValueError("window > 0 (local attention) is only supported with causal="
                         "'top_left' or 'bottom_right'")
    a.p = checks.check_probability(dropout_p, "dropout_p")
    a.seed = checks.check_int(seed, "seed")
    a.offset = checks.check_int(offset, "offset")
    if scale is None:
        a.scale = 1.0 / math.sqrt(D)
    else:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
            raise ValueError(f"scale must be a finite real number or None, got {scale!r}")
        a.scale = float(scale)

    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
    a.varlen = cu_seqlens_q is not None
    if a.varlen:
        if B != 1:
            raise ValueError(f"with cu_seqlens, q, k, v must have batch 1 (sequences packed "
                             f"along dim 1), got batch {B}")
        cus = []
        for obj, name, total in ((cu_seqlens_q, "cu_seqlens_q", Sq), (cu_seqlens_k, "cu_seqlens_k", Sk)):
            C = as_kernel_array(obj, name)
            if C.dtype != "int32":
                raise TypeError(f"{name} must have dtype int32, got {C.dtype}")
            if C.ndim != 1 or C.shape[0] < 1:
                raise ValueError(f"{name} must be 1-D [num_seqs + 1], got shape {C.shape}")
            checks.check_same_device(Q, "q", (C, name))
            host = _host_ints(C)
            if host[0] < 0 or np.any(np.diff(host) < 0):
                raise ValueError(f"{name} must be non-negative and non-decreasing, got {host.tolist()}")
            if host[-1] > total:
                raise ValueError(f"{name} ends at {int(host[-1])} but dim 1 of "
                                 f"{'q' if name == 'cu_seqlens_q' else 'k'} has {total} rows")
            cus.append((C, host))
        (a.cu_q, hq), (a.cu_k, hk) = cus
        if hq.shape != hk.shape:
            raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length, got "
                             f"{hq.shape[0]} and {hk.shape[0]}")
        a.nb = hq.shape[0] - 1
        a.rows = int(np.max(np.diff(hq))) if a.nb else 0
        a.kcols = int(np.max(np.diff(hk))) if a.nb else 0
    else:
        a.cu_q = a.cu_k = None
        a.nb, a.rows, a.kcols = B, Sq, Sk
    # Batches (sequences) are the grids' z extent, times the backward's column parts.
    z_max = _MAX_GRID_Z // (bwd_col_parts(a.d_max, a.p > 0.0) if a.tc else 1)
    if a.nb > z_max:
        raise ValueError(f"at most {z_max} {'sequences' if a.varlen else 'batches'} per call "
                         f"at this head_dim (CUDA's grid z limit), got {a.nb}")

    a.B = None
    if bias is not None:
        if a.varlen:
            raise ValueError("bias with cu_seqlens is not supported (as the seed kernel)")
        a.B = checks.floating_array(bias, "bias")
        checks.check_same_dtype(Q, "q", (a.B, "bias"))
        checks.check_same_device(Q, "q", (a.B, "bias"))
        if a.B.shape != (B, H, Sq, Sk):
            raise ValueError(f"bias must be [batch, heads, seq_q, seq_k] = {(B, H, Sq, Sk)} "
                             f"(broadcast with stride 0 where needed), got {a.B.shape}")
        _check_strides(a.B, "bias")
    a.bias_strides = list(a.B.strides) if a.B is not None else [0, 0, 0, 0]
    a.Q, a.K, a.V = Q, K, V
    a.dims = (B, Sq, H, D, Sk, Dv)
    a.dtype = Q.dtype
    a.dropout = a.p > 0.0
    seed_lo, seed_hi = split_u64(a.seed)
    off_lo, off_hi = split_u64(a.offset)
    drop_scale = 0.0 if a.p >= 1.0 else 1.0 / (1.0 - a.p)
    a.scalars = [a.scale, a.mask_kind, a.window, int(a.B is not None), int(a.varlen),
                 a.p, drop_scale, seed_lo, seed_hi, off_lo, off_hi,
                 a.rows, cdiv(a.kcols, 4)]
    return a


_INT32_DUMMIES = {}


def _int32_dummy(like):
    """A tiny int32 array on like's device standing in for absent cu_seqlens (never
    read; never an array a kernel writes: the simulator copies every array argument in
    and back out, so an alias of a written array would be overwritten)."""
    key = (like.lib, like.device)
    arr = _INT32_DUMMIES.get(key)
    if arr is None:
        arr = empty_like_lib(like, (2,), "int32")
        if like.lib in ("torch", "cupy", "numba"):
            _INT32_DUMMIES[key] = arr
    return arr


# ---------------------------------------------------------------- forward


def attention_forward(q, k, v, bias=None, causal=None, window=0, dropout_p=0.0, seed=0,
                      offset=0, scale=None, cu_seqlens_q=None, cu_seqlens_k=None, *, block=None,
                      tensor_cores=None):
    """Attention forward: ``(out [B, Sq, H, Dv], lse [B, H, Sq] float32)``; see the module
    docstring for the math and the options."""
    a = _prepare(q, k, v, bias, causal, window, dropout_p, seed, offset, scale,
                 cu_seqlens_q, cu_seqlens_k, block, tensor_cores)
    out, lse = _forward(a)
    return out.owner, lse.owner


# The index of the seed's low word in _Args.scalars: it and the next three (seed high,
# offset low, offset high) change call to call; a plan takes them from rng_values().
_SEED_AT = 7


def rng_values(seed, offset):
    """The per-call scalars of an attention plan with dropout (:func:`forward_plan`,
    :func:`backward_plan`): ``seed``'s and ``offset``'s 32-bit words."""
    return split_u64(seed) + split_u64(offset)


def _dynamic(a, args, after):
    """Indices of the seed and offset words in kernel ``args`` whose scalars
    (``a.scalars``) are followed by ``after`` more arguments; none without dropout."""
    if not a.dropout:
        return ()
    first = len(args) - after - len(a.scalars) + _SEED_AT
    return range(first, first + 4)


def _no_cu(a, ex):
    """The cu_seqlens argument of a launch without them (never read by the kernels)."""
    if ex.recording:
        # q's stand-in, as an int32 pair: a plan must only name its own buffers.
        Q = a.Q
        return KernelArray(None, Q.lib, "int32", (2,), (1,), Q.ptr, None, Q.device)
    return _int32_dummy(a.Q)


def _forward(a, ex=NOW):
    B, Sq, H, D, Sk, Dv = a.dims
    if a.nb == 0 or H == 0 or a.rows == 0:
        return (empty_like_lib(a.Q, (B, Sq, H, Dv), a.dtype),
                empty_like_lib(a.Q, (a.nb, H, a.rows), "float32"))
    if ex.recording:
        a.Q, a.K, a.V, a.B = ex.inputs
    out = ex.alloc(a.Q, (B, Sq, H, Dv), a.dtype)
    lse = ex.alloc(a.Q, (a.nb, H, a.rows), "float32")
    cu_q = a.cu_q if a.varlen else _no_cu(a, ex)
    cu_k = a.cu_k if a.varlen else cu_q
    grid = (cdiv(a.rows, a.cfg.blk), H, a.nb)
    bias_arr = a.B if a.B is not None else a.Q
    args = [
        _flat(a.Q), _flat(a.K), _flat(a.V), _flat(bias_arr), _flat(out), _flat(lse), cu_q, cu_k,
        *_bsh(a.Q), *_bsh(a.K), *_bsh(a.V), *_bsh(out), *a.bias_strides, *lse.strides,
        Sq, Sk, D, Dv, a.rows, *a.scalars]
    if a.tc:
        # The forward has no query sub-tile.
        kernel = make_attention_fwd_tc_kernel(a.dtype, a.d_max, a.dropout,
                                              TcConfig(a.cfg.blk, a.cfg.blk))
        ex.launch(kernel, grid, a.cfg.nt, stream_handle(a.Q), args + [
            int(_rows_aligned(a.Q, a.K, a.V))],
            shared=fwd_smem_bytes(a.cfg, a.d_max, a.B is not None),
            dynamic=_dynamic(a, args, 0))
    else:
        kernel = make_attention_fwd_kernel(a.dtype, a.d_max, a.dropout, a.cfg)
        ex.launch(kernel, grid, a.cfg.nt, stream_handle(a.Q), args,
                  dynamic=_dynamic(a, args, 0))
    return out, lse


# ---------------------------------------------------------------- backward


def attention_backward(grad_out, q, k, v, out, lse, bias=None, causal=None, window=0,
                       dropout_p=0.0, seed=0, offset=0, scale=None, cu_seqlens_q=None,
                       cu_seqlens_k=None, deterministic=False, *, need_bias_grad=True,
                       num_splits=None, block=None, tensor_cores=None, dq_scheme=None):
    """Attention backward: ``(grad_q, grad_k, grad_v, grad_bias_or_None)`` for the
    forward with the same options; ``out`` and ``lse`` are what the forward returned.
    ``deterministic=True`` makes dQ bit-identical run to run (per-split workspace
    slices summed in split order instead of an order set by timing)."""
    a = _prepare(q, k, v, bias, causal, window, dropout_p, seed, offset, scale,
                 cu_seqlens_q, cu_seqlens_k, block, tensor_cores)
    gq, gk, gv, red = _backward(a, grad_out, out, lse, deterministic, need_bias_grad, num_splits,
                                dq_scheme=dq_scheme)
    return gq.owner, gk.owner, gv.owner, (red.owner if red is not None else None)


def _backward(a, grad_out, out, lse, deterministic, need_bias_grad, num_splits, ex=NOW,
              dq_scheme=None):
    B, Sq, H, D, Sk, Dv = a.dims
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TypeError(f"deterministic must be a bool, got {type(deterministic).__name__}")
    if dq_scheme is None:
        dq_scheme = DQ_SCHEME
    if dq_scheme not in DQ_MODES:
        raise ValueError(f"dq_scheme must be one of {sorted(DQ_MODES)} or None, got {dq_scheme!r}")
    dq_mode = DQ_SLICES if deterministic else DQ_MODES[dq_scheme]
    if not isinstance(need_bias_grad, (bool, np.bool_)):
        raise TypeError(f"need_bias_grad must be a bool, got {type(need_bias_grad).__name__}")
    GO = checks.floating_array(grad_out, "grad_out")
    O = checks.floating_array(out, "out")
    L = checks.floating_array(lse, "lse", ("float32",))
    checks.check_same_dtype(a.Q, "q", (GO, "grad_out"), (O, "out"))
    checks.check_same_device(a.Q, "q", (GO, "grad_out"), (O, "out"), (L, "lse"))
    for arr, name in ((GO, "grad_out"), (O, "out")):
        if arr.shape != (B, Sq, H, Dv):
            raise ValueError(f"{name} must be [batch, seq_q, heads, head_dim_v] = "
                             f"{(B, Sq, H, Dv)}, got {arr.shape}")
        _check_last_dim(arr, name)
        _check_strides(arr, name)
    _check_strides(L, "lse")
    if L.ndim != 3 or L.shape[:2] != (a.nb, H) or (L.shape[2] != a.rows if not a.varlen
                                                     else L.shape[2] < a.rows):
        want = f"[{a.nb}, {H}, {a.rows}]" if not a.varlen else f"[{a.nb}, {H}, >= {a.rows}]"
        raise ValueError(f"lse must be {want} float32 (as attention_forward returns), got {L.shape}")

    cfg = a.cfg
    blk = cfg.blk
    nkb = cdiv(a.kcols, blk)
    if num_splits is None:
        nsplit = _default_splits(a, nkb, H, bool(deterministic))
    else:
        nsplit = checks.check_int(num_splits, "num_splits", 1, 2**15)
        if nsplit > max(1, nkb):
            raise ValueError(f"num_splits={nsplit} is too large for seq_k={a.kcols} "
                             f"({nkb} key blocks of {blk})")
    want_gb = a.B is not None and bool(need_bias_grad)
    reduce_dims = ()
    red_shape = None
    if want_gb:
        reduce_dims = tuple(i for i in range(4) if a.B.strides[i] == 0 and a.B.shape[i] > 1)
        red_shape = tuple(1 if i in reduce_dims else s for i, s in enumerate(a.B.shape))

    if a.nb == 0 or H == 0 or (a.rows == 0 and a.kcols == 0):
        gb = None if red_shape is None else empty_like_lib(a.Q, red_shape, a.dtype)
        return (empty_like_lib(a.Q, (B, Sq, H, D), a.dtype),
                empty_like_lib(a.Q, (B, Sk, H, D), a.dtype),
                empty_like_lib(a.Q, (B, Sk, H, Dv), a.dtype), gb)
    if ex.recording:
        a.Q, a.K, a.V, a.B, GO, O, L = ex.inputs
    gq = ex.alloc(a.Q, (B, Sq, H, D), a.dtype)
    gk = ex.alloc(a.Q, (B, Sk, H, D), a.dtype)
    gv = ex.alloc(a.Q, (B, Sk, H, Dv), a.dtype)
    gb = red = None
    if want_gb:
        red = ex.alloc(a.Q, red_shape, a.dtype)
        gb = red if not reduce_dims else ex.alloc(a.Q, a.B.shape, a.dtype)

    nqb = cdiv(a.rows, blk)
    slices = nsplit if deterministic else 1
    delta = ex.alloc(a.Q, (a.nb * H * a.rows,), "float32")
    ws = ex.alloc(a.Q, (slices * a.nb * H, nqb * blk, D), "float32")
    locks = ex.alloc(a.Q, (max(2, a.nb * H * nqb * 2),), "int32")
    cu_q = a.cu_q if a.varlen else _no_cu(a, ex)
    cu_k = a.cu_k if a.varlen else cu_q
    bias_arr = a.B if a.B is not None else a.Q
    gb_arr = gb if gb is not None else a.Q
    stream = stream_handle(a.Q)

    gb_strides = list(gb_arr.strides[:3]) if gb is not None else [0, 0, 0]
    sizes = [Sq, Sk, D, Dv, a.rows, nqb * blk]
    if nqb:
        # The prep kernel needs only the main kernel's query-block length.
        prep_cfg = _PRESETS[blk] if a.tc else cfg
        prep = make_attention_bwd_prep_kernel(a.dtype, prep_cfg)
        ex.launch(prep, (nqb, H, a.nb), prep_cfg.nt, stream, [
            _flat(O), _flat(GO), delta, _flat(ws), locks, _flat(gq), _flat(gb_arr), cu_q, cu_k,
            *_bsh(O), *_bsh(GO), *_bsh(gq), *gb_strides, *sizes, slices, nsplit,
            a.mask_kind, a.window, int(a.varlen), int(want_gb)])
    if nkb:
        args = [
            _flat(a.Q), _flat(a.K), _flat(a.V), _flat(GO), _flat(bias_arr), _flat(L), delta,
            _flat(gq), _flat(gk), _flat(gv), _flat(gb_arr), _flat(ws), locks, cu_q, cu_k,
            *_bsh(a.Q), *_bsh(a.K), *_bsh(a.V), *_bsh(GO), *_bsh(gq), *_bsh(gk), *_bsh(gv),
            *a.bias_strides, *L.strides, *gb_strides, *sizes, *a.scalars,
            int(want_gb), dq_mode]
        dynamic = _dynamic(a, args, 2)
        if a.tc:
            main = make_attention_bwd_tc_kernel(a.dtype, a.d_max, a.dropout, cfg)
            parts = bwd_col_parts(a.d_max, a.dropout)
            group = _head_group(a.nb * H, H, a.rows * (D + Dv) * a.Q.itemsize, parts)
            ex.launch(main, (group, nsplit, a.nb * H // group * parts), cfg.nt, stream, args + [
                int(_rows_aligned(a.Q, a.K, a.V, GO)), H],
                shared=bwd_smem_bytes(cfg, a.d_max, a.B is not None), dynamic=dynamic)
            if dq_mode == DQ_ATOMIC and nsplit > 1 and nqb:
                ex.launch(make_dq_store_kernel(a.dtype, blk, cfg.nt), (nqb, H, a.nb), cfg.nt,
                          stream, [_flat(ws), _flat(gq), cu_q, *_bsh(gq), Sq, D, nqb * blk,
                                   int(a.varlen)])
        else:
            main = make_attention_bwd_kernel(a.dtype, a.d_max, a.dropout, cfg)
            ex.launch(main, (nsplit, H, a.nb), cfg.nt, stream, args, dynamic=dynamic)
    if want_gb and reduce_dims and red.size:
        kern = make_bias_grad_reduce_kernel(a.dtype)
        threads = 32 if SIMULATOR else 256
        grid = max(1, min(cdiv(red.size, threads), 8 * 1024))
        flags = [int(i in reduce_dims) for i in range(4)]
        ex.launch(kern, grid, threads, stream, [gb, red, *flags])
    return gq, gk, gv, red


def forward_plan(q, k, v, bias=None, causal=None, window=0, dropout_p=0.0, scale=None):
    """A :class:`~numba_fused.plan.Plan` of :func:`attention_forward` (no cu_seqlens,
    default block and kernels) for inputs of the signature of ``q``, ``k``, ``v``,
    ``bias`` (shapes, strides, 16-byte alignment; validated here as there): inputs
    ``(q, k, v, bias)``, outputs ``(out, lse)``, per-call values :func:`rng_values`
    ``(seed, offset)`` when ``dropout_p > 0``. GPU only; no empty dimension."""
    a = _prepare(q, k, v, bias, causal, window, dropout_p, 0, 0, scale, None, None, None, None)
    rec = Recorder([a.Q, a.K, a.V, a.B])
    return rec.plan(_forward(a, ex=rec))


def backward_plan(grad_out, q, k, v, out, lse, bias=None, causal=None, window=0,
                  dropout_p=0.0, scale=None, deterministic=False, need_bias_grad=True):
    """A :class:`~numba_fused.plan.Plan` of :func:`attention_backward` (no cu_seqlens,
    default splits, block and kernels) for inputs of this signature: inputs
    ``(q, k, v, bias, grad_out, out, lse)``, outputs ``(grad_q, grad_k, grad_v,
    grad_bias or None)``, per-call values as :func:`forward_plan`'s."""
    a = _prepare(q, k, v, bias, causal, window, dropout_p, 0, 0, scale, None, None, None, None)
    arrays = [as_kernel_array(t, name) for t, name in
              ((grad_out, "grad_out"), (out, "out"), (lse, "lse"))]
    rec = Recorder([a.Q, a.K, a.V, a.B] + arrays)
    return rec.plan(_backward(a, grad_out, out, lse, deterministic, need_bias_grad, None,
                              ex=rec))


# Q and dO bytes of the heads whose blocks the tensor-core backward runs together
# (_head_group): kept well inside L2 (50 MB on H100 / H200), which every key block of
# those heads re-reads them from.
_GROUP_BYTES = 8 << 20
_MAX_GRID_Z = 65535


def _head_group(pairs, heads, head_bytes, parts=1):
    """(batch, head) pairs per group of the tensor-core backward's grid (its x
    extent): the largest divisor of ``pairs`` whose Q and dO (``head_bytes`` each
    pair) fit in _GROUP_BYTES, at most 16, and one that keeps the grid's z extent
    (pairs / group x ``parts`` column parts) within CUDA's limit (``heads`` divides
    ``pairs`` and does, since _prepare keeps batches x parts within it)."""
    best = 1
    for g in range(1, min(16, pairs) + 1):
        if pairs % g == 0 and g * head_bytes <= _GROUP_BYTES:
            best = g
    if pairs // best * parts > _MAX_GRID_Z:
        best = max(best, heads)
    return best


def _default_splits(a, nkb, H, deterministic):
    """Key splits of the backward when the caller gives none.

    CUDA-core kernels: one 256-thread block per SM. Tensor-core kernels: one key block
    per split (as flash-attention's backward: the most blocks, the finest balance;
    the seed's query-start rotation keeps splits off each other's dQ locks), except
    that deterministic mode keeps a workspace slice per split, so there the splits
    are capped to about 4 blocks per SM and at most 8 slices. Splits divide the key
    blocks as evenly as the count allows."""
    heads = max(1, a.nb * H)
    if not a.tc:
        return max(1, min(nkb, sm_count(a.Q.device) // heads))
    if not deterministic:
        return max(1, nkb)
    target = max(1, min(8, nkb, cdiv(4 * sm_count(a.Q.device), heads)))
    return cdiv(nkb, cdiv(nkb, target))


# ---------------------------------------------------------------- references


def dropout_keep_ref(num_seqs, heads, rows, cols, p, seed, offset):
    """bool ``[num_seqs, heads, rows, cols]``: True where the kernels keep P[i, j] under
    dropout probability ``p`` (rows / cols: Sq / Sk, or the max sequence lengths with
    varlen), from the same Philox positions as the kernels."""
    groups = cdiv(cols, 4)
    b, h, i, g = np.meshgrid(np.arange(num_seqs, dtype=np.uint64), np.arange(heads, dtype=np.uint64),
                             np.arange(rows, dtype=np.uint64), np.arange(groups, dtype=np.uint64),
                             indexing="ij")
    pos = ((b * np.uint64(heads) + h) * np.uint64(rows) + i) * np.uint64(groups) + g
    off_lo, off_hi = split_u64(offset)
    ctr = np.stack([pos & np.uint64(0xFFFFFFFF), pos >> np.uint64(32),
                    np.full_like(pos, off_lo), np.full_like(pos, off_hi)], axis=-1)
    bits = philox4x32_np(ctr.astype(np.uint32), split_u64(seed))
    keep = uniform_from_bits_np(bits) >= np.float32(p)
    return keep.reshape(num_seqs, heads, rows, groups * 4)[..., :cols]


def _zero_stride_dims(x):
    if hasattr(x, "stride") and callable(x.stride):
        strides = x.stride()
    else:
        strides = getattr(x, "strides", None) or ()
    return tuple(i for i, (s, n) in enumerate(zip(strides, x.shape)) if s == 0 and n > 1)


def attention_ref(q, k, v, bias=None, causal=None, window=0, dropout_p=0.0, seed=0, offset=0,
                  scale=None, cu_seqlens_q=None, cu_seqlens_k=None, grad_out=None):
    """float64 NumPy attention with the kernels' semantics (inputs: torch / NumPy / CuPy
    arrays; bfloat16 NumPy data as uint16 bits). Returns ``(out, lse)``, or with
    ``grad_out`` ``(out, lse, grad_q, grad_k, grad_v, grad_bias_or_None)``; grad_bias is
    reduced over the bias's stride-0 dimensions as ``attention_backward`` does."""
    qn, kn, vn = dtypes.to_float64(q), dtypes.to_float64(k), dtypes.to_float64(v)
    bn = dtypes.to_float64(bias)
    gon = dtypes.to_float64(grad_out)
    B, Sq, H, D = qn.shape
    Sk = kn.shape[1]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    if cu_seqlens_q is not None:
        cq = dtypes.to_float64(cu_seqlens_q).astype(np.int64)
        ck = dtypes.to_float64(cu_seqlens_k).astype(np.int64)
        nb = cq.shape[0] - 1
        rows = int(np.max(np.diff(cq))) if nb else 0
        cols = int(np.max(np.diff(ck))) if nb else 0
        spans = [(0, cq[i], cq[i + 1], ck[i], ck[i + 1]) for i in range(nb)]
    else:
        nb, rows, cols = B, Sq, Sk
        spans = [(i, 0, Sq, 0, Sk) for i in range(B)]
    p = float(dropout_p)
    keep = dropout_keep_ref(nb, H, rows, cols, p, seed, offset) if p > 0 else None
    zscale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
    shift_br = causal == "bottom_right"

    out = np.zeros(qn.shape[:3] + (vn.shape[3],))
    lse = np.full((nb, H, rows), -np.inf)
    grads = None
    if gon is not None:
        grads = [np.zeros_like(qn), np.zeros_like(kn), np.zeros_like(vn),
                 None if bn is None else np.zeros((B, H, Sq, Sk))]
    for seq, (bi, q0, q1, k0, k1) in enumerate(spans):
        Qh = qn[bi, q0:q1].transpose(1, 0, 2)
        Kh = kn[bi, k0:k1].transpose(1, 0, 2)
        Vh = vn[bi, k0:k1].transpose(1, 0, 2)
        sq, sk = q1 - q0, k1 - k0
        s = scale * np.einsum("hid,hjd->hij", Qh, Kh)
        if bn is not None:
            s = s + bn[bi]
        ii = np.arange(sq)[:, None]
        jj = np.arange(sk)[None, :]
        vis = np.ones((sq, sk), dtype=bool)
        if causal is not None:
            shift = sk - sq if shift_br else 0
            vis &= jj <= ii + shift
            if window > 0:
                vis &= jj > ii + shift - window
        s = np.where(vis, s, -np.inf)
        m = s.max(axis=-1, keepdims=True) if sk else np.full((H, sq, 1), -np.inf)
        m_safe = np.where(np.isfinite(m), m, 0.0)
        e = np.where(vis, np.exp(np.where(vis, s, 0.0) - m_safe), 0.0)
        lsum = e.sum(axis=-1, keepdims=True)
        P = np.divide(e, lsum, out=np.zeros_like(e), where=lsum > 0)
        with np.errstate(divide="ignore"):
            lse[seq, :, :sq] = np.where(lsum[..., 0] > 0, m_safe[..., 0] + np.log(lsum[..., 0]),
                                        -np.inf)
        Z = 1.0 if keep is None else keep[seq, :, :sq, :sk] * zscale
        PZ = P * Z
        out[bi, q0:q1] = np.einsum("hij,hjd->hid", PZ, Vh).transpose(1, 0, 2)
        if grads is not None:
            dO = gon[bi, q0:q1].transpose(1, 0, 2)
            dP = np.einsum("hid,hjd->hij", dO, Vh) * Z
            delta = (P * dP).sum(axis=-1, keepdims=True)
            dS = P * (dP - delta)
            grads[0][bi, q0:q1] = scale * np.einsum("hij,hjd->hid", dS, Kh).transpose(1, 0, 2)
            grads[1][bi, k0:k1] = scale * np.einsum("hij,hid->hjd", dS, Qh).transpose(1, 0, 2)
            grads[2][bi, k0:k1] = np.einsum("hij,hid->hjd", PZ, dO).transpose(1, 0, 2)
            if grads[3] is not None:
                grads[3][bi] = dS
    if grads is None:
        return out, lse
    gbias = grads[3]
    if gbias is not None:
        red = _zero_stride_dims(bias)
        if red:
            gbias = gbias.sum(axis=red, keepdims=True)
    return out, lse, grads[0], grads[1], grads[2], gbias


# ---------------------------------------------------------------- registry


def shipped_kernels():
    """Every kernel the launchers pick on the GPU (GPU tiles, each dtype, width, dropout;
    for float16 / bfloat16 the tensor-core kernels and the CUDA-core ones that
    ``tensor_cores=False`` selects)."""
    for dt in DTYPES:
        for d_max in D_MAXES:
            if d_max % GPU_TILE.tx:
                continue
            for drop in (False, True):
                yield make_attention_fwd_kernel(dt, d_max, drop, GPU_TILE)
                yield make_attention_bwd_kernel(dt, d_max, drop, GPU_TILE)
        if dt != "float32":
            for d_max, drop, cfg in _tc_tiles():
                yield make_attention_fwd_tc_kernel(dt, d_max, drop, TcConfig(TC_BLK, TC_BLK))
                yield make_attention_bwd_tc_kernel(dt, d_max, drop, cfg)
            yield make_dq_store_kernel(dt, TC_BLK, TcConfig(TC_BLK, TC_BLK).nt)
        yield make_attention_bwd_prep_kernel(dt, GPU_TILE)
        yield make_bias_grad_reduce_kernel(dt)
