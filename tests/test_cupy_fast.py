"""The CuPy front ends' per-signature plans (``interop.cupy._fast``): a call that takes
a cached plan gives the array-level path's bits, patches every data pointer (fresh
arrays each call), follows CuPy's current stream, keys on alignment, strides and the
flags' types, and never caches a signature that failed validation: a bad call after
a plan exists raises as the array-level path does. GPU only: plans hold driver
launches, which the simulator does not have."""

import importlib

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from interop.cupy import _fast  # noqa: E402
from interop.dlpack import poison_outputs  # noqa: E402

# interop.cupy's package namespace holds the functions layer_norm and linear_act, which
# shadow their modules there: the tests import those modules by their full names.

pytestmark = pytest.mark.gpu


@pytest.fixture
def replays(monkeypatch):
    """Counts the calls that ran a cached plan."""
    count = [0]
    real = _fast._replay

    def spy(*args):
        count[0] += 1
        return real(*args)

    monkeypatch.setattr(_fast, "_replay", spy)
    return count


def _bits(a):
    if a is None:
        return None
    a = cupy.asnumpy(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def _assert_same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            assert isinstance(g, cupy.ndarray)
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(_bits(g), _bits(w))


def _randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape, dtype=cupy.float32) * scale).astype(dtype)


def _calls(front, array_level, make, n=4):
    """``front(*make(i))`` for i < n (the first with plans off: the array-level path;
    then a call that records, then replays), each against ``array_level`` on the same
    inputs, outputs poisoned."""
    for i in range(n):
        args, kwargs = make(i)
        _fast.ENABLED[0] = i > 0
        try:
            with poison_outputs():
                got = front(*args, **kwargs)
        finally:
            _fast.ENABLED[0] = True
        with poison_outputs():
            want = array_level(*args, **kwargs)
        _assert_same(got, want)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("shape", [(3, 5, 1024), (77, 768), (5, 4097)])
def test_layer_norm_plans_match_array_path(dtype, affine, shape, replays):
    import numba_fused.layer_norm as ln
    cln = importlib.import_module("interop.cupy.layer_norm")

    n = shape[-1]
    rng = cupy.random.default_rng(sum(shape))

    def fwd_inputs(i):
        x = _randn(rng, shape, dtype, 1 + i)
        w = _randn(rng, n, dtype) if affine[0] else None
        b = _randn(rng, n, dtype) if affine[1] else None
        return x, w, b

    before = replays[0]
    _calls(cln.layer_norm_forward, ln.layer_norm_forward,
           lambda i: (fwd_inputs(i) + (1e-5,), {}))
    _calls(cln.layer_norm, lambda *a: ln.layer_norm_forward(*a, stats=False)[0],
           lambda i: (fwd_inputs(i), {}))
    _calls(cln.rms_norm_forward, ln.rms_norm_forward,
           lambda i: (fwd_inputs(i)[:2], {"stats": i % 2 == 0}))
    for det in (False, True):
        def bwd_inputs(i, rms):
            x, w, b = fwd_inputs(i)
            dy = _randn(rng, shape, dtype)
            if rms:
                _, rstd = ln.rms_norm_forward(x, w)
                return (dy, x, w, rstd), {"deterministic": det}
            _, mean, rstd = ln.layer_norm_forward(x, w, b)
            return (dy, x, w, b, mean, rstd), {"deterministic": det}

        _calls(cln.layer_norm_backward, ln.layer_norm_backward, lambda i: bwd_inputs(i, False))
        _calls(cln.rms_norm_backward, ln.rms_norm_backward, lambda i: bwd_inputs(i, True))
    # Each _calls: one array-level call, one that records, two replays; the RMSNorm
    # forward alternates stats, so its replays are one of each signature's.
    assert replays[0] - before >= 2 * 6


