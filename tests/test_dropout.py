"""Fused dropout + bias + activation: forward and backward against the float64
reference, the documented Philox keying, the uint8-mask variant, independence from
the launch configuration, bad input, the torch and CuPy front ends, and the PTX
compile of every shipped kernel."""

import ctypes
import math

import numpy as np
import pytest
import torch
from numba import cuda, types

import numba_fused  # noqa: F401  (simulator warp primitives / numpy shim)
from interop.dlpack import as_kernel_array, poison_outputs, stream_handle
from numba_fused import dropout as D
from numba_fused.activations import ACTIVATIONS
from numba_fused.launch import Kernel
from numba_fused.philox import philox4x32_np, philox_ir, round_keys
from tests.util import (DTYPES, SIMULATOR, TOL, assert_close, compile_backend, compiled_targets,
                        device, griddep_pair_reports, rel_err, torch_dtype)

# The simulator runs every thread as a Python thread: small blocks there.
CFG = D.LaunchConfig(threads=64) if SIMULATOR else D.LaunchConfig()
# Vector path (N % 8 == 0) and scalar path (N odd: chunks straddle Philox groups and rows).
SHAPES = [(4, 16), (3, 13)] if SIMULATOR else [(4, 16), (4, 12), (3, 13), (513, 4096), (97, 4100)]
GPU_LARGE = [(4096, 4096), (33, 65536), (1000, 1000), (2, 3, 65537)]


def _inputs(shape, dt, seed=0, bias=True, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    tdt = torch_dtype(dt)
    x = (torch.randn(shape, generator=g) * scale).to(tdt).to(device())
    b = (torch.randn(shape[-1], generator=g) * scale).to(tdt).to(device()) if bias else None
    go = torch.randn(shape, generator=g).to(tdt).to(device())
    return x, b, go


def _run(x, b, go, p, seed, offset, activation, config=CFG):
    with poison_outputs():
        y = D.dropout_bias_act_forward(x, b, p, seed, offset, activation, config=config)
        gx, gb = D.dropout_bias_act_backward(go, x, b, p, seed, offset, activation,
                                             config=config)
    return y, gx, gb


def _spy(monkeypatch, name):
    """Wrap ``D.<name>`` so each call's ``(args, kwargs, result)`` is appended to the
    returned list (the launcher's picks, checked on what it made)."""
    calls = []
    real = getattr(D, name)

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append((args, kwargs, out))
        return out

    monkeypatch.setattr(D, name, spy)
    return calls


def _mask_from_formula(numel, p, seed, offset):
    """The module docstring's keying, written out element by element: element e draws
    16-bit half e % 2 (0 = low) of word (e % 8) // 2 of Philox(counter = (e // 8, offset),
    key = seed); u = (h + 1/2) / 2^16; kept iff u >= float32(p)."""
    e = np.arange(numel, dtype=np.uint64)
    g = e // np.uint64(8)
    counter = np.stack([g & np.uint64(0xFFFFFFFF), g >> np.uint64(32),
                        np.full_like(g, offset & 0xFFFFFFFF),
                        np.full_like(g, offset >> 32)], axis=-1).astype(np.uint32)
    words = philox4x32_np(counter, (seed & 0xFFFFFFFF, seed >> 32))
    word = words[np.arange(numel), ((e % np.uint64(8)) // np.uint64(2)).astype(np.int64)]
    h = np.where(e % np.uint64(2) == 0, word & np.uint32(0xFFFF), word >> np.uint32(16))
    u = (h.astype(np.float64) + 0.5) / 65536.0
    return u >= float(np.float32(p))


# ---------------------------------------------------------------------------
# Numerics against the float64 reference
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("p,with_bias", [(0.0, True), (0.3, True), (0.3, False)])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dt", DTYPES)
def test_forward_backward_match_reference(dt, activation, shape, p, with_bias):
    x, b, go = _inputs(shape, dt, seed=10 * ACTIVATIONS.index(activation) + SHAPES.index(shape),
                       bias=with_bias)
    seed, offset = 1234, 5
    y, gx, gb = _run(x, b, go, p, seed, offset, activation)
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, p, seed, offset, activation,
                                                    grad_out=go)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert gx.dtype == x.dtype and gx.shape == x.shape
    assert_close(y, y_ref, dt, "y")
    assert_close(gx, gx_ref, dt, "grad_x")
    if with_bias:
        assert gb.dtype == x.dtype and gb.shape == b.shape
        assert_close(gb, gb_ref, dt, "grad_bias")
    else:
        assert gb is None


@pytest.mark.parametrize("shape", [(5, 1), (4, 2), (3, 3), (2, 3, 8), (1, 1)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_tiny_and_leading_shapes(dt, shape):
    x, b, go = _inputs(shape, dt, seed=3)
    y, gx, gb = _run(x, b, go, 0.4, 99, 0, "gelu_tanh")
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, 0.4, 99, 0, "gelu_tanh", grad_out=go)
    assert_close(y, y_ref, dt, "y")
    assert_close(gx, gx_ref, dt, "grad_x")
    assert_close(gb, gb_ref, dt, "grad_bias")


@pytest.mark.parametrize("activation", ["none", "gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("dt", DTYPES)
def test_error_within_twice_torch_same_dtype(dt, activation):
    """Ours against torch computing the same math (same mask) in the same dtype."""
    shape = (6, 20) if SIMULATOR else (1024, 4096)
    p, seed, offset = 0.25, 77, 3
    x, b, go = _inputs(shape, dt, seed=11)
    y, gx, gb = _run(x, b, go, p, seed, offset, activation)
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, p, seed, offset, activation,
                                                    grad_out=go)
    keep = torch.from_numpy(D.dropout_keep_mask(shape, p, seed, offset)).to(x.device)
    xt = x.clone().requires_grad_(True)
    bt = b.clone().requires_grad_(True)
    z = xt + bt
    a = {"none": lambda: z, "gelu": lambda: torch.nn.functional.gelu(z),
         "gelu_tanh": lambda: torch.nn.functional.gelu(z, approximate="tanh"),
         "silu": lambda: torch.nn.functional.silu(z)}[activation]()
    yt = torch.where(keep, a * (1.0 / (1.0 - p)), torch.zeros_like(a))
    yt.backward(go)
    floor = TOL[dt] * 1e-2
    for what, ours, theirs, ref in [("y", y, yt, y_ref), ("grad_x", gx, xt.grad, gx_ref),
                                    ("grad_bias", gb, bt.grad, gb_ref)]:
        e_ours, e_torch = rel_err(ours, ref), rel_err(theirs, ref)
        assert e_ours <= 2 * e_torch + floor, f"{what}: ours {e_ours:.2e}, torch {e_torch:.2e}"


@pytest.mark.parametrize("dt", DTYPES)
def test_silu_across_its_range(dt):
    """The dropout kernels' silu (v9: sigmoid from exp(-|z|), one ex2 and one rcp) at
    z in [-90, 90], around silu's minimum (z = -1.278, where silu' = 0) and at 0:
    element by element, |ours - float64| / max(scale, 1e-3) within the dtype's
    tolerance wherever the float64 value is a normal float32, and below that under
    1e-30 (the kernel may flush to 0, as torch's float32 form does past z = -88.7).
    scale is |float64| for y; for grad_x = s (1 + z (1 - s)) it is s (1 + |z (1 - s)|),
    the size of the terms the dtype's rounding acts on: near silu's minimum they
    cancel (z = -1.2804: grad_x -4.0e-4 from terms of 0.44), so no float32 evaluation
    keeps the result's own relative error (float32, H200: 1.2e-8 off, 1.2e-5 of the
    1e-3 floor, 2.8e-8 of the terms)."""
    z = np.concatenate([np.linspace(-90.0, 90.0, 721), np.linspace(-1.4, -1.15, 24),
                        [0.0, -0.0, 1e-3, -1e-3]])
    n = len(z)
    x = torch.from_numpy(z.reshape(1, n)).to(torch_dtype(dt)).to(device())
    go = torch.ones_like(x)
    y, gx, _ = _run(x, None, go, 0.0, 1, 0, "silu")
    y_ref, gx_ref, _ = D.dropout_bias_act_ref(x, None, 0.0, 1, 0, "silu", grad_out=go)
    tiny = float(np.finfo(np.float32).tiny)
    z64 = x.double().cpu().numpy().ravel()
    s = 1.0 / (1.0 + np.exp(-z64))
    terms = s * (1.0 + np.abs(z64 * (1.0 - s)))
    for what, ours, ref in (("y", y, y_ref), ("grad_x", gx, gx_ref)):
        ours = ours.double().cpu().numpy().ravel()
        ref = np.asarray(ref, dtype=np.float64).ravel()
        scale = np.abs(ref) if what == "y" else np.maximum(np.abs(ref), terms)
        normal = np.abs(ref) >= tiny
        err = np.abs(ours - ref)[normal] / np.maximum(scale[normal], 1e-3)
        assert err.max() < TOL[dt], f"{what}: {err.max():.2e} at z = {z[normal][err.argmax()]}"
        assert np.all(np.abs(ours[~normal]) < 1e-30), what


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("n", [768, 765])
@pytest.mark.parametrize("dt", DTYPES)
def test_gelu_across_its_range(dt, n, p):
    """The dropout kernels' gelu at z in [-14, 14] and near 0, element by element:
    |ours - float64| / max(scale, 1e-3) within the dtype's tolerance wherever the
    float64 value is a normal float32 (below that, |ours| < 1e-30), dropped elements
    exactly 0; the vector path (n = 768) and the scalar one (n = 765), p = 1 (scale 0)
    included. The float64 reference takes Phi(z) as erfc(-z / sqrt 2) / 2, which keeps
    the negative tail that (1 + erf) / 2 cancels to 0 below z = -8.3. scale is
    |float64| for y; for grad_x = s (Phi(z) + z phi(z)), s = 1 / (1 - p), it is
    s (Phi(z) + |z| phi(z)), the size of the terms (they cancel near z = -0.75)."""
    z = np.concatenate([np.linspace(-14.0, 14.0, n - 8),
                        [0.0, -0.0, 1e-3, -1e-3, 1e-6, -1e-6, -0.7518, 0.5]])
    x = torch.from_numpy(z.reshape(1, n)).to(torch_dtype(dt)).to(device())
    go = torch.ones_like(x)
    seed, offset = 21, 4
    y, gx, _ = _run(x, None, go, p, seed, offset, "gelu")
    y_ref, gx_ref, _ = D.dropout_bias_act_ref(x, None, p, seed, offset, "gelu", grad_out=go)
    keep = D.dropout_keep_mask((1, n), p, seed, offset).ravel()
    tiny = float(np.finfo(np.float32).tiny)
    z64 = x.double().cpu().numpy().ravel()
    s = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    phi = np.exp(-z64 * z64 / 2.0) / math.sqrt(2.0 * math.pi)
    cdf = np.array([math.erfc(-v / math.sqrt(2.0)) / 2.0 for v in z64])
    terms = s * (cdf + np.abs(z64) * phi)
    for what, ours, ref in (("y", y, y_ref), ("grad_x", gx, gx_ref)):
        ours = ours.double().cpu().numpy().ravel()
        ref = np.asarray(ref, dtype=np.float64).ravel()
        assert np.all(ours[~keep] == 0.0), what
        scale = np.abs(ref) if what == "y" else np.maximum(np.abs(ref), terms)
        normal = keep & (np.abs(ref) >= tiny)
        err = np.abs(ours - ref)[normal] / np.maximum(scale[normal], 1e-3)
        if err.size:
            assert err.max() < TOL[dt], f"{what}: {err.max():.2e} at z = {z64[normal][err.argmax()]}"
        assert np.all(np.abs(ours[keep & ~normal]) < 1e-30), what


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["none", "gelu", "squared_relu"])
@pytest.mark.parametrize("shape", GPU_LARGE, ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_large_shapes_on_gpu(dt, shape, activation):
    x, b, go = _inputs(shape, dt, seed=5)
    y, gx, gb = _run(x, b, go, 0.1, 2**40 + 17, 2**33 + 8, activation, config=None)
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, 0.1, 2**40 + 17, 2**33 + 8, activation,
                                                    grad_out=go)
    assert_close(y, y_ref, dt, "y")
    assert_close(gx, gx_ref, dt, "grad_x")
    assert_close(gb, gb_ref, dt, "grad_bias")


@pytest.mark.gpu
@pytest.mark.parametrize("config", [D.LaunchConfig(threads=1024, unroll=2),
                                    D.LaunchConfig(threads=512, unroll=4),
                                    D.LaunchConfig(threads=1024, unroll=4)], ids=str)
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_big_blocks_fit_the_register_file(dt, config):
    """Kernels for more than 256 threads a block carry launch bounds: the deep
    unrolls of the gelu backward (128-204 registers unbounded) still launch at 512 and
    1024 threads (before, CUDA error 701), with the reference's results."""
    x, b, go = _inputs((300, 1024), dt, seed=9)
    for act in ("none", "gelu"):
        y, gx, gb = _run(x, b, go, 0.2, 77, 3, act, config=config)
        y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, 0.2, 77, 3, act, grad_out=go)
        assert_close(y, y_ref, dt, "y")
        assert_close(gx, gx_ref, dt, "grad_x")
        assert_close(gb, gb_ref, dt, "grad_bias")


# ---------------------------------------------------------------------------
# The mask: keying, statistics, variants
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 7), (2, 16)], ids=str)
def test_mask_follows_documented_philox_keying(shape):
    seed, offset, p = (7 << 32) | 0x1234, (3 << 32) | 9, 0.45
    x = torch.ones(shape, device=device())
    with poison_outputs():
        _, mask = D.dropout_bias_act_forward(x, None, p, seed, offset, return_mask=True,
                                             config=CFG)
    want = _mask_from_formula(x.numel(), p, seed, offset).reshape(shape)
    np.testing.assert_array_equal(mask.cpu().numpy().astype(bool), want)
    np.testing.assert_array_equal(D.dropout_keep_mask(shape, p, seed, offset), want)


