"""Fused linear + activation: forward, dgrad, backward, the torch front end.

Compared with float64 references (``numba_fused.linear_act.*_ref``) by relative
error within docs/API.md's tolerances, and with torch in the same dtype: our error must be
within 2x of torch's own (or within one unit roundoff of the dtype, the least any
implementation can promise for a single rounded output, when torch happens to be
nearly exact on a tiny problem). Under the simulator shapes are tiny and ragged
against the simulator's 32x32x16 tiles; larger ragged shapes run on the GPU only.
"""

import importlib
import math
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numba import cuda, types

import numba_fused as nf
from interop.dlpack import poison_outputs
from numba_fused import linear_act as la
from numba_fused.activations import ACTIVATIONS
from numba_fused.dtypes import to_float64
from tests.util import (DTYPES, SIMULATOR, assert_close, compile_backend, compiled_targets, device,
                        rel_err, torch_act, torch_dtype)

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}

# (leading shape, K, N): M, N, K in {1, primes, non powers of two}, ragged vs the tiles.
SIM_SHAPES = [((1,), 1, 1), ((17,), 24, 40), ((5,), 13, 127), ((2, 3, 7), 40, 33), ((33,), 17, 16)]
GPU_SHAPES = [((1000,), 1000, 127), ((127,), 17, 1000), ((2, 513), 1000, 384),
              ((4096,), 512, 1024), ((1,), 4096, 4096), ((300,), 8, 4104)]
SHAPES = SIM_SHAPES if SIMULATOR else SIM_SHAPES + GPU_SHAPES


