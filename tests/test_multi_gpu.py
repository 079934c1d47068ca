"""Ops on a device other than the current one (issue #21).

Every op must run where its inputs live, on that device's current stream, whatever
device the caller has current, and leave the caller's current device as it was.
Each case runs the op twice on the same inputs: once with the inputs' device
current (the reference), once with the other device current; the results must
agree bit for bit (same kernels, same device, deterministic options). Needs two
GPUs (the lent ``nvidia-h200-x2``); skipped with a reason elsewhere.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.util import SIMULATOR, rel_err

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _two_gpus():
    return not SIMULATOR and torch.cuda.is_available() and torch.cuda.device_count() >= 2


needs_two = pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA devices")

# (device the inputs live on, device current during the call)
PAIRS = [(1, 0), (0, 1)]
# Ops whose results are bit-identical run to run; the others may sum in a different
# order (atomics in attention's dQ, the GEMMs' bias gradients), so they are held to
# a relative error far below what another device's garbage gives (order 1, or NaN).
EXACT = ("layer_norm", "rms_norm", "dropout_bias_act")


def _grads(fn, inputs, seed=0):
    """Outputs of ``fn(*inputs)`` and the gradients of every input that requires one,
    for a fixed random upstream gradient."""
    out = fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    gen = torch.Generator(device=outs[0].device).manual_seed(seed)
    loss = sum((o.float() * torch.randn(o.shape, device=o.device, generator=gen)).sum()
               for o in outs)
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = torch.autograd.grad(loss, leaves)
    return [o.detach() for o in outs] + list(grads)


def _leaf(shape, dev, dtype=torch.float16, scale=1.0):
    return (torch.randn(shape, device=f"cuda:{dev}", dtype=torch.float32) * scale).to(dtype) \
        .requires_grad_()


def _cases(dev):
    from interop.torch import (FusedMLP, dropout_bias_act, layer_norm, linear_act, rms_norm,
                               scaled_dot_product_attention)

    torch.manual_seed(0)
    n = 256
    x = _leaf((37, n), dev)
    w = _leaf((n,), dev)
    b = _leaf((n,), dev)
    q, k, v = (_leaf((2, 4, 67, 64), dev) for _ in range(3))
    lx = _leaf((61, 128), dev)
    lw = _leaf((96, 128), dev, scale=0.1)
    lb = _leaf((96,), dev)
    mlp = FusedMLP(128, 192, 64, activation="gelu_tanh", device=f"cuda:{dev}",
                   dtype=torch.float16)
    mlp_params = [p for p in mlp.parameters()]
    return {
        "layer_norm": (lambda x, w, b: layer_norm(x, (n,), w, b, deterministic=True), (x, w, b)),
        "rms_norm": (lambda x, w: rms_norm(x, (n,), w, deterministic=True), (x, w)),
        "dropout_bias_act": (lambda x, b: dropout_bias_act(x, b, p=0.0, activation="gelu"),
                             (x, b)),
        "sdpa_causal": (lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True),
                        (q, k, v)),
        "linear_act": (lambda x, w, b: linear_act(x, w, b, activation="relu"), (lx, lw, lb)),
        "mlp": (lambda x, *params: mlp(x), (lx, *mlp_params)),
    }


@needs_two
@pytest.mark.parametrize("data_dev,cur_dev", PAIRS)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "dropout_bias_act", "sdpa_causal",
                                "linear_act", "mlp"])
def test_torch_op_on_other_device(op, data_dev, cur_dev):
    fn, inputs = _cases(data_dev)[op]
    with torch.cuda.device(data_dev):
        ref = _grads(fn, inputs)
        torch.cuda.synchronize()
    # Twice: the first call validates and builds any cached launch plan, the second
    # takes the per-signature fast path.
    for _ in range(2):
        with torch.cuda.device(cur_dev):
            got = _grads(fn, inputs)
            assert torch.cuda.current_device() == cur_dev
        torch.cuda.synchronize(data_dev)
        for i, (r, g) in enumerate(zip(ref, got)):
            assert g.device == r.device, (op, i, g.device)
            if op in EXACT:
                assert torch.equal(r, g), f"{op}: output/grad {i} differs with device {cur_dev} current"
            else:
                err = rel_err(g, r)
                assert err < 1e-3, f"{op}: output/grad {i} off by {err:.2e} with device {cur_dev} current"
    _assert_healthy()


@needs_two
@pytest.mark.parametrize("data_dev,cur_dev", PAIRS)
def test_dropout_mask_same_on_other_device(data_dev, cur_dev):
    """p > 0 through the array-level API with a fixed seed: the same mask either way."""
    import numba_fused as nf

    x = torch.randn(33, 200, device=f"cuda:{data_dev}", dtype=torch.float16)
    b = torch.randn(200, device=f"cuda:{data_dev}", dtype=torch.float16)
    with torch.cuda.device(data_dev):
        ref = nf.dropout_bias_act_forward(x, b, p=0.3, seed=7, offset=3, activation="relu")
        rgx, rgb = nf.dropout_bias_act_backward(x, x, b, p=0.3, seed=7, offset=3,
                                                activation="relu")
    with torch.cuda.device(cur_dev):
        got = nf.dropout_bias_act_forward(x, b, p=0.3, seed=7, offset=3, activation="relu")
        ggx, ggb = nf.dropout_bias_act_backward(x, x, b, p=0.3, seed=7, offset=3,
                                                activation="relu")
        assert torch.cuda.current_device() == cur_dev
    torch.cuda.synchronize(data_dev)
    assert torch.equal(ref, got) and torch.equal(rgx, ggx)
    assert torch.allclose(rgb.float(), ggb.float(), rtol=1e-3, atol=1e-3)
    _assert_healthy()


@needs_two
@pytest.mark.parametrize("data_dev,cur_dev", PAIRS)
def test_cupy_on_other_device(data_dev, cur_dev):
    cupy = pytest.importorskip("cupy")
    import numba_fused as nf

    with cupy.cuda.Device(data_dev):
        rs = cupy.random.RandomState(0)
        x = rs.standard_normal((29, 160), dtype=cupy.float32)
        w = rs.standard_normal(160, dtype=cupy.float32)
        b = rs.standard_normal(160, dtype=cupy.float32)
        ref = nf.layer_norm_forward(x, w, b)
        cupy.cuda.Device().synchronize()
    with cupy.cuda.Device(cur_dev):
        got = nf.layer_norm_forward(x, w, b)
        assert cupy.cuda.runtime.getDevice() == cur_dev
    with cupy.cuda.Device(data_dev):
        cupy.cuda.Device().synchronize()
        for r, g in zip(ref, got):
            assert g.device.id == data_dev
            assert bool((r == g).all())
    _assert_healthy()


@needs_two
@pytest.mark.parametrize("data_dev,cur_dev", PAIRS)
def test_numba_arrays_on_other_device(data_dev, cur_dev):
    """numba device arrays do not say their device: the driver is asked."""
    import numpy as np
    from numba import cuda

    import numba_fused as nf

    host = np.random.default_rng(0).standard_normal((19, 96)).astype(np.float32)
    with cuda.gpus[data_dev]:
        x = cuda.to_device(host)
    with cuda.gpus[cur_dev]:
        y, mean, rstd = nf.layer_norm_forward(x, None, None)
        assert cuda.get_current_device().id == cur_dev
    with cuda.gpus[data_dev]:
        out = y.copy_to_host()
    ref = nf.layer_norm_ref(host)[0]
    assert np.abs(out - ref).max() < 1e-4
    _assert_healthy()


@needs_two
def test_inputs_on_two_devices_raise_before_launch():
    from interop.torch import layer_norm, linear_act

    x = torch.randn(8, 64, device="cuda:0", dtype=torch.float16)
    w = torch.randn(64, device="cuda:1", dtype=torch.float16)
    with pytest.raises(ValueError, match="device"):
        layer_norm(x, (64,), w, None)
    lw = torch.randn(32, 64, device="cuda:1", dtype=torch.float16)
    with pytest.raises(ValueError, match="device"):
        linear_act(x, lw)
    _assert_healthy()


_EXIT_SCRIPT = """
import torch
from interop.torch import layer_norm
for d in (1, 0):
    x = torch.randn(8, 256, device=f"cuda:{d}", dtype=torch.float16, requires_grad=True)
    layer_norm(x, (256,)).float().sum().backward()
    torch.cuda.synchronize(d)
