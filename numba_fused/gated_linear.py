"""Gated linear units (SwiGLU, GeGLU, ...) on the linear_act GEMMs, the gate fused in
the epilogues.

A gated MLP (Llama, Mistral, Qwen: ``act = silu``; GeGLU: ``gelu_tanh``) is ::

    g = x @ W_gate^T + b_gate,  u = x @ W_up^T + b_up          [M, I] each
    h = act(g) * u                                              [M, I]
    y = h @ W_down^T + b_down                                   [M, N]

Here the gate and up projections are one GEMM over an *interleaved* weight
``weight [2I, K]`` (row 2j = W_gate[j], row 2j + 1 = W_up[j]; bias likewise;
:func:`interleave` builds it): each (gate, up) pair of output columns then lies in one
accumulator chunk, and the epilogue writes ``h`` directly (``linear_act.F_GATED``),
with the pairs ``z = (g, u)`` saved as the pre-activation ``[M, 2I]``. In the
backward, the down projection's dgrad GEMM gives ``dH = dy @ W_down`` and its
epilogue turns it into the pairs' gradient ::

    dz[m, 2j]     = dH[m, j] * u * act'(g)
    dz[m, 2j + 1] = dH[m, j] * act(g)

(``gated_linear_dgrad``), from which ``dx = dz @ weight``, ``dweight = dz^T x`` and
``dbias = sum_m dz`` are linear_act's plain GEMMs. float32 accumulation and epilogue
math; float16 / bfloat16 on tensor cores, float32 on CUDA cores; one rounding per
stored value.
"""

import functools

import numpy as np
from numba import cuda, types

from interop.dlpack import stream_handle

from . import checks, dtypes
from .activations import act_grad_ref, act_ref, check_activation
from .launch import SIMULATOR, Kernel, cdiv
from .linear_act import (ACT_CODES, F_BIAS, F_GATED, F_PREACT, _address, _check_flag, _flat,
                         _gemm, _linear_inputs, _matrix, _plan_inputs, _wgrad, act_by_code,
                         act_grad_by_code, gated_pair_ok, gemm_gated_pair, gemm_pair_dgrad,
                         gemm_pair_wgrad, linear_act_dgrad, linear_weight_grad)
from .linear_act import _grads as _la_grads
from .plan import NOW, Recorder

__all__ = ["gated_linear_forward", "gated_linear_forward_pair", "gated_linear_dgrad",
           "gated_linear_backward", "gated_linear_backward_pair", "gated_act_backward",
           "pair_grads", "interleave", "deinterleave", "gated_linear_ref", "gated_linear_dgrad_ref",
           "gated_linear_backward_ref", "make_gated_grad_kernel", "shipped_kernels"]

GRAD_THREADS = 256


def interleave(gate, up):
    """``[2I, ...]`` rows gate[0], up[0], gate[1], up[1], ... of two ``[I, ...]``
    arrays (weights or biases of the gate and up projections): torch tensors, CuPy or
    NumPy arrays; the result in the same library."""
    if tuple(gate.shape) != tuple(up.shape):
        raise ValueError(f"gate {list(gate.shape)} and up {list(up.shape)} must have one shape")
    shape = (2 * gate.shape[0],) + tuple(gate.shape[1:])
    if type(gate).__module__.split(".")[0] == "torch":
        import torch

        return torch.stack((gate, up), dim=1).reshape(shape)
    import importlib

    xp = importlib.import_module(type(gate).__module__.split(".")[0])
    return xp.stack((gate, up), axis=1).reshape(shape)


def deinterleave(pairs):
    """``(gate, up)``: the even and odd rows of ``pairs`` ``[2I, ...]`` (as
    :func:`interleave` builds), each a contiguous ``[I, ...]`` array in the same
    library (torch, CuPy or NumPy). Raises ValueError unless ``pairs`` has an even
    number of rows."""
    shape = tuple(getattr(pairs, "shape", ()))
    if not shape or shape[0] % 2:
        raise ValueError(f"pairs must have an even number of rows (interleaved gate and up "
                         f"rows, see interleave()), got shape {list(shape)}")
    mod = type(pairs).__module__.split(".")[0]
    if mod == "torch":
        return pairs[0::2].contiguous(), pairs[1::2].contiguous()
    import importlib

    xp = importlib.import_module(mod)
    return xp.ascontiguousarray(pairs[0::2]), xp.ascontiguousarray(pairs[1::2])


