"""The torch front ends' per-signature plans (``interop.torch._fast``): a call that
takes a cached plan gives bit-identical results to the validating array-level
path, patches every data pointer (fresh tensors each call), keys on alignment, and
never caches a signature that failed validation. GPU only: plans hold driver
launches, which the simulator does not have."""

import pytest

torch = pytest.importorskip("torch")

from interop.torch import _fast  # noqa: E402

pytestmark = pytest.mark.gpu


def _assert_same(a, b):
    for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert u.shape == v.shape and u.dtype == v.dtype
        assert torch.equal(u, v)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("activation,bias", [("gelu_tanh", True), ("none", False), ("relu", True)])
def test_linear_act_plan_matches_array_path(dtype, activation, bias):
    from interop.torch import linear_act

    g = torch.Generator(device="cuda").manual_seed(0)

    def call():
        # Fresh tensors every call: a plan that kept an old pointer would read them.
        x = torch.randn(3, 37, 72, device="cuda", dtype=dtype, generator=g)
        w = torch.randn(136, 72, device="cuda", dtype=dtype, generator=g) / 8
        b = torch.randn(136, device="cuda", dtype=dtype, generator=g) if bias else None
        return x, w, b

    inputs = [call() for _ in range(3)]
    outs = []
    for i, (x, w, b) in enumerate(inputs):
        _fast.ENABLED[0] = i > 0
        try:
            outs.append(linear_act(x, w, b, activation))
        finally:
            _fast.ENABLED[0] = True
    from numba_fused import linear_act_forward

    for (x, w, b), y in zip(inputs, outs):
        _assert_same(y, linear_act_forward(x, w, b, activation))


def test_linear_act_plan_keys_on_alignment():
    from interop.torch import linear_act
    from numba_fused import linear_act_forward

    w = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    for _ in range(2):
        for shift in (0, 1):
            # A view starting one element (2 bytes) in: not 16-byte aligned.
            x = torch.randn(1 + 8 * 64, device="cuda", dtype=torch.float16)[shift:shift + 512]
            x = x.view(8, 64)
            assert (x.data_ptr() % 16 == 0) == (shift == 0)
            _assert_same(linear_act(x, w, None, "gelu"), linear_act_forward(x, w, None, "gelu"))


def test_linear_act_plan_keys_on_bias_alignment():
    """A 16-bit bias that does not start 16-byte aligned is read element by element: a
    plan recorded for an aligned bias (16-byte loads in the epilogue) must not replay
    for it, nor the other way round."""
    from interop.torch import linear_act
    from numba_fused import linear_act_forward

    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 64, device="cuda", dtype=torch.float16) / 8
    for _ in range(2):
        for shift in (0, 1, 0):
            b = torch.randn(1 + 64, device="cuda", dtype=torch.float16)[shift:shift + 64]
            assert (b.data_ptr() % 16 == 0) == (shift == 0)
            _assert_same(linear_act(x, w, b, "gelu"), linear_act_forward(x, w, b, "gelu"))
    torch.cuda.synchronize()


def test_invalid_signature_raises_every_call():
    from interop.torch import linear_act

    x = torch.randn(4, 16, device="cuda", dtype=torch.float16)
    w = torch.randn(8, 16, device="cuda", dtype=torch.float32)
    for _ in range(3):
        with pytest.raises((TypeError, ValueError)):
            linear_act(x, w)