def _philox_group_kernel(g, key_words, out):
    i = cuda.grid(1)
    if i < g.shape[0]:
        keys = (key_words[0], key_words[1], key_words[2], key_words[3], key_words[4],
                key_words[5], key_words[6], key_words[7], key_words[8], key_words[9],
                key_words[10], key_words[11], key_words[12], key_words[13], key_words[14],
                key_words[15], key_words[16], key_words[17], key_words[18], key_words[19])
        w = D._philox_group(g[i], keys, key_words[20], key_words[21])
        for k in range(4):
            out[4 * i + k] = w[k]


PHILOX_GROUP = Kernel("test_dropout_philox_group", _philox_group_kernel,
                      (types.Array(types.int64, 1, "C"), types.Array(types.uint32, 1, "C"),
                       types.Array(types.uint32, 1, "C")))


def _gelu_scaled_kernel(dt):
    """The plain and the scaled gelu of storage dtype ``dt``."""
    gelu, _ = D.kernel_act("gelu", dt)
    prep, gelu_s = D._scaled_act("gelu", dt, True)

    def kernel(z, s, plain, scaled):
        i = cuda.grid(1)
        if i < z.shape[0]:
            plain[i] = gelu(z[i])
            for k in range(s.shape[0]):
                scaled[k * z.shape[0] + i] = gelu_s(z[i], s[k], prep(s[k]))

    f32 = types.Array(types.float32, 1, "C")
    return Kernel(f"test_dropout_gelu_scaled_{dt}", kernel, (f32, f32, f32, f32))