def test_layer_norm_plan_keys_on_alignment_and_strides(replays):
    import numba_fused.layer_norm as ln
    cln = importlib.import_module("interop.cupy.layer_norm")

    rng = cupy.random.default_rng(1)
    w = _randn(rng, 256, "float16")
    for _ in range(2):
        for shift in (0, 1, 8):
            # A view starting 2 or 16 bytes in: off and on the 16-byte grid.
            x = _randn(rng, 1 + 8 * 256 + 8, "float16")[shift:shift + 8 * 256].reshape(8, 256)
            assert (x.data.ptr % 16 == 0) == (shift in (0, 8))
            _assert_same(cln.layer_norm_forward(x, w, None), ln.layer_norm_forward(x, w, None))
    assert replays[0] >= 3
    # Same shape and dtype, not contiguous: the key differs, so the array-level path
    # raises, every time.
    x = _randn(rng, (8, 512), "float16")[:, ::2]
    for _ in range(2):
        with pytest.raises(ValueError):
            cln.layer_norm_forward(x, w, None)


def test_layer_norm_plan_never_skips_validation():
    cln = importlib.import_module("interop.cupy.layer_norm")

    rng = cupy.random.default_rng(2)
    x = _randn(rng, (16, 512), "float32")
    w = _randn(rng, 512, "float32")
    dy = _randn(rng, (16, 512), "float32")
    for _ in range(3):
        _, mean, rstd = cln.layer_norm_forward(x, w, w)
        cln.layer_norm_backward(dy, x, w, w, mean, rstd, deterministic=True)
    # Plans exist for these signatures now; each bad call below still raises.
    with pytest.raises(TypeError, match="deterministic"):
        cln.layer_norm_backward(dy, x, w, w, mean, rstd, deterministic=1)
    with pytest.raises(ValueError):
        cln.layer_norm_forward(x, _randn(rng, 256, "float32"), w)
    with pytest.raises(TypeError):
        cln.layer_norm_forward(x, w.astype("float16"), w)
    with pytest.raises(ValueError):
        cln.layer_norm_forward(x, w, w, eps=-1.0)
    with pytest.raises(TypeError, match="CuPy"):
        cln.layer_norm_forward(np.zeros((16, 512), np.float32), w, w)
    with pytest.raises(ValueError):
        cln.layer_norm_backward(dy, x, w, w, mean[:8], rstd)


def test_plan_follows_current_stream(monkeypatch):
    import numba_fused.layer_norm as ln
    cln = importlib.import_module("interop.cupy.layer_norm")
    from numba_fused.plan import Plan

    streams = []
    real = Plan.run

    def spy(self, stream, *args):
        streams.append(stream)
        return real(self, stream, *args)

    monkeypatch.setattr(Plan, "run", spy)
    rng = cupy.random.default_rng(3)
    w = _randn(rng, 2048, "float16")
    xs = [_randn(rng, (4096, 2048), "float16") for _ in range(3)]
    want = [ln.layer_norm_forward(x, w, w)[0] for x in xs]
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        # The first call validates and records; the others replay, on `stream`.
        got = [cln.layer_norm_forward(x, w, w)[0] for x in xs]
        stream.synchronize()
    assert streams == [stream.ptr] * 2
    for g, e in zip(got, want):
        _assert_same(g, e)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("p", [0.0, 0.1])
def test_dropout_plans_match_array_path(dtype, activation, p, replays):
    import numba_fused.dropout as dr
    from interop.cupy import dropout as cdr

    rng = cupy.random.default_rng(4)

    def make(i, grad=False):
        x = _randn(rng, (37, 1000), dtype)
        b = _randn(rng, 1000, dtype)
        args = (x, b, p, 1234 + i, 4 * i, activation)
        if grad:
            return (_randn(rng, (37, 1000), dtype),) + args, {}
        return args, {"return_mask": i % 2 == 1}

    _calls(cdr.dropout_bias_act_forward, dr.dropout_bias_act_forward, make)
    _calls(cdr.dropout_bias_act_backward, dr.dropout_bias_act_backward,
           lambda i: make(i, True))
    assert replays[0] >= 3
    x, b = _randn(rng, (37, 1000), dtype), _randn(rng, 1000, dtype)
    for bad in (-1, 1.5, True):
        with pytest.raises((TypeError, ValueError), match="seed"):
            cdr.dropout_bias_act_forward(x, b, p, bad, 0, activation)