@functools.lru_cache(maxsize=None)
def make_gated_grad_kernel(dtype, threads=GRAD_THREADS):
    """Kernel ``(gh, z, dz, n, act)``: the pairs' gradient ``dz`` ``[n, 2]`` from the
    gradient of ``h = act(g) * u``, ``gh`` ``[n]``, and the pairs ``z = (g, u)``
    ``[n, 2]`` (flat, element i of gh belongs to pair i). One pair per thread; grid
    ``cdiv(n, threads)``."""
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)

    def kernel(gh, z, dz, n, act):
        """dz[2i] = gh[i] * u * act'(g), dz[2i + 1] = gh[i] * act(g), (g, u) = z[2i:2i+2]."""
        i = cuda.grid(1)
        if i < n:
            g = load(z, 2 * i)
            u = load(z, 2 * i + 1)
            d = load(gh, i)
            store(dz, 2 * i, d * u * act_grad_by_code(act, g))
            store(dz, 2 * i + 1, d * act_by_code(act, g))

    arr = types.Array(dtypes.numba_storage_type(dtype), 1, "C")
    return Kernel(f"gated_grad_{dtype}", kernel, (arr, arr, arr, types.int64, types.int64))


def _pairs_of(wa, name):
    rows = wa.shape[0]
    if rows % 2:
        raise ValueError(f"{name} must have an even number of rows (interleaved gate and up "
                         f"projections, see interleave()), got shape {list(wa.shape)}")
    return rows // 2


def gated_linear_forward(x, weight, bias=None, activation="silu", save_preact=False):
    """``h = act(g) * u`` with ``(g, u)`` the interleaved pairs of ``x @ weight^T + bias``.

    x: ``[..., K]``; weight: ``[2I, K]`` interleaved (row 2j gate, row 2j + 1 up; see
    :func:`interleave`); bias: ``[2I]`` interleaved or None; one dtype (float32, float16,
    bfloat16), contiguous, one device. Returns ``h`` ``[..., I]`` or, with
    ``save_preact``, ``(h, z)`` with the pairs ``z`` ``[..., 2I]`` (what the backward
    needs), in x's dtype and library.
    """
    check_activation(activation)
    save_preact = _check_flag(save_preact, "save_preact")
    h, z = _forward(*_forward_inputs(x, weight, bias), activation, save_preact)
    if save_preact:
        return h.owner, z.owner
    return h.owner


def _forward_inputs(x, weight, bias):
    """(x, weight, bias or None) of :func:`gated_linear_forward`, validated."""
    xa, wa, ba = _linear_inputs(x, weight, bias, "2I")
    _pairs_of(wa, "weight")
    return xa, wa, ba


def _forward(xa, wa, ba, activation, save_preact, ex=NOW):
    """(h, z or None) of :func:`gated_linear_forward` on validated KernelArrays."""
    N2, K = wa.shape
    hid = N2 // 2
    dtype = xa.dtype
    lead = xa.shape[:-1]
    h = ex.alloc(xa, lead + (hid,), dtype)
    z = ex.alloc(xa, lead + (N2,), dtype) if save_preact else None
    M = h.size // hid if hid else 0
    if M and hid:
        h2 = h.reshape((M, hid))
        z2 = z.reshape((M, N2)) if z is not None else h2
        flags = F_GATED | (F_BIAS if ba is not None else 0) | (F_PREACT if save_preact else 0)
        _gemm("fwd", dtype, xa.reshape((M, K)), wa, ba if ba is not None else h2, z2, h2,
              M, N2, K, K, K, hid, ACT_CODES[activation], flags, stream_handle(xa), ex)
    return h, z