# v22's bound on the tests' measure |ours - scale gelu| / (scale max(|gelu|, 1e-3)):
# the fit's minimax 6.49e-4 (bench/ab/gelu_logit.py), plus the float32 evaluation
# (ex2 / rcp approximations ~2^-22, the exponent's rounding).
_GELU_LOGIT_BOUND = 6.6e-4


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_gelu_scaled_is_scale_times_gelu(dt):
    """The forward's gelu with the dropout scale folded in (the 16-bit vector path,
    v22: z / (c + c 2^(z F(z^2))), c = 1 / scale) at the scales of p = 0, 0.1, 0.3,
    0.5, 0.999 for z in [-14, 14] (dense in [-7, 7], where the fit was made) against
    float64 scale gelu(z): the tests' measure (|error| / max(|gelu|, 1e-3), scaled)
    within the fit's bound; +inf -> +inf, -inf and NaN -> NaN (as the plain form);
    at scale 0 (p = 1) finite and below 1e-30. float32 keeps gelu(z) * scale."""
    z = np.concatenate([np.linspace(-14.0, 14.0, 113), np.linspace(-7.0, 7.0, 701),
                        [0.0, -0.0, 1e-6, -1e-6, -0.7518, 3e4, -3e4]])
    z = z.astype(np.float32)
    special = np.array([np.inf, -np.inf, np.nan], np.float32)
    zz = np.concatenate([z, special])
    scales = np.array([1.0, 1 / 0.9, 1 / 0.7, 2.0, 1 / 0.001, 0.0], np.float32)
    plain = torch.full((zz.size,), 7.0, dtype=torch.float32, device=device())
    scaled = torch.full((zz.size * scales.size,), 7.0, dtype=torch.float32, device=device())
    args = [as_kernel_array(torch.from_numpy(zz).to(device()), "z"),
            as_kernel_array(torch.from_numpy(scales).to(device()), "s"),
            as_kernel_array(plain, "plain"), as_kernel_array(scaled, "scaled")]
    _gelu_scaled_kernel(dt).launch(-(-zz.size // 64), 64, stream_handle(args[0]), args)
    if not SIMULATOR:
        torch.cuda.synchronize()
    plain = plain.cpu().numpy()
    scaled = scaled.cpu().numpy().reshape(scales.size, zz.size)
    if dt == "float32":
        with np.errstate(invalid="ignore"):
            want = (plain[None, :] * scales[:, None]).astype(np.float32)
        # Values, NaN where NaN (the device's NaN payload is not numpy's).
        np.testing.assert_array_equal(scaled, want)
        return
    n = z.size
    z64 = z.astype(np.float64)
    g64 = z64 * np.array([math.erfc(-v / math.sqrt(2.0)) / 2.0 for v in z64])
    for k, s in enumerate(scales[:-1].astype(np.float64)):
        err = np.abs(scaled[k, :n] - s * g64) / (s * np.maximum(np.abs(g64), 1e-3))
        assert err.max() < _GELU_LOGIT_BOUND, f"scale {s}: {err.max():.2e} at {z[err.argmax()]}"
        assert scaled[k, n] == np.inf and np.isnan(scaled[k, n + 1:]).all(), s
    assert np.all(np.isfinite(scaled[-1, :n])) and np.all(np.abs(scaled[-1, :n]) < 1e-30)


def test_philox_group_device_function_for_64_bit_groups():
    """The kernels' Philox (an i32 intrinsic on the GPU) for group indices past 2**32."""
    seed, offset = 0xDEADBEEF12345678, 0x0123456789ABCDEF
    gs = np.array([0, 1, 5, 2**32 - 1, 2**32, 2**32 + 3, 2**40 + 12345, 2**62 + 1], np.int64)
    words = np.array(round_keys(seed) + [offset & 0xFFFFFFFF, offset >> 32], np.uint32)
    out = torch.zeros(4 * gs.size, dtype=torch.int32, device=device())
    key_words = torch.from_numpy(words.view(np.int32)).to(device())
    args = [as_kernel_array(torch.from_numpy(gs).to(device()), "g"),
            as_kernel_array(key_words.view(torch.uint32), "key_words"),
            as_kernel_array(out.view(torch.uint32), "out")]
    PHILOX_GROUP.launch(1, 32, stream_handle(args[0]), args)
    if not SIMULATOR:
        torch.cuda.synchronize()
    got = out.cpu().numpy().view(np.uint32).reshape(-1, 4)
    u = gs.astype(np.uint64)
    counter = np.stack([u & np.uint64(0xFFFFFFFF), u >> np.uint64(32),
                        np.full_like(u, offset & 0xFFFFFFFF), np.full_like(u, offset >> 32)],
                       axis=-1).astype(np.uint32)
    np.testing.assert_array_equal(got, philox4x32_np(counter, (seed & 0xFFFFFFFF, seed >> 32)))


def test_philox_ir_known_answers_on_host_cpu():
    """The IR the GPU intrinsic emits, JIT-compiled for this CPU, against Random123."""
    from llvmlite import binding as llvm
    from llvmlite import ir

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    i32 = ir.IntType(32)
    module = ir.Module(name="philox_ir_test")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i32.as_pointer()] * 3), "philox")
    builder = ir.IRBuilder(fn.append_basic_block())
    ctr, keys, out = fn.args
    counter = [builder.load(builder.gep(ctr, [ir.Constant(i32, i)])) for i in range(4)]
    rks = [builder.load(builder.gep(keys, [ir.Constant(i32, i)])) for i in range(20)]
    for i, v in enumerate(philox_ir(builder, counter, rks)):
        builder.store(v, builder.gep(out, [ir.Constant(i32, i)]))
    builder.ret_void()
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(mod, machine)
    engine.finalize_object()
    u32p = ctypes.POINTER(ctypes.c_uint32)
    call = ctypes.CFUNCTYPE(None, u32p, u32p, u32p)(engine.get_function_address("philox"))
    known = [
        ((0, 0, 0, 0), 0, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, 2**64 - 1, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), 0x299F31D0A4093822,
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]
    rng = np.random.default_rng(4)
    for _ in range(20):
        c = tuple(int(v) for v in rng.integers(0, 2**32, 4, dtype=np.uint64))
        s = int(rng.integers(0, 2**63, dtype=np.int64)) * 2 + 1
        want = philox4x32_np(c, (s & 0xFFFFFFFF, s >> 32))
        known.append((c, s, tuple(int(v) for v in want)))
    for c, seed, want in known:
        o = (ctypes.c_uint32 * 4)()
        call((ctypes.c_uint32 * 4)(*c), (ctypes.c_uint32 * 20)(*round_keys(seed)), o)
        assert tuple(o) == want, (c, seed)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate_within_statistical_bounds(p):
    shape = (16, 256) if SIMULATOR else (1024, 4096)
    x = torch.ones(shape, device=device())
    with poison_outputs():
        y = D.dropout_bias_act_forward(x, None, p, 2024, 1, config=CFG)
    y = y.cpu().numpy()
    kept = np.count_nonzero(y)
    n = y.size
    # Binomial(n, 1 - p): 5 standard deviations.
    assert abs(kept - n * (1 - p)) <= 5 * math.sqrt(n * p * (1 - p)), (kept, n, p)
    np.testing.assert_array_equal(y[y != 0], np.float32(1.0 / (1.0 - p)))
    host = D.dropout_keep_mask((1 << 20,), p, 7, 0)
    assert abs(host.sum() - host.size * (1 - p)) <= 5 * math.sqrt(host.size * p * (1 - p))


@pytest.mark.parametrize("p", [0.0, 1e-6, 2.0**-17, 0.1, 0.25, 1 / 3, 0.5, 0.9, 1 - 1e-6, 1.0])
def test_keep_threshold_is_16_bit_and_keep_rate_within_2_to_minus_17(p):
    t16 = D.keep_threshold(p)
    assert 0 <= t16 <= 65536
    # Kept iff (h + 1/2) / 2^16 >= float32(p) for the 16-bit draw h: exactly h >= t16.
    p32 = float(np.float32(p))
    h = np.arange(65536, dtype=np.float64)
    np.testing.assert_array_equal(h >= t16, (h + 0.5) / 65536 >= p32)
    assert abs((1 - t16 / 65536) - (1 - p)) <= 2.0**-17 < 8e-6
    draw, rng = D._rng_args(1, 2, p)
    assert draw == (t16 > 0 and p > 0)
    if draw:
        assert rng[-1] == 65536 * t16 - 1


@pytest.mark.parametrize("p,kept", [(1e-6, True), (1 - 1e-6, False)])
def test_extreme_p_without_draws_or_keeps(p, kept):
    """p below 2^-17 rounds to t16 = 0 (all kept, scaled, no Philox work); p above
    1 - 2^-17 to t16 = 65536 (none kept)."""
    x, b, go = _inputs((3, 16), "float32", seed=14)
    y, gx, gb = _run(x, b, go, p, 3, 4, "relu")
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, p, 3, 4, "relu", grad_out=go)
    assert bool((y != 0).any()) == kept
    assert_close(y, y_ref, "float32", "y")
    assert_close(gx, gx_ref, "float32", "grad_x")
    if kept:
        assert_close(gb, gb_ref, "float32", "grad_bias")
    else:
        assert bool((gb == 0).all())


def test_masks_differ_across_seeds_and_offsets():
    shape = (8, 64) if SIMULATOR else (512, 1024)
    p = 0.5
    x = torch.ones(shape, device=device())
    keys = [(1, 0), (2, 0), (1, 1), (1 + (1 << 32), 0), (1, 1 << 32), (2**64 - 1, 2**64 - 1)]
    masks = []
    for seed, offset in keys:
        with poison_outputs():
            _, m = D.dropout_bias_act_forward(x, None, p, seed, offset, return_mask=True,
                                              config=CFG)
        masks.append(m.cpu().numpy().astype(bool))
    n = x.numel()
    for i in range(len(masks)):
        for j in range(i + 1, len(masks)):
            agree = np.count_nonzero(masks[i] == masks[j])
            # Independent masks agree on half the elements: Binomial(n, 1/2), 5 sigma.
            assert abs(agree - n / 2) <= 5 * math.sqrt(n / 4), (keys[i], keys[j], agree)


@pytest.mark.parametrize("dt", DTYPES)
def test_forward_and_backward_drop_the_same_elements(dt):
    shape = (5, 24)
    x, b, _ = _inputs(shape, dt, seed=8)
    x = x.abs() + 1
    b = b.abs()
    go = torch.ones(shape, dtype=x.dtype, device=device())
    y, gx, _ = _run(x, b, go, 0.5, 31337, 4, "relu")
    want = D.dropout_keep_mask(shape, 0.5, 31337, 4)
    np.testing.assert_array_equal(y.cpu().float().numpy() != 0, want)
    np.testing.assert_array_equal(gx.cpu().float().numpy() != 0, want)


CONFIGS = [D.LaunchConfig(threads=32), D.LaunchConfig(threads=64, block_x=1),
           D.LaunchConfig(threads=64, block_x=2, rows_per_block=1),
           D.LaunchConfig(threads=32, block_x=8, rows_per_block=3, unroll=1),
           D.LaunchConfig(threads=64, block_x=4, unroll=2),
           D.LaunchConfig(threads=128, block_x=32, unroll=4),
           D.LaunchConfig(threads=64, fill=1), D.LaunchConfig(threads=32, unroll=4, fill=2),
           D.LaunchConfig(threads=64, fill=0), D.LaunchConfig(threads=64, stages=2),
           D.LaunchConfig(threads=32, block_x=8, rows_per_block=5, stages=3),
           D.LaunchConfig(threads=64, stages=4)]