@pytest.mark.parametrize("dropout_p", [0.0, 0.2])
def test_attention_plans_match_array_path(dropout_p, replays):
    import numba_fused.attention as at
    from interop.cupy import attention as cat

    rng = cupy.random.default_rng(5)

    def qkv():
        return tuple(_randn(rng, (2, 67, 3, 64), "float16", 0.5) for _ in range(3))

    def fwd(i):
        q, k, v = qkv()
        return (q, k, v), {"causal": "top_left", "dropout_p": dropout_p, "seed": 7 + i,
                           "offset": 64 * i}

    def bwd(i):
        (q, k, v), kw = fwd(i)
        out, lse = at.attention_forward(q, k, v, **kw)
        return (_randn(rng, out.shape, "float16"), q, k, v, out, lse), dict(kw, deterministic=True)

    _calls(cat.attention_forward, at.attention_forward, fwd)
    _calls(cat.attention_backward, at.attention_backward, bwd)
    assert replays[0] >= 4
    q, k, v = qkv()
    with pytest.raises(TypeError, match="offset"):
        cat.attention_forward(q, k, v, causal="top_left", dropout_p=dropout_p, seed=7,
                              offset=0.5)


def test_attention_packed_sequences_take_array_path(replays):
    import numba_fused.attention as at
    from interop.cupy import attention as cat

    rng = cupy.random.default_rng(6)
    q, k, v = (_randn(rng, (1, 50, 2, 32), "float16") for _ in range(3))
    cu = cupy.asarray([0, 20, 50], dtype=cupy.int32)
    for _ in range(3):
        _assert_same(cat.attention_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu),
                     at.attention_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu))
    assert replays[0] == 0


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("activation,bias", [("gelu_tanh", True), ("none", False)])
def test_linear_act_plans_match_array_path(dtype, activation, bias, replays):
    import numba_fused.linear_act as la
    cla = importlib.import_module("interop.cupy.linear_act")

    rng = cupy.random.default_rng(7)

    def fwd(i):
        x = _randn(rng, (3, 37, 72), dtype)
        w = _randn(rng, (136, 72), dtype, 0.125)
        b = _randn(rng, 136, dtype) if bias else None
        return (x, w, b, activation), {"save_preact": i % 2 == 1}

    def bwd(i):
        (x, w, b, act), _ = fwd(i)
        _, pre = la.linear_act_forward(x, w, b, act, save_preact=True)
        return (_randn(rng, pre.shape, dtype), x, w, pre, act), {}

    _calls(cla.linear_act_forward, la.linear_act_forward, fwd)
    _calls(cla.linear_act_backward, la.linear_act_backward, bwd)
    assert replays[0] >= 3
    (x, w, b, act), _ = fwd(0)
    with pytest.raises(TypeError, match="save_preact"):
        cla.linear_act_forward(x, w, b, act, save_preact=1)
    if activation == "none":
        # preact is not read with 'none', but a non-CuPy one still raises.
        g = _randn(rng, (3, 37, 136), dtype)
        with pytest.raises(TypeError, match="preact"):
            cla.linear_act_backward(g, x, w, np.zeros((3, 37, 136), dtype), act)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("activation", ["gelu", "none"])
