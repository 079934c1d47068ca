"""NaN and inf propagate as through torch's own ops (issue #18 item 4).

Each case puts a NaN, +inf or -inf into one element of an input and compares where
our outputs and gradients are NaN, +inf and -inf with where torch's are, same dtype,
same device. One documented difference: dropout's dropped elements are exact zeros
whatever the input (torch multiplies by the 0/1 mask, so a dropped NaN or inf gives
NaN there); kept elements propagate as torch's.
"""

import pytest

torch = pytest.importorskip("torch")

from tests.util import DTYPES, SIMULATOR, device, torch_act, torch_dtype  # noqa: E402

BAD = [float("nan"), float("inf"), float("-inf")]
ACTS = ["none", "relu", "gelu", "gelu_tanh", "squared_relu", "leaky_relu", "silu"]
# Under the simulator float32 only (the patterns do not depend on the storage dtype's
# code paths there, and it keeps CI short).
CASE_DTYPES = ["float32"] if SIMULATOR else list(DTYPES)


def _pattern(t):
    """0 finite, 1 NaN, 2 +inf, 3 -inf, per element."""
    t = t.detach().float()
    return (torch.isnan(t).int() + 2 * torch.isposinf(t).int() + 3 * torch.isneginf(t).int())


def _same_pattern(ours, theirs, what):
    po, pt = _pattern(ours), _pattern(theirs)
    assert po.shape == pt.shape, what
    diff = (po != pt).nonzero()
    assert diff.numel() == 0, (f"{what}: non-finite pattern differs from torch's at "
                               f"{diff[:5].tolist()} (ours {po[tuple(diff[0])].item()}, "
                               f"torch {pt[tuple(diff[0])].item()}; 1 NaN, 2 +inf, 3 -inf)")


def _leaves(*tensors):
    return [None if t is None else t.clone().requires_grad_() for t in tensors]


def _run(fn, tensors, grad_out):
    leaves = _leaves(*tensors)
    out = fn(*leaves)
    out.backward(grad_out)
    return [out] + [None if t is None else t.grad for t in leaves]


def _compare(ours_fn, torch_fn, tensors, grad_out, names):
    ours = _run(ours_fn, tensors, grad_out)
    theirs = _run(torch_fn, tensors, grad_out)
    for o, t, name in zip(ours, theirs, ["out"] + names):
        if o is None or t is None:
            assert o is None and t is None, name
            continue
        _same_pattern(o, t, name)