def gated_linear_forward_pair(x, w_gate, w_up, bias=None, activation="silu",
                              save_preact=False):
    """``h = act(g) * u`` with ``g = x @ w_gate^T`` and ``u = x @ w_up^T`` (plus the
    interleaved ``bias``), the two weights read in place: the result of
    :func:`gated_linear_forward` on ``interleave(w_gate, w_up)`` without building that
    copy (a read and a write of both weights: the larger part of the work at a
    decoder's few tokens a step; in training, a weight-sized tensor kept for the
    backward).

    x: ``[..., K]``; w_gate, w_up: ``[I, K]``; bias: ``[2I]`` interleaved or None; one
    dtype (float32, float16, bfloat16), contiguous, one device. Where the weights are
    not read in place (float32, rows not 16-byte aligned, and with
    ``linear_act.GATED_PAIRS_EVERYWHERE`` turned off a GEMM large enough for wgmma:
    :func:`numba_fused.linear_act.gated_pair_ok`), the interleaved copy is made.
    Returns ``h`` ``[..., I]`` in x's dtype and library, or with ``save_preact`` ``(h,
    z)``, ``z`` the interleaved pairs ``[..., 2I]`` as :func:`gated_linear_forward`'s.
    """
    check_activation(activation)
    save_preact = _check_flag(save_preact, "save_preact")
    xa, ga, ua, ba = _pair_inputs(x, w_gate, w_up, bias)
    if not _pair_in_place(xa, ga, ua):
        return gated_linear_forward(x, interleave(w_gate, w_up), bias, activation, save_preact)
    h, z = _forward_pair(xa, ga, ua, ba, activation, save_preact)
    return (h.owner, z.owner) if save_preact else h.owner


def _pair_inputs(x, w_gate, w_up, bias):
    """(x, w_gate, w_up, bias or None) of :func:`gated_linear_forward_pair`, validated."""
    xa, ga, _ = _linear_inputs(x, w_gate, None, "I")
    ua = _matrix(checks.floating_array(w_up, "w_up"), "w_up", 2)
    ba = checks.optional_array(bias, "bias")
    checks.check_same_dtype(xa, "x", (ua, "w_up"), (ba, "bias"))
    checks.check_same_device(xa, "x", (ua, "w_up"), (ba, "bias"))
    if ua.shape != ga.shape:
        raise ValueError(f"w_gate {list(ga.shape)} and w_up {list(ua.shape)} must have one "
                         f"shape [I, K]")
    if ba is not None:
        _matrix(ba, "bias", 1)
        if ba.shape[0] != 2 * ga.shape[0]:
            raise ValueError(f"bias must have shape [{2 * ga.shape[0]}] (the gate's and up "
                             f"projection's, interleaved), got {list(ba.shape)}")
    return xa, ga, ua, ba


def _pair_in_place(xa, ga, ua, backward=False):
    """Whether :func:`_forward_pair` (and with ``backward`` :func:`_pair_grads`) can
    use these weights in place."""
    hid, K = ga.shape
    M = xa.size // K if K else 0
    aligned = all(_address(a) % 16 == 0 for a in (xa, ga, ua))
    device = None if SIMULATOR else xa.device
    return bool(M and hid) and gated_pair_ok(xa.dtype, aligned, M, 2 * hid, K, device,
                                             backward)


def _forward_pair(xa, ga, ua, ba, activation, save_preact=False, ex=NOW):
    """(h, z or None) of :func:`gated_linear_forward_pair` on validated KernelArrays
    whose weights :func:`_pair_in_place` accepts."""
    hid, K = ga.shape
    lead = xa.shape[:-1]
    h = ex.alloc(xa, lead + (hid,), xa.dtype)
    z = ex.alloc(xa, lead + (2 * hid,), xa.dtype) if save_preact else None
    M = h.size // hid
    h2 = h.reshape((M, hid))
    flags = F_GATED | (F_BIAS if ba is not None else 0) | (F_PREACT if save_preact else 0)
    gemm_gated_pair(xa.dtype, xa.reshape((M, K)), ga, ua, ba if ba is not None else h2,
                    z.reshape((M, 2 * hid)) if save_preact else h2, h2, M, 2 * hid, K,
                    ACT_CODES[activation], flags, stream_handle(xa), ex)
    return h, z


def forward_pair_plan(x, w_gate, w_up, bias, activation, save_preact=False):
    """A :class:`~numba_fused.plan.Plan` of :func:`gated_linear_forward_pair` for inputs
    of this signature whose weights are read in place (validated here as there;
    non-empty; the caller checked :func:`pair_in_place`): inputs ``(x, w_gate, w_up,
    bias or None)``, outputs ``(h, z or None)``. GPU only."""
    check_activation(activation)
    save_preact = _check_flag(save_preact, "save_preact")
    rec = Recorder(_plan_inputs(*_pair_inputs(x, w_gate, w_up, bias)))
    return rec.plan(_forward_pair(*rec.inputs, activation, save_preact, ex=rec))


