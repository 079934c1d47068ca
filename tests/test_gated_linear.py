"""Gated linear units (SwiGLU / GeGLU): forward with the gate in the GEMM epilogue,
the down projection's dgrad with the gate's gradient in its epilogue, the backward.

Against the float64 references (``numba_fused.gated_linear.*_ref``) within docs/API.md's
tolerances, and against torch in the same dtype (two ``F.linear``, ``act(g) * u``,
autograd): ours within 2x of torch's error (floor: one unit roundoff). Outputs are
poisoned before each call, so an unwritten element fails.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numba_fused as nf
from interop.dlpack import poison_outputs
from numba_fused import gated_linear as gl
from numba_fused import linear_act as la
from numba_fused.dtypes import to_float64
from tests.util import (DTYPES, SIMULATOR, assert_close, device, record_calls, rel_err,
                        torch_dtype)

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
ACTS = ("silu", "gelu_tanh", "none")

# (leading shape, K, I): 1, primes, odd I (2I not a multiple of the epilogue's 8); I = 16:
# 16-byte rows, the vector epilogues (16-bit dtypes).
SIM_SHAPES = [((1,), 1, 1), ((17,), 24, 20), ((5,), 13, 63), ((2, 3, 7), 40, 17), ((9,), 24, 16)]
GPU_SHAPES = [((1000,), 1000, 127), ((127,), 17, 1000), ((2, 513), 1000, 384),
              ((4096,), 512, 1024)]
SHAPES = SIM_SHAPES if SIMULATOR else SIM_SHAPES + GPU_SHAPES


def _sid(s):
    lead, k, i = s
    return "x".join(map(str, lead)) + f"-K{k}-I{i}"


def _rand(shape, dtype, gen, scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(torch_dtype(dtype)).to(device())


def _inputs(lead, K, hid, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = _rand(lead + (K,), dtype, g)
    wg = _rand((hid, K), dtype, g, 1.0 / math.sqrt(K))
    wu = _rand((hid, K), dtype, g, 1.0 / math.sqrt(K))
    bg = _rand((hid,), dtype, g)
    bu = _rand((hid,), dtype, g)
    return x, wg, wu, bg, bu


def _act(name, z):
    if name == "silu":
        return F.silu(z)
    if name == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    return z


def _torch_h(x, wg, wu, bg, bu, act):
    """torch's own gated unit in x's dtype, or None where its CPU lacks the op."""
    try:
        return _act(act, F.linear(x, wg, bg)) * F.linear(x, wu, bu)
    except RuntimeError:
        return None


def _vs_torch(ours, theirs, ref, dtype, what, scale=None):
    """ours within the dtype's tolerance of float64 ``ref``, and its error at most twice
    torch's own (``theirs``; at least the unit roundoff). Errors are ||out - ref|| /
    ||ref||, or with ``scale`` (outputs that are sums: the sum of the terms' sizes)
    ||out - ref|| / ||scale||: where the terms cancel, the relative error of a few
    outputs says which order each library happened to sum in, not how well it sums."""
    assert_close(ours, ref, dtype, what)
    if theirs is None:
        return
    size = 1.0 if scale is None else (np.linalg.norm(to_float64(ref))
                                      / np.linalg.norm(to_float64(scale)))
    bound = max(2.0 * rel_err(theirs, ref) * size, UNIT_ROUNDOFF[dtype])
    err = rel_err(ours, ref) * size
    assert err <= bound, f"{what}: error {err:.3e} vs torch's {bound / 2:.3e} ({dtype})"


def test_interleave():
    g = torch.arange(6.0).reshape(3, 2)
    u = -torch.arange(6.0).reshape(3, 2)
    w = gl.interleave(g, u)
    assert w.shape == (6, 2)
    assert torch.equal(w[0::2], g) and torch.equal(w[1::2], u)
    with pytest.raises(ValueError, match="one shape"):
        gl.interleave(g, u[:2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shape", SHAPES, ids=_sid)
def test_forward_vs_float64_and_torch(shape, act, dtype):
    lead, K, hid = shape
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype)
    w, b = gl.interleave(wg, wu), gl.interleave(bg, bu)
    for bias in (b, None):
        with poison_outputs():
            h, z = nf.gated_linear_forward(x, w, bias, activation=act, save_preact=True)
            h_only = nf.gated_linear_forward(x, w, bias, activation=act)
        assert h.shape == lead + (hid,) and z.shape == lead + (2 * hid,)
        assert h.dtype == x.dtype and z.dtype == x.dtype
        assert torch.equal(h, h_only)
        h_ref, z_ref = gl.gated_linear_ref(x, w, bias, act, save_preact=True)
        theirs = _torch_h(x, wg, wu, bg if bias is not None else None,
                          bu if bias is not None else None, act)
        _vs_torch(h, theirs, h_ref, dtype, f"h ({act})")
        assert_close(z, z_ref, dtype, "pairs")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("shape", SHAPES, ids=_sid)
def test_forward_pair_reads_weights_in_place(shape, act, dtype, monkeypatch):
    """gated_linear_forward_pair gives gated_linear_forward's h on the interleaved copy,
    bit for bit, with and without the bias; 16-bit x and weights with 16-byte rows (K a
    multiple of 8) take the in-place GEMM (B's rows from the two weights), the others
    (float32, K = 1 / 13) the copy."""
    lead, K, hid = shape
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype, seed=K + hid)
    w, b = gl.interleave(wg, wu), gl.interleave(bg, bu)
    paired = []
    real = gl.gemm_gated_pair
    monkeypatch.setattr(gl, "gemm_gated_pair", lambda *a, **kw: paired.append(1) or real(*a, **kw))
    for bias in (b, None):
        with poison_outputs():
            h = gl.gated_linear_forward_pair(x, wg, wu, bias, activation=act)
            want = nf.gated_linear_forward(x, w, bias, activation=act)
        assert h.shape == want.shape and h.dtype == want.dtype
        assert torch.equal(h, want)
    # With GATED_PAIRS_EVERYWHERE off (it is on by default) large GEMMs run on wgmma,
    # which then reads the interleaved copy, and the backward takes the copy.
    M = math.prod(lead)
    wgmma = la._wgmma_for("fwd", dtype, True, None if SIMULATOR else x.device.index, M,
                          2 * hid, K) is not None
    everywhere = la.GATED_PAIRS_EVERYWHERE
    in_place = dtype != "float32" and K % 8 == 0 and (everywhere or not wgmma)
    assert gl.pair_in_place(x, wg, wu) == in_place
    assert gl.pair_in_place(x, wg, wu, backward=True) == (everywhere and in_place
                                                          and (2 * hid) % 8 == 0)
    assert len(paired) == (2 if in_place else 0)


def _spy_pairs(monkeypatch):
    """{'fwd' | 'dgrad' | 'wgrad': [wgmma tiling or None, ...]}: the pair GEMMs
    launched (on a GPU with prepared launches cleared, so none is skipped)."""
    seen = {"fwd": [], "dgrad": [], "wgrad": []}
    real = la._launch_gemm

    def spy(role, dtype, flat, Mg, Ng, Kg, lda, ldb, ldc, act, flags, vec_ab, device, wg,
            pair, stream, ex):
        if pair:
            seen[role].append(wg)
        return real(role, dtype, flat, Mg, Ng, Kg, lda, ldb, ldc, act, flags, vec_ab, device,
                    wg, pair, stream, ex)

    monkeypatch.setattr(la, "_launch_gemm", spy)
    return seen


# The pair GEMMs on both kernel families: mma.sync, and wgmma (forced in the
# simulator; on a GPU the default picks it for the large shapes).
PAIR_WGMMA = [False, True] if SIMULATOR else [None]


@pytest.mark.parametrize("wgmma", PAIR_WGMMA, ids=lambda v: f"wgmma{v}")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("shape", SHAPES, ids=_sid)
def test_pair_training_matches_the_interleaved_copy(shape, act, dtype, wgmma, monkeypatch):
    """Training without the interleaved weight: gated_linear_forward_pair with the pairs
    kept and gated_linear_backward_pair give, bit for bit, gated_linear_forward /
    gated_linear_backward on interleave(w_gate, w_up) (the gradient's rows split);
    16-bit x and weights with 16-byte rows (K and 2I multiples of 8) run every GEMM in
    place (B's rows and k-rows read from the two weights, wgrad's rows written to the
    two gradients), the others the copy. Outputs poisoned, gradients contiguous."""
    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    lead, K, hid = shape
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype, seed=5 + K)
    w, b = gl.interleave(wg, wu), gl.interleave(bg, bu)
    dh = _rand(lead + (hid,), dtype, torch.Generator().manual_seed(6))
    seen = _spy_pairs(monkeypatch)
    la._gemm_prepared.cache_clear()
    with la.use_wgmma(wgmma), poison_outputs():
        h, z = gl.gated_linear_forward_pair(x, wg, wu, b, act, save_preact=True)
        grads = gl.gated_linear_backward_pair(dh, x, wg, wu, z, act)
    with la.use_wgmma(wgmma), poison_outputs():
        h0, z0 = nf.gated_linear_forward(x, w, b, act, save_preact=True)
        gx0, gw0, gb0 = nf.gated_linear_backward(dh, x, w, z0, act)
    assert torch.equal(h, h0) and torch.equal(z, z0)
    for what, got, want in zip(("grad_x", "grad_w_gate", "grad_w_up", "grad_bias"), grads,
                               (gx0, gw0[0::2], gw0[1::2], gb0)):
        assert got.shape == want.shape and got.is_contiguous(), what
        assert torch.equal(got, want), what
    fwd_ok = dtype != "float32" and K % 8 == 0
    bwd_ok = fwd_ok and (2 * hid) % 8 == 0
    assert gl.pair_in_place(x, wg, wu) == fwd_ok
    assert gl.pair_in_place(x, wg, wu, backward=True) == bwd_ok
    assert len(seen["fwd"]) == (1 if fwd_ok else 0)
    assert len(seen["dgrad"]) == len(seen["wgrad"]) == (1 if bwd_ok else 0)
    if wgmma and bwd_ok:
        assert all(t is not None for ts in seen.values() for t in ts), "wgmma pair kernels"


@pytest.mark.parametrize("cfg_name", ["WG_SIM_SW128_HB", "WG_SIM_WS", "WG_SIM_WS_PF",
                                      "WG_SIM_WS_TMA", "WG_SIM_WS_EPI", "WG_SIM_WS_EPI2",
                                      "WG_SIM_WS_EPI3", "WG_SIM_WS_EPI4"])
def test_pair_training_on_the_swizzled_wgmma_tilings(cfg_name, monkeypatch):
    """The pair loaders' swizzled paths: whole tiles by strength reduction (the row
    stride halved, the array picked once a thread), edge tiles chunk by chunk, in
    the one-warpgroup and the warp-specialised (producer warpgroup) kernels, and the
    TMA forward's two half-tile boxes (its accumulator columns put back in the
    interleaved order); every GEMM of the forward with pairs and the backward equal
    to the interleaved copy's, bit for bit (M = 70: one whole 64-row tile and an
    edge)."""
    if not SIMULATOR and not la._hopper(torch.cuda.current_device()):
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    cfg = getattr(la, cfg_name)
    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    monkeypatch.setattr(la, "WG_SIM", cfg)
    monkeypatch.setattr(la, "WG_LARGE", cfg)
    seen = _spy_pairs(monkeypatch)
    la._gemm_prepared.cache_clear()
    lead, K, hid = (70,), 128, 64
    x, wg, wu, bg, bu = _inputs(lead, K, hid, "float16", seed=11)
    w, b = gl.interleave(wg, wu), gl.interleave(bg, bu)
    dh = _rand(lead + (hid,), "float16", torch.Generator().manual_seed(12))
    with la.use_wgmma(True), poison_outputs():
        h, z = gl.gated_linear_forward_pair(x, wg, wu, b, "silu", save_preact=True)
        grads = gl.gated_linear_backward_pair(dh, x, wg, wu, z, "silu")
        h0, z0 = nf.gated_linear_forward(x, w, b, "silu", save_preact=True)
        gx0, gw0, gb0 = nf.gated_linear_backward(dh, x, w, z0, "silu")
    assert torch.equal(h, h0) and torch.equal(z, z0)
    for got, want in zip(grads, (gx0, gw0[0::2], gw0[1::2], gb0)):
        assert torch.equal(got, want)
    assert all(len(v) == 1 and v[0] == cfg for v in seen.values()), seen


@pytest.mark.parametrize("act", ["silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gated_epilogues_with_the_fast_forms(dtype, act, monkeypatch):
    """epi 1 (the wgmma epilogue's activations in fast_act's forms, a chunk's 4 gates
    under one switch): the pair forward with bias (h; its pre-activations equal epi
    0's bit for bit, no activation in them) and gated_linear_dgrad (the F_GATED
    dgrad epilogue: act and act' of each gate) within the float64 references'
    tolerance and within 1.5x (or the unit roundoff) of epi 0's error; epi 2 (its
    shared-memory indices unsigned) equal to epi 1 bit for bit, and epi 3 (whole tiles
    finished from the registers: the forward's first 64 rows here) and epi 4 (its
    stores quad-transposed) to epi 2."""
    if not SIMULATOR and not la._hopper(torch.cuda.current_device()):
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    lead, K, hid, N = ((70,), 128, 64, 64) if SIMULATOR else ((300,), 512, 384, 256)
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype, seed=13)
    b = gl.interleave(bg, bu)
    gen = torch.Generator().manual_seed(14)
    gy = _rand(lead + (N,), dtype, gen)
    wd = _rand((N, hid), dtype, gen, 1.0 / math.sqrt(N))
    ref_h, ref_z = gl.gated_linear_ref(x, gl.interleave(wg, wu), b, act, save_preact=True)
    outs = {}
    for epi in (0, 1, 2, 3, 4):
        cfg = (la.WG_SIM_WS if SIMULATOR else la.WG_LARGE_WS_HB)._replace(epi=epi)
        monkeypatch.setattr(la, "WG_SIM", cfg)
        monkeypatch.setattr(la, "WG_LARGE", cfg)
        la._gemm_prepared.cache_clear()
        with la.use_wgmma(True), poison_outputs():
            h, z = gl.gated_linear_forward_pair(x, wg, wu, b, act, save_preact=True)
            dz = gl.gated_linear_dgrad(gy, wd, z, act)
        outs[epi] = (h, z, dz)
    la._gemm_prepared.cache_clear()
    ref_dz = gl.gated_linear_dgrad_ref(gy, wd, outs[0][1], act)
    assert torch.equal(outs[0][1], outs[1][1])
    # epi 2 changes only how the epilogue indexes shared memory.
    for a, b, c, d in zip(outs[1], outs[2], outs[3], outs[4]):
        assert torch.equal(a, b) and torch.equal(b, c) and torch.equal(b, d)
    for got, exact, ref, what in ((outs[1][0], outs[0][0], ref_h, "h"),
                                  (outs[1][2], outs[0][2], ref_dz, "dz")):
        assert_close(got, ref, dtype, what)
        assert rel_err(got, ref) <= max(1.5 * rel_err(exact, ref), UNIT_ROUNDOFF[dtype]), what


@pytest.mark.gpu
def test_front_end_pair_plans_on_the_tma_tiling(monkeypatch):
    """The torch front end's in-place gated forward, recorded as a plan on the TMA
    tiling (the plan makes its three tensor maps from each call's pointers): replays
    on new x give, bit for bit, the array level's pair forward on that tiling, and
    the recorded forward kernel is the TMA pair one."""
    import importlib

    from interop.torch import gated_mlp
    from numba_fused.plan import PlanCache

    if not la._hopper(torch.cuda.current_device()):
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    monkeypatch.setattr(la, "WG_LARGE", la.WG_LARGE_WS_TMA)
    front = importlib.import_module("interop.torch.gated_linear")
    monkeypatch.setattr(front, "_PAIR_PLANS", PlanCache())
    made = record_calls(monkeypatch, la, "make_wgmma_kernel")
    la._gemm_prepared.cache_clear()
    g = torch.Generator(device="cuda").manual_seed(4)
    wg, wu = (torch.randn(384, 256, device="cuda", dtype=torch.bfloat16, generator=g) / 16
              for _ in range(2))
    wd = torch.randn(256, 384, device="cuda", dtype=torch.bfloat16, generator=g) / 20
    with la.use_wgmma(True):
        for seed in range(3):
            x = torch.randn(300, 256, device="cuda", dtype=torch.bfloat16, generator=g)
            want = la.linear_act_forward(gl.gated_linear_forward_pair(x, wg, wu), wd)
            assert torch.equal(gated_mlp(x, wg, wu, wd), want), seed
    assert any(a[0] == "fwd" and a[2].tma and a[3] for a in made), made


@pytest.mark.parametrize("everywhere", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_pair_grads_asks_only_for_what_it_needs(dtype, everywhere, monkeypatch):
    """pair_grads: each subset of (grad_x, weights, bias) against the full set, None for
    the others; the copy's path (float32, or GATED_PAIRS_EVERYWHERE off: the
    interleaved weight, then the gradient split) the same way."""
    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", everywhere)
    lead, K, hid = (3, 5), 24, 20
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype, seed=7)
    dz = _rand(lead + (2 * hid,), dtype, torch.Generator().manual_seed(8))
    full = gl.pair_grads(dz, x, wg, wu)
    w64 = to_float64(gl.interleave(wg, wu))
    dz64 = to_float64(dz).reshape(-1, 2 * hid)
    x64 = to_float64(x).reshape(-1, K)
    gw64 = dz64.T @ x64
    for what, got, ref in zip(("grad_x", "grad_w_gate", "grad_w_up", "grad_bias"), full,
                              (to_float64(dz) @ w64, gw64[0::2], gw64[1::2], dz64.sum(0))):
        assert got.is_contiguous(), what
        assert_close(got, ref, dtype, what)
    for need in [(True, False, False), (False, True, False), (False, False, True),
                 (False, True, True)]:
        with poison_outputs():
            part = gl.pair_grads(dz, x, wg, wu, *need)
        wanted = (need[0], need[1], need[1], need[2])
        for i, (got, want) in enumerate(zip(part, wanted)):
            if want:
                assert torch.equal(got, full[i]), (need, i)
            else:
                assert got is None, (need, i)


@pytest.mark.parametrize("needs", [(True,) * 5, (False, True, False, True, False),
                                   (True, False, True, False, True),
                                   (False, False, False, True, True)], ids=str)
def test_mlp_grads_pair_matches_the_copy(needs, monkeypatch):
    """The torch front end's backward plans run _mlp_grads_pair (pairs) or _mlp_grads
    (the copy): the same gradients, bit for bit (the weight gradient's rows split),
    None exactly where not asked."""
    from interop.dlpack import as_kernel_array

    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    x, wg, wu, bg, bu = _inputs((7,), 24, 20, "float16", seed=9)
    w = gl.interleave(wg, wu)
    gen = torch.Generator().manual_seed(10)
    wd = _rand((16, 20), "float16", gen, 0.2)
    gy = _rand((7, 16), "float16", gen)
    h, z = nf.gated_linear_forward(x, w, None, "silu", save_preact=True)
    k = [as_kernel_array(t, "t") for t in (gy, x, w, wg, wu, wd, h, z)]
    copy = gl._mlp_grads(k[0], k[1], k[2], k[5], k[6], k[7], "silu", needs)
    pair = gl._mlp_grads_pair(k[0], k[1], k[3], k[4], k[5], k[6], k[7], "silu", needs)
    copy = [None if t is None else t.owner for t in copy]
    pair = [None if t is None else t.owner for t in pair]
    gw = copy[1]
    want = [copy[0], None if gw is None else gw[0::2], None if gw is None else gw[1::2]]
    for got, ref in zip(pair, want + copy[2:]):
        assert (got is None) == (ref is None)
        assert got is None or torch.equal(got, ref)


def test_pair_backward_checks_its_inputs():
    x, wg, wu, bg, bu = _inputs((3,), 16, 8, "float16")
    h, z = gl.gated_linear_forward_pair(x, wg, wu, save_preact=True)
    dh = torch.zeros_like(h)
    with pytest.raises(ValueError, match="grad_h must have shape"):
        gl.gated_linear_backward_pair(dh[:, :7].contiguous(), x, wg, wu, z)
    with pytest.raises(ValueError, match="preact must have shape"):
        gl.gated_linear_backward_pair(dh, x, wg, wu, z[:, :8].contiguous())
    with pytest.raises(ValueError, match="one shape"):
        gl.gated_linear_backward_pair(dh, x, wg, wu[:7], z)
    with pytest.raises(TypeError):
        gl.gated_linear_backward_pair(dh.float(), x, wg, wu, z)
    with pytest.raises(ValueError, match="preact must have shape"):
        gl.pair_grads(z[:, :8].contiguous(), x, wg, wu)
    with pytest.raises(TypeError, match="need_x"):
        gl.pair_grads(z, x, wg, wu, need_x=1)


def test_forward_pair_checks_its_inputs():
    x, wg, wu, bg, bu = _inputs((3,), 16, 8, "float16")
    with pytest.raises(ValueError, match="one shape"):
        gl.gated_linear_forward_pair(x, wg, wu[:7])
    with pytest.raises(ValueError, match="bias must have shape"):
        gl.gated_linear_forward_pair(x, wg, wu, bg)
    with pytest.raises(TypeError):
        gl.gated_linear_forward_pair(x, wg, wu.float())
    with pytest.raises(ValueError, match="features"):
        gl.gated_linear_forward_pair(x[:, :8].contiguous(), wg, wu)
    # An unaligned view of x (one element in) is read through the copy, with the same h.
    xs = torch.cat([x.new_zeros(1), x.reshape(-1)])[1:].view(3, 16)
    assert not gl.pair_in_place(xs, wg, wu)
    assert torch.equal(gl.gated_linear_forward_pair(xs, wg, wu),
                       nf.gated_linear_forward(xs, gl.interleave(wg, wu)))


def _torch_pair_grads(make_pairs, dh, act):
    """torch's gradient of h = act(g) * u w.r.t. the pairs (g, u) = make_pairs(),
    interleaved, in their dtype; None where torch's CPU lacks an op."""
    try:
        g, u = (t.detach().requires_grad_() for t in make_pairs())
        (_act(act, g) * u).backward(dh)
    except RuntimeError:
        return None
    return torch.stack((g.grad, u.grad), dim=-1).reshape(g.shape[:-1] + (2 * g.shape[-1],))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shape", SHAPES, ids=_sid)
def test_dgrad_fuses_the_gate_gradient(shape, act, dtype):
    """gated_linear_dgrad: dH = dy @ W_down, then the pairs' gradient, in one GEMM."""
    lead, K, hid = shape
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype, seed=1)
    w, b = gl.interleave(wg, wu), gl.interleave(bg, bu)
    _, z = nf.gated_linear_forward(x, w, b, activation=act, save_preact=True)
    n_out = 7 if SIMULATOR else 300
    gen = torch.Generator().manual_seed(2)
    w_down = _rand((n_out, hid), dtype, gen, 1.0 / math.sqrt(hid))
    dy = _rand(lead + (n_out,), dtype, gen)
    with poison_outputs():
        dz = nf.gated_linear_dgrad(dy, w_down, z, activation=act)
    assert dz.shape == z.shape and dz.dtype == z.dtype
    ref = gl.gated_linear_dgrad_ref(dy, w_down, z, act)
    try:
        dh = dy @ w_down
    except RuntimeError:
        dh = None
    theirs = None if dh is None else _torch_pair_grads(lambda: (z[..., 0::2], z[..., 1::2]),
                                                       dh, act)
    # dH sums n_out products: errors against the sum of their sizes (|dy| @ |W_down|),
    # through the same pair gradient (linear in dH). At one output pair (SIM_SHAPES'
    # first) the seven terms cancel ~100-fold, and torch's CPU matmul (2.13) and ours
    # sum them in different orders: 4e-7 / 1.3e-6 relative, 4e-9 / 1.4e-8 of the terms.
    scale = np.abs(gl.gated_linear_dgrad_ref(dy.abs(), w_down.abs(), z, act))
    _vs_torch(dz, theirs, ref, dtype, f"dz ({act})", scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shape", SHAPES, ids=_sid)
def test_backward_vs_float64(shape, act, dtype):
    lead, K, hid = shape
    x, wg, wu, bg, bu = _inputs(lead, K, hid, dtype, seed=3)
    w, b = gl.interleave(wg, wu), gl.interleave(bg, bu)
    _, z = nf.gated_linear_forward(x, w, b, activation=act, save_preact=True)
    dh = _rand(lead + (hid,), dtype, torch.Generator().manual_seed(4))
    with poison_outputs():
        dz = nf.gated_act_backward(dh, z, activation=act)
        gx, gw, gb = nf.gated_linear_backward(dh, x, w, z, activation=act)
    dz_ref = gl._pairs_grad_ref(to_float64(dh), to_float64(z), act)
    theirs = _torch_pair_grads(lambda: (F.linear(x, wg, bg), F.linear(x, wu, bu)), dh, act)
    _vs_torch(dz, theirs, dz_ref, dtype, "dz")
    refs = gl.gated_linear_backward_ref(dh, x, w, z, act)
    for what, got, ref in zip(("grad_x", "grad_weight", "grad_bias"), (gx, gw, gb), refs):
        assert got.shape == ref.shape, what
        assert_close(got, ref, dtype, what)


def test_errors_raise_before_writing():
    dtype = "float32"
    x, wg, wu, bg, bu = _inputs((3,), 8, 4, dtype)
    w = gl.interleave(wg, wu)
    with pytest.raises(ValueError, match="even number of rows"):
        nf.gated_linear_forward(x, w[:7])
    with pytest.raises(ValueError, match="expects K"):
        nf.gated_linear_forward(x[:, :5].contiguous(), w)
    with pytest.raises(ValueError, match="bias must have shape"):
        nf.gated_linear_forward(x, w, bg)
    with pytest.raises(ValueError, match="unknown activation|activation"):
        nf.gated_linear_forward(x, w, activation="tanh")
    _, z = nf.gated_linear_forward(x, w, save_preact=True)
    dh = torch.zeros(3, 4, dtype=torch.float32, device=device())
    with pytest.raises(ValueError, match="preact must have shape"):
        nf.gated_act_backward(dh, z[:, :6].contiguous())
    with pytest.raises(ValueError, match="grad_h must have shape"):
        nf.gated_linear_backward(dh[:, :3].contiguous(), x, w, z)
    with pytest.raises(ValueError, match="expects N"):
        nf.gated_linear_dgrad(torch.zeros(3, 5, device=device()),
                              torch.zeros(6, 4, device=device()), z)
    with pytest.raises(TypeError):
        nf.gated_linear_forward(x.to(torch.float16), w)


@pytest.mark.ptx
@pytest.mark.parametrize("kernel", list(gl.shipped_kernels()), ids=lambda k: k.name)
def test_kernels_compile_to_ptx(kernel):
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = kernel.ptx()
    assert ".target sm_90" in ptx
    rep = ptxas_report(ptx)
    assert rep["spill_stores"] == 0 and rep["stack"] == 0, rep
    assert not math.isnan(rep["registers"]) and np.isfinite(rep["registers"])


def _torch_mlp64(x, mod, act):
    """float64 reference of FusedGatedMLP ``mod`` on ``x`` with autograd leaves."""
    leaves = {"x": x.detach().double().requires_grad_()}
    for name, p in mod.named_parameters():
        leaves[name] = p.detach().double().requires_grad_()

    def lin(t, pre):
        return F.linear(t, leaves[f"{pre}.weight"], leaves.get(f"{pre}.bias"))

    y = lin(_act(act, lin(leaves["x"], "gate_proj")) * lin(leaves["x"], "up_proj"), "down_proj")
    return y, leaves


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act,bias", [("silu", False), ("gelu_tanh", True)])
def test_torch_fused_gated_mlp(dtype, act, bias):
    """interop.torch.FusedGatedMLP: output and every gradient against float64, and the
    state_dict keys of a Hugging Face LlamaMLP."""
    from interop.torch import FusedGatedMLP

    torch.manual_seed(0)
    lead, k, hid = ((2, 9), 24, 20) if SIMULATOR else ((4, 257), 512, 1376)
    mod = FusedGatedMLP(k, hid, bias=bias, activation=act, dtype=torch_dtype(dtype),
                        device=device())
    keys = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}
    if bias:
        keys |= {"gate_proj.bias", "up_proj.bias", "down_proj.bias"}
    assert set(mod.state_dict()) == keys
    x = torch.randn(lead + (k,), dtype=torch_dtype(dtype), device=device()).requires_grad_()
    gy = torch.randn(lead + (k,), dtype=torch_dtype(dtype), device=device())
    y = mod(x)
    y.backward(gy)
    y64, leaves = _torch_mlp64(x, mod, act)
    y64.backward(gy.double())
    assert y.shape == x.shape and y.dtype == x.dtype
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, leaves["x"].grad, dtype, "grad x")
    for name, p in mod.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
        assert_close(p.grad, leaves[name].grad, dtype, f"grad {name}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("tokens", [1, 3, 12])
def test_torch_gated_mlp_decodes_on_the_few_row_kernel(dtype, tokens, monkeypatch):
    """A decoder's step through interop.torch (FusedGatedMLP without autograd, 1-12
    tokens) with the few-row kernel forced: the gate and up GEMM on its pair form
    (the two weights in place), the down projection on its plain form, as many token
    tiles as the rows need; y against float64 and the same on a second call (the
    front end's plan)."""
    import importlib

    from interop.torch import FusedGatedMLP
    from interop.torch import gated_linear as tgl

    # By its full name: interop.torch's namespace holds the function linear_act.
    tla = importlib.import_module("interop.torch.linear_act")

    made = []
    real = la.make_skinny_kernel
    monkeypatch.setattr(la, "make_skinny_kernel",
                        lambda *a, **kw: made.append((a[2], a[3] if len(a) > 3 else
                                                      kw.get("pair", False))) or real(*a, **kw))
    torch.manual_seed(1)
    k, hid = 24, 40  # K and I multiples of 8: both GEMMs qualify
    mod = FusedGatedMLP(k, hid, activation="silu", dtype=torch_dtype(dtype), device=device())
    x = torch.randn(tokens, k, dtype=torch_dtype(dtype), device=device())
    for cache in (tgl._PAIR_PLANS, tla._FWD_PLANS):
        cache.clear()
    la._gemm_prepared.cache_clear()
    try:
        with la.use_skinny(True), torch.no_grad():
            with poison_outputs():
                y = mod(x)
            y2 = mod(x)
    finally:
        for cache in (tgl._PAIR_PLANS, tla._FWD_PLANS):
            cache.clear()
    y64, _ = _torch_mlp64(x, mod, "silu")
    assert_close(y, y64.detach(), dtype, "y")
    assert torch.equal(y, y2)
    tiles = la.cdiv(tokens, 8)
    assert (tiles, True) in made and (tiles, False) in made, made
    assert all(t == tiles for t, _ in made), made


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_gated_mlp_trains_without_the_copy(dtype, monkeypatch):
    """FusedGatedMLP's training step with 16-bit weights in 16-byte rows never builds
    the interleaved weight (nor keeps it for the backward): the forward and grad_x read
    the gate and up weights in place, the weight gradients come out of the GEMM as the
    two parameters' own contiguous arrays. Against float64, and the same bits when the
    step repeats (the second through the cached plans)."""
    import interop.torch.gated_linear as tgl
    from interop.torch import FusedGatedMLP

    def no_copy(*a, **kw):
        raise AssertionError("the interleaved copy was built")

    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    monkeypatch.setattr(tgl, "interleave", no_copy)
    torch.manual_seed(1)
    lead, k, hid = ((3, 5), 24, 20) if SIMULATOR else ((2, 1000), 1024, 2752)
    mod = FusedGatedMLP(k, hid, activation="silu", dtype=torch_dtype(dtype), device=device())
    x = torch.randn(lead + (k,), dtype=torch_dtype(dtype), device=device())
    gy = torch.randn(lead + (k,), dtype=torch_dtype(dtype), device=device())
    steps = []
    for _ in range(2):
        mod.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_()
        y = mod(xi)
        y.backward(gy)
        steps.append([y, xi.grad] + [p.grad for p in mod.parameters()])
    y64, leaves = _torch_mlp64(x, mod, "silu")
    y64.backward(gy.double())
    assert_close(steps[0][0], y64, dtype, "y")
    assert_close(steps[0][1], leaves["x"].grad, dtype, "grad x")
    for (name, p), g in zip(mod.named_parameters(), steps[0][2:]):
        assert g.is_contiguous(), name
        assert_close(g, leaves[name].grad, dtype, f"grad {name}")
    for a, b in zip(*steps):
        assert torch.equal(a, b)


def test_deinterleave_splits_what_interleave_builds():
    """deinterleave: interleave's inverse for torch and NumPy (contiguous halves, same
    library, any trailing shape, one pair); an odd row count or a 0-d array raises."""
    g = torch.arange(15.0).reshape(5, 3)
    u = -g
    gate, up = gl.deinterleave(gl.interleave(g, u))
    assert torch.equal(gate, g) and torch.equal(up, u)
    assert gate.is_contiguous() and up.is_contiguous()
    gn, un = gl.deinterleave(gl.interleave(np.arange(7.0), np.ones(7)))
    assert isinstance(gn, np.ndarray) and np.array_equal(gn, np.arange(7.0))
    assert np.array_equal(un, np.ones(7)) and gn.flags["C_CONTIGUOUS"]
    one = gl.deinterleave(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert one[0].tolist() == [[1.0, 2.0]] and one[1].tolist() == [[3.0, 4.0]]
    for bad in (torch.zeros(5, 3), np.zeros(1), np.float32(1.0)):
        with pytest.raises(ValueError, match="even number of rows"):
            gl.deinterleave(bad)


def test_interleave_numpy():
    g = np.arange(6.0).reshape(3, 2)
    w = gl.interleave(g, -g)
    assert isinstance(w, np.ndarray) and w.shape == (6, 2)
    assert np.array_equal(w[0::2], g) and np.array_equal(w[1::2], -g)


@pytest.mark.gpu
def test_cupy_front_end():
    cp = pytest.importorskip("cupy")
    from interop import cupy as icp

    rng = np.random.default_rng(7)
    x = cp.asarray(rng.standard_normal((37, 64)).astype(np.float16))
    wg = (rng.standard_normal((24, 64)) / 8).astype(np.float16)
    wu = (rng.standard_normal((24, 64)) / 8).astype(np.float16)
    w = icp.interleave(cp.asarray(wg), cp.asarray(wu))
    assert isinstance(w, cp.ndarray) and w.shape == (48, 64)
    h, z = icp.gated_linear_forward(x, w, None, "silu", save_preact=True)
    assert isinstance(h, cp.ndarray) and h.dtype == np.float16 and h.shape == (37, 24)
    assert_close(h, gl.gated_linear_ref(x.get(), w.get(), None, "silu"), "float16", "h")
    dh = cp.asarray(rng.standard_normal((37, 24)).astype(np.float16))
    gx, gw, gb = icp.gated_linear_backward(dh, x, w, z, "silu")
    for got, ref, what in zip((gx, gw, gb),
                              gl.gated_linear_backward_ref(dh.get(), x.get(), w.get(), z.get(),
                                                           "silu"), ("gx", "gw", "gb")):
        assert_close(got, ref, "float16", what)
    with pytest.raises(TypeError, match="cupy"):
        icp.gated_linear_forward(np.zeros((2, 4), np.float16), w)


def test_torch_compile_fullgraph_matches_eager():
    """torch.compile(fullgraph=True) of FusedGatedMLP: one graph with no break (the
    compiled route runs linear_act's custom ops and a torch product), output and
    every gradient as the eager route's fused kernels within float32 rounding."""
    import torch._dynamo

    from interop.torch import FusedGatedMLP
    from tests.util import compile_backend, compiled_targets

    torch._dynamo.reset()
    torch.manual_seed(3)
    mod = FusedGatedMLP(12, 20, bias=True, activation="silu").to(device())
    x = torch.randn(2, 5, 12, device=device())
    gy = torch.randn(2, 5, 12, device=device())
    assert "numba_fused.linear_act_fwd.default" in compiled_targets(mod, x)
    runs = []
    for run in (mod, torch.compile(mod, backend=compile_backend(), fullgraph=True)):
        for p in mod.parameters():
            p.grad = None
        xs = x.clone().requires_grad_()
        y = run(xs)
        y.backward(gy)
        runs.append([y.detach(), xs.grad] + [p.grad for p in mod.parameters()])
    for i, (a, b) in enumerate(zip(*runs)):
        assert_close(b, a.double(), "float32", f"output {i}")


def test_torch_gated_mlp_rejects_half_a_bias_pair():
    """gated_mlp: biases of the gate and up projections come both or neither."""
    from interop.torch import gated_mlp

    x, wg, wu, bg, _ = _inputs((3,), 8, 4, "float32")
    wd = torch.zeros(8, 4, device=device())
    with pytest.raises(ValueError, match="both the gate's and the up projection's"):
        gated_mlp(x, wg, wu, wd, b_gate=bg)
    with pytest.raises(TypeError, match="w_down must be a torch.Tensor"):
        gated_mlp(x, wg, wu, None)