@pytest.mark.parametrize("shape", [(9, 24), (9, 22)], ids=str)
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_results_identical_across_launch_configurations(dt, shape):
    x, b, go = _inputs(shape, dt, seed=2)
    p, seed, offset, act = 0.35, 5, 6, "gelu"
    _, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, p, seed, offset, act, grad_out=go)
    base = None
    for cfg in CONFIGS:
        y, gx, gb = _run(x, b, go, p, seed, offset, act, config=cfg)
        if base is None:
            base = (y, gx)
        else:
            assert torch.equal(y, base[0]), cfg
            assert torch.equal(gx, base[1]), cfg
        # grad_bias sums rows in a configuration-dependent order: compared to float64.
        assert_close(gb, gb_ref, dt, f"grad_bias {cfg}")


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("p,return_mask", [(0.0, False), (0.3, False), (0.3, True)])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_staged_forward_same_bits(dt, activation, p, return_mask, stages):
    """LaunchConfig.stages (v13, opt-in in the forward): the 16-bit vector forward
    reading its rows through a cp.async ring of ``stages`` shared slots gives the bits (y
    and the mask) of the register-prefetched kernel, with rows per block not a multiple
    of the ring (a thread's last rows leave slots unfilled) and p = 0 (no draws), and
    against float64."""
    shape = (45, 64) if SIMULATOR else (4099, 4096)
    x, b, _ = _inputs(shape, dt, seed=8)
    threads = 64 if SIMULATOR else 256
    # Simulator: one block of 8 x 8 threads, 5-6 rows a thread, so the ring wraps.
    rpb = 45 if SIMULATOR else None
    base = D.LaunchConfig(threads=threads, rows_per_block=rpb)
    staged = base._replace(stages=stages)
    with poison_outputs():
        want = D.dropout_bias_act_forward(x, b, p, 9, 2, activation, return_mask=return_mask,
                                          config=base)
        got = D.dropout_bias_act_forward(x, b, p, 9, 2, activation, return_mask=return_mask,
                                         config=staged)
    if return_mask:
        assert torch.equal(got[1], want[1])
        want, got = want[0], got[0]
    assert torch.equal(got, want)
    assert_close(got, D.dropout_bias_act_ref(x, b, p, 9, 2, activation), dt, "y")
    kernel = D.make_forward_kernel(dt, activation, True, threads, 1, return_mask,
                                   1 if p else 0, stages)
    assert f"st{stages}" in kernel.name


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("how", ["p0", "philox", "mask", "nobias"])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_staged_backward_same_bits(dt, activation, how, stages):
    """LaunchConfig.stages in the backward (v13): grad_out and x through the
    cp.async ring give the bits of grad_x and grad_bias of the register-batched kernel
    at one row a batch and the same rows per block (so the same partial rows), with
    draws, at p = 0, without a bias grad, and with a stored mask (that mode keeps the
    register batches: the same kernel)."""
    shape = (45, 64) if SIMULATOR else (4099, 4096)
    x, b, go = _inputs(shape, dt, seed=12)
    threads = 64 if SIMULATOR else 256
    rpb = 45 if SIMULATOR else 64
    base = D.LaunchConfig(threads=threads, rows_per_block=rpb, unroll=1)
    p = 0.0 if how == "p0" else 0.3
    kw = {"need_bias_grad": how != "nobias"}
    if how == "mask":
        kw["mask"] = torch.from_numpy(D.dropout_keep_mask(shape, p, 4, 1)).to(x.device)
    with poison_outputs():
        want = D.dropout_bias_act_backward(go, x, b, p, 4, 1, activation, config=base, **kw)
        got = D.dropout_bias_act_backward(go, x, b, p, 4, 1, activation,
                                          config=base._replace(stages=stages), **kw)
    assert torch.equal(got[0], want[0])
    if how == "nobias":
        assert got[1] is None and want[1] is None
    else:
        assert torch.equal(got[1], want[1])
    _, gx_ref, _ = D.dropout_bias_act_ref(x, b, p, 4, 1, activation, grad_out=go)
    assert_close(got[0], gx_ref, dt, "grad_x")
    if how != "mask":
        mode = D.MODE_NONE if p == 0 else D.MODE_PHILOX
        kernel = D.make_backward_kernel(dt, activation, True, threads, 1, mode,
                                        tile_reduce=D._tile_reduce_for(base, how != "nobias"),
                                        stages=stages)
        assert f"st{stages}" in kernel.name


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_default_ring_without_bias_grad_same_bits(dt, activation, monkeypatch):
    """v13's default: the 16-bit backward with Philox draws and no bias grad reads its
    rows through a 3-slot ring (at three waves; silu keeps two rows a batch); its grad_x
    has the bits of the register batches (stages=0), for every activation, including
    rows that do not fill the last block. The launcher's pick is checked on the kernel
    it makes."""
    shape = (45, 64) if SIMULATOR else (4099, 4096)
    x, b, go = _inputs(shape, dt, seed=14)
    threads = 64 if SIMULATOR else None
    calls = _spy(monkeypatch, "make_backward_kernel")
    with poison_outputs():
        got, none = D.dropout_bias_act_backward(go, x, b, 0.3, 4, 1, activation,
                                                need_bias_grad=False,
                                                config=D.LaunchConfig(threads=threads))
        want, _ = D.dropout_bias_act_backward(go, x, b, 0.3, 4, 1, activation,
                                              need_bias_grad=False,
                                              config=D.LaunchConfig(threads=threads, stages=0))
    assert none is None
    made = [kernel.name for _, _, kernel in calls]
    paths = [name.split("_v16u")[1].split("_t")[0] for name in made]
    assert paths[0] == ("2" if activation == "silu" else "1st3") and "st" not in paths[1], made
    assert torch.equal(got, want)
    _, gx_ref, _ = D.dropout_bias_act_ref(x, b, 0.3, 4, 1, activation, grad_out=go)
    assert_close(got, gx_ref, dt, "grad_x")


def test_default_stages_only_without_bias_grad_with_draws():
    """Where the ring is the default (v13): 16-bit, vector path, Philox draws, no bias
    grad, every activation but silu; off with a bias grad and for silu (both measured
    slower), at p = 0, with a stored mask, at float32 and on the scalar path."""
    for act in ACTIVATIONS:
        want = 0 if act == "silu" else 3
        assert D._default_stages("float16", act, True, D.MODE_PHILOX, False) == want
        assert D._default_stages("bfloat16", act, True, D.MODE_PHILOX, False) == want
        assert D._default_stages("float16", act, True, D.MODE_PHILOX, True) == 0
        assert D._default_stages("float16", act, True, D.MODE_NONE, False) == 0
        assert D._default_stages("float16", act, True, D.MODE_MASK, False) == 0
        assert D._default_stages("float32", act, True, D.MODE_PHILOX, False) == 0
        assert D._default_stages("float16", act, False, D.MODE_PHILOX, False) == 0
    assert D._default_fill("float16", False, False, True) == 3


def test_default_fwd_fill_gelu_16bit_rows_to_16384():
    """Where the forward's grid is four waves of resident blocks (v15): the 16-bit gelu
    forward with Philox draws on the vector path, rows of at most 16384 columns, the
    shipped kernel (no explicit unroll, no ring, no returned mask); the nominal plan
    everywhere else (measured slower at N = 65536, unmeasured for the rest)."""
    fill = D._default_fwd_fill
    for dt in ("float16", "bfloat16"):
        for n in (8, 512, 4096, 12288, D._FWD_FILL_MAX_N):
            assert fill(dt, "gelu", True, n, True, None, 0, False) == 4, (dt, n)
        assert fill(dt, "gelu", True, D._FWD_FILL_MAX_N + 8, True, None, 0, False) == 0
        assert fill(dt, "gelu", True, 65536, True, None, 0, False) == 0
        for act in ACTIVATIONS:
            if act != "gelu":
                assert fill(dt, act, True, 4096, True, None, 0, False) == 0, act
        assert fill(dt, "gelu", False, 4096, True, None, 0, False) == 0
        assert fill(dt, "gelu", True, 4096, False, None, 0, False) == 0
        assert fill(dt, "gelu", True, 4096, True, 1, 0, False) == 0
        assert fill(dt, "gelu", True, 4096, True, None, 3, False) == 0
        assert fill(dt, "gelu", True, 4096, True, None, 0, True) == 0
    assert fill("float32", "gelu", True, 4096, True, None, 0, False) == 0


