"""The exchange layer: zero-copy views of every supported producer, outputs in the
caller's library, launches on the caller's current stream (torch and CuPy), CUDA
graph capture, and the direct launch path against numba's dispatcher."""

import numpy as np
import pytest
import torch
from numba import cuda, types

import numba_fused  # noqa: F401
from interop import dlpack
from interop.dlpack import as_kernel_array, empty_like_lib, poison_outputs, stream_handle
from numba_fused import dtypes
from numba_fused.launch import SIMULATOR, Kernel, cdiv
from tests.util import DTYPES, device, torch_dtype


def _make_axpy(dt):
    load = dtypes.loader(dt)
    store = dtypes.storer(dt)
    arr = types.Array(dtypes.numba_storage_type(dt), 1, "C")

    def axpy(x, y, out, a, n):
        """out[i] = a * x[i] + y[i] for i < n (float32 math, stored in dtype)."""
        i = cuda.grid(1)
        if i < n:
            store(out, i, a * load(x, i) + load(y, i))

    return Kernel(f"test_axpy_{dt}", axpy, (arr, arr, arr, types.float32, types.int64))


AXPY = {dt: _make_axpy(dt) for dt in DTYPES}


def axpy(x, y, a=2.0):
    """Array-level axpy through the same path the ops use."""
    X = as_kernel_array(x, "x")
    Y = as_kernel_array(y, "y")
    out = empty_like_lib(X, X.shape, X.dtype)
    n = X.size
    AXPY[X.dtype].launch(cdiv(n, 128), 128, stream_handle(X), [X, Y, out, a, n])
    return out.owner


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [1, 37, 300])
def test_torch_round_trip(dt, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g).to(torch_dtype(dt)).to(device())
    y = torch.randn(n, generator=g).to(torch_dtype(dt)).to(device())
    with poison_outputs():
        out = axpy(x, y, 2.0)
    assert isinstance(out, torch.Tensor) and out.dtype == x.dtype and out.device == x.device
    want = (2.0 * x.float() + y.float()).to(x.dtype)
    assert torch.equal(out.cpu(), want.cpu())


@pytest.mark.parametrize("dt", ["int32", "float16"])
def test_empty_like_lib_from_a_plan_stand_in(dt):
    """A plan's stand-in (no owner: library and device only) still names where a new
    array goes: a stream buffer made when a plan first meets a stream."""
    x = torch.zeros(4, 8, device=device())
    real = as_kernel_array(x, "x")
    stand_in = dlpack.KernelArray(None, "torch", real.dtype, real.shape, real.strides,
                                  ptr=1 << 40, device=real.device)
    with poison_outputs():
        out = empty_like_lib(stand_in, (5, 3), dt)
    t = out.owner
    assert isinstance(t, torch.Tensor) and t.shape == (5, 3) and t.device == x.device
    assert t.dtype == getattr(torch, dt)
    assert out.dtype == dt
    assert (t.isnan() if t.is_floating_point() else t == -1).all()


def test_kernel_array_views_are_zero_copy():
    x = torch.arange(12, dtype=torch.float32, device=device()).reshape(3, 4)
    k = as_kernel_array(x, "x")
    assert k.shape == (3, 4) and k.strides == (4, 1) and k.dtype == "float32"
    assert k.is_contiguous() and k.flat2d().shape == (3, 4)
    t = as_kernel_array(x.t(), "xt")
    assert t.strides == (1, 4) and not t.is_contiguous()
    b = as_kernel_array(x.to(torch.bfloat16), "b")
    assert b.dtype == "bfloat16" and b.itemsize == 2
    if SIMULATOR:
        assert np.shares_memory(k.host, x.numpy())
    else:
        assert k.ptr == x.data_ptr()
        assert k.abi_args[:5] == (0, 0, 12, 4, x.data_ptr())
        assert k.abi_args[5:] == (3, 4, 16, 4)


def test_reshape_and_flat2d():
    x = torch.randn(2, 3, 5, device=device())
    k = as_kernel_array(x, "x").flat2d()
    assert k.shape == (6, 5) and k.strides == (5, 1)
    with pytest.raises(ValueError, match="non-contiguous"):
        as_kernel_array(x.transpose(0, 2), "x").flat2d()


def test_dlpack_only_producer():
    class OnlyDLPack:
        def __init__(self, t):
            self._t = t

        def __dlpack__(self, **kw):
            return self._t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self._t.__dlpack_device__()

    x = torch.randn(7, device=device())
    k = as_kernel_array(OnlyDLPack(x), "x")
    assert k.lib == "torch" and k.shape == (7,)


def test_rejects_non_arrays_and_names_the_argument():
    with pytest.raises(TypeError, match="weight must be a GPU array"):
        as_kernel_array([1.0, 2.0], "weight")


@pytest.mark.sim
def test_simulator_accepts_numpy_and_allocates_numpy():
    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, dtype=np.float32)
    out = axpy(x, y, 3.0)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, 3.0 * x + 1.0)