def pair_in_place(x, w_gate, w_up, backward=False):
    """Whether :func:`gated_linear_forward_pair` (and with ``backward``
    :func:`gated_linear_backward_pair`) uses these weights in place (valid inputs;
    the torch front end picks its plans by it)."""
    xa, ga, ua, _ = _pair_inputs(x, w_gate, w_up, None)
    return _pair_in_place(xa, ga, ua, backward)


def _check_pairs(za, lead, hid):
    if za.shape != lead + (2 * hid,):
        raise ValueError(f"preact must have shape {list(lead + (2 * hid,))} (the (gate, up) "
                         f"pairs of the forward), got {list(za.shape)}")


def gated_linear_dgrad(grad_out, weight, preact, activation="silu"):
    """The pairs' gradient ``dz`` through the next layer: ``dH = grad_out @ weight``
    (the down projection's input gradient), then ``dz = (dH u act'(g), dH act(g))``
    per pair, in the GEMM's epilogue.

    grad_out: ``[..., N]``; weight: ``[N, I]`` (the down projection); preact: the
    pairs ``[..., 2I]`` from :func:`gated_linear_forward`. Returns ``dz`` ``[..., 2I]``
    in grad_out's dtype and library.
    """
    check_activation(activation)
    return _dgrad(*_dgrad_inputs(grad_out, weight, preact), activation).owner


def _dgrad_inputs(grad_out, weight, preact):
    """(grad_out, weight, preact) of :func:`gated_linear_dgrad`, validated."""
    ga = _matrix(checks.floating_array(grad_out, "grad_out"), "grad_out")
    wa = _matrix(checks.floating_array(weight, "weight"), "weight", 2)
    za = _matrix(checks.floating_array(preact, "preact"), "preact")
    checks.check_same_dtype(ga, "grad_out", (wa, "weight"), (za, "preact"))
    checks.check_same_device(ga, "grad_out", (wa, "weight"), (za, "preact"))
    N, hid = wa.shape
    if ga.shape[-1] != N:
        raise ValueError(f"grad_out has {ga.shape[-1]} features (last dimension) but weight "
                         f"[N, I] = {list(wa.shape)} expects N = {N}")
    _check_pairs(za, ga.shape[:-1], hid)
    return ga, wa, za


def _dgrad(ga, wa, za, activation, ex=NOW):
    """``dz`` of :func:`gated_linear_dgrad` on validated KernelArrays."""
    N, hid = wa.shape
    dtype = ga.dtype
    dz = ex.alloc(ga, ga.shape[:-1] + (2 * hid,), dtype)
    M = dz.size // (2 * hid) if hid else 0
    if M and hid:
        d2 = dz.reshape((M, 2 * hid))
        _gemm("dgrad", dtype, ga.reshape((M, N)), wa, d2, za.reshape((M, 2 * hid)), d2,
              M, hid, N, N, hid, 2 * hid, ACT_CODES[activation], F_GATED, stream_handle(ga),
              ex)
    return dz


def _gated_grad(gh, za, code, ex=NOW):
    """New array: the pairs' gradient from ``gh`` ``[..., I]`` and pairs ``za``."""
    dz = ex.alloc(gh, za.shape, gh.dtype)
    n = gh.size
    if n:
        ex.launch(make_gated_grad_kernel(gh.dtype), (cdiv(n, GRAD_THREADS),), (GRAD_THREADS,),
                  stream_handle(gh), [_flat(gh), _flat(za), _flat(dz), n, code])
    return dz


def gated_act_backward(grad_h, preact, activation="silu"):
    """The pairs' gradient ``dz`` ``[..., 2I]`` of ``h = act(g) * u`` from ``grad_h``
    ``[..., I]`` and the pairs ``preact`` ``[..., 2I]`` (elementwise; float32 math, one
    rounding per value)."""
    check_activation(activation)
    ga, za = _act_inputs(grad_h, preact)
    return _gated_grad(ga, za, ACT_CODES[activation]).owner


def _act_inputs(grad_h, preact):
    """(grad_h, preact) of :func:`gated_act_backward`, validated."""
    ga = _matrix(checks.floating_array(grad_h, "grad_h"), "grad_h")
    za = _matrix(checks.floating_array(preact, "preact"), "preact")
    checks.check_same_dtype(ga, "grad_h", (za, "preact"))
    checks.check_same_device(ga, "grad_h", (za, "preact"))
    _check_pairs(za, ga.shape[:-1], ga.shape[-1])
    return ga, za