def test_default_fwd_threads_128_where_planned_in_waves(monkeypatch):
    """v24: the forward planned in whole waves (the 16-bit gelu forward with draws,
    rows up to _FWD_FILL_MAX_N) runs blocks of 128 threads; every other forward keeps
    _default_threads; an explicit LaunchConfig.threads wins. Checked on the kernels the
    launcher made."""
    assert D._default_fwd_threads("float16", True, 4) == 128
    assert D._default_fwd_threads("float16", True, 0) == D._default_threads("float16", True)
    assert D._default_fwd_threads("float32", True, 0) == D._default_threads("float32", True)
    calls = _spy(monkeypatch, "make_forward_kernel")
    x, b, _ = _inputs((5, 64), "float16", seed=16)
    wide, bw, _ = _inputs((2, D._FWD_FILL_MAX_N + 8), "float16", seed=17)
    with poison_outputs():
        D.dropout_bias_act_forward(x, b, 0.3, 4, 1, "gelu")
        D.dropout_bias_act_forward(x, b, 0.3, 4, 1, "relu")
        D.dropout_bias_act_forward(x, b, 0.0, 4, 1, "gelu")
        D.dropout_bias_act_forward(wide, bw, 0.3, 4, 1, "gelu")
        D.dropout_bias_act_forward(x, b, 0.3, 4, 1, "gelu", config=D.LaunchConfig(threads=64))
    threads = [args[3] for args, _, _ in calls]
    assert threads == [128, 256, 256, 256, 64]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_default_fwd_fill_same_bits(dt, monkeypatch):
    """The gelu forward's default four waves (v15) reach _plan as fill 4 and give the
    nominal plan's bits (LaunchConfig(fill=0)), with a last row block that is not
    full; at p = 0 the forward keeps the nominal plan."""
    shape = (45, 64) if SIMULATOR else (4099, 4096)
    x, b, _ = _inputs(shape, dt, seed=15)
    threads = 64 if SIMULATOR else None
    calls = _spy(monkeypatch, "_plan")
    with poison_outputs():
        got = D.dropout_bias_act_forward(x, b, 0.3, 4, 1, "gelu",
                                         config=D.LaunchConfig(threads=threads))
        want = D.dropout_bias_act_forward(x, b, 0.3, 4, 1, "gelu",
                                          config=D.LaunchConfig(threads=threads, fill=0))
        D.dropout_bias_act_forward(x, b, 0.0, 4, 1, "gelu", config=D.LaunchConfig(threads=threads))
    assert [kwargs["fill"] for _, kwargs, _ in calls] == [4, 4, 0]
    assert torch.equal(got, want)
    y_ref = D.dropout_bias_act_ref(x, b, 0.3, 4, 1, "gelu")
    assert_close(got, y_ref, dt, "y")


def test_fill_plans_whole_waves_of_resident_blocks(monkeypatch):
    """LaunchConfig.fill: row blocks from the kernel's real residency (here 2 blocks an
    SM of 132), not the nominal 2048 // threads: 4096 x 16384 at 4 rows a batch (64
    column strips, batches of 32 rows) takes 4 row blocks of 1024 rows for one wave
    (256 of 264 slots) where the half-wave heuristic asks 9 of 480 (2.2 waves at 2
    blocks an SM)."""

    class Resident2:
        def resident_blocks(self, threads, shared, device):
            return 2

    monkeypatch.setattr(D, "sm_count", lambda device: 132)
    cfg = D.LaunchConfig(threads=256)
    half = D._plan(4096, 16384, True, 4, cfg, None, D._WAVES_BIAS_GRAD)
    assert (half.grid, half.rows_per_block) == ((64, 9), 480)
    for fill, want in ((1, ((64, 4), 1024)), (2, ((64, 8), 512))):
        plan = D._plan(4096, 16384, True, 4, cfg._replace(fill=fill), None,
                       D._WAVES_BIAS_GRAD, Resident2())
        assert (plan.grid, plan.rows_per_block) == want, fill
    # Rows too few for the wave: one batch a row block, at least one block.
    plan = D._plan(40, 16384, True, 4, cfg._replace(fill=1), None, kernel=Resident2())
    assert (plan.grid, plan.rows_per_block) == ((64, 2), 32)
    # The backward's default (v10) passes fill; config fill 0 restores the nominal plan.
    assert D._plan(4096, 16384, True, 4, cfg, None, D._WAVES_BIAS_GRAD, Resident2(),
                   fill=1) == D._plan(4096, 16384, True, 4, cfg._replace(fill=1), None,
                                      D._WAVES_BIAS_GRAD, Resident2())
    assert D._plan(4096, 16384, True, 4, cfg._replace(fill=0), None, D._WAVES_BIAS_GRAD,
                   Resident2(), fill=1) == half
    assert [D._default_fill("float16", True, False), D._default_fill("bfloat16", False, False),
            D._default_fill("float16", True, True), D._default_fill("float32", True, False),
            D._default_fill("float32", False, False)] == [1, 2, 0, 0, 0]


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_row_pieces_match_one_launch(dt, monkeypatch):
    """Tensors of 2^28 or more 8-element groups go in row pieces (32-bit indices in
    the kernels): with the limit lowered to 5 groups, (7, 16) takes 4 pieces; grad_bias
    is reduced by the last piece's launch from every piece's partial rows. The first
    piece (and a whole tensor) runs the kernels that read no first group (v23); the
    others add theirs to the Philox counters."""
    shape = (7, 16)
    x, b, go = _inputs(shape, dt, seed=13)
    p, seed, offset, act = 0.3, 2**35 + 3, 1, "gelu"
    fwd = _spy(monkeypatch, "make_forward_kernel")
    bwd = _spy(monkeypatch, "make_backward_kernel")
    whole = _run(x, b, go, p, seed, offset, act)
    with poison_outputs():
        _, mask_whole = D.dropout_bias_act_forward(x, b, p, seed, offset, act, return_mask=True,
                                                   config=CFG)
    assert not any(k.name.endswith("_g64") for _, _, k in fwd + bwd)
    del fwd[:], bwd[:]
    monkeypatch.setattr(D, "_MAX_GROUPS", 5)
    assert len(D._pieces(7, 16, True)) == 4
    pieces = _run(x, b, go, p, seed, offset, act)
    assert [k.name.endswith("_g64") for _, _, k in fwd] == [False, True, True, True]
    assert [k.name.endswith("_g64") for _, _, k in bwd] == [False, True, True, True]
    with poison_outputs():
        _, mask_pieces = D.dropout_bias_act_forward(x, b, p, seed, offset, act,
                                                    return_mask=True, config=CFG)
        gx_m, gb_m = D.dropout_bias_act_backward(go, x, b, p, 0, 0, act, mask=mask_pieces,
                                                 config=CFG)
    assert torch.equal(whole[0], pieces[0]) and torch.equal(whole[1], pieces[1])
    assert torch.equal(mask_whole, mask_pieces)
    assert torch.equal(gx_m, whole[1])
    _, _, gb_ref = D.dropout_bias_act_ref(x, b, p, seed, offset, act, grad_out=go)
    assert_close(pieces[2], gb_ref, dt, "grad_bias")
    assert_close(gb_m, gb_ref, dt, "grad_bias (mask)")