def test_linear_grad_pieces_plans_match_array_path(dtype, activation, replays):
    """linear_act_dgrad, linear_weight_grad and activation_backward (the CuPy MLP
    example's backward calls them one by one)."""
    import numba_fused.linear_act as la
    cla = importlib.import_module("interop.cupy.linear_act")

    rng = cupy.random.default_rng(8)

    def dgrad(i):
        g, w = _randn(rng, (5, 33, 136), dtype), _randn(rng, (136, 72), dtype, 0.125)
        pre = _randn(rng, (5, 33, 72), dtype) if activation != "none" or i % 2 else None
        return (g, w, activation, pre), {}

    def wgrad(i):
        return (_randn(rng, (5, 33, 136), dtype), _randn(rng, (5, 33, 72), dtype),
                i % 2 == 0), {}

    def act(i):
        return (_randn(rng, (5, 33, 72), dtype), _randn(rng, (5, 33, 72), dtype),
                activation), {}

    _calls(cla.linear_act_dgrad, la.linear_act_dgrad, dgrad)
    _calls(cla.linear_weight_grad, la.linear_weight_grad, wgrad)
    _calls(cla.activation_backward, la.activation_backward, act)
    assert replays[0] >= 3
    if activation != "none":
        (g, w, _, _), _ = dgrad(0)
        with pytest.raises(ValueError, match="preact"):
            cla.linear_act_dgrad(g, w, activation, None)
    (gz, x, _), _ = wgrad(0)
    with pytest.raises(TypeError, match="need_bias_grad"):
        cla.linear_weight_grad(gz, x, 1)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("activation,bias", [("silu", True), ("gelu_tanh", False)])
def test_gated_linear_plans_match_array_path(dtype, activation, bias, replays):
    """Every gated function: forward (with and without the pairs), the dgrad GEMM with
    the pairs' gradient in its epilogue, the elementwise pairs' gradient and the
    whole backward."""
    import numba_fused.gated_linear as gl
    from interop.cupy import gated_linear as cgl

    rng = cupy.random.default_rng(9)
    lead, K, hid, N = (3, 37), 72, 68, 40

    def fwd(i):
        x = _randn(rng, lead + (K,), dtype)
        w = _randn(rng, (2 * hid, K), dtype, 0.125)
        b = _randn(rng, 2 * hid, dtype) if bias else None
        return (x, w, b, activation), {"save_preact": i % 2 == 1}

    def pairs():
        return _randn(rng, lead + (2 * hid,), dtype)

    def dgrad(i):
        return (_randn(rng, lead + (N,), dtype), _randn(rng, (N, hid), dtype, 0.125), pairs(),
                activation), {}

    def act(i):
        return (_randn(rng, lead + (hid,), dtype), pairs(), activation), {}

    def bwd(i):
        (x, w, _, _), _ = fwd(i)
        return (_randn(rng, lead + (hid,), dtype), x, w, pairs(), activation), {}

    _calls(cgl.gated_linear_forward, gl.gated_linear_forward, fwd)
    _calls(cgl.gated_linear_dgrad, gl.gated_linear_dgrad, dgrad)
    _calls(cgl.gated_act_backward, gl.gated_act_backward, act)
    _calls(cgl.gated_linear_backward, gl.gated_linear_backward, bwd)
    assert replays[0] >= 7
    (x, w, b, _), _ = fwd(0)
    with pytest.raises(TypeError, match="save_preact"):
        cgl.gated_linear_forward(x, w, b, activation, save_preact=1)
    with pytest.raises(ValueError, match="even number of rows"):
        cgl.gated_linear_forward(x, w[1:], None, activation)
    (g, wd, z, _), _ = dgrad(0)
    with pytest.raises(ValueError, match="preact"):
        cgl.gated_linear_dgrad(g, wd, z[..., 1:], activation)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gated_pair_plans_match_array_path(dtype, replays):
    """The pair functions (the gate and up weights as two arrays): where the weights
    are read in place (16-bit, 16-byte rows; the backward with
    linear_act.GATED_PAIRS_EVERYWHERE) later calls replay a plan; float32 (the
    interleaved copy) stays on the array-level path. Bits equal the array level's
    either way."""
    import numba_fused.gated_linear as gl
    import numba_fused.linear_act as la
    from interop.cupy import gated_linear as cgl

    rng = cupy.random.default_rng(11)
    lead, K, hid = (3, 37), 72, 68

    def weights():
        return _randn(rng, (hid, K), dtype, 0.125), _randn(rng, (hid, K), dtype, 0.125)

    def fwd(i):
        wg, wu = weights()
        return (_randn(rng, lead + (K,), dtype), wg, wu, _randn(rng, 2 * hid, dtype),
                "silu"), {"save_preact": i % 2 == 1}

    def bwd(i):
        wg, wu = weights()
        return (_randn(rng, lead + (hid,), dtype), _randn(rng, lead + (K,), dtype), wg, wu,
                _randn(rng, lead + (2 * hid,), dtype), "silu"), {}

    _calls(cgl.gated_linear_forward_pair, gl.gated_linear_forward_pair, fwd)
    fwd_replays = replays[0]
    _calls(cgl.gated_linear_backward_pair, gl.gated_linear_backward_pair, bwd)
    half = dtype != "float32"
    # Forward: calls 1 (save_preact) and 2 record, 3 replays; backward: 1 records.
    assert fwd_replays == (1 if half else 0)
    assert replays[0] - fwd_replays == (2 if half and la.GATED_PAIRS_EVERYWHERE else 0)
    (x, wg, wu, b, _), _ = fwd(0)
    with pytest.raises(ValueError, match="w_up"):
        cgl.gated_linear_forward_pair(x, wg, wu[1:], b)
    with pytest.raises(TypeError, match="cupy"):
        cgl.gated_linear_forward_pair(cupy.asnumpy(x), wg, wu, b)