def gated_linear_backward(grad_h, x, weight, preact, activation="silu"):
    """Gradients of :func:`gated_linear_forward`: ``(grad_x, grad_weight, grad_bias)``
    (grad_weight and grad_bias interleaved as weight and bias), from ``grad_h``
    ``[..., I]``, x ``[..., K]``, weight ``[2I, K]`` and the pairs ``preact``
    ``[..., 2I]``: ``dz`` by :func:`gated_act_backward` (rounded to the dtype), then
    ``grad_x = dz @ weight``, ``grad_weight = dz^T x``, ``grad_bias = sum_m dz``."""
    check_activation(activation)
    gx, gw, gb = _grads(*_backward_inputs(grad_h, x, weight, preact), activation)
    return gx.owner, gw.owner, gb.owner


def _backward_inputs(grad_h, x, weight, preact):
    """(grad_h, x, weight, preact) of :func:`gated_linear_backward`, validated."""
    ga = _matrix(checks.floating_array(grad_h, "grad_h"), "grad_h")
    za = _matrix(checks.floating_array(preact, "preact"), "preact")
    xa, wa, _ = _linear_inputs(x, weight, None, "2I")
    checks.check_same_dtype(ga, "grad_h", (xa, "x"), (wa, "weight"), (za, "preact"))
    checks.check_same_device(ga, "grad_h", (xa, "x"), (wa, "weight"), (za, "preact"))
    hid = _pairs_of(wa, "weight")
    lead = xa.shape[:-1]
    if ga.shape != lead + (hid,):
        raise ValueError(f"grad_h must have shape {list(lead + (hid,))} (x's leading "
                         f"dimensions, weight's I), got {list(ga.shape)}")
    _check_pairs(za, lead, hid)
    return ga, xa, wa, za


def _grads(ga, xa, wa, za, activation, ex=NOW):
    """(grad_x, grad_weight, grad_bias) of :func:`gated_linear_backward` on validated
    KernelArrays."""
    N2, K = wa.shape
    dtype = ga.dtype
    lead = xa.shape[:-1]
    M = int(np.prod(lead, dtype=np.int64))
    stream = stream_handle(ga)
    dz2 = _gated_grad(ga, za, ACT_CODES[activation], ex).reshape((M, N2))
    gx = ex.alloc(ga, lead + (K,), dtype)
    if M and K:
        gx2 = gx.reshape((M, K))
        _gemm("dgrad", dtype, dz2, wa, gx2, gx2, gx2, M, K, N2, N2, K, K, 0, 0, stream, ex)
    gw, gb = _wgrad(dz2, xa.reshape((M, K)), M, N2, K, True, stream, ex)
    return gx, gw, gb


def _down_grads(gy, wd, h, za, activation, needs, ex=NOW):
    """(grad_w_down, grad_b_down, dz) of the gated MLP's backward (``needs``: flags for
    x, the gate and up weights, their bias, w_down, b_down): the down projection's
    weight gradient (None where not asked), and the pairs' gradient ``dz`` in its
    dgrad GEMM's epilogue (None where nothing upstream is asked)."""
    need_x, need_w, need_b, need_wd, need_bd = needs
    N, hid = wd.shape
    M = gy.size // N
    gwd = gbd = dz = None
    if need_wd or need_bd:
        gwd, gbd = _wgrad(gy.reshape((M, N)), h.reshape((M, hid)), M, N, hid, need_bd,
                          stream_handle(gy), ex)
    if need_x or need_w or need_b:
        dz = _dgrad(gy, wd, za, activation, ex)
    return (gwd if need_wd else None), gbd, dz


def _mlp_grads(gy, xa, wa, wd, h, za, activation, needs, ex=NOW):
    """(grad_x, grad_weight, grad_bias, grad_w_down, grad_b_down), None where not
    asked (``needs``: five flags), of the gated MLP ``down(act(g) * u)`` with
    ``(g, u)`` the pairs of ``x @ weight^T + bias``, from grad_y ``gy`` ``[..., N]``, x
    ``[..., K]``, the interleaved weight ``[2I, K]``, w_down ``[N, I]``, h ``[..., I]``
    and the pairs ``za`` ``[..., 2I]`` (validated, non-empty KernelArrays): the down
    projection's weight gradient, the pairs' gradient in the dgrad GEMM's epilogue,
    then linear_act's gradients of the gate and up projection."""
    gwd, gbd, dz = _down_grads(gy, wd, h, za, activation, needs, ex)
    gx = gw = gb = None
    if dz is not None:
        gx, gw, gb = _la_grads(dz, xa, wa, None, "none", *needs[:3], ex)
    return gx, gw, gb, gwd, gbd


