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