def _rand(shape, dtype, gen, scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(torch_dtype(dtype)).to(device())


def _inputs(lead, K, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = _rand(lead + (K,), dtype, g)
    w = _rand((N, K), dtype, g, 1.0 / math.sqrt(max(K, 1)))
    b = _rand((N,), dtype, g)
    return x, w, b


def _assert_vs_torch(ours, theirs, ref, dtype, what):
    """Ours within 2x torch's error in the same dtype (floor: one unit roundoff)."""
    if theirs is None:
        return
    ours_err = rel_err(ours, ref)
    torch_err = rel_err(theirs, ref)
    bound = max(2.0 * torch_err, UNIT_ROUNDOFF[dtype])
    assert ours_err <= bound, f"{what}: error {ours_err:.3e} vs torch {torch_err:.3e} ({dtype})"


def _torch_or_none(fn):
    """torch's result in the same dtype, or None where torch's CPU lacks the op."""
    try:
        return fn()
    except RuntimeError:
        if SIMULATOR:
            return None
        raise


def _shape_id(s):
    lead, K, N = s
    return f"{'x'.join(map(str, lead))}_K{K}_N{N}"


# ---- forward -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_forward_every_activation(dtype, activation):
    lead, K, N = (17,), 24, 40
    x, w, b = _inputs(lead, K, N, dtype, seed=ACTIVATIONS.index(activation))
    with poison_outputs():
        y, pre = nf.linear_act_forward(x, w, b, activation, save_preact=True)
    ref_y, ref_pre = la.linear_act_ref(x, w, b, activation, save_preact=True)
    assert y.shape == lead + (N,) and y.dtype == x.dtype and pre.dtype == x.dtype
    assert_close(pre, ref_pre, dtype, "preact")
    assert_close(y, ref_y, dtype, f"y ({activation})")
    theirs = _torch_or_none(lambda: torch_act(activation)(F.linear(x, w, b)))
    _assert_vs_torch(y, theirs, ref_y, dtype, f"y ({activation})")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("save_preact", [True, False], ids=["save", "nosave"])
def test_forward_ragged_shapes_bias_and_preact(dtype, shape, bias, save_preact):
    lead, K, N = shape
    x, w, b = _inputs(lead, K, N, dtype, seed=K + N)
    b = b if bias else None
    act = "gelu_tanh"
    with poison_outputs():
        res = nf.linear_act_forward(x, w, b, act, save_preact=save_preact)
    y, pre = res if save_preact else (res, None)
    ref_y, ref_pre = la.linear_act_ref(x, w, b, act, save_preact=True)
    assert_close(y, ref_y, dtype, "y")
    if save_preact:
        assert pre.shape == y.shape
        assert_close(pre, ref_pre, dtype, "preact")
    theirs = _torch_or_none(lambda: torch_act(act)(F.linear(x, w, b)))
    _assert_vs_torch(y, theirs, ref_y, dtype, "y")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_forward_unaligned_views_take_the_element_path(dtype):
    """An operand that does not start on a 16-byte boundary falls back to element
    copies into shared memory: bit-identical results."""
    g = torch.Generator().manual_seed(7)
    M, K, N = 9, 16, 24
    buf = _rand((M * K + 1,), dtype, g)
    x = buf[1:].view(M, K)
    w = _rand((N, K), dtype, g, 0.25)
    b = _rand((N,), dtype, g)
    y = nf.linear_act_forward(x, w, b, "relu")
    y_aligned = nf.linear_act_forward(x.clone(), w, b, "relu")
    assert torch.equal(y.cpu(), y_aligned.cpu())
    assert_close(y, la.linear_act_ref(x, w, b, "relu"), dtype, "y")


def _spy_restrides(monkeypatch):
    """A list that collects (rows, cols, ld) of every operand _gemm copies to aligned rows."""
    seen = []
    real = la._restrided

    def spy(dtype, g, rows, cols, ld, *more):
        seen.append((rows, cols, ld))
        return real(dtype, g, rows, cols, ld, *more)

    monkeypatch.setattr(la, "_restrided", spy)
    return seen


def _all_passes(x, w, b, gy, pre_in, act):
    """Forward (with preact), dgrad (act' of ``pre_in``) and backward, as tensors."""
    y, pre = nf.linear_act_forward(x, w, b, act, save_preact=True)
    d = nf.linear_act_dgrad(gy, w, act, pre_in)
    return (y, pre, d) + tuple(nf.linear_act_backward(gy, x, w, pre, act))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_unaligned_rows_are_restrided_bit_for_bit(dtype, monkeypatch):
    """16-bit operands whose rows do not start 16-byte aligned (K = 23 and N = 17
    elements a row; a view one element into its buffer) are copied to aligned rows
    for GEMMs of at least RESTRIDE_MIN_MACS multiply-adds (0 here): each role's
    operands, with their true extents; the results are bit for bit those of the
    element loads and within tolerance of float64."""
    gen = torch.Generator().manual_seed(31)
    M, K, N = 37, 23, 17
    x, w, b = _inputs((M,), K, N, dtype, seed=30)
    gy = _rand((M, N), dtype, gen)
    pre_in = _rand((M, K), dtype, gen)
    act = "gelu_tanh"
    monkeypatch.setattr(la, "RESTRIDE_MIN_MACS", 1 << 62)
    plain = _all_passes(x, w, b, gy, pre_in, act)
    monkeypatch.setattr(la, "RESTRIDE_MIN_MACS", 0)
    seen = _spy_restrides(monkeypatch)
    with poison_outputs():
        ours = _all_passes(x, w, b, gy, pre_in, act)
    # fwd: x [M, K], weight [N, K]; dgrad: grad [M, N], weight [N, K] read as [Kg = N,
    # Ng = K]; backward: grad_z [M, N] written once with aligned rows (act' fused) for
    # both GEMMs, then dgrad's weight and wgrad's x [M, K].
    assert seen == [(M, K, K), (N, K, K), (M, N, N), (N, K, K), (M, N, N), (N, K, K),
                    (M, K, K)]
    for a, p in zip(ours, plain):
        assert torch.equal(a.cpu(), p.cpu())
    ref_y, ref_pre = la.linear_act_ref(x, w, b, act, save_preact=True)
    assert_close(ours[0], ref_y, dtype, "y")
    assert_close(ours[2], la.linear_act_dgrad_ref(gy, w, act, pre_in), dtype, "dgrad")
    for got, want, what in zip(ours[3:], la.linear_act_backward_ref(gy, x, w, ours[1], act),
                               ("grad_x", "grad_weight", "grad_bias")):
        assert_close(got, want, dtype, what)
    # An aligned row length in a view that starts 2 bytes into its buffer.
    buf = _rand((M * 16 + 1,), dtype, gen)
    xv = buf[1:].view(M, 16)
    w16 = _rand((N, 16), dtype, gen, 0.25)
    seen.clear()
    y = nf.linear_act_forward(xv, w16, b, "relu")
    assert seen == [(M, 16, 16)]
    assert torch.equal(y.cpu(), nf.linear_act_forward(xv.clone(), w16, b, "relu").cpu())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fuse_act", [False, True], ids=["copy", "act"])
def test_restride_kernel_copies_and_zero_pads(dtype, fuse_act):
    """make_restride_kernel: rows of ``cols`` elements from stride ``lds`` to ``ldd``,
    bit for bit (or times act'(pre), as the activation-gradient kernel rounds it), the
    padding zeroed (poisoned before); more rows than the grid's y extent."""
    from interop.dlpack import as_kernel_array

    rows, cols, lds, ldd, threads = 7, 13, 19, 16, 4
    gen = torch.Generator().manual_seed(32)
    src = _rand((rows * lds,), dtype, gen)
    pre = _rand((rows * lds,), dtype, gen)
    dst = torch.full((rows * ldd,), float("nan"), dtype=src.dtype, device=src.device)
    code = la.ACT_CODES["gelu_tanh"]
    k = la.make_restride_kernel(dtype, fuse_act)
    grid = (-(-ldd // (threads * la.RESTRIDE_PER_THREAD)), 3)
    k.launch(grid, (threads,), 0, [as_kernel_array(t, n) for t, n in
                                   ((src, "src"), (pre, "pre"), (dst, "dst"))]
             + [rows, cols, lds, ldd, code])
    got = dst.view(rows, ldd).cpu()
    want = src.view(rows, lds)[:, :cols]
    if fuse_act:
        want = nf.activation_backward(want.contiguous(),
                                      pre.view(rows, lds)[:, :cols].contiguous(), "gelu_tanh")
    assert torch.equal(got[:, :cols], want.cpu())
    assert not got[:, cols:].float().any()


def _forward_backward_close(x, w, b, activation, dtype, seed):
    """The forward (with its preact) and the backward of (x, w, b) against the float64
    references; returns the random output gradient used."""
    y, pre = nf.linear_act_forward(x, w, b, activation, save_preact=True)
    assert_close(y, la.linear_act_ref(x, w, b, activation), dtype, "y")
    gy = _rand(y.shape, dtype, torch.Generator().manual_seed(seed))
    gx, gw, gb = nf.linear_act_backward(gy, x, w, pre, activation)
    rx, rw, rb = la.linear_act_backward_ref(gy, x, w, pre, activation)
    assert_close(gx, rx, dtype, "grad_x")
    assert_close(gw, rw, dtype, "grad_weight")
    assert_close(gb, rb, dtype, "grad_bias")
    return gy


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cfg", [la.GemmConfig(32, 64, 32, 16, 32, 2, 1),
                                 la.GemmConfig(16, 32, 16, 16, 16, 4, 3),
                                 la.GemmConfig(64, 16, 32, 32, 16, 3, 1),
                                 la.GemmConfig(16, 32, 128, 16, 16, 4, 8)],
                         ids=lambda c: "x".join(map(str, c)))
def test_other_tilings(dtype, cfg, monkeypatch):
    """Other block / warp tiles, pipeline depths and group sizes (the launcher's
    choice is patched): all roles, including the fused bias gradient."""
    monkeypatch.setattr(la, "_pick_config", lambda Mg, Ng, device=None: cfg)
    x, w, b = _inputs((37,), 40, 33, dtype, seed=11)
    gy = _forward_backward_close(x, w, b, "squared_relu", dtype, seed=12)
    d = nf.linear_act_dgrad(gy, w, "gelu", x)
    assert_close(d, la.linear_act_dgrad_ref(gy, w, "gelu", x), dtype, "dgrad")
    # The gated forward reading its two weights in place (K = 40: 16-byte rows).
    from numba_fused import gated_linear as gl

    wg, wu = w[0:32:2].contiguous(), w[1:32:2].contiguous()
    assert gl.pair_in_place(x, wg, wu)
    assert torch.equal(gl.gated_linear_forward_pair(x, wg, wu, b[:32], "silu"),
                       nf.gated_linear_forward(x, gl.interleave(wg, wu), b[:32], "silu"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cfg", [la.GemmConfig(16, 32, 128, 16, 16, 4, 8),
                                 la.GemmConfig(32, 32, 64, 32, 32, 2, 1)],
                         ids=lambda c: "x".join(map(str, c)))
def test_tilings_whose_loader_rows_step_below_the_swizzle_period(dtype, cfg, monkeypatch):
    """Few threads for a long k-tile (64 threads on 16-chunk rows, 32 on 8-chunk
    rows): a thread's chunks lie 4 rows apart, so each has its own XOR swizzle (a
    single one for all put three in four chunks in the wrong place, relative error ~1
    on the GPU). Whole tiles (K a multiple of bk) take the unbounded copy path."""
    monkeypatch.setattr(la, "_pick_config", lambda Mg, Ng, device=None: cfg)
    x, w, b = _inputs((32,), 256, 64, dtype, seed=5)
    _forward_backward_close(x, w, b, "gelu", dtype, seed=6)


def test_empty_and_k0():
    dtype = "float16"
    g = torch.Generator().manual_seed(3)
    w = _rand((5, 4), dtype, g)
    b = _rand((5,), dtype, g)
    y = nf.linear_act_forward(_rand((0, 4), dtype, g), w, b, "relu")
    assert y.shape == (0, 5)
    y = nf.linear_act_forward(_rand((3, 4), dtype, g), _rand((0, 4), dtype, g), None)
    assert y.shape == (3, 0)
    # K = 0: the empty sum leaves act(bias) in every row.
    y = nf.linear_act_forward(_rand((3, 0), dtype, g), _rand((5, 0), dtype, g), b, "relu")
    torch.testing.assert_close(y.cpu().float(), F.relu(b.cpu().float()).expand(3, 5))
    gx, gw, gb = nf.linear_act_backward(_rand((0, 5), dtype, g), _rand((0, 4), dtype, g), w)
    assert gx.shape == (0, 4)
    assert not gw.cpu().float().any() and not gb.cpu().float().any()
    assert nf.linear_act_dgrad(_rand((0, 5), dtype, g), w).shape == (0, 4)


# ---- dgrad -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_dgrad_fuses_activation_gradient(dtype, activation):
    """(grad_out @ W) * act'(preact): the seed's kernel_bwd, as a FusedMLP uses it."""
    g = torch.Generator().manual_seed(20 + ACTIVATIONS.index(activation))
    lead, N, K = (3, 7), 40, 33   # grad_out [..., N], weight [N, K], preact [..., K]
    go = _rand(lead + (N,), dtype, g)
    w = _rand((N, K), dtype, g, 1.0 / math.sqrt(N))
    pre = _rand(lead + (K,), dtype, g)
    with poison_outputs():
        d = nf.linear_act_dgrad(go, w, activation, pre if activation != "none" else None)
    ref = la.linear_act_dgrad_ref(go, w, activation, pre)
    assert d.shape == lead + (K,)
    assert_close(d, ref, dtype, f"dgrad ({activation})")
    theirs = _torch_or_none(lambda: _torch_dgrad(go, w, pre, activation))
    _assert_vs_torch(d, theirs, ref, dtype, f"dgrad ({activation})")


def _torch_dgrad(go, w, pre, activation):
    z = pre.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        a = torch_act(activation)(z)
        (da,) = torch.autograd.grad(a, z, torch.ones_like(a))
    return (go @ w) * da


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_dgrad_ragged_shapes(dtype, shape):
    lead, N, K = shape
    g = torch.Generator().manual_seed(N * 7 + K)
    go = _rand(lead + (N,), dtype, g)
    w = _rand((N, K), dtype, g, 1.0 / math.sqrt(max(N, 1)))
    pre = _rand(lead + (K,), dtype, g)
    with poison_outputs():
        d = nf.linear_act_dgrad(go, w, "gelu", pre)
    assert_close(d, la.linear_act_dgrad_ref(go, w, "gelu", pre), dtype, "dgrad")


# ---- backward ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["none", "relu", "gelu_tanh", "leaky_relu"])
@pytest.mark.parametrize("shape", SHAPES[:3] if SIMULATOR else SHAPES, ids=_shape_id)
def test_backward(dtype, activation, shape):
    lead, K, N = shape
    x, w, b = _inputs(lead, K, N, dtype, seed=40 + K)
    y, pre = nf.linear_act_forward(x, w, b, activation, save_preact=True)
    go = _rand(y.shape, dtype, torch.Generator().manual_seed(41))
    with poison_outputs():
        gx, gw, gb = nf.linear_act_backward(go, x, w, pre if activation != "none" else None,
                                            activation)
    rx, rw, rb = la.linear_act_backward_ref(go, x, w, pre, activation)
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == (N,)
    assert_close(gx, rx, dtype, "grad_x")
    assert_close(gw, rw, dtype, "grad_weight")
    assert_close(gb, rb, dtype, "grad_bias")


@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_grad_without_bias_and_activation_backward(dtype):
    g = torch.Generator().manual_seed(50)
    gz = _rand((19, 24), dtype, g)
    x = _rand((19, 40), dtype, g)
    gw, gb = la.linear_weight_grad(gz, x, need_bias_grad=False)
    assert gb is None
    assert_close(gw, to_float64(gz).T @ to_float64(x), dtype, "grad_weight")
    pre = _rand((19, 24), dtype, g)
    out = la.activation_backward(gz, pre, "gelu")
    from numba_fused.activations import act_grad_ref

    assert_close(out, to_float64(gz) * act_grad_ref("gelu", to_float64(pre)), dtype, "act grad")


def test_deterministic_backward():
    x, w, b = _inputs((45,), 40, 36, "bfloat16", seed=60)
    y, pre = nf.linear_act_forward(x, w, b, "gelu", save_preact=True)
    go = _rand(y.shape, "bfloat16", torch.Generator().manual_seed(61))
    first = nf.linear_act_backward(go, x, w, pre, "gelu")
    second = nf.linear_act_backward(go, x, w, pre, "gelu")
    for a, c in zip(first, second):
        assert torch.equal(a.cpu(), c.cpu())


# ---- bad input -----------------------------------------------------------------------


def test_bad_inputs_raise_naming_the_argument():
    g = torch.Generator().manual_seed(70)
    x = _rand((4, 8), "float16", g)
    w = _rand((6, 8), "float16", g)
    b = _rand((6,), "float16", g)
    with pytest.raises(ValueError, match="activation"):
        nf.linear_act_forward(x, w, b, "swish")
    with pytest.raises(TypeError, match="weight"):
        nf.linear_act_forward(x, w.float(), b)
    with pytest.raises(TypeError, match="bias"):
        nf.linear_act_forward(x, w, b.to(torch.bfloat16))
    with pytest.raises(ValueError, match="x has 7 features"):
        nf.linear_act_forward(x[:, :7].contiguous(), w, b)
    with pytest.raises(ValueError, match="bias must have shape"):
        nf.linear_act_forward(x, w, b[:5])
    with pytest.raises(ValueError, match="weight must be 2-D"):
        nf.linear_act_forward(x, w[None], b)
    with pytest.raises(ValueError, match="x must be contiguous"):
        nf.linear_act_forward(_rand((8, 4), "float16", g).t(), w, b)
    with pytest.raises(TypeError, match="save_preact"):
        nf.linear_act_forward(x, w, b, save_preact=1)
    with pytest.raises(TypeError, match="x must have dtype"):
        nf.linear_act_forward(x.to(torch.int32), w, b)
    with pytest.raises(TypeError, match="x is required"):
        nf.linear_act_forward(None, w, b)
    go = _rand((4, 6), "float16", g)
    with pytest.raises(ValueError, match="preact is required"):
        nf.linear_act_dgrad(go, w, "gelu")
    with pytest.raises(ValueError, match="preact must have shape"):
        nf.linear_act_dgrad(go, w, "gelu", go)
    with pytest.raises(ValueError, match="grad_out has 8 features"):
        nf.linear_act_dgrad(x, w)
    with pytest.raises(ValueError, match="grad_out must have shape"):
        nf.linear_act_backward(go[:3].contiguous(), x, w)
    with pytest.raises(ValueError, match="preact must have grad_out's shape"):
        nf.linear_act_backward(go, x, w, x, "relu")
    with pytest.raises(ValueError, match="preact is required"):
        nf.linear_act_backward(go, x, w, None, "relu")


@pytest.mark.skipif(SIMULATOR, reason="device checks need CUDA tensors")
def test_cpu_tensor_rejected_on_gpu():
    g = torch.Generator().manual_seed(71)
    w = _rand((6, 8), "float16", g)
    with pytest.raises(TypeError, match="x must be a CUDA tensor"):
        nf.linear_act_forward(torch.randn(4, 8).half(), w)


# ---- torch front end -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["gelu_tanh", "relu", "none"])
def test_torch_fused_mlp_gradients_match_torch_mlp(dtype, activation):
    from interop.torch.linear_act import FusedMLP

    torch.manual_seed(80)
    tdt = torch_dtype(dtype)
    mlp = FusedMLP(24, 40, 17, activation=activation).to(device=device(), dtype=tdt)
    x = _rand((2, 9, 24), dtype, torch.Generator().manual_seed(81))
    gy = _rand((2, 9, 17), dtype, torch.Generator().manual_seed(82))
    xs = x.clone().requires_grad_(True)
    y = mlp(xs)
    y.backward(gy)

    # float64 reference of the same parameters, torch autograd.
    p64 = {n: p.detach().cpu().double().requires_grad_(True) for n, p in mlp.named_parameters()}
    x64 = x.detach().cpu().double().requires_grad_(True)
    h = torch_act(activation)(F.linear(x64, p64["fc1.weight"], p64["fc1.bias"]))
    y64 = F.linear(h, p64["fc2.weight"], p64["fc2.bias"])
    y64.backward(gy.cpu().double())
    assert_close(y, y64, dtype, "y")
    assert_close(xs.grad, x64.grad, dtype, "grad x")
    for n, p in mlp.named_parameters():
        assert_close(p.grad, p64[n].grad, dtype, f"grad {n}")

    # torch's own MLP in the same dtype, same parameters.
    def torch_mlp():
        pt = {n: p.detach().clone().requires_grad_(True) for n, p in mlp.named_parameters()}
        xt = x.clone().requires_grad_(True)
        yt = F.linear(torch_act(activation)(F.linear(xt, pt["fc1.weight"], pt["fc1.bias"])),
                      pt["fc2.weight"], pt["fc2.bias"])
        yt.backward(gy)
        return yt, xt.grad, {n: p.grad for n, p in pt.items()}

    theirs = _torch_or_none(torch_mlp)
    if theirs is not None:
        yt, gxt, gpt = theirs
        _assert_vs_torch(y, yt, y64, dtype, "y")
        _assert_vs_torch(xs.grad, gxt, x64.grad, dtype, "grad x")
        for n, p in mlp.named_parameters():
            _assert_vs_torch(p.grad, gpt[n], p64[n].grad, dtype, f"grad {n}")


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_torch_linear_act_and_module(dtype):
    from interop.torch.linear_act import FusedLinearAct, linear_act

    torch.manual_seed(90)
    tdt = torch_dtype(dtype)
    lin = FusedLinearAct(20, 33, activation="squared_relu").to(device=device(), dtype=tdt)
    assert "squared_relu" in repr(lin)
    x = _rand((3, 5, 20), dtype, torch.Generator().manual_seed(91)).requires_grad_(True)
    y = lin(x)
    gy = _rand(y.shape, dtype, torch.Generator().manual_seed(92))
    y.backward(gy)
    x64 = x.detach().cpu().double().requires_grad_(True)
    w64 = lin.weight.detach().cpu().double().requires_grad_(True)
    b64 = lin.bias.detach().cpu().double().requires_grad_(True)
    y64 = F.relu(F.linear(x64, w64, b64)) ** 2
    y64.backward(gy.cpu().double())
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, x64.grad, dtype, "grad x")
    assert_close(lin.weight.grad, w64.grad, dtype, "grad w")
    assert_close(lin.bias.grad, b64.grad, dtype, "grad b")
    # Functional form, no bias, weight only requiring grad.
    w = lin.weight.detach().clone().requires_grad_(True)
    out = linear_act(x.detach(), w, None, "leaky_relu")
    out.sum().backward()
    assert w.grad is not None and w.grad.shape == w.shape
    with pytest.raises(ValueError, match="activation"):
        linear_act(x, w, None, "tanh")


# ---- the torch.compile route: custom ops (issue #15) ----------------------------------


@pytest.mark.parametrize("activation", ["gelu_tanh", "none"])
@pytest.mark.parametrize("needs", ["all", "x_only", "no_x"])
def test_custom_ops_opcheck(needs, activation):
    """torch.library.opcheck of linear_act_fwd/bwd and mlp_fwd/bwd (forward ops with
    their autograd), the backward ops over the gradients asked for."""
    tla = importlib.import_module("interop.torch.linear_act")

    g = torch.Generator().manual_seed(93)
    x, w1, b1, w2, b2 = (_rand(s, "float32", g) for s in ((2, 3, 12), (16, 12), (16,),
                                                            (9, 16), (9,)))
    want = {"all": (True,) * 5, "x_only": (True, False, False, False, False),
            "no_x": (False, True, True, True, True)}[needs]
    leaves = [t.clone().requires_grad_(r) for t, r in zip((x, w1, b1, w2, b2), want)]
    torch.library.opcheck(tla._linear_act_fwd, (*leaves[:3], activation))
    torch.library.opcheck(tla._mlp_fwd, (*leaves, activation))
    with torch.no_grad():
        pre = tla._linear_act_fwd(x, w1, b1, activation)[-1]
        _, h, *z1 = tla._mlp_fwd(x, w1, b1, w2, b2, activation)
    z1 = z1[0] if z1 else None
    gy1, gy2 = _rand((2, 3, 16), "float32", g), _rand((2, 3, 9), "float32", g)
    torch.library.opcheck(tla._linear_act_bwd, (gy1, x, w1, pre if activation != "none"
                                                else None, activation, *want[:3]))
    torch.library.opcheck(tla._mlp_bwd, (gy2, x, w1, w2, h, z1, activation, *want))


def test_torch_compile_fullgraph_matches_eager():
    """torch.compile(fullgraph=True) of FusedLinearAct and FusedMLP: one graph holding
    our ops; output and every gradient equal the eager route's (same kernels, same
    plans)."""
    import torch._dynamo

    from interop.torch.linear_act import FusedLinearAct, FusedMLP

    torch._dynamo.reset()
    torch.manual_seed(94)
    lin = FusedLinearAct(12, 16, activation="squared_relu").to(device())
    mlp = FusedMLP(16, 24, 12, activation="gelu").to(device())
    x = _rand((2, 5, 12), "float32", torch.Generator().manual_seed(95))
    gy = _rand((2, 5, 12), "float32", torch.Generator().manual_seed(96))

    def f(x):
        return mlp(lin(x)) * 2.0

    targets = compiled_targets(f, x)
    assert {"numba_fused.linear_act_fwd.default", "numba_fused.mlp_fwd.default"} <= targets
    params = list(lin.parameters()) + list(mlp.parameters())
    runs = []
    for run in (f, torch.compile(f, backend=compile_backend(), fullgraph=True)):
        for p in params:
            p.grad = None
        xs = x.clone().requires_grad_()
        y = run(xs)
        y.backward(gy)
        runs.append([y.detach(), xs.grad] + [p.grad for p in params])
    for i, (a, b) in enumerate(zip(*runs)):
        assert torch.equal(a, b), i


@pytest.mark.gpu
def test_cupy_front_end():
    cp = pytest.importorskip("cupy")
    cla = importlib.import_module("interop.cupy.linear_act")

    rng = np.random.default_rng(100)
    x = cp.asarray(rng.standard_normal((37, 64)).astype(np.float16))
    w = cp.asarray((rng.standard_normal((48, 64)) / 8).astype(np.float16))
    b = cp.asarray(rng.standard_normal(48).astype(np.float16))
    y, pre = cla.linear_act_forward(x, w, b, "gelu", save_preact=True)
    assert isinstance(y, cp.ndarray) and y.dtype == np.float16
    assert_close(y, la.linear_act_ref(x.get(), w.get(), b.get(), "gelu"), "float16", "y")
    gy = cp.asarray(rng.standard_normal((37, 48)).astype(np.float16))
    gx, gw, gb = cla.linear_act_backward(gy, x, w, pre, "gelu")
    rx, rw, rb = la.linear_act_backward_ref(gy.get(), x.get(), w.get(), pre.get(), "gelu")
    assert_close(gx, rx, "float16", "grad_x")
    assert_close(gw, rw, "float16", "grad_w")
    assert_close(gb, rb, "float16", "grad_b")
    with pytest.raises(TypeError, match="cupy"):
        cla.linear_act(np.zeros((2, 2), np.float16), w)


# ---- GPU: large shapes against torch, PTX ------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_large_forward_backward_vs_torch(dtype):
    """A shape that takes the large tiling (many 128x128 tiles) and is ragged."""
    x, w, b = _inputs((2047,), 1032, 3000, dtype, seed=110)
    y, pre = nf.linear_act_forward(x, w, b, "gelu_tanh", save_preact=True)
    ref_y, ref_pre = la.linear_act_ref(x, w, b, "gelu_tanh", save_preact=True)
    _assert_vs_torch(y, F.gelu(F.linear(x, w, b), approximate="tanh"), ref_y, dtype, "y")
    go = _rand(y.shape, dtype, torch.Generator().manual_seed(111))
    gx, gw, gb = nf.linear_act_backward(go, x, w, pre, "gelu_tanh")
    rx, rw, rb = la.linear_act_backward_ref(go, x, w, pre, "gelu_tanh")
    assert_close(gx, rx, dtype, "grad_x")
    assert_close(gw, rw, dtype, "grad_weight")
    assert_close(gb, rb, dtype, "grad_bias")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_ragged_rows_vs_torch_through_both_front_ends(dtype, monkeypatch):
    """M = 1000, K = 1023, N = 4097 (rows of x, weight and grad_out not 16-byte aligned):
    the GEMMs copy their operands to aligned rows (the wgmma kernels on sm_90); forward
    and backward within 2x torch's error against float64, at array level and through
    interop.torch, whose cached plan replays the copies (second call, bit for bit)."""
    from interop.torch import linear_act

    x, w, b = _inputs((1000,), 1023, 4097, dtype, seed=120)
    seen = _spy_restrides(monkeypatch)
    y, pre = nf.linear_act_forward(x, w, b, "gelu_tanh", save_preact=True)
    assert len(seen) == 2
    x64, w64, b64 = x.double(), w.double(), b.double()
    z64 = F.linear(x64, w64, b64)
    ref_y = F.gelu(z64, approximate="tanh")
    _assert_vs_torch(y, F.gelu(F.linear(x, w, b), approximate="tanh"), ref_y, dtype, "y")
    assert_close(pre, z64, dtype, "preact")
    go = _rand(y.shape, dtype, torch.Generator().manual_seed(121))
    gx, gw, gb = nf.linear_act_backward(go, x, w, pre, "gelu_tanh")
    xt, wt, bt = (t.clone().requires_grad_() for t in (x, w, b))
    F.gelu(F.linear(xt, wt, bt), approximate="tanh").backward(go)
    x6, w6, b6 = (t.clone().requires_grad_() for t in (x64, w64, b64))
    F.gelu(F.linear(x6, w6, b6), approximate="tanh").backward(go.double())
    for ours, theirs, ref, what in ((gx, xt.grad, x6.grad, "grad_x"),
                                    (gw, wt.grad, w6.grad, "grad_weight"),
                                    (gb, bt.grad, b6.grad, "grad_bias")):
        assert_close(ours, ref, dtype, what)
        _assert_vs_torch(ours, theirs, ref, dtype, what)
    results = []
    for _ in range(2):  # the first call records the plan, the second replays it
        xi, wi, bi = (t.clone().requires_grad_() for t in (x, w, b))
        yi = linear_act(xi, wi, bi, "gelu_tanh")
        yi.backward(go)
        results.append((yi.detach(), xi.grad, wi.grad, bi.grad))
    assert torch.equal(results[0][0], y)
    for a, c in zip(*results):
        assert torch.equal(a, c)


def _sass(kernel, tmp_path):
    """SASS of a compiled kernel: numba's nvdisasm path, else cuobjdump, else skip."""
    try:
        return kernel.dispatcher.inspect_sass(kernel.argtypes)
    except RuntimeError:
        pass
    tool = shutil.which("cuobjdump")
    if tool is None and os.path.exists("/usr/local/cuda/bin/cuobjdump"):
        tool = "/usr/local/cuda/bin/cuobjdump"
    if tool is None:
        pytest.skip("no nvdisasm or cuobjdump here")
    cubin = kernel._compiled._codelibrary.get_cubin()
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin.code)
    return subprocess.run([tool, "-sass", str(path)], check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.gpu
@pytest.mark.parametrize("role", la.ROLES)
def test_sass_uses_tensor_cores(role, tmp_path):
    """The GEMMs' machine code: HMMA (tensor cores), LDSM (ldmatrix), LDGSTS (cp.async)."""
    kernel = la.make_tc_kernel(role, "float16", True, la.TC_LARGE).compile()
    sass = _sass(kernel, tmp_path)
    assert "HMMA" in sass and "LDSM" in sass and "LDGSTS" in sass


def _ptx_id(k):
    return k.name


@pytest.mark.ptx
@pytest.mark.parametrize("kernel", list(la.shipped_kernels()), ids=_ptx_id)
def test_shipped_kernels_compile_without_spills(kernel):
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = kernel.ptx()
    if "_skinny_" in kernel.name:
        # The few-row forward: the weight straight from global memory into the MMA's
        # fragments, no shared-memory staging of the operands.
        assert "mma.sync.aligned.m16n8k16.row.col.f32" in ptx
        assert "ld.global.L1::no_allocate.v4.u32" in ptx or "ld.global.L1::no_allocate.v4.b32" in ptx
        assert "ldmatrix" not in ptx and "cp.async" not in ptx
    elif not any(part in kernel.name for part in ("simt", "act_grad", "restride")):
        assert "mma.sync.aligned.m16n8k16.row.col.f32" in ptx
        assert "ldmatrix.sync.aligned.m8n8.x4" in ptx
        if "_vec_" in kernel.name:
            assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
            assert "st.global.v4.u32" in ptx
    rep = ptxas_report(ptx)
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0 and rep["stack"] == 0, rep


@pytest.mark.ptx
@pytest.mark.parametrize("splits", [1, 2])
@pytest.mark.parametrize("pair", [False, True], ids=["plain", "pair"])
@pytest.mark.parametrize("tiles", [1, 2, 4])
def test_skinny_loads_all_in_flight_before_the_mmas(tiles, pair, splits):
    """The few-row kernel's reason to exist is bytes in flight: in its sm_90 SASS
    every 16-byte load of a warp's turn (unroll x (2 groups' rows + tiles) vectors)
    comes before the turn's first HMMA, with its k-chunks split over blocks too.
    Without the launch bounds (a register budget) ptxas issued one chunk's loads,
    waited on them in an HMMA, then issued the next chunk's."""
    from numba_fused.registry import find_nvdisasm, offline_compile, sass

    if find_nvdisasm() is None:
        pytest.skip("no nvdisasm to read the SASS (pip install numba-fused[ci])")
    cfg = la.SKINNY_DEFAULT._replace(splits=splits)
    kernel = la.make_skinny_kernel("bfloat16", cfg, tiles, pair)
    with offline_compile():
        text = sass(kernel.ptx())
    first_mma = text.index("HMMA.16816.F32.BF16")
    loads = [ln for ln in text[:first_mma].splitlines() if "LDG.E" in ln and ".128" in ln]
    assert len(loads) == cfg.unroll * (2 * cfg.groups + tiles), loads
    assert sum(".NA." in ln for ln in loads) == cfg.unroll * 2 * cfg.groups, loads


def test_weight_grad_shape_when_rows_equal_out_features():
    """x [2, 4, 8] through an 8 -> 8 layer: grad_z flattened to [M, N] = [8, 8] has the
    weight's shape. The allocator once took torch's empty_like of grad_z's owner there
    ([2, 4, 8]) and autograd rejected the gradient (found by tests/test_ddp.py)."""
    from interop.torch import linear_act

    gen = torch.Generator().manual_seed(3)
    x = _rand((2, 4, 8), "float32", gen).requires_grad_()
    w = _rand((8, 8), "float32", gen).requires_grad_()
    gz = _rand((2, 4, 8), "float32", gen)
    gw, gb = nf.linear_weight_grad(gz, x.detach())
    assert tuple(gw.shape) == (8, 8) and tuple(gb.shape) == (8,)
    ref = gz.reshape(8, 8).T.double() @ x.detach().reshape(8, 8).double()
    assert_close(gw, ref, "float32", "grad_weight")
    linear_act(x, w, None, "none").backward(gz)
    assert tuple(w.grad.shape) == (8, 8)
    assert_close(w.grad, ref, "float32", "grad_weight via autograd")


# ---- the few-row forward (a decoder's tokens) -------------------------------------------


def _every_forward_epilogue(x, w, b, dtype, ctx):
    """Inside ``ctx`` (a kernel choice), outputs poisoned: the forward with bias, kept
    pre-activation and activation, without bias, and the gated forward through the
    interleaved copy and in place (same bits); each against the float64 reference."""
    from numba_fused import gated_linear as gl

    with ctx, poison_outputs():
        y, pre = nf.linear_act_forward(x, w, b, "gelu_tanh", save_preact=True)
        y0 = nf.linear_act_forward(x, w)
        wg, wu = w[0::2].contiguous(), w[1::2].contiguous()
        h_copy = nf.gated_linear_forward(x, gl.interleave(wg, wu), b, "silu")
        h_pair = gl.gated_linear_forward_pair(x, wg, wu, b, "silu")
    ry, rpre = la.linear_act_ref(x, w, b, "gelu_tanh", save_preact=True)
    assert_close(y, ry, dtype, "y")
    assert_close(pre, rpre, dtype, "preact")
    assert_close(y0, la.linear_act_ref(x, w), dtype, "y (no bias)")
    assert torch.equal(h_copy, h_pair)
    assert_close(h_copy, gl.gated_linear_ref(x, gl.interleave(wg, wu), b, "silu"), dtype, "h")
    return y, ry



@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M", [1, 5, 16, 27])
def test_skinny_forward_every_epilogue(dtype, M, monkeypatch):
    """The few-row kernel (forced here; on a GPU the default takes it for few rows):
    bias, kept pre-activation, activation, no bias; ragged N against the block's
    columns, K of three 32-wide chunks over the simulator's two warps (one warp's
    second turn past K), 1 to 4 token tiles; the gated forward through the
    interleaved copy and in place (same bits)."""
    made = []
    real = la.make_skinny_kernel
    monkeypatch.setattr(la, "make_skinny_kernel",
                        lambda *a, **kw: made.append(a[2]) or real(*a, **kw))
    la._gemm_prepared.cache_clear()  # on a GPU: prepared launches would skip the spy
    K, N = 72, 40
    x, w, b = _inputs((M,), K, N, dtype, seed=23 + M)
    y, ry = _every_forward_epilogue(x, w, b, dtype, la.use_skinny(True))
    assert made and all(t == la.cdiv(M, 8) for t in made), made
    theirs = _torch_or_none(lambda: torch_act("gelu_tanh")(F.linear(x, w, b)))
    _assert_vs_torch(y, theirs, ry, dtype, "y")


@pytest.mark.parametrize("cfg", [la.SkinnyConfig(1, 1, 1, None), la.SkinnyConfig(3, 3, 3),
                                 la.SkinnyConfig(1, 4, 1, "no_allocate+L2first"),
                                 la.SkinnyConfig(1, 1, 1, None, 1), la.SkinnyConfig(2, 2, 2, prefetch=1),
                                 la.SkinnyConfig(1, 1, 1, None, splits=2),
                                 la.SkinnyConfig(1, 1, 1, None, 1, 2),
                                 la.SkinnyConfig(2, 2, 1, splits=4)],
                         ids=["g1w1u1", "g3w3u3", "g1w4u1_l2", "g1w1u1p", "g2w2u2p", "g1w1u1k2",
                              "g1w1u1pk2", "g2w2u1k4"])
def test_skinny_other_layouts(cfg, monkeypatch):
    """Other few-row layouts give the right values: one warp, three groups (a block of
    48 columns over N = 40), more warps than chunks, the prefetching loop (one warp:
    both register sets multiplied, the last prefetch past K); the k-chunks split over
    2 blocks (parts of 2 and 1 chunks) and 4 (the last part past K, all zeros)."""
    dtype = "bfloat16"
    K, N = 72, 40
    x, w, b = _inputs((9,), K, N, dtype, seed=31)
    monkeypatch.setattr(la, "SKINNY_SIM", cfg)
    la._gemm_prepared.cache_clear()
    with la.use_skinny(True), poison_outputs():
        y = nf.linear_act_forward(x, w, b, "relu")
    assert_close(y, la.linear_act_ref(x, w, b, "relu"), dtype, f"y ({cfg})")


@pytest.mark.parametrize("M", [1, 16, 27])
def test_skinny_split_every_epilogue(M, monkeypatch):
    """The few-row kernel with its k-chunks split over blocks (3 parts of 3 chunks,
    K = 288 over the simulator's two warps): every epilogue and the gated pair form,
    against float64; the same bits as run again (the parts are added in part order
    by whichever block arrives last)."""
    monkeypatch.setattr(la, "SKINNY_SIM", la.SKINNY_SIM._replace(splits=3))
    monkeypatch.setattr(la, "SKINNY_DEFAULT", la.SKINNY_DEFAULT._replace(splits=3))
    la._gemm_prepared.cache_clear()
    dtype = "float16"
    K, N = 288, 40
    x, w, b = _inputs((M,), K, N, dtype, seed=41 + M)
    assert la._splits_for("fwd", dtype, True, None if SIMULATOR else 0, M, N, K, None) == 1
    with la.use_skinny(True):
        assert la._splits_for("fwd", dtype, True, None if SIMULATOR else 0, M, N, K, None) == 3
    y, _ = _every_forward_epilogue(x, w, b, dtype, la.use_skinny(True))
    with la.use_skinny(True):
        again = nf.linear_act_forward(x, w, b, "gelu_tanh")
    assert torch.equal(again, y)


def test_skinny_rule_and_checks(monkeypatch):
    """The default takes the few-row kernel only for at most SKINNY_AUTO_ROWS rows
    whose blocks cover every multiprocessor; forced, only forwards of 16-bit data with
    16-byte rows, K a multiple of 8 and at most SKINNY_MAX_ROWS rows; bad layouts and
    token tiles raise."""
    assert la.skinny_auto(1, 4096, 132) and la.skinny_auto(16, 22016, 132)
    assert not la.skinny_auto(la.SKINNY_AUTO_ROWS + 1, 22016, 132)
    assert not la.skinny_auto(1, 16 * 131, 132)
    with la.use_skinny(True):
        cfg = la._skinny_for("fwd", "float16", True, None, 32, 40, 72)
        assert cfg == (la.SKINNY_SIM if SIMULATOR else la.SKINNY_DEFAULT)
        assert la._skinny_for("fwd", "float16", True, None, la.SKINNY_MAX_ROWS + 1, 40, 72) is None
        assert la._skinny_for("dgrad", "float16", True, None, 5, 40, 72) is None
        assert la._skinny_for("fwd", "float32", True, None, 5, 40, 72) is None
        assert la._skinny_for("fwd", "float16", False, None, 5, 40, 72) is None
        assert la._skinny_for("fwd", "float16", True, None, 5, 40, 76) is None
        with la.use_split_k(4):
            assert la._splits_for("fwd", "float16", True, None, 5, 40, 72, None) == 1
    with la.use_skinny(False):
        assert la._skinny_for("fwd", "float16", True, None, 5, 40, 72) is None
    assert la._SKINNY[0] is None
    # The default (here with the rule on, a 4096-column output, 132 SMs) yields to a
    # forced split, not to a forced "no split".
    monkeypatch.setattr(la, "SKINNY_BY_DEFAULT", True)
    monkeypatch.setattr(la, "SIMULATOR", False)
    monkeypatch.setattr(la, "sm_count", lambda device=None: 132)
    assert la._skinny_for("fwd", "float16", True, 0, 1, 4096, 11008) == la.SKINNY_DEFAULT
    with la.use_split_k(1):
        assert la._skinny_for("fwd", "float16", True, 0, 1, 4096, 11008) == la.SKINNY_DEFAULT
    with la.use_split_k(4):
        assert la._skinny_for("fwd", "float16", True, 0, 1, 4096, 11008) is None
    for bad in (la.SkinnyConfig(0, 8, 2), la.SkinnyConfig(1, 33, 2), la.SkinnyConfig(1, 8, 9),
                la.SkinnyConfig(1, 8, 2, "evict_first"), la.SkinnyConfig(1, 8, 2, prefetch=2),
                la.SkinnyConfig(1, 8, 2, splits=0), la.SkinnyConfig(1, 8, 2, splits=9)):
        with pytest.raises(ValueError):
            la.make_skinny_kernel("float16", bad, 1)
    with pytest.raises(ValueError, match="tiles"):
        la.make_skinny_kernel("float16", la.SKINNY_DEFAULT, 5)
    with pytest.raises(ValueError, match="dtype"):
        la.make_skinny_kernel("float32", la.SKINNY_DEFAULT, 1)


def _decode_forward_vs_torch(x, w, dtype, ctx):
    """Inside ``ctx`` (a kernel choice): x @ w^T within 2x torch's error, outputs
    poisoned, the same bits run to run and through the torch front end's plan (its
    first call records it). The front end's plans are keyed by signature, not by
    kernel choice, so they are cleared before and after: another test's plan of this
    shape must not answer here."""
    # By its full name: interop.torch's namespace holds the function linear_act.
    tla_mod = importlib.import_module("interop.torch.linear_act")

    ref = la.linear_act_ref(x, w)
    tla_mod._FWD_PLANS.clear()
    try:
        with ctx:
            with poison_outputs():
                y = nf.linear_act_forward(x, w)
            _assert_vs_torch(y, F.linear(x, w), ref, dtype, "y")
            for _ in range(3):
                assert torch.equal(nf.linear_act_forward(x, w), y)
                assert torch.equal(tla_mod.linear_act(x, w), y)
    finally:
        tla_mod._FWD_PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M", [1, 16, 32])
@pytest.mark.parametrize("NK", [(4096, 11008), (22016, 4096)], ids=["down", "gate_up"])
def test_skinny_decode_shapes_vs_torch(dtype, M, NK):
    """Llama-7B's MLP GEMMs at a decoder's token counts on the few-row kernel: within
    2x torch's error, the same bits run to run and through the torch front end's plan
    (its first call records it)."""
    N, K = NK
    x, w, _ = _inputs((M,), K, N, dtype, seed=7)
    la._gemm_prepared.cache_clear()
    _decode_forward_vs_torch(x, w, dtype, la.use_skinny(True))


# ---- split-K (few output rows) ---------------------------------------------------------


def _split_counters_zero():
    """Whether every split-K arrival counter made so far is back to zero."""
    for c in la._SPLIT_COUNTERS.values():
        data = c.host if c.host is not None else c.owner.cpu().numpy()
        if np.any(data):
            return False
    return True


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("splits", [2, 3, 4])
def test_split_k_forward_every_epilogue(dtype, splits, monkeypatch):
    """The split-K forward (forced here; on a GPU the default takes it for few rows
    and few tiles): bias, kept pre-activation, activation, ragged M and N, K of 5
    k-tiles of the simulator's tiles (4 ways leave the last part empty), the gated
    forward through the interleaved copy and in place (same bits); the arrival
    counters are left zero."""
    made = []
    real = la.make_tc_kernel
    monkeypatch.setattr(la, "make_tc_kernel",
                        lambda *a, **kw: made.append(kw.get("split", False)) or real(*a, **kw))
    la._gemm_prepared.cache_clear()  # on a GPU: prepared launches would skip the spy
    lead, K, N = (2, 3), 72, 40
    x, w, b = _inputs(lead, K, N, dtype, seed=21)
    _every_forward_epilogue(x, w, b, dtype, la.use_split_k(splits))
    assert made and all(made), "every GEMM took the split-K kernel"
    assert _split_counters_zero()


def test_split_k_ways_clamp_and_rule():
    """Forced ways are clamped to the k-tiles; the default splits only outputs of at
    most SPLITK_MAX_ROWS rows and fewer tiles than multiprocessors."""
    cfg = la.TC_SMALL
    assert la.split_k_auto(16, 4096, 11008, cfg, 132) > 1  # 64 tiles on 132 SMs
    assert la.split_k_auto(16, 22016, 4096, cfg, 132) == 1  # 344 tiles
    assert la.split_k_auto(la.SPLITK_MAX_ROWS + 1, 256, 11008, cfg, 132) == 1
    assert la.split_k_auto(1, 64, 64, cfg, 132) == 1  # two k-tiles
    ways = la.split_k_auto(1, 64, 1 << 20, cfg, 132)
    assert ways == la.SPLITK_MAX
    for bad in (0, -2, 2.5, True, "4"):
        with pytest.raises(ValueError, match="positive int"):
            with la.use_split_k(bad):
                pass
    assert la._SPLIT_K[0] is None
    with la.use_split_k(64):
        tc = la._pick_config(5, 40, None)
        assert la._splits_for("fwd", "float16", True, None, 5, 40, 72, None) == la.cdiv(72, tc.bk)
        assert la._splits_for("dgrad", "float16", True, None, 5, 40, 72, None) == 1
        assert la._splits_for("fwd", "float16", False, None, 5, 40, 72, None) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M", [1, 16, 64])
def test_split_k_decode_shapes_vs_torch(dtype, M):
    """Llama-7B's down projection at a decoder's token counts, split the ways
    split_k_auto picks (more than one): within 2x torch's error, the same bits run to
    run and through the torch front end's plan (its first call records it), counters
    left zero."""
    from numba_fused.launch import sm_count

    N, K = 4096, 11008
    dev = torch.cuda.current_device()
    ways = la.split_k_auto(M, N, K, la._pick_config(M, N, dev), sm_count(dev))
    assert ways > 1
    x, w, _ = _inputs((M,), K, N, dtype, seed=5)
    _decode_forward_vs_torch(x, w, dtype, la.use_split_k(ways))
    torch.cuda.synchronize()
    assert _split_counters_zero()


def _switch_kernel(dt, grad):
    """Each code's fast_act_switch on single values and on tuples of 4 and 8, and
    fast_act.kernel_act's function of every activation applied directly."""
    from numba_fused import fast_act
    from numba_fused.launch import Kernel

    s1, s4, s8 = (la.fast_act_switch(dt, n, grad) for n in (1, 4, 8))
    f0, f1, f2, f3, f4, f5, f6 = (fast_act.kernel_act(name, dt)[int(grad)]
                                  for name in ACTIVATIONS)

    def kernel(z, out):
        i = cuda.grid(1)
        n = z.shape[0]
        if i < n // 8:
            for code in range(7):
                base = code * 4 * n
                for k in range(8):
                    out[base + 8 * i + k] = s1(code, z[8 * i + k])
                a = s4(code, (z[8 * i], z[8 * i + 1], z[8 * i + 2], z[8 * i + 3]))
                b = s4(code, (z[8 * i + 4], z[8 * i + 5], z[8 * i + 6], z[8 * i + 7]))
                c = s8(code, (z[8 * i], z[8 * i + 1], z[8 * i + 2], z[8 * i + 3],
                              z[8 * i + 4], z[8 * i + 5], z[8 * i + 6], z[8 * i + 7]))
                for k in range(4):
                    out[base + n + 8 * i + k] = a[k]
                    out[base + n + 8 * i + 4 + k] = b[k]
                for k in range(8):
                    out[base + 2 * n + 8 * i + k] = c[k]
            for k in range(8):
                v = z[8 * i + k]
                out[3 * n + 8 * i + k] = f0(v)
                out[7 * n + 8 * i + k] = f1(v)
                out[11 * n + 8 * i + k] = f2(v)
                out[15 * n + 8 * i + k] = f3(v)
                out[19 * n + 8 * i + k] = f4(v)
                out[23 * n + 8 * i + k] = f5(v)
                out[27 * n + 8 * i + k] = f6(v)

    f32 = types.Array(types.float32, 1, "C")
    return Kernel(f"test_fast_act_switch_{dt}_{int(grad)}", kernel, (f32, f32))


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_fast_act_switch_gives_each_codes_activation(dt, grad):
    """fast_act_switch(dtype, n, grad)(code, z) is fast_act.kernel_act's act (grad:
    act') of ACTIVATIONS[code], bit for bit, for one value and for each element of a
    tuple of 4 or 8 (the wgmma epilogue's epi 1 takes a chunk's values under one
    switch), at every code; and those forms stay far below the 16-bit outputs'
    rounding against the float64 references."""
    from interop.dlpack import as_kernel_array, stream_handle
    from numba_fused.activations import act_grad_ref, act_ref

    z = np.concatenate([np.linspace(-12.0, 12.0, 200), [0.0, -0.0, 1e-6, -3e-5, 40.0, -40.0,
                                                          0.5, -0.5]]).astype(np.float32)
    n = z.size
    zt = torch.from_numpy(z).to(device())
    out = torch.full((28 * n,), float("nan"), dtype=torch.float32, device=device())
    args = [as_kernel_array(zt, "z"), as_kernel_array(out, "out")]
    _switch_kernel(dt, grad).launch(-(-(n // 8) // 32), 32, stream_handle(args[0]), args)
    if not SIMULATOR:
        torch.cuda.synchronize()
    got = out.cpu().numpy().reshape(7, 4, n)
    ref = act_grad_ref if grad else act_ref
    for code, name in enumerate(ACTIVATIONS):
        direct = got[code, 3]
        for form in range(3):
            np.testing.assert_array_equal(got[code, form], direct, err_msg=f"{name} {form}")
        # fast_act's forms: gelu's fit 1.1e-5 relative, |gelu'| 3.8e-6 absolute, the
        # others the ex2 / rcp approximations' ~2^-22; the outputs round at 2^-11
        # (float16) / 2^-8 (bfloat16).
        want = ref(name, z.astype(np.float64))
        err = np.abs(direct - want) / np.maximum(np.abs(want), 1.0)
        assert err.max() <= 1e-5, (name, float(err.max()))


def test_fast_act_switch_rejects_other_widths():
    with pytest.raises(ValueError, match="n must be 1, 4 or 8"):
        la.fast_act_switch("float16", 3)
    with pytest.raises(ValueError, match="epi must be 0, 1, 2, 3 or 4"):
        la.WG_LARGE_WS_HB._replace(epi=5).validate()
    with pytest.raises(ValueError, match="epi 4 needs bn a multiple of 32"):
        la.WG_LARGE_WS_HB._replace(epi=4, bn=48).validate()