def _rand(shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(device=device(), dtype=torch_dtype(dtype))


@pytest.mark.parametrize("dtype", CASE_DTYPES)
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("rms", [False, True])
def test_norms(dtype, bad, rms):
    from interop.torch import layer_norm, rms_norm

    x = _rand((4, 24), dtype, 0)
    x[1, 7] = bad
    w, b = _rand((24,), dtype, 1), _rand((24,), dtype, 2)
    g = _rand((4, 24), dtype, 3)
    F = torch.nn.functional
    if rms:
        _compare(lambda x, w: rms_norm(x, (24,), w, 1e-6),
                 lambda x, w: F.rms_norm(x, (24,), w, 1e-6), [x, w], g, ["grad_x", "grad_w"])
    else:
        _compare(lambda x, w, b: layer_norm(x, (24,), w, b),
                 lambda x, w, b: F.layer_norm(x, (24,), w, b), [x, w, b], g,
                 ["grad_x", "grad_w", "grad_b"])


@pytest.mark.parametrize("dtype", CASE_DTYPES)
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("activation", ACTS)
def test_bias_activation_without_dropout(dtype, bad, activation):
    from interop.torch import dropout_bias_act

    x = _rand((3, 16), dtype, 0)
    x[0, 3] = bad
    x[2, 8] = -bad  # the other sign too (NaN stays NaN)
    b = _rand((16,), dtype, 1)
    g = _rand((3, 16), dtype, 2)
    act = torch_act(activation)
    # On the CPU (simulator runs) torch's float32 vectorised gelu depends on the
    # machine's instruction set: with AVX-512 (seen 2026-11-25, torch 2.13) it gives
    # gelu(+inf) = NaN, elsewhere +inf. Its float64 kernels agree with its GPU ones.
    ref_dtype = torch.float64 if SIMULATOR else x.dtype
    _compare(lambda x, b: dropout_bias_act(x, b, 0.0, activation),
             lambda x, b: act(x.to(ref_dtype) + b.to(ref_dtype)), [x, b], g,
             ["grad_x", "grad_b"])


@pytest.mark.parametrize("dtype", CASE_DTYPES)
@pytest.mark.parametrize("bad", BAD)
def test_dropout_kept_elements_propagate_dropped_are_zero(dtype, bad):
    from interop.torch import dropout_bias_act

    x = _rand((8, 64), dtype, 0)
    x[::2, ::3] = bad
    b = _rand((64,), dtype, 1)
    # The mask: the same call (same seed and offset after reseeding) on ones.
    torch.manual_seed(0)
    kept = dropout_bias_act(torch.ones_like(x), None, 0.5) != 0
    torch.manual_seed(0)
    y = dropout_bias_act(x, b, 0.5, "gelu_tanh")
    assert 0 < int(kept.sum()) < kept.numel()
    assert bool((y[~kept] == 0).all()), "dropped elements must be exact zeros"
    expect = torch.nn.functional.gelu(x.float() + b.float(), approximate="tanh") * 2.0
    _same_pattern(y[kept], expect[kept], "kept elements")


@pytest.mark.parametrize("dtype", CASE_DTYPES)
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("activation", ["none", "relu", "gelu_tanh"])
def test_linear_act(dtype, bad, activation):
    from interop.torch import linear_act

    x = _rand((5, 32), dtype, 0)
    x[2, 9] = bad
    w = _rand((24, 32), dtype, 1) / 4
    b = _rand((24,), dtype, 2)
    g = _rand((5, 24), dtype, 3)
    act = torch_act(activation)
    _compare(lambda x, w, b: linear_act(x, w, b, activation),
             lambda x, w, b: act(torch.nn.functional.linear(x, w, b)), [x, w, b], g,
             ["grad_x", "grad_w", "grad_b"])


@pytest.mark.parametrize("dtype", [d for d in CASE_DTYPES if d != "float32"] or ["float32"])
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("where", ["q", "k", "v"])
def test_attention(dtype, bad, where):
    """Non-finite inputs give NaN output rows exactly where the math does: a row whose
    scores hold a NaN or a +inf (the softmax then takes inf - inf); a non-finite value
    makes its own column non-finite in every row and leaves the rest finite. Held to
    that directly (torch's CPU kernels are no reference: its CPU flash path returns
    finite rows for a NaN query); on the GPU also to torch's SDPA. Rows whose scores
    are all -inf see no key and give 0 (docs/API.md), where torch gives NaN."""
    from interop.torch import scaled_dot_product_attention as sdpa

    q, k, v = (_rand((1, 2, 6, 16), dtype, s) for s in range(3))
    {"q": q, "k": k, "v": v}[where][0, 1, 2, 5] = bad
    out = sdpa(q, k, v).float()
    if where == "v":
        col = out[0, 1, :, 5]
        assert not bool(torch.isfinite(col).any()), "the value's column must be non-finite"
        others = out[0, 1, :, [c for c in range(16) if c != 5]]
        assert bool(torch.isfinite(others).all()) and bool(torch.isfinite(out[0, 0]).all())
    else:
        s = q.float() @ k.float().transpose(-1, -2)
        none_seen = torch.isneginf(s).all(-1)
        expect = (torch.isnan(s) | torch.isposinf(s)).any(-1) & ~none_seen
        got = torch.isnan(out).all(-1)
        assert torch.equal(got, expect), f"NaN rows {got.nonzero().tolist()}, expected " \
                                         f"{expect.nonzero().tolist()}"
        assert bool(torch.isfinite(out[~expect]).all())
    if not SIMULATOR:
        _same_pattern(out, torch.nn.functional.scaled_dot_product_attention(q, k, v), "out")