"""


@needs_two
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["direct", "core", "dispatcher"])
def test_process_exits_cleanly_after_kernels_on_both_devices(mode):
    """The same kernels loaded on both devices are unloaded once at interpreter exit.

    numba gives each device's copy of a module a finalizer that unloads the one library
    they share; two unloads abort the process ("double free or corruption") after the
    work itself succeeded. numba flushes those finalizers in batches, so whether an
    exit crashed depended on how many kernels had run; with no pending batch allowed
    (``NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0``) every unload happens and one kernel
    pair is enough.
    """
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT="0", NUMBA_FUSED_LAUNCH=mode,
               PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _EXIT_SCRIPT], cwd=root,
                          env=env, capture_output=True, text=True, timeout=240)
    # faulthandler ends with a long list of extension modules: show what came before it.
    said = "\n".join(line for line in proc.stderr.splitlines()
                     if not line.startswith("Extension modules"))
    assert proc.returncode == 0, f"exit code {proc.returncode}: {said[-3000:]}"


def _assert_healthy():
    """Both devices still allocate, compute and synchronise (a launch with another
    device's pointers leaves an illegal-address error behind)."""
    for d in range(2):
        t = torch.ones(1024, device=f"cuda:{d}") * 2
        assert float(t.sum()) == 2048.0
        torch.cuda.synchronize(d)
