"""Property fuzzing of the array-level ops (issue #18 item 4), with hypothesis.

Random shapes (1, primes, odd sizes), dtypes, flags, activations, p, and layouts (a
contiguous tensor, a view at an odd offset into a larger buffer, a non-contiguous
transposed view): each call either matches the float64 reference within the dtype's
tolerance or raises ``ValueError`` / ``TypeError`` naming what was wrong, and never
changes its inputs. Under the simulator (CI) a few small, derandomised examples per
test; on a GPU more and larger ones, drawn afresh each run.
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import numba_fused as nf  # noqa: E402
from numba_fused.linear_act import linear_act_backward_ref  # noqa: E402
from numba_fused.activations import ACTIVATIONS  # noqa: E402
from tests.util import (DTYPES, SIMULATOR, TOL, assert_close, device, rel_err,  # noqa: E402
                        torch_act, torch_dtype)

FUZZ = settings(max_examples=6 if SIMULATOR else 100, deadline=None, derandomize=SIMULATOR,
                database=None, suppress_health_check=list(HealthCheck))
ROWS = st.integers(1, 5 if SIMULATOR else 300)
COLS = st.integers(1, 40 if SIMULATOR else 3000)
LAYOUTS = st.sampled_from(["contiguous", "offset", "transposed"])
SEEDS = st.integers(0, 2**31 - 1)


def _tensor(shape, dtype, seed, layout="contiguous", scale=1.0, shift=0.0):
    """Random values of ``shape`` in one of three layouts (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    vals = (torch.randn(*shape, generator=g) * scale + shift).to(torch_dtype(dtype))
    if layout == "offset":
        buf = torch.empty(vals.numel() + 3, dtype=vals.dtype, device=device())
        t = buf[3:].view(shape)
        t.copy_(vals.to(device()))
        return t
    if layout == "transposed" and len(shape) == 2:
        return vals.t().contiguous().t().to(device())
    return vals.to(device())


def _call(fn, inputs):
    """fn() or the ValueError/TypeError it raised; the inputs must come out unchanged."""
    before = [None if t is None else t.clone() for t in inputs]
    try:
        out, err = fn(), None
    except (ValueError, TypeError) as exc:
        out, err = None, exc
    for t, b in zip(inputs, before):
        assert t is None or torch.equal(t, b), "an input was written"
    return out, err


def _expect_contiguity_error(err, *tensors):
    """A raised error is acceptable only as the contiguity check on a tensor that is
    not C-contiguous."""
    if err is not None:
        assert "contiguous" in str(err), err
        assert not all(t is None or t.is_contiguous() for t in tensors), err
        return True
    return False


@FUZZ
@given(rows=ROWS, cols=COLS, dtype=st.sampled_from(DTYPES), bias=st.booleans(),
       p=st.sampled_from([0.0, 0.1, 0.5, 1.0]), activation=st.sampled_from(ACTIVATIONS),
       layout=LAYOUTS, seed=SEEDS)
def test_dropout_bias_act(rows, cols, dtype, bias, p, activation, layout, seed):
    x = _tensor((rows, cols), dtype, seed, layout)
    b = _tensor((cols,), dtype, seed + 1) if bias else None
    go = _tensor((rows, cols), dtype, seed + 2)
    out, err = _call(lambda: (nf.dropout_bias_act_forward(x, b, p, seed, 12, activation),
                              nf.dropout_bias_act_backward(go, x, b, p, seed, 12, activation)),
                     [x, b, go])
    if _expect_contiguity_error(err, x):
        return
    y, (gx, gb) = out
    y_ref, gx_ref, gb_ref = nf.dropout_bias_act_ref(x, b, p, seed, 12, activation, grad_out=go)
    assert_close(y, y_ref, dtype, "y")
    assert_close(gx, gx_ref, dtype, "grad_x")
    if bias:
        assert_close(gb, gb_ref, dtype, "grad_bias")
    else:
        assert gb is None


@FUZZ
@given(rows=ROWS, cols=COLS, dtype=st.sampled_from(DTYPES),
       affine=st.sampled_from(["wb", "w", "none"]), rms=st.booleans(),
       deterministic=st.booleans(), layout=LAYOUTS, seed=SEEDS,
       shift=st.sampled_from([0.0, 3.0]))
# Found on the H100 (2026-11-26): 9.9% where torch had 1.5%; 9.9% is the exact derivative
# at the forward's correctly rounded rstd (see the floor below).
@example(rows=1, cols=1, dtype="float32", affine="wb", rms=True, deterministic=False,
         layout="contiguous", seed=5172, shift=0.0)
def test_layer_norm_and_rms_norm(rows, cols, dtype, affine, rms, deterministic, layout, seed,
                                 shift):
    x = _tensor((rows, cols), dtype, seed, layout, shift=shift)
    w = _tensor((cols,), dtype, seed + 1, scale=0.5, shift=1.0) if "w" in affine else None
    b = _tensor((cols,), dtype, seed + 2) if "b" in affine and not rms else None
    go = _tensor((rows, cols), dtype, seed + 3)

    def run():
        if rms:
            y, rstd = nf.rms_norm_forward(x, w)
            return (y, rstd), nf.rms_norm_backward(go, x, w, rstd, deterministic=deterministic)
        y, mean, rstd = nf.layer_norm_forward(x, w, b)
        return (y, mean, rstd), nf.layer_norm_backward(go, x, w, b, mean, rstd,
                                                       deterministic=deterministic)

    out, err = _call(run, [x, w, b, go])
    if _expect_contiguity_error(err, x):
        return
    fwd, bwd = out
    if rms:
        y_ref, rstd_ref, gx_ref, gw_ref = nf.rms_norm_ref(x, w, grad_out=go)
        got = {"y": fwd[0], "grad_x": bwd[0], "grad_weight": bwd[1]}
        refs = {"y": y_ref, "grad_x": gx_ref, "grad_weight": gw_ref}
    else:
        y_ref, mean_ref, rstd_ref, gx_ref, gw_ref, gb_ref = nf.layer_norm_ref(x, w, b,
                                                                              grad_out=go)
        got = {"y": fwd[0], "grad_x": bwd[0], "grad_weight": bwd[1], "grad_bias": bwd[2]}
        refs = {"y": y_ref, "grad_x": gx_ref, "grad_weight": gw_ref, "grad_bias": gb_ref}
    theirs = _torch_norm_errors(x, w, b, go, rms, refs)
    floor = {}
    if rms:
        # For N = 1, RMSNorm's d/dx = w d eps r^3 = w d r (1 - x^2 r^2), and the backward
        # has r (the forward's float32 rstd) but no eps: one ulp of r moves dx by
        # 2 x^2 / eps ulps (5e6 at x = 1.6, eps = 1e-6), so even the exact derivative at
        # that r can be 10% off. The bound admits 2x that floor as it admits 2x torch's.
        gx_at_r = nf.rms_norm_ref(x, w, grad_out=go, rstd=fwd[1])[2]
        floor = {"grad_x": rel_err(gx_at_r, refs["grad_x"])}
    for what, ref in refs.items():
        if ref is None:
            assert got[what] is None, what
            continue
        # Rows of one or a few nearly equal elements make d/dx a difference of nearly
        # equal terms (for N = 1, RMSNorm's is w * eps / |x|^3): torch's own op in the
        # same dtype loses as much there. Such cases are held to 2x torch's error.
        t = theirs[what]
        tol = max(TOL[dtype], 2 * t) if math.isfinite(t) else TOL[dtype]
        assert_close(got[what], ref, dtype, what, tol=max(tol, 2 * floor.get(what, 0.0)))


@pytest.mark.parametrize("rms,rows", [(True, 1), (True, 7), (False, 6)])
def test_norm_one_element_rows(rms, rows):
    """Rows of one element, float32, as the fuzz test found them on the H100 (2026-11-25).
    LayerNorm: dx is exactly 0, as torch's; ours was 1.8e-5 (absolute): NVVM fused the
    streaming kernel's w * dy into ``w * dy - c2`` (one FMA), leaving the product's
    rounding error, times rstd; ``mul_rn`` now rounds it as the row sum did. RMSNorm:
    d/dx = w eps / |x|^3 is a difference of nearly equal terms; torch's error was 9%,
    ours 44% until the kernel carried h = x rstd and h^2 as exact pairs (fma_rn). Held
    to 2x torch's error as everywhere."""
    x = _tensor((rows, 1), "float32", 0)
    w = _tensor((1,), "float32", 1, scale=0.5, shift=1.0)
    b = None if rms else _tensor((1,), "float32", 2)
    go = _tensor((rows, 1), "float32", 3)
    if rms:
        _, rstd = nf.rms_norm_forward(x, w)
        gx, _ = nf.rms_norm_backward(go, x, w, rstd)
        ref = nf.rms_norm_ref(x, w, grad_out=go)[2]
    else:
        _, mean, rstd = nf.layer_norm_forward(x, w, b)
        gx, _, _ = nf.layer_norm_backward(go, x, w, b, mean, rstd)
        ref = nf.layer_norm_ref(x, w, b, grad_out=go)[3]
    theirs = _torch_norm_errors(x, w, b, go, rms, {"grad_x": ref})["grad_x"]
    assert_close(gx, ref, "float32", "grad_x", tol=max(TOL["float32"], 2 * theirs))


def _torch_norm_errors(x, w, b, go, rms, refs):
    """Relative errors of torch's own norm (same dtype and device) against ``refs``."""
    import torch.nn.functional as F

    leaves = {"x": x.detach().clone().requires_grad_()}
    if w is not None:
        leaves["w"] = w.detach().clone().requires_grad_()
    if b is not None:
        leaves["b"] = b.detach().clone().requires_grad_()
    n = (x.shape[-1],)
    if rms:
        y = F.rms_norm(leaves["x"], n, leaves.get("w"), eps=1e-6)
    else:
        y = F.layer_norm(leaves["x"], n, leaves.get("w"), leaves.get("b"), eps=1e-5)
    y.backward(go)
    theirs = {"y": y.detach(), "grad_x": leaves["x"].grad}
    if "w" in leaves:
        theirs["grad_weight"] = leaves["w"].grad
    if "b" in leaves:
        theirs["grad_bias"] = leaves["b"].grad
    return {what: rel_err(theirs[what], ref) if ref is not None else 0.0
            for what, ref in refs.items()}


@FUZZ
@given(m=st.integers(1, 7 if SIMULATOR else 600), k=st.integers(1, 24 if SIMULATOR else 700),
       n=st.integers(1, 24 if SIMULATOR else 700), dtype=st.sampled_from(DTYPES),
       bias=st.booleans(), activation=st.sampled_from(ACTIVATIONS), layout=LAYOUTS,
       seed=SEEDS)
# Found on the H100 (2026-11-26): grad_weight 3.8e-3 in float16, all of it grad_z's
# rounding to float16 (1.2451 is the float16 sum of the rounded terms).
@example(m=56, k=1, n=1, dtype="float16", bias=False, activation="gelu", layout="contiguous",
         seed=225)
def test_linear_act(m, k, n, dtype, bias, activation, layout, seed):
    x = _tensor((m, k), dtype, seed, layout)
    w = _tensor((n, k), dtype, seed + 1, scale=k ** -0.5)
    b = _tensor((n,), dtype, seed + 2) if bias else None
    go = _tensor((m, n), dtype, seed + 3)

    def run():
        y, pre = nf.linear_act_forward(x, w, b, activation, save_preact=True)
        return y, pre, nf.linear_act_backward(go, x, w, pre, activation)

    out, err = _call(run, [x, w, b, go])
    if _expect_contiguity_error(err, x):
        return
    y, pre, (gx, gw, gb) = out
    y_ref, pre_ref = nf.linear_act_ref(x, w, b, activation, save_preact=True)
    assert_close(pre, pre_ref, dtype, "preact")
    assert_close(y, nf.linear_act_ref(x, w, b, activation), dtype, "y")
    # The backward's reference takes our preact: act' of the rounded value is what the
    # op is asked to apply (a float64 preact can sit across a kink of relu).
    gx_ref, gw_ref, gb_ref = linear_act_backward_ref(go, x, w, pre, activation)
    refs = {"grad_x": gx_ref, "grad_weight": gw_ref, "grad_bias": gb_ref}
    # grad_z = grad_out * act'(preact) is rounded to the dtype before the two GEMMs, as
    # torch's own activation backward rounds it; a sum of few terms that cancel (K = N
    # = 1, M = 56: 1.25 out of 25.7) then loses more than the dtype's tolerance. Such
    # cases are held to 2x torch's error in the same dtype, as everywhere.
    theirs = _torch_linear_errors(x, w, b, go, activation, refs)
    for (what, ref), got in zip(refs.items(), (gx, gw, gb)):
        assert_close(got, ref, dtype, what, tol=max(TOL[dtype], 2 * theirs[what]))


def _torch_linear_errors(x, w, b, go, activation, refs):
    """Relative errors of torch's linear + activation backward (same dtype and device)
    against ``refs``; zeros where torch's CPU lacks the dtype's kernels (simulator)."""
    import torch.nn.functional as F

    xt, wt = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    bt = torch.zeros(w.shape[0], dtype=w.dtype, device=w.device) if b is None else b.detach()
    bt = bt.clone().requires_grad_()
    try:
        y = torch_act(activation)(F.linear(xt, wt, bt))
        y.backward(go)
    except RuntimeError:
        if SIMULATOR:
            return dict.fromkeys(refs, 0.0)
        raise
    theirs = {"grad_x": xt.grad, "grad_weight": wt.grad, "grad_bias": bt.grad}
    return {what: rel_err(theirs[what], ref) for what, ref in refs.items()}