def gated_linear_backward_pair(grad_h, x, w_gate, w_up, preact, activation="silu"):
    """Gradients of :func:`gated_linear_forward_pair` (with ``save_preact``): ``(grad_x,
    grad_w_gate, grad_w_up, grad_bias)`` from ``grad_h`` ``[..., I]``, x ``[..., K]``,
    w_gate and w_up ``[I, K]`` and the pairs ``preact`` ``[..., 2I]``; grad_bias ``[2I]``
    interleaved as the bias. :func:`gated_linear_backward` on ``interleave(w_gate,
    w_up)`` with its grad_weight's rows split: the pairs' gradient ``dz`` as
    :func:`gated_act_backward`'s, then :func:`pair_grads`' GEMMs (in place only with
    ``linear_act.GATED_PAIRS_EVERYWHERE``, the default)."""
    check_activation(activation)
    gh, xa, ga, ua, za = _backward_pair_inputs(grad_h, x, w_gate, w_up, preact)
    dz = _gated_grad(gh, za, ACT_CODES[activation])
    return _pair_grads_owned(dz, xa, ga, ua, True, True, True)


def pair_grads(dz, x, w_gate, w_up, need_x=True, need_w=True, need_b=True):
    """``(grad_x, grad_w_gate, grad_w_up, grad_bias)``, None where not asked, of the
    gate and up GEMM ``z = x @ interleave(w_gate, w_up)^T + bias`` from the pairs'
    gradient ``dz`` ``[..., 2I]`` (:func:`gated_linear_dgrad`'s): ``grad_x = dz @ W``,
    the rows of ``dz^T x`` split into the two weights' gradients ``[I, K]``, grad_bias
    ``sum_m dz`` ``[2I]`` interleaved. Where :func:`pair_in_place` (``backward``)
    holds, the GEMMs read the weights in place and write the two gradients directly;
    otherwise they run on the interleaved copy (then split)."""
    need_x, need_w, need_b = (_check_flag(v, n) for v, n in
                              ((need_x, "need_x"), (need_w, "need_w"), (need_b, "need_b")))
    xa, ga, ua, _ = _pair_inputs(x, w_gate, w_up, None)
    da = _matrix(checks.floating_array(dz, "dz"), "dz")
    checks.check_same_dtype(xa, "x", (da, "dz"))
    checks.check_same_device(xa, "x", (da, "dz"))
    _check_pairs(da, xa.shape[:-1], ga.shape[0])
    return _pair_grads_owned(da, xa, ga, ua, need_x, need_w, need_b)


def _pair_grads_owned(da, xa, ga, ua, need_x, need_w, need_b):
    """:func:`pair_grads` on validated KernelArrays, as arrays of the inputs' library:
    in place where :func:`_pair_in_place` (``backward``) holds, else on the interleaved
    copy, its gradient's rows then split."""
    if _pair_in_place(xa, ga, ua, backward=True):
        return tuple(None if g is None else g.owner
                     for g in _pair_grads(da, xa, ga, ua, need_x, need_w, need_b))
    dz, x = da.owner, xa.owner
    gx = gwg = gwu = gb = None
    if need_x:
        gx = linear_act_dgrad(dz, interleave(ga.owner, ua.owner), "none")
    if need_w or need_b:
        gw, gb = linear_weight_grad(dz, x, need_bias_grad=need_b)
        if need_w:
            gwg, gwu = deinterleave(gw)
    return gx, gwg, gwu, gb


def _backward_pair_inputs(grad_h, x, w_gate, w_up, preact):
    """(grad_h, x, w_gate, w_up, preact) of :func:`gated_linear_backward_pair`,
    validated."""
    xa, ga, ua, _ = _pair_inputs(x, w_gate, w_up, None)
    gh = _matrix(checks.floating_array(grad_h, "grad_h"), "grad_h")
    za = _matrix(checks.floating_array(preact, "preact"), "preact")
    checks.check_same_dtype(xa, "x", (gh, "grad_h"), (za, "preact"))
    checks.check_same_device(xa, "x", (gh, "grad_h"), (za, "preact"))
    hid = ga.shape[0]
    lead = xa.shape[:-1]
    if gh.shape != lead + (hid,):
        raise ValueError(f"grad_h must have shape {list(lead + (hid,))} (x's leading "
                         f"dimensions, w_gate's I), got {list(gh.shape)}")
    _check_pairs(za, lead, hid)
    return gh, xa, ga, ua, za