def test_plans_on_the_tma_tiling(replays, monkeypatch):
    """The CuPy plans of the forward and of the gated pair forward on the TMA tiling
    (linear_act.WG_LARGE_WS_TMA pinned; the plan makes its tensor maps from each
    call's pointers, plan.Executor.derived): calls after the first replay a plan and
    give the array level's bits on fresh arrays, and the kernels made are the TMA
    ones (the torch front end's twin: test_gated_linear's
    test_front_end_pair_plans_on_the_tma_tiling)."""
    import numba_fused.gated_linear as gl
    import numba_fused.linear_act as la
    from interop.cupy import gated_linear as cgl
    from tests.util import record_calls

    if not la._hopper(cupy.cuda.Device().id):
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    cla = importlib.import_module("interop.cupy.linear_act")
    monkeypatch.setattr(la, "WG_LARGE", la.WG_LARGE_WS_TMA)
    monkeypatch.setattr(la, "GATED_PAIRS_EVERYWHERE", True)
    made = record_calls(monkeypatch, la, "make_wgmma_kernel")
    la._gemm_prepared.cache_clear()
    rng = cupy.random.default_rng(13)
    dtype = "float16"
    w = _randn(rng, (384, 256), dtype, 0.0625)
    b = _randn(rng, 384, dtype)
    wg, wu = _randn(rng, (384, 256), dtype, 0.0625), _randn(rng, (384, 256), dtype, 0.0625)

    def fwd(i):
        return (_randn(rng, (300, 256), dtype), w, b, "gelu_tanh"), {}

    def pair(i):
        return (_randn(rng, (300, 256), dtype), wg, wu, None, "silu"), {}

    with la.use_wgmma(True):
        _calls(cla.linear_act_forward, la.linear_act_forward, fwd)
        fwd_replays = replays[0]
        _calls(cgl.gated_linear_forward_pair, gl.gated_linear_forward_pair, pair)
    la._gemm_prepared.cache_clear()
    assert fwd_replays >= 2 and replays[0] - fwd_replays >= 2, replays
    assert any(a[0] == "fwd" and a[2].tma and not a[3] for a in made), made
    assert any(a[0] == "fwd" and a[2].tma and a[3] for a in made), made