@pytest.mark.parametrize("shape", [(37, 16), (37, 14)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_bias_reduce_kernel_pdl_same_bits(dt, shape):
    """bias_reduce="kernel_pdl" (v14, opt-in): the reduction kernel as a dependent
    launch, the backward's blocks triggering it, gives the bits of the plain reduction
    kernel (grad_bias) and of the default (grad_x), on the vector and scalar paths;
    the launcher makes the trigger and wait variants (on a GPU of sm_90 or later)."""
    x, b, go = _inputs(shape, dt, seed=16)
    base = D.LaunchConfig(threads=32, block_x=2, rows_per_block=1)
    with poison_outputs():
        want = D.dropout_bias_act_backward(go, x, b, 0.2, 9, 1, "gelu",
                                           config=base._replace(bias_reduce="kernel"))
        got = D.dropout_bias_act_backward(go, x, b, 0.2, 9, 1, "gelu",
                                          config=base._replace(bias_reduce="kernel_pdl"))
        plain = D.dropout_bias_act_backward(go, x, b, 0.2, 9, 1, "gelu", config=base)
    assert torch.equal(got[1], want[1])
    assert torch.equal(got[0], want[0]) and torch.equal(got[0], plain[0])
    vec = shape[1] % 8 == 0
    trig = D.make_backward_kernel(dt, "gelu", vec, 32, None, D.MODE_PHILOX if vec else -1,
                                  tile_reduce="direct", trigger=True)
    assert trig.name.endswith("_trig")
    dep = D.make_bias_grad_kernel(dt, D._REDUCE_THREADS, True)
    assert dep.dependent and dep.name.endswith("_dep")


@pytest.mark.ptx
@pytest.mark.parametrize("dt", DTYPES)
def test_bias_reduce_pdl_kernels_ptx(dt):
    """v14's kernels (opt-in) compile for sm_90 with their griddepcontrol instruction
    (the backward's trigger, the reduction's wait) and the registers of their plain
    forms, which have none."""
    threads = D._default_threads(dt, True)
    pairs = [(D.make_backward_kernel(dt, act, True, threads, fixed_mode=D.MODE_PHILOX,
                                     tile_reduce="direct", trigger=trig),
              "griddepcontrol.launch_dependents")
             for act in ("none", "gelu") for trig in (False, True)]
    pairs += [(D.make_bias_grad_kernel(dt, 1024, dep), "griddepcontrol.wait")
              for dep in (False, True)]
    reports = griddep_pair_reports(pairs)
    for plain, dependent in zip(reports[::2], reports[1::2]):
        assert dependent["spill_stores"] == 0 and dependent["stack"] == 0, dependent
        assert dependent["registers"] <= plain["registers"] + 2, (plain, dependent)


@pytest.mark.parametrize("dt", ["float16", "float32"])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("fence,reduce,step,tile", [("block", "last_block", None, None),
                                                    ("thread", "last_block", None, None),
                                                    ("block", "kernel", None, None),
                                                    ("block", "kernel_pdl", None, None),
                                                    ("block", "last_block", 1, None),
                                                    ("block", "last_block", 4, None),
                                                    ("block", "last_block", None, "shuffle")])
def test_bias_grad_last_block_reduction(dt, activation, fence, reduce, step, tile):
    """grad_bias from many row blocks (rows_per_block=1: 37 partial rows, more than the
    final_step x blockDim.y = 16, 32 or 64 rows the last block sums per round: 3, 2 or 1
    rounds, the last one partial) on the vector and scalar paths, with either way of
    publishing the partial rows (one fence a block, or one a thread) and either
    reduction (the last block of each strip, or a kernel of its own, plainly or as a
    dependent launch): against float64, bit-identical run to run (fixed summation order
    whichever block arrives last), the arrival counters back at zero after each launch,
    and at every final_step the same bits as at the default; the tiles summed directly
    (the default with a bias grad) or by shuffles (tile_reduce="shuffle"). On a GPU also
    3001 row blocks of 2 rows racing over 16 strips."""
    if SIMULATOR and (step, tile) != (None, None) and (dt, activation) != ("float16", "none"):
        pytest.skip("simulator: final_step and tile_reduce on one dtype and activation "
                    "(~40 s a case); the GPU runs every combination")
    cfg = D.LaunchConfig(threads=32, block_x=2, rows_per_block=1, fence=fence,
                         bias_reduce=reduce, final_step=step, tile_reduce=tile)
    shapes = [((37, 16), cfg), ((37, 14), cfg)]
    if SIMULATOR and step is not None:
        shapes = shapes[:1]  # final_step is the vector path's (N = 14 takes the scalar one)
    if not SIMULATOR:
        shapes.append(((6001, 4096), D.LaunchConfig(rows_per_block=2, fence=fence,
                                                     bias_reduce=reduce, final_step=step,
                                                     tile_reduce=tile)))
    for shape, cfg in shapes:
        x, b, go = _inputs(shape, dt, seed=15)
        p, seed, offset = 0.2, 9, 1
        outs = []
        for _ in range(2):
            with poison_outputs():
                outs.append(D.dropout_bias_act_backward(go, x, b, p, seed, offset, activation,
                                                        config=cfg))
            for counters in D._COUNTERS.values():
                owner = counters.owner
                host = (counters.host if counters.host is not None
                        else owner.get() if hasattr(owner, "get") else owner.cpu().numpy())
                assert not np.asarray(host).any()
        _, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, p, seed, offset, activation,
                                                    grad_out=go)
        assert torch.equal(outs[0][1], outs[1][1]) and torch.equal(outs[0][0], outs[1][0])
        assert_close(outs[0][0], gx_ref, dt, "grad_x")
        assert_close(outs[0][1], gb_ref, dt, "grad_bias")
        if step is not None:
            # Each thread adds its rows ty, ty + by, ... in that order at any step.
            _, gb_default = D.dropout_bias_act_backward(go, x, b, p, seed, offset, activation,
                                                        config=cfg._replace(final_step=None))
            assert torch.equal(outs[0][1], gb_default)


@pytest.mark.parametrize("need_bias_grad,config,want", [
    (True, None, "direct"), (False, None, "shuffle"),
    (True, "shuffle", "shuffle"), (False, "direct", "direct")])
def test_default_tile_reduce_by_bias_grad(monkeypatch, need_bias_grad, config, want):
    """v7's choice: the backward sums its tiles directly when it reduces a bias grad
    (5-7 us faster on the H100) and keeps the 40-register shuffle kernel when it does
    not (the unused epilogue's 48 registers cost 2.6 us there); a configured
    tile_reduce wins either way."""
    calls = _spy(monkeypatch, "make_backward_kernel")
    x, b, go = _inputs((4, 16), "float16", seed=3)
    gx, gb = D.dropout_bias_act_backward(go, x, b, 0.2, 9, 1, "none",
                                         need_bias_grad=need_bias_grad,
                                         config=D.LaunchConfig(tile_reduce=config))
    picked = [args[8] if len(args) > 8 else kwargs.get("tile_reduce", "shuffle")
              for args, kwargs, _ in calls]
    assert picked == [want]
    assert (gb is not None) == need_bias_grad


@pytest.mark.parametrize("dt", DTYPES)
def test_vector_and_scalar_paths_agree(dt):
    """A view 2 bytes off an 8-byte boundary takes the scalar path: same bits."""
    shape = (6, 16)
    x, b, go = _inputs(shape, dt, seed=9)
    n = x.numel()
    x_big = torch.zeros(n + 1, dtype=x.dtype, device=device())
    x_big[1:] = x.reshape(-1)
    x_off = x_big[1:].view(shape)
    assert (x_off.data_ptr() % 8) != 0
    y_vec, gx_vec, gb_vec = _run(x, b, go, 0.3, 10, 0, "squared_relu")
    y_sc, gx_sc, gb_sc = _run(x_off, b, go, 0.3, 10, 0, "squared_relu")
    assert torch.equal(y_vec, y_sc)
    assert torch.equal(gx_vec, gx_sc)
    assert_close(gb_sc, gb_vec.double(), dt, "grad_bias")


@pytest.mark.parametrize("shape", [(7, 12), (5, 11)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_mask_variant_equals_recompute_variant(dt, shape):
    x, b, go = _inputs(shape, dt, seed=4)
    p, seed, offset, act = 0.3, 42, 17, "leaky_relu"
    with poison_outputs():
        y_mask, mask = D.dropout_bias_act_forward(x, b, p, seed, offset, act, return_mask=True,
                                                  config=CFG)
        y = D.dropout_bias_act_forward(x, b, p, seed, offset, act, config=CFG)
        gx, gb = D.dropout_bias_act_backward(go, x, b, p, seed, offset, act, config=CFG)
        gx_m, gb_m = D.dropout_bias_act_backward(go, x, b, p, 0, 0, act, mask=mask, config=CFG)
        gx_bool, gb_bool = D.dropout_bias_act_backward(go, x, b, p, 0, 0, act,
                                                       mask=mask.bool(), config=CFG)
    assert mask.dtype == torch.uint8 and mask.shape == x.shape
    np.testing.assert_array_equal(mask.cpu().numpy(),
                                  D.dropout_keep_mask(shape, p, seed, offset).astype(np.uint8))
    assert torch.equal(y_mask, y)
    assert torch.equal(gx_m, gx) and torch.equal(gb_m, gb)
    assert torch.equal(gx_bool, gx) and torch.equal(gb_bool, gb)


def test_p_zero_is_identity_and_ignores_seed():
    x, b, go = _inputs((4, 12), "float32", seed=6)
    y1, gx1, gb1 = _run(x, b, go, 0.0, 1, 2, "gelu")
    y2, gx2, gb2 = _run(x, b, go, 0.0, 3, 4, "gelu")
    assert torch.equal(y1, y2) and torch.equal(gx1, gx2) and torch.equal(gb1, gb2)
    assert_close(y1, D.dropout_bias_act_ref(x, b, activation="gelu"), "float32", "y")
    with poison_outputs():
        _, mask = D.dropout_bias_act_forward(x, b, 0.0, return_mask=True, config=CFG)
    assert bool((mask == 1).all())


# act(inf) * scale is computed before the select drops it; the simulator's NumPy
# scalars warn about that inf * 0.
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("shape", [(4, 12), (3, 13)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_p_one_gives_zeros_without_nan(dt, shape):
    x, b, go = _inputs(shape, dt, seed=1)
    x[0, 0] = float("inf")
    x[1, 1] = float("nan")
    go[0, 1] = float("inf")
    y, gx, gb = _run(x, b, go, 1.0, 8, 0, "gelu")
    for t in (y, gx, gb):
        assert not torch.isnan(t).any()
        assert bool((t == 0).all())


def test_empty_inputs():
    x = torch.empty((0, 8), device=device())
    b = torch.randn(8, device=device())
    y, gx, gb = _run(x, b, x, 0.5, 0, 0, "gelu")
    assert y.shape == (0, 8) and gx.shape == (0, 8)
    assert gb.shape == (8,) and bool((gb == 0).all())
    x = torch.empty((3, 0), device=device())
    b = torch.empty(0, device=device())
    y, gx, gb = _run(x, b, x, 0.5, 0, 0, "relu")
    assert y.shape == (3, 0) and gx.shape == (3, 0) and gb.shape == (0,)
    with poison_outputs():
        y, mask = D.dropout_bias_act_forward(torch.empty((2, 0, 4), device=device()),
                                             return_mask=True)
    assert y.shape == (2, 0, 4) and mask.shape == (2, 0, 4)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

def _fwd_case(**over):
    x = torch.randn(4, 8, device=device())
    kw = {"x": x, "bias": torch.randn(8, device=device()), "p": 0.5, "seed": 1, "offset": 0,
          "activation": "relu"}
    kw.update(over)
    return kw


FORWARD_BAD = [
    ({"p": -0.1}, ValueError, "p must be"),
    ({"p": 1.5}, ValueError, "p must be"),
    ({"p": float("nan")}, ValueError, "p must be"),
    ({"p": "0.5"}, ValueError, "p must be"),
    ({"x": torch.randn(4, 8, dtype=torch.float64)}, TypeError, "x must have dtype"),
    ({"x": torch.ones(4, 8, dtype=torch.int32)}, TypeError, "x must have dtype"),
    ({"x": [[1.0, 2.0]]}, TypeError, "x must be a GPU array"),
    ({"x": torch.tensor(1.0)}, ValueError, "at least one dimension"),
    ({"x": torch.randn(8, 4).t()}, ValueError, "x must be contiguous"),
    ({"bias": torch.randn(7)}, ValueError, "bias must have shape (8,)"),
    ({"bias": torch.randn(2, 4)}, ValueError, "bias must have shape (8,)"),
    ({"bias": torch.randn(8, dtype=torch.float16)}, TypeError, "bias has dtype"),
    ({"activation": "tanh"}, ValueError, "activation must be one of"),
    ({"seed": -1}, ValueError, "seed must be in"),
    ({"seed": 2**64}, ValueError, "seed must be in"),
    ({"seed": 1.5}, TypeError, "seed must be an integer"),
    ({"offset": -3}, ValueError, "offset must be in"),
]


def _bad_id(v):
    # Stable across processes (pytest-xdist compares ids): no tensor reprs.
    if isinstance(v, dict):
        return "+".join(f"{k}={type(val).__name__}" for k, val in v.items())
    if isinstance(v, type):
        return v.__name__
    return str(v)[:40]


@pytest.mark.parametrize("over,exc,msg", FORWARD_BAD, ids=_bad_id)
def test_forward_rejects_bad_input(over, exc, msg):
    kw = _fwd_case(**{k: (v.to(device()) if isinstance(v, torch.Tensor) else v)
                      for k, v in over.items()})
    with pytest.raises(exc, match=msg.replace("(", r"\(").replace(")", r"\)")):
        D.dropout_bias_act_forward(**kw, config=CFG)


BACKWARD_BAD = [
    ({"x": torch.randn(4, 9)}, ValueError, "x has shape"),
    ({"x": None, "activation": "gelu"}, TypeError, "x is required"),
    ({"x": torch.randn(4, 8, dtype=torch.float16)}, TypeError, "x has dtype"),
    ({"mask": torch.ones(4, 8)}, TypeError, "mask must have dtype"),
    ({"mask": torch.ones(4, 7, dtype=torch.uint8)}, ValueError, "mask has shape"),
    ({"need_bias_grad": "yes"}, TypeError, "need_bias_grad must be a bool"),
    ({"p": 2.0}, ValueError, "p must be"),
    ({"grad_out": torch.randn(4, 8, dtype=torch.float64)}, TypeError, "grad_out must have dtype"),
]


@pytest.mark.parametrize("over,exc,msg", BACKWARD_BAD, ids=_bad_id)
def test_backward_rejects_bad_input(over, exc, msg):
    kw = {"grad_out": torch.randn(4, 8), "x": torch.randn(4, 8), "bias": torch.randn(8),
          "p": 0.5, "activation": "relu"}
    kw.update(over)
    kw = {k: (v.to(device()) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    with pytest.raises(exc, match=msg):
        D.dropout_bias_act_backward(**kw, config=CFG)


def test_backward_without_x_for_activation_none():
    x, b, go = _inputs((4, 12), "float16", seed=12)
    with poison_outputs():
        gx, gb = D.dropout_bias_act_backward(go, None, b, 0.2, 3, 1, "none", config=CFG)
        gx2, gb2 = D.dropout_bias_act_backward(go, x, b, 0.2, 3, 1, "none", config=CFG)
        gx3, gb3 = D.dropout_bias_act_backward(go, x, b, 0.2, 3, 1, "none",
                                               need_bias_grad=False, config=CFG)
    assert torch.equal(gx, gx2) and torch.equal(gb, gb2) and torch.equal(gx, gx3)
    assert gb3 is None


@pytest.mark.parametrize("config,msg", [(D.LaunchConfig(threads=48), "threads"),
                                        (D.LaunchConfig(block_x=64), "block_x"),
                                        (D.LaunchConfig(unroll=3), "unroll"),
                                        (D.LaunchConfig(fence="none"), "fence"),
                                        (D.LaunchConfig(bias_reduce="atomic"), "bias_reduce"),
                                        (D.LaunchConfig(final_step=3), "final_step"),
                                        (D.LaunchConfig(tile_reduce="tree"), "tile_reduce"),
                                        (D.LaunchConfig(fill=9), "fill"),
                                        (D.LaunchConfig(fill=-1), "fill"),
                                        (D.LaunchConfig(fill=1.5), "fill"),
                                        (D.LaunchConfig(stages=1), "stages"),
                                        (D.LaunchConfig(stages=5), "stages"),
                                        ({"threads": 64}, "LaunchConfig")])
def test_bad_launch_config(config, msg):
    with pytest.raises((TypeError, ValueError), match=msg):
        D.dropout_bias_act_forward(torch.randn(2, 8, device=device()), config=config)


@pytest.mark.parametrize("backward", [False, True])
def test_staged_ring_over_static_shared_memory_raises(backward):
    """stages x 16 bytes a thread (32 with x in the backward) beyond 48 KB of static
    shared memory: a ValueError naming stages when the kernel is made, before any
    launch (ptxas would reject the kernel)."""
    x = torch.randn(4, 64, device=device(), dtype=torch.float16)
    cfg = D.LaunchConfig(threads=1024, stages=4)
    with pytest.raises(ValueError, match="stages=4 at 1024 threads"):
        if backward:
            D.dropout_bias_act_backward(x, x, None, 0.3, 1, 0, "gelu", config=cfg)
        else:
            D.dropout_bias_act_forward(x, None, 0.3, 1, 0, "gelu", config=cfg)
    # 256 threads fit: 4 x 16 bytes x 256 = 16 KB (forward), 32 KB plus the tile (backward).
    D.make_forward_kernel("float16", "gelu", True, 256, 1, False, 1, 4)
    D.make_backward_kernel("float16", "gelu", True, 256, 1, D.MODE_PHILOX, stages=4)


@pytest.mark.gpu
def test_cpu_tensor_rejected_on_gpu():
    with pytest.raises(TypeError, match="x must be a CUDA tensor"):
        D.dropout_bias_act_forward(torch.randn(2, 8), p=0.5)
    with pytest.raises(TypeError, match="bias must be a CUDA tensor"):
        D.dropout_bias_act_forward(torch.randn(2, 8, device="cuda"), torch.randn(8), p=0.5)


def test_tile_stride_avoids_bank_conflicts():
    assert D.tile_stride(32, 8, 4) == 132
    for bx, by in [(32, 8), (32, 32), (16, 16), (1, 256), (4, 64)]:
        s = D.tile_stride(bx, by, 4)
        lanes = min(by, 32)
        reads = [yl * s + cs for cs in range(32 // lanes) for yl in range(lanes)]
        assert D._conflict_degree(reads) == 1, (bx, by, s)


# ---------------------------------------------------------------------------
# Torch front end
# ---------------------------------------------------------------------------

def _torch_fn():
    from interop.torch.dropout import FusedDropoutBiasAct, dropout_bias_act

    return dropout_bias_act, FusedDropoutBiasAct


@pytest.mark.parametrize("store_mask", [False, True])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("dt", DTYPES)
def test_torch_autograd_matches_reference(dt, activation, store_mask):
    from interop.torch._rng import next_seed_offset

    dropout_bias_act, _ = _torch_fn()
    shape = (2, 3, 12)
    x0, b0, go = _inputs(shape, dt, seed=21)
    x = x0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    gen = torch.Generator(device=x.device).manual_seed(5)
    with poison_outputs():
        y = dropout_bias_act(x, b, 0.3, activation, generator=gen, store_mask=store_mask)
        y.backward(go)
    seed, offset = next_seed_offset(x.device, (x.numel() + 3) // 4,
                                    torch.Generator(device=x.device).manual_seed(5))
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x0, b0, 0.3, seed, offset, activation,
                                                    grad_out=go)
    assert_close(y, y_ref, dt, "y")
    assert_close(x.grad, gx_ref, dt, "grad_x")
    assert_close(b.grad, gb_ref, dt, "grad_bias")


def test_torch_manual_seed_reproduces_runs():
    dropout_bias_act, _ = _torch_fn()
    x = torch.randn(4, 16, device=device())
    torch.manual_seed(7)
    y1 = dropout_bias_act(x, None, 0.5)
    y2 = dropout_bias_act(x, None, 0.5)
    torch.manual_seed(7)
    y3 = dropout_bias_act(x, None, 0.5)
    assert torch.equal(y1, y3)
    assert not torch.equal(y1, y2)


def test_torch_eval_and_non_contiguous_input():
    dropout_bias_act, _ = _torch_fn()
    x = torch.randn(12, 5, device=device()).t()
    b = torch.randn(12, device=device())
    y = dropout_bias_act(x, b, 0.9, "relu", training=False)
    assert_close(y, D.dropout_bias_act_ref(x, b, activation="relu"), "float32", "y")


def test_torch_module():
    _, FusedDropoutBiasAct = _torch_fn()
    m = FusedDropoutBiasAct(p=0.2, activation="squared_relu", bias_shape=8, device=device())
    assert "squared_relu" in repr(m)
    x = torch.randn(3, 8, device=device(), requires_grad=True)
    y = m(x)
    y.sum().backward()
    assert m.bias.grad is not None and m.bias.grad.shape == (8,)
    m.eval()
    with torch.no_grad():
        assert_close(m(x), D.dropout_bias_act_ref(x, m.bias, activation="squared_relu"),
                     "float32", "eval")
    none = FusedDropoutBiasAct(p=0.0)
    assert none.bias is None
    with pytest.raises(ValueError, match="p must be"):
        FusedDropoutBiasAct(p=1.1)


# The torch.compile route: custom ops (issue #15).

@pytest.mark.parametrize("store_mask", [False, True])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("has_bias", [True, False])
def test_custom_ops_opcheck(has_bias, activation, store_mask):
    """torch.library.opcheck of the forward op (with its autograd) and the backward op."""
    from interop.torch import dropout as tdrop

    x0, b0, go = _inputs((3, 20), "float32", seed=31)
    x = x0.clone().requires_grad_()
    b = b0.clone().requires_grad_() if has_bias else None
    so = torch.tensor([5, 8], dtype=torch.int64)
    torch.library.opcheck(tdrop._dropout_fwd, (x, b, so, 0.3, activation, store_mask))
    with torch.no_grad():
        out = tdrop._dropout_fwd(x, b, so, 0.3, activation, store_mask)
    mask = out[2] if store_mask else None
    bd = None if b is None else b.detach()
    torch.library.opcheck(tdrop._dropout_bwd, (go, x0, bd, mask, so, 0.3, activation, True))


def test_custom_op_matches_reference_with_the_seed_it_used():
    """Compiled, the seed is drawn inside the graph; the op's second output is the pair
    it used, and forward and backward match the float64 reference keyed by it."""
    from interop.torch import dropout as tdrop
    from interop.torch._compiled import compiled_seed

    x0, b0, go = _inputs((4, 24), "float32", seed=32)
    b = b0.clone().requires_grad_()

    def f(x):
        y, used = tdrop._dropout_fwd(x, b, compiled_seed(True), 0.4, "gelu_tanh", False)
        return y * 1.0, used

    x = x0.clone().requires_grad_()
    y, used = torch.compile(f, backend=compile_backend(), fullgraph=True)(x)
    y.backward(go)
    seed, offset = used.tolist()
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x0, b0, 0.4, seed, offset, "gelu_tanh",
                                                    grad_out=go)
    assert_close(y, y_ref, "float32", "y")
    assert_close(x.grad, gx_ref, "float32", "grad_x")
    assert_close(b.grad, gb_ref, "float32", "grad_bias")


@pytest.mark.parametrize("store_mask", [False, True])
def test_torch_compile_fullgraph(store_mask):
    """torch.compile(fullgraph=True) of the module: one graph, our op in it; two calls
    in one graph draw two masks (no CSE); torch.manual_seed reproduces a compiled run;
    the mask backward applies is the one forward drew."""
    import torch._dynamo

    _, FusedDropoutBiasAct = _torch_fn()
    torch._dynamo.reset()
    p = 0.3
    mod = FusedDropoutBiasAct(p=p, bias_shape=24, store_mask=store_mask, device=device())
    with torch.no_grad():
        mod.bias.copy_(torch.randn(24))
    x0 = torch.randn(2, 7, 24, device=device())
    go = torch.randn(2, 7, 24, device=device())

    def f(x):
        return mod(x), mod(x)

    assert "numba_fused.dropout_bias_act_fwd.default" in compiled_targets(f, x0)
    cf = torch.compile(f, backend=compile_backend(), fullgraph=True)
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        x = x0.clone().requires_grad_()
        mod.zero_grad(set_to_none=True)
        y1, y2 = cf(x)
        y1.backward(go)
        runs.append((y1.detach(), y2.detach(), x.grad, mod.bias.grad))
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    y1, y2, gx, gb = runs[0]
    assert not torch.equal(y1 != 0, y2 != 0), "two dropouts in one graph drew one mask"
    kept = y1 != 0
    assert 0.15 < 1.0 - kept.float().mean().item() < 0.45
    z = (x0 + mod.bias.detach()) / (1 - p)
    assert_close(y1, torch.where(kept, z, torch.zeros_like(z)), "float32", "y")
    assert_close(gx, torch.where(kept, go / (1 - p), torch.zeros_like(go)), "float32", "grad_x")
    assert_close(gb, gx.sum((0, 1)), "float32", "grad_bias")


# ---------------------------------------------------------------------------
# CuPy front end (GPU with CuPy only)
# ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_cupy_front_end():
    cupy = pytest.importorskip("cupy")
    from interop.cupy.dropout import dropout_bias_act_backward, dropout_bias_act_forward

    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.standard_normal((64, 96)).astype(np.float16))
    b = cupy.asarray(rng.standard_normal(96).astype(np.float16))
    go = cupy.asarray(rng.standard_normal((64, 96)).astype(np.float16))
    y, mask = dropout_bias_act_forward(x, b, 0.2, 3, 4, "gelu", return_mask=True)
    gx, gb = dropout_bias_act_backward(go, x, b, 0.2, 3, 4, "gelu", mask=mask)
    assert all(isinstance(a, cupy.ndarray) for a in (y, mask, gx, gb))
    y_ref, gx_ref, gb_ref = D.dropout_bias_act_ref(x, b, 0.2, 3, 4, "gelu", grad_out=go)
    assert_close(y, y_ref, "float16", "y")
    assert_close(gx, gx_ref, "float16", "grad_x")
    assert_close(gb, gb_ref, "float16", "grad_bias")
    with pytest.raises(TypeError, match="cupy.ndarray"):
        dropout_bias_act_forward(torch.randn(2, 4, device="cuda"))


# ---------------------------------------------------------------------------
# PTX
# ---------------------------------------------------------------------------

# The backward's other way of publishing the bias-grad partial rows (LaunchConfig.fence).
FENCE_THREAD = [D.make_backward_kernel(dt, act, True, D._default_threads(dt, True),
                                       fixed_mode=D.MODE_PHILOX, fence="thread")
                for dt in DTYPES for act in ("none", "gelu")]
# LaunchConfig.stages (v13; the backward's default without a bias grad, in
# shipped_kernels): the 16-bit passes through the cp.async ring.
STAGED = [k for dt in ("float16", "bfloat16") for act in ("none", "gelu") for st in (2, 3, 4)
          for k in (D.make_forward_kernel(dt, act, True, 256, 1, False, 1, st),
                    D.make_backward_kernel(dt, act, True, 256, 1, D.MODE_PHILOX,
                                           tile_reduce="direct", stages=st))]


@pytest.mark.ptx
@pytest.mark.parametrize("kernel", [*D.shipped_kernels(), *FENCE_THREAD, PHILOX_GROUP, *STAGED],
                         ids=lambda k: k.name)
def test_kernels_compile_to_ptx_without_spills(kernel):
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = kernel.ptx()
    assert ".target sm_90" in ptx
    rep = ptxas_report(ptx)
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0, rep
    assert rep["stack"] == 0, rep
    # The tile reducer's tag comes last; the checks below read the tags before it.
    name = kernel.name.removesuffix("_tile_direct")
    draws = name.startswith(("dropout_fwd", "dropout_bwd", "test_dropout_philox")) and not (
        name.endswith("_p0") or name.startswith("dropout_bwd")
        and name.endswith("_mask"))  # p = 0 and stored-mask variants draw nothing
    if draws:
        # The Philox rounds are 32x32->64 multiplies, not emulated 64-bit ones.
        assert ptx.count("mul.wide.u32") >= 19, kernel.name
    if kernel.name.startswith("dropout_bwd"):
        # v3: one acquire-release fence by one thread a block; v2: membar.gl by each.
        thread = name.endswith("_fence_thread")
        assert ("membar.gl" in ptx) == thread, kernel.name
        assert ("fence.acq_rel.gpu" in ptx) != thread, kernel.name
    if kernel.name.startswith(("dropout_fwd", "dropout_bwd")) and "_v16" in kernel.name:
        # The vector path moves its data in 16-byte accesses; the staged forward reads
        # through its shared ring (16-byte cp.async in, 16-byte ld.shared out) and, under
        # its launch bounds, keeps to 32 registers (8 blocks of 256 an SM).
        if "st" in name.split("_v16")[1].split("_")[0]:
            assert "cp.async.cg.shared.global" in ptx and "ld.shared.v4.u32" in ptx, kernel.name
            if kernel.name.startswith("dropout_fwd"):
                assert rep["registers"] <= 32, rep
        else:
            assert "ld.global.v4.u32" in ptx, kernel.name
        assert "st.global.v4.u32" in ptx, kernel.name