def _pair_grads(dz, xa, ga, ua, need_x, need_w, need_b, ex=NOW):
    """(grad_x, grad_w_gate, grad_w_up, grad_bias), None where not asked, of the gate
    and up GEMM from the pairs' gradient ``dz`` ``[..., 2I]``, x ``[..., K]`` and the
    weights ``[I, K]`` (validated KernelArrays that :func:`_pair_in_place` accepts
    with ``backward``): ``grad_x = dz @ W`` and ``dz^T x`` with W's interleaved rows
    read from, and written to, the two arrays; grad_bias ``[2I]`` interleaved."""
    hid, K = ga.shape
    dtype = dz.dtype
    M = dz.size // (2 * hid)
    stream = stream_handle(dz)
    dz2 = dz.reshape((M, 2 * hid))
    gx = gwg = gwu = gb = None
    if need_x:
        gx = ex.alloc(dz, xa.shape, dtype)
        gemm_pair_dgrad(dtype, dz2, ga, ua, gx.reshape((M, K)), M, K, 2 * hid, stream, ex)
    if need_w or need_b:
        gwg = ex.alloc(dz, (hid, K), dtype)
        gwu = ex.alloc(dz, (hid, K), dtype)
        gb = ex.alloc(dz, (2 * hid,), dtype) if need_b else None
        gemm_pair_wgrad(dtype, dz2, xa.reshape((M, K)), gwg, gwu, gb, M, 2 * hid, K, stream,
                        ex)
    if not need_w:
        gwg = gwu = None
    return gx, gwg, gwu, gb


def _mlp_grads_pair(gy, xa, ga, ua, wd, h, za, activation, needs, ex=NOW):
    """(grad_x, grad_w_gate, grad_w_up, grad_bias, grad_w_down, grad_b_down), None where
    not asked (``needs``: flags for x, the two weights, their bias, w_down, b_down), of
    the gated MLP as :func:`_mlp_grads`, the gate and up weights ``[I, K]`` used in
    place (:func:`_pair_in_place` with ``backward``)."""
    gwd, gbd, dz = _down_grads(gy, wd, h, za, activation, needs, ex)
    gx = gwg = gwu = gb = None
    if dz is not None:
        gx, gwg, gwu, gb = _pair_grads(dz, xa, ga, ua, *needs[:3], ex)
    return gx, gwg, gwu, gb, gwd, gbd


def forward_plan(x, weight, bias, activation, save_preact):
    """A :class:`~numba_fused.plan.Plan` of :func:`gated_linear_forward` for inputs of
    this signature (validated here as there; non-empty): inputs ``(x, weight, bias or
    None)``, outputs ``(h, z or None)``. GPU only."""
    check_activation(activation)
    save_preact = _check_flag(save_preact, "save_preact")
    rec = Recorder(_plan_inputs(*_forward_inputs(x, weight, bias)))
    return rec.plan(_forward(*rec.inputs, activation, save_preact, ex=rec))


def dgrad_plan(grad_out, weight, preact, activation):
    """A :class:`~numba_fused.plan.Plan` of :func:`gated_linear_dgrad` (validated here
    as there; non-empty): inputs ``(grad_out, weight, preact)``, outputs ``(dz,)``.
    GPU only."""
    check_activation(activation)
    rec = Recorder(_plan_inputs(*_dgrad_inputs(grad_out, weight, preact)))
    return rec.plan((_dgrad(*rec.inputs, activation, ex=rec),))


def act_backward_plan(grad_h, preact, activation):
    """A :class:`~numba_fused.plan.Plan` of :func:`gated_act_backward` (validated here
    as there; non-empty): inputs ``(grad_h, preact)``, outputs ``(dz,)``. GPU only."""
    check_activation(activation)
    rec = Recorder(_plan_inputs(*_act_inputs(grad_h, preact)))
    return rec.plan((_gated_grad(*rec.inputs, ACT_CODES[activation], ex=rec),))