@pytest.mark.sim
def test_simulator_numba_device_array():
    x = cuda.to_device(np.arange(4, dtype=np.float32))
    k = as_kernel_array(x, "x")
    assert k.lib == "numba" and k.shape == (4,)


@pytest.mark.gpu
def test_gpu_rejects_host_inputs():
    with pytest.raises(TypeError, match="x must be a CUDA tensor"):
        as_kernel_array(torch.ones(3), "x")
    with pytest.raises(TypeError, match="host NumPy array"):
        as_kernel_array(np.ones(3, np.float32), "x")


@pytest.mark.gpu
def test_gpu_numba_device_array_round_trip():
    x = cuda.to_device(np.arange(64, dtype=np.float32))
    y = cuda.to_device(np.ones(64, dtype=np.float32))
    out = axpy(x, y, 0.5)
    assert hasattr(out, "copy_to_host")
    np.testing.assert_array_equal(out.copy_to_host(), 0.5 * np.arange(64) + 1)


@pytest.mark.gpu
def test_gpu_torch_launch_on_current_stream():
    """Work queued behind a long kernel on a side stream: our launch must wait for
    it (same stream) and leave the default stream idle."""
    n = 1 << 20
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.empty(n, device="cuda")
        y = torch.ones(n, device="cuda")
        torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time on side
        x.fill_(3.0)
        out = axpy(x, y, 2.0)
        assert not side.query(), "side stream finished too early to tell"
        assert torch.cuda.default_stream().query(), "our kernel ran on the default stream"
    side.synchronize()
    assert torch.all(out == 7.0)


@pytest.mark.gpu
def test_gpu_cupy_launch_on_current_stream():
    cupy = pytest.importorskip("cupy")
    n = 1 << 16
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x = cupy.full(n, 3.0, dtype=cupy.float32)
        y = cupy.ones(n, dtype=cupy.float32)
        k = as_kernel_array(x, "x")
        assert stream_handle(k) == s.ptr
        out = axpy(x, y, 2.0)
    s.synchronize()
    assert isinstance(out, cupy.ndarray)
    assert bool((out == 7.0).all())


@pytest.mark.gpu
def test_gpu_cupy_and_torch_interchange():
    cupy = pytest.importorskip("cupy")
    x = torch.randn(1000, device="cuda", dtype=torch.float16)
    xc = cupy.from_dlpack(x)
    out = axpy(xc, xc, 1.0)
    assert isinstance(out, cupy.ndarray)
    want = (2.0 * x.float()).half()
    assert torch.equal(torch.from_dlpack(out), want)


@pytest.mark.gpu
def test_gpu_cuda_graph_capture():
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    axpy(x, y)  # compile and load outside capture
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out = axpy(x, y, 2.0)
    torch.cuda.current_stream().wait_stream(s)
    x.copy_(torch.arange(4096, device="cuda", dtype=torch.float32))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, 2.0 * x + y)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["core", "dispatcher"])
def test_gpu_other_launch_paths_match_direct(mode):
    from numba_fused.launch import set_launch_mode

    x = torch.randn(999, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(999, device="cuda", dtype=torch.bfloat16)
    direct = axpy(x, y, 1.5)
    old = set_launch_mode(mode)
    try:
        other = axpy(x, y, 1.5)
    finally:
        set_launch_mode(old)
    torch.cuda.synchronize()
    assert torch.equal(direct, other)


@pytest.mark.gpu
def test_gpu_launch_from_a_fresh_thread():
    """autograd runs backward on its own threads: a launch from a thread that never
    touched CUDA must still find a context."""
    import threading

    x = torch.randn(64, device="cuda")
    result = {}

    def work():
        result["out"] = axpy(x, x, 1.0)
        torch.cuda.synchronize()

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert torch.equal(result["out"], 2.0 * x)


@pytest.mark.ptx
@pytest.mark.parametrize("dt", DTYPES)
def test_axpy_compiles(dt):
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        rep = ptxas_report(AXPY[dt].ptx())
    assert rep["spill_stores"] == 0


def test_library_of():
    assert dlpack.library_of(np.zeros(1)) == "numpy"
    assert dlpack.library_of(torch.zeros(1)) == "torch"


def _alias_kernel(a, b):
    i = cuda.grid(1)
    if i < a.shape[0]:
        if i % 2 == 0:
            a[i] = 1.0
        else:
            b[i] = 2.0


ALIAS = Kernel("test_alias", _alias_kernel,
               (types.Array(types.float32, 1, "C"), types.Array(types.float32, 1, "C")))


def test_same_array_passed_twice_keeps_both_writes():
    """The simulator copies plain host arrays in and out per argument; launches must
    work in place so that aliased arguments behave as on the GPU."""
    x = torch.zeros(8, device=device())
    X = as_kernel_array(x, "x")
    ALIAS.launch(1, 8, stream_handle(X), [X, X])
    if not SIMULATOR:
        torch.cuda.synchronize()
    assert x.cpu().tolist() == [1.0, 2.0] * 4