def test_prepared_launch_patches_pointers_and_dynamic_scalars():
    from numba import types

    from bench.launch_cost import _axpy_kernel
    from interop.dlpack import as_kernel_array, stream_handle

    k = _axpy_kernel()
    n = 1000
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    X, Y, O = (as_kernel_array(t, "t") for t in (x, y, o))
    assert k.argtypes[3] == types.float32
    plan = k.prepare((n + 255) // 256, 256, 0, [X, Y, O, 2.0, n], dynamic=(3,))
    for a in (0.5, -3.0):
        x2, y2 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        plan.launch(stream_handle(X), (x2.data_ptr(), y2.data_ptr(), out.data_ptr()), (a,))
        # FMA contraction may differ from torch's rounding by an ulp.
        torch.testing.assert_close(out, a * x2 + y2, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError):
        k.prepare(1, 256, 0, [X, Y, O, 2.0, n], dynamic=(0,))


def test_linear_act_without_grad_skips_autograd_same_values():
    from interop.torch import FusedMLP, linear_act

    x = torch.randn(5, 48, device="cuda", dtype=torch.float16, requires_grad=True)
    w = torch.randn(40, 48, device="cuda", dtype=torch.float16)
    b = torch.randn(40, device="cuda", dtype=torch.float16)
    y1 = linear_act(x, w, b, "gelu")
    with torch.no_grad():
        y2 = linear_act(x, w, b, "gelu")
    assert y1.grad_fn is not None and y2.grad_fn is None
    assert torch.equal(y1.detach(), y2)
    mlp = FusedMLP(48, 64, 24, "gelu_tanh", device="cuda", dtype=torch.float16)
    z1 = mlp(x)
    with torch.no_grad():
        z2 = mlp(x)
    assert z1.grad_fn is not None and z2.grad_fn is None
    assert torch.equal(z1.detach(), z2)


NORM_CASES = [  # (rms, has_w, has_b, deterministic)
    (False, True, True, False), (False, True, True, True), (False, False, False, False),
    (False, True, False, False), (True, True, False, False), (True, False, False, True),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rms,has_w,has_b,det", NORM_CASES)
@pytest.mark.parametrize("n", [1024, 771])
def test_norm_plans_match_array_path(dtype, rms, has_w, has_b, det, n):
    """Forward and backward through the replayed plans (calls 2 and 3 of a signature)
    give what the array-level functions give on the same fresh tensors."""
    import numba_fused as nf
    from interop.torch import layer_norm, rms_norm

    g = torch.Generator(device="cuda").manual_seed(1)
    for _ in range(3):
        x = torch.randn(67, n, device="cuda", dtype=dtype, generator=g).requires_grad_()
        w = (torch.randn(n, device="cuda", dtype=dtype, generator=g).requires_grad_()
             if has_w else None)
        b = (torch.randn(n, device="cuda", dtype=dtype, generator=g).requires_grad_()
             if has_b else None)
        dy = torch.randn(67, n, device="cuda", dtype=dtype, generator=g)
        if rms:
            y = rms_norm(x, (n,), w, eps=1e-6, deterministic=det)
            y_ref, rstd = nf.rms_norm_forward(x.detach(), None if w is None else w.detach(), 1e-6)
        else:
            y = layer_norm(x, (n,), w, b, eps=1e-5, deterministic=det)
            y_ref, mean, rstd = nf.layer_norm_forward(
                x.detach(), None if w is None else w.detach(), None if b is None else b.detach())
        _assert_same(y.detach(), y_ref)
        y.backward(dy)
        wd = None if w is None else w.detach()
        if rms:
            gx, gw = nf.rms_norm_backward(dy, x.detach(), wd, rstd, deterministic=det)
            gb = None
        else:
            gx, gw, gb = nf.layer_norm_backward(dy, x.detach(), wd,
                                                None if b is None else b.detach(), mean, rstd,
                                                deterministic=det)
        _assert_same(x.grad, gx)
        for p, ref in ((w, gw), (b, gb)):
            if p is None:
                continue
            if det:
                _assert_same(p.grad, ref)
            else:  # the lock scheme sums the row groups in arrival order
                torch.testing.assert_close(p.grad.float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_norm_plan_keys_on_alignment():
    import numba_fused as nf
    from interop.torch import layer_norm

    w = torch.randn(64, device="cuda", dtype=torch.float16)
    for _ in range(2):
        for shift in (0, 1):
            x = torch.randn(1 + 8 * 64, device="cuda", dtype=torch.float16)[shift:shift + 512]
            x = x.view(8, 64)
            _assert_same(layer_norm(x, (64,), w, None), nf.layer_norm_forward(x, w, None)[0])


DROPOUT_CASES = [  # (activation, has_bias, p, store_mask)
    ("none", True, 0.1, False), ("gelu", True, 0.3, False), ("relu", False, 0.1, False),
    ("gelu_tanh", True, 0.0, False), ("none", True, 0.2, True), ("squared_relu", True, 1.0, False),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("activation,has_bias,p,store_mask", DROPOUT_CASES)
@pytest.mark.parametrize("n", [1024, 771])
def test_dropout_plans_match_array_path(dtype, activation, has_bias, p, store_mask, n):
    """Forward and backward through replayed plans (calls 2-4 of a signature, each with
    its own seed and offset) give what the array-level functions give."""
    import numba_fused as nf
    from interop.torch.dropout import DropoutBiasActFunction

    g = torch.Generator(device="cuda").manual_seed(2)
    for call in range(4):
        seed, offset = 1000 + 77 * call, 4 * 1013 * call
        x = torch.randn(53, n, device="cuda", dtype=dtype, generator=g).requires_grad_()
        b = (torch.randn(n, device="cuda", dtype=dtype, generator=g).requires_grad_()
             if has_bias else None)
        dy = torch.randn(53, n, device="cuda", dtype=dtype, generator=g)
        y = DropoutBiasActFunction.apply(x, b, p, activation, seed, offset, store_mask)
        bd = None if b is None else b.detach()
        y_ref, mask = nf.dropout_bias_act_forward(x.detach(), bd, p, seed, offset, activation,
                                                  return_mask=True)
        _assert_same(y.detach(), y_ref)
        y.backward(dy)
        gx, gb = nf.dropout_bias_act_backward(dy, x.detach(), bd, p, seed, offset, activation,
                                              mask=mask if store_mask else None)
        _assert_same(x.grad, gx)
        if has_bias:
            torch.testing.assert_close(b.grad.float(), gb.float(), rtol=1e-3, atol=1e-3)


def test_dropout_plan_without_grad_and_alignment():
    """The no-grad path (no autograd Function) replays plans with the generator's
    (seed, offset); the plan keys on the input's address modulo 16 (vector path or not)."""
    import numba_fused as nf
    from interop.torch import dropout_bias_act

    gen = torch.Generator(device="cuda").manual_seed(5)
    b = torch.randn(64, device="cuda", dtype=torch.float16)
    for _ in range(2):
        for shift in (0, 1, 0):
            x = torch.randn(1 + 8 * 64, device="cuda", dtype=torch.float16)[shift:shift + 512]
            x = x.view(8, 64)
            seed, offset = gen.initial_seed(), gen.get_offset()
            with torch.no_grad():
                y = dropout_bias_act(x, b, 0.25, "gelu", generator=gen)
            assert gen.get_offset() > offset
            _assert_same(y, nf.dropout_bias_act_forward(x, b, 0.25, seed, offset, "gelu"))


def test_dropout_plan_counters_follow_the_stream():
    """A backward plan recorded on one stream and replayed on another takes that
    stream's arrival counters (bias-grad reduction), giving the same results."""
    from interop.torch.dropout import DropoutBiasActFunction

    x0 = torch.randn(300, 512, device="cuda", dtype=torch.float16)
    b0 = torch.randn(512, device="cuda", dtype=torch.float16)
    dy = torch.randn(300, 512, device="cuda", dtype=torch.float16)
    results = []
    for stream in (torch.cuda.current_stream(), torch.cuda.Stream(), torch.cuda.Stream()):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            x, b = x0.clone().requires_grad_(), b0.clone().requires_grad_()
            DropoutBiasActFunction.apply(x, b, 0.1, "gelu", 7, 0, False).backward(dy)
            results.append((x.grad, b.grad))
        torch.cuda.current_stream().wait_stream(stream)
    for gx, gb in results[1:]:
        _assert_same(gx, results[0][0])
        torch.testing.assert_close(gb.float(), results[0][1].float(), rtol=1e-3, atol=1e-3)


def test_linear_act_split_plan_counters_follow_the_stream():
    """A split-K forward's plan recorded on one stream and replayed on streams it has
    not met makes their arrival counters from its stand-in (the plan keeps no caller
    array; a CUDA graph's capture stream is such a stream): same bits everywhere."""
    from interop.torch import linear_act
    from numba_fused import linear_act as la

    g = torch.Generator(device="cuda").manual_seed(3)
    x0 = torch.randn(5, 256, device="cuda", dtype=torch.float16, generator=g)
    w = torch.randn(128, 256, device="cuda", dtype=torch.float16, generator=g) / 16
    b = torch.randn(128, device="cuda", dtype=torch.float16, generator=g)
    results = []
    with la.use_split_k(2):
        assert la._splits_for("fwd", "float16", True, 0, 5, 128, 256, None) == 2
        for stream in (torch.cuda.current_stream(), torch.cuda.current_stream(),
                       torch.cuda.Stream(), torch.cuda.Stream()):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                results.append(linear_act(x0.clone(), w, b, "gelu"))
            torch.cuda.current_stream().wait_stream(stream)
        want = la.linear_act_forward(x0, w, b, "gelu")
    for y in results:
        _assert_same(y, want)


ATTN_CASES = [  # (causal, bias shape or None, dropout_p, Sq, Sk, D)
    (None, None, 0.0, 70, 70, 64), ("top_left", None, 0.0, 128, 128, 32),
    ("bottom_right", (1, 1, 33, 90), 0.0, 33, 90, 64), (None, None, 0.2, 65, 97, 128),
    ("top_left", (2, 3, 64, 64), 0.1, 64, 64, 40),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("causal,bias_shape,p,sq,sk,d", ATTN_CASES)
def test_attention_plans_match_array_path(dtype, causal, bias_shape, p, sq, sk, d):
    """Forward and backward of torch-layout (strided) inputs through replayed plans
    (calls 2 and 3 of a signature, each with its own seed and offset) give what the
    array-level functions give; the bias gradient is summed over its broadcast dims."""
    import numba_fused as nf
    from interop.torch.attention import AttentionFunction, _expand_bias

    g = torch.Generator(device="cuda").manual_seed(3)
    for call in range(3):
        seed, offset = 11 + call, 4 * 97 * call

        def rand(*shape):
            return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)

        q = rand(2, 3, sq, d).transpose(1, 2).requires_grad_()
        k = rand(2, 3, sk, d).transpose(1, 2).requires_grad_()
        v = rand(2, 3, sk, d).transpose(1, 2).requires_grad_()
        bias = rand(*bias_shape).requires_grad_() if bias_shape else None
        dout = rand(2, sq, 3, d)
        opts = dict(causal=causal, window=0, dropout_p=p, seed=seed, offset=offset, scale=None)
        out = AttentionFunction.apply(q, k, v, bias, *opts.values())
        out.backward(dout)
        qd, kd, vd = q.detach(), k.detach(), v.detach()
        b4 = None if bias is None else _expand_bias(bias.detach(), qd, kd)
        o_ref, lse = nf.attention_forward(qd, kd, vd, bias=b4, **opts)
        _assert_same(out.detach(), o_ref)
        gq, gk, gv, gb = nf.attention_backward(dout, qd, kd, vd, o_ref, lse, bias=b4, **opts)
        # dQ sums key splits in lock-arrival order.
        torch.testing.assert_close(q.grad.float(), gq.float(), rtol=2e-2, atol=2e-2)
        _assert_same(k.grad, gk)
        _assert_same(v.grad, gv)
        if bias is not None:
            torch.testing.assert_close(bias.grad.float(), gb.reshape(bias_shape).float(),
                                       rtol=2e-2, atol=2e-2)


def test_attention_without_grad_takes_plans_and_keys_on_strides():
    """No-grad calls (no autograd Function) replay plans; a layout change (contiguous
    [B, H, S, D] against a [B, S, H, D] transpose) is a new signature, same values."""
    from interop.torch import scaled_dot_product_attention as sdpa

    g = torch.Generator(device="cuda").manual_seed(4)
    q, k, v = (torch.randn(2, 4, 80, 64, device="cuda", dtype=torch.float16, generator=g)
               for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with torch.no_grad():
        for _ in range(3):
            for layout in (lambda t: t, lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)):
                out = sdpa(layout(q), layout(k), layout(v), is_causal=True)
                torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("activation,needs", [
    ("gelu_tanh", (True, True, True)), ("none", (True, True, False)),
    ("relu", (False, True, True)), ("gelu", (True, False, False)), ("squared_relu", (False, False, True)),
])
def test_linear_act_backward_plans_match_array_path(dtype, activation, needs):
    """The backward through replayed plans (calls 2 and 3 of a signature, fresh
    tensors) gives what the array-level functions give; only asked-for grads appear."""
    from interop.torch import linear_act
    from numba_fused import linear_act_backward, linear_act_forward

    g = torch.Generator(device="cuda").manual_seed(6)
    need_x, need_w, need_b = needs
    for _ in range(3):
        x = torch.randn(3, 37, 72, device="cuda", dtype=dtype, generator=g).requires_grad_(need_x)
        w = (torch.randn(136, 72, device="cuda", dtype=dtype, generator=g) / 8).requires_grad_(need_w)
        b = torch.randn(136, device="cuda", dtype=dtype, generator=g).requires_grad_(need_b)
        dy = torch.randn(3, 37, 136, device="cuda", dtype=dtype, generator=g)
        linear_act(x, w, b, activation).backward(dy)
        _, pre = linear_act_forward(x.detach(), w.detach(), b.detach(), activation,
                                    save_preact=True)
        gx, gw, gb = linear_act_backward(dy, x.detach(), w.detach(), pre, activation)
        for t, ref, need in ((x, gx, need_x), (w, gw, need_w), (b, gb, need_b)):
            if need:
                _assert_same(t.grad, ref)
            else:
                assert t.grad is None


@pytest.mark.parametrize("activation", ["gelu_tanh", "none"])
def test_mlp_backward_plans_match_first_call(activation):
    """FusedMLP's backward replayed from a plan equals its first (array-level) call on
    the same inputs, for every parameter and the input."""
    from interop.torch import FusedMLP

    mlp = FusedMLP(48, 64, 24, activation, device="cuda", dtype=torch.float16)
    x0 = torch.randn(5, 7, 48, device="cuda", dtype=torch.float16)
    dy = torch.randn(5, 7, 24, device="cuda", dtype=torch.float16)
    grads = []
    for _ in range(3):
        x = x0.clone().requires_grad_()
        mlp.zero_grad(set_to_none=True)
        mlp(x).backward(dy)
        grads.append([x.grad] + [p.grad for p in mlp.parameters()])
    for later in grads[1:]:
        for a, b in zip(later, grads[0]):
            _assert_same(a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("bias,x_grad", [(True, True), (False, False)])
def test_gated_mlp_plans_match_first_call(dtype, bias, x_grad):
    """FusedGatedMLP's forward and backward replayed from plans (calls 2 and 3 of a
    signature) equal its first (array-level) call on the same inputs, for the input
    and every parameter; without autograd the forward gives the same y."""
    from interop.torch import FusedGatedMLP

    torch.manual_seed(3)
    mlp = FusedGatedMLP(48, 68, 24, bias=bias, device="cuda", dtype=dtype)
    x0 = torch.randn(5, 7, 48, device="cuda", dtype=dtype)
    dy = torch.randn(5, 7, 24, device="cuda", dtype=dtype)
    outs, grads = [], []
    for _ in range(3):
        x = x0.clone().requires_grad_(x_grad)
        mlp.zero_grad(set_to_none=True)
        y = mlp(x)
        y.backward(dy)
        outs.append(y.detach())
        grads.append(([x.grad] if x_grad else []) + [p.grad for p in mlp.parameters()])
        assert x.grad is None or x_grad
    from interop.torch import gated_linear as tgl

    tgl._PAIR_PLANS.clear()
    with torch.no_grad():
        for _ in range(2):
            outs.append(mlp(x0))
    # Without autograd, 16-bit weights with 16-byte rows are read in place (a plan),
    # float32 ones through the interleaved copy (no plan: False).
    assert [bool(p) for p in tgl._PAIR_PLANS.values()] == [dtype != torch.float32]
    for y in outs[1:]:
        _assert_same(y, outs[0])
    for later in grads[1:]:
        for a, b in zip(later, grads[0]):
            _assert_same(a, b)