def backward_plan(grad_h, x, weight, preact, activation):
    """A :class:`~numba_fused.plan.Plan` of :func:`gated_linear_backward` (validated
    here as there; non-empty): inputs ``(grad_h, x, weight, preact)``, outputs
    ``(grad_x, grad_weight, grad_bias)``. GPU only."""
    check_activation(activation)
    rec = Recorder(_plan_inputs(*_backward_inputs(grad_h, x, weight, preact)))
    return rec.plan(_grads(*rec.inputs, activation, ex=rec))


def backward_pair_plan(grad_h, x, w_gate, w_up, preact, activation):
    """A :class:`~numba_fused.plan.Plan` of :func:`gated_linear_backward_pair` for
    inputs whose weights :func:`pair_in_place` (``backward``) accepts (validated here
    as there; non-empty): inputs ``(grad_h, x, w_gate, w_up, preact)``, outputs
    ``(grad_x, grad_w_gate, grad_w_up, grad_bias)``. GPU only."""
    check_activation(activation)
    rec = Recorder(_plan_inputs(*_backward_pair_inputs(grad_h, x, w_gate, w_up, preact)))
    gh, xa, ga, ua, za = rec.inputs
    dz = _gated_grad(gh, za, ACT_CODES[activation], ex=rec)
    return rec.plan(_pair_grads(dz, xa, ga, ua, True, True, True, ex=rec))


def mlp_backward_pair_plan(grad_y, x, w_gate, w_up, w_down, h, preact, activation, needs):
    """As :func:`mlp_backward_plan`, the gate and up weights used in place
    (:func:`pair_in_place` with ``backward``): inputs ``(grad_y, x, w_gate, w_up,
    w_down, h, preact)``, outputs as :func:`_mlp_grads_pair`'. GPU only."""
    rec = Recorder(_plan_inputs(grad_y, x, w_gate, w_up, w_down, h, preact))
    return rec.plan(_mlp_grads_pair(*rec.inputs, activation, tuple(needs), ex=rec))


def mlp_backward_plan(grad_y, x, weight, w_down, h, preact, activation, needs):
    """A :class:`~numba_fused.plan.Plan` of the gated MLP's backward (``needs``: flags
    for x, the interleaved weight, its bias, w_down, b_down) for inputs of this
    signature, already validated by the array-level functions (contiguous, one dtype
    and device, non-empty): inputs ``(grad_y, x, weight, w_down, h, preact)``, outputs
    as :func:`_mlp_grads`'. GPU only."""
    rec = Recorder(_plan_inputs(grad_y, x, weight, w_down, h, preact))
    return rec.plan(_mlp_grads(*rec.inputs, activation, tuple(needs), ex=rec))


# ---------------------------------------------------------------------------
# float64 references
# ---------------------------------------------------------------------------


def gated_linear_ref(x, weight, bias=None, activation="silu", save_preact=False):
    """float64 NumPy reference of :func:`gated_linear_forward`."""
    x, w, b = dtypes.to_float64(x), dtypes.to_float64(weight), dtypes.to_float64(bias)
    z = x @ w.T
    if b is not None:
        z = z + b
    h = act_ref(activation, z[..., 0::2]) * z[..., 1::2]
    return (h, z) if save_preact else h


def _pairs_grad_ref(dh, z, activation):
    g, u = z[..., 0::2], z[..., 1::2]
    dz = np.empty(z.shape)
    dz[..., 0::2] = dh * u * act_grad_ref(activation, g)
    dz[..., 1::2] = dh * act_ref(activation, g)
    return dz


def gated_linear_dgrad_ref(grad_out, weight, preact, activation="silu"):
    """float64 reference of :func:`gated_linear_dgrad`."""
    g64 = dtypes.to_float64(grad_out) @ dtypes.to_float64(weight)
    return _pairs_grad_ref(g64, dtypes.to_float64(preact), activation)


def gated_linear_backward_ref(grad_h, x, weight, preact, activation="silu"):
    """float64 reference of :func:`gated_linear_backward`: (grad_x, grad_weight,
    grad_bias)."""
    dz = _pairs_grad_ref(dtypes.to_float64(grad_h), dtypes.to_float64(preact), activation)
    x, w = dtypes.to_float64(x), dtypes.to_float64(weight)
    dz2 = dz.reshape(-1, w.shape[0])
    return dz @ w, dz2.T @ x.reshape(-1, w.shape[1]), dz2.sum(axis=0)


def shipped_kernels():
    """The elementwise kernel of each dtype (the GEMMs are linear_act's)."""
    for dtype in dtypes.DTYPES:
        yield make_gated_grad_kernel(dtype)
