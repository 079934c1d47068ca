"""Shared device helpers: Philox known answers, uniforms, dtype load/store round
trips, warp and block reductions, the NumPy 2.5 shim; and their PTX compile."""

import math
import re
import types as pytypes
from fractions import Fraction

import numpy as np
import pytest
import torch
from numba import cuda, types

import numba_fused  # noqa: F401  (installs the simulator primitives / numpy shim)
from interop.dlpack import as_kernel_array, stream_handle
from numba_fused import _compat, dtypes, intrinsics, philox, reductions
from numba_fused.launch import Kernel, carveout_percent, smem_per_sm
from tests.util import DTYPES, device, kernel_attr, torch_dtype

U32 = types.Array(types.uint32, 1, "C")
F32 = types.Array(types.float32, 1, "C")


def _arr(t):
    return as_kernel_array(t, "t")


def _launch(kernel, grid, block, *args):
    ka = [_arr(a) if isinstance(a, torch.Tensor) else a for a in args]
    first = next(a for a in ka if not isinstance(a, (int, float)))
    kernel.launch(grid, block, stream_handle(first), ka)
    if not numba_fused.launch.SIMULATOR:
        torch.cuda.synchronize()


# ---- kernels under test (also compiled to PTX below) ----

def _philox_kernel(ctr, key, out):
    i = cuda.grid(1)
    if i < out.shape[0] // 4:
        r = philox.philox4x32(ctr[4 * i], ctr[4 * i + 1], ctr[4 * i + 2], ctr[4 * i + 3],
                              key[2 * i], key[2 * i + 1])
        out[4 * i] = r[0]
        out[4 * i + 1] = r[1]
        out[4 * i + 2] = r[2]
        out[4 * i + 3] = r[3]


PHILOX = Kernel("test_philox", _philox_kernel, (U32, U32, U32))


def _uniform_kernel(bits, out):
    i = cuda.grid(1)
    if i < bits.shape[0]:
        out[i] = philox.uniform_from_bits(bits[i])


UNIFORM = Kernel("test_uniform", _uniform_kernel, (U32, F32))


def _make_roundtrip(dt):
    load = dtypes.loader(dt)
    store = dtypes.storer(dt)
    st = types.Array(dtypes.numba_storage_type(dt), 1, "C")

    def k(x, widened, y, narrowed):
        i = cuda.grid(1)
        if i < x.shape[0]:
            widened[i] = load(x, i)
            store(narrowed, i, y[i])

    return Kernel(f"test_roundtrip_{dt}", k, (st, F32, F32, st))


ROUNDTRIP = {dt: _make_roundtrip(dt) for dt in DTYPES}


def _warp_kernel(x, sums, maxs):
    i = cuda.grid(1)
    v = x[i]
    s = reductions.warp_sum(v)
    m = reductions.warp_max(v)
    sums[i] = s
    maxs[i] = m


WARP = Kernel("test_warp_reduce", _warp_kernel, (F32, F32, F32))


def _warp_pair_kernel(a, b, ref, got):
    """ref[0 / 1, i]: warp_sum of a / b; got[0 / 1, i]: warp_sum2's; got[2, i]:
    warp_sum_halves' (a's sum in lanes 0-15, b's in 16-31)."""
    i = cuda.grid(1)
    n = a.shape[0]
    ref[i] = reductions.warp_sum(a[i])
    ref[n + i] = reductions.warp_sum(b[i])
    s, t = reductions.warp_sum2(a[i], b[i])
    got[i] = s
    got[n + i] = t
    got[2 * n + i] = reductions.warp_sum_halves(a[i], b[i])


WARP_PAIR = Kernel("test_warp_pair", _warp_pair_kernel, (F32, F32, F32, F32))


def _block_kernel(x, sums, maxs):
    scratch = cuda.shared.array(32, dtype=np.float32)
    i = cuda.grid(1)
    v = x[i]
    s = reductions.block_sum(v, scratch)
    m = reductions.block_max(v, scratch)
    if cuda.threadIdx.x == 0:
        sums[cuda.blockIdx.x] = s
        maxs[cuda.blockIdx.x] = m


BLOCK = Kernel("test_block_reduce", _block_kernel, (F32, F32, F32))

def _rounding_kernel(a, b, c, prod, fused, resid):
    i = cuda.grid(1)
    if i < a.shape[0]:
        h = intrinsics.mul_rn(a[i], b[i])
        prod[i] = h
        fused[i] = intrinsics.fma_rn(a[i], b[i], c[i])
        resid[i] = intrinsics.fma_rn(a[i], b[i], -h)


ROUNDING = Kernel("test_rounding", _rounding_kernel, (F32,) * 6)

ALL = [PHILOX, UNIFORM, WARP, WARP_PAIR, BLOCK, ROUNDING, *ROUNDTRIP.values()]

# ---- tests ----

KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _u32(values):
    return torch.tensor(np.asarray(values, dtype=np.uint32).view(np.int32)).view(torch.uint32)


def test_philox_host_known_answers():
    for c, k, want in KAT:
        assert tuple(int(v) for v in philox.philox4x32_np(c, k)) == want


def test_philox_device_known_answers_and_random_counters():
    rng = np.random.default_rng(1)
    ctr = np.concatenate([np.array([c for c, _, _ in KAT], np.uint32),
                          rng.integers(0, 2**32, (29, 4), dtype=np.uint32)])
    key = np.concatenate([np.array([k for _, k, _ in KAT], np.uint32),
                          rng.integers(0, 2**32, (29, 2), dtype=np.uint32)])
    n = ctr.shape[0]
    out = torch.zeros(4 * n, dtype=torch.uint32, device=device())
    _launch(PHILOX, 1, 32, _u32(ctr.ravel()).to(device()), _u32(key.ravel()).to(device()), out)
    got = out.cpu().view(torch.int32).numpy().view(np.uint32).reshape(n, 4)
    for i, (_, _, want) in enumerate(KAT):
        assert tuple(int(v) for v in got[i]) == want
    np.testing.assert_array_equal(got, philox.philox4x32_np(ctr, key))


def test_uniform_from_bits_exact_and_in_range():
    bits = np.array([0, 1, 255, 256, 0x80000000, 0xFFFFFFFF, 0xFFFFFF00, 12345678], np.uint32)
    out = torch.full((bits.size,), float("nan"), device=device())
    _launch(UNIFORM, 1, 32, _u32(bits).to(device()), out)
    got = out.cpu().numpy()
    np.testing.assert_array_equal(got, philox.uniform_from_bits_np(bits))
    assert got.min() >= 0.0 and got.max() < 1.0
    assert got[5] == np.float32(1.0 - 2.0**-24)


@pytest.mark.parametrize("dt", DTYPES)
def test_dtype_round_trip(dt):
    tdt = torch_dtype(dt)
    g = torch.Generator().manual_seed(0)
    n = 61
    src = (torch.randn(n, generator=g) * 100).to(tdt)
    y = torch.randn(n, generator=g, dtype=torch.float32) * 3
    # Values that probe rounding: ties, subnormals, overflow, NaN, inf, signed zero.
    y[:8] = torch.tensor([1.00390625, 1.01171875, -0.0, 1e-40, 3.4e38, float("inf"),
                          float("nan"), 65520.0])
    widened = torch.full((n,), float("nan"), device=device())
    narrowed = torch.empty(n, dtype=tdt, device=device())
    _launch(ROUNDTRIP[dt], 1, 64, src.to(device()), widened, y.to(device()), narrowed)
    torch.testing.assert_close(widened.cpu(), src.float(), rtol=0, atol=0, equal_nan=True)
    want = y.to(tdt)
    got = narrowed.cpu()
    # Bit-exact rounding everywhere; NaN payloads may differ (torch's CPU and GPU
    # conversions already disagree on them), so NaN only has to stay NaN.
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    bits = torch.int32 if dt == "float32" else torch.int16
    assert torch.equal(got[~nan].view(bits), want[~nan].view(bits)), (got, want)


def test_warp_reductions():
    rng = np.random.default_rng(2)
    n = 4 * 32
    x = rng.standard_normal(n).astype(np.float32)
    sums = torch.full((n,), float("nan"), device=device())
    maxs = torch.full((n,), float("nan"), device=device())
    _launch(WARP, 2, 64, torch.from_numpy(x).to(device()), sums, maxs)
    xs = x.reshape(-1, 32).astype(np.float64)
    np.testing.assert_allclose(sums.cpu().numpy().reshape(-1, 32),
                               np.repeat(xs.sum(1, keepdims=True), 32, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(maxs.cpu().numpy().reshape(-1, 32),
                                  np.repeat(x.reshape(-1, 32).max(1, keepdims=True), 32, 1))


def test_warp_pair_sums_same_bits():
    """warp_sum2 (six shuffles) and warp_sum_halves (five) give each lane warp_sum's
    bits for both sums. The values span 2^-20 .. 2^20 with both signs, so another
    order of the additions would round differently somewhere in the 64 warps."""
    rng = np.random.default_rng(7)
    n = 64 * 32
    a, b = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 21, n)) for _ in range(2))
    a = torch.from_numpy(a.astype(np.float32)).to(device())
    b = torch.from_numpy(b.astype(np.float32)).to(device())
    ref = torch.full((2 * n,), float("nan"), device=device())
    got = torch.full((3 * n,), float("nan"), device=device())
    _launch(WARP_PAIR, 16, 128, a, b, ref, got)
    ref, got = ref.cpu().view(2, -1, 32), got.cpu().view(3, -1, 32)
    assert torch.equal(got[:2], ref)
    assert torch.equal(got[2, :, :16], ref[0, :, :16])
    assert torch.equal(got[2, :, 16:], ref[1, :, 16:])
    # The bits test means something: the sums in float64 differ from warp_sum's.
    exact = a.cpu().double().view(-1, 32).sum(1)
    assert not torch.equal(ref[0, :, 0].double(), exact)


@pytest.mark.parametrize("block", [32, 96, 256])
def test_block_reductions(block):
    rng = np.random.default_rng(block)
    nblocks = 3
    x = rng.standard_normal(nblocks * block).astype(np.float32)
    sums = torch.full((nblocks,), float("nan"), device=device())
    maxs = torch.full((nblocks,), float("nan"), device=device())
    _launch(BLOCK, nblocks, block, torch.from_numpy(x).to(device()), sums, maxs)
    xb = x.reshape(nblocks, block)
    np.testing.assert_allclose(sums.cpu().numpy(), xb.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(maxs.cpu().numpy(), xb.max(1))


def _round_exact(q):
    """The float32 nearest the rational ``q`` (ties to even), by brute force."""
    f = np.float32(float(q))
    cands = [f, np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda g: (abs(Fraction(float(g)) - q),
                                     int(np.float32(g).view(np.uint32)) % 2))


def test_mul_rn_and_fma_rn_round_once():
    """mul_rn rounds the product, fma_rn rounds a * b + c once, and
    fma_rn(a, b, -mul_rn(a, b)) is the product's exact rounding error: the pieces the
    one-element RMSNorm backward is built on, on the GPU and in the simulator."""
    rng = np.random.default_rng(5)
    n = 256
    a = (1 + rng.random(n)).astype(np.float32)
    b = (1 + rng.random(n)).astype(np.float32)
    c = -(a.astype(np.float64) * b).astype(np.float32)  # near-cancellation: fma matters
    c[: n // 2] = rng.standard_normal(n // 2).astype(np.float32)
    # Exact ties for the fused rounding: a * b + c halfway between two float32s.
    a[0], b[0], c[0] = np.float32(1 + 2 ** -12), np.float32(1 + 2 ** -12), np.float32(0)
    outs = [torch.full((n,), float("nan"), device=device()) for _ in range(3)]
    _launch(ROUNDING, 1, n, *(torch.from_numpy(v).to(device()) for v in (a, b, c)), *outs)
    prod, fused, resid = (o.cpu().numpy() for o in outs)
    for i in range(n):
        exact = Fraction(float(a[i])) * Fraction(float(b[i]))
        assert prod[i] == _round_exact(exact), i
        assert fused[i] == _round_exact(exact + Fraction(float(c[i]))), i
        assert Fraction(float(prod[i])) + Fraction(float(resid[i])) == exact, i


def test_to_float64_reads_every_array_kind():
    """The float64 host copy every <op>_ref reads its inputs through: torch tensors
    (bfloat16 too), NumPy (uint16 as bfloat16 bits, the kernels' storage), numba
    device arrays, sequences; None stays None; what holds no numbers is a TypeError
    naming the argument."""
    vals = np.array([1.5, -2.25, 3.0e38, -0.0], dtype=np.float64)
    bf = torch.tensor(vals, dtype=torch.bfloat16)
    want = bf.double().numpy()
    bits = bf.view(torch.int16).numpy().view(np.uint16)
    assert dtypes.to_float64(None) is None
    for a in (bf, bits, cuda.to_device(bits), list(want), want.astype(np.float32)):
        got = dtypes.to_float64(a)
        assert got.dtype == np.float64 and np.array_equal(got, want), type(a)
    assert np.array_equal(dtypes.to_float64(torch.tensor(vals, device=device())), vals)
    with pytest.raises(TypeError, match="grad_out: cannot read list as float64"):
        dtypes.to_float64(["a", "b"], "grad_out")


def test_row_stack_shim_only_when_missing():
    fake = pytypes.SimpleNamespace(vstack=np.vstack)
    assert _compat.ensure_numpy_row_stack(fake) is True
    assert fake.row_stack is np.vstack
    assert _compat.ensure_numpy_row_stack(fake) is False
    sentinel = object()
    kept = pytypes.SimpleNamespace(vstack=np.vstack, row_stack=sentinel)
    assert _compat.ensure_numpy_row_stack(kept) is False
    assert kept.row_stack is sentinel
    # After importing numba_fused, the real numpy has the alias, whatever its version.
    assert hasattr(np, "row_stack")


def test_each_library_unloaded_once(monkeypatch):
    """Of the modules that share one library across devices' contexts, one keeps its
    unloading finalizer: the first still armed, in numba's device order."""
    import weakref

    from numba.cuda.cudadrv.driver import driver

    from numba_fused import launch

    class Module:
        pass

    unloads = []

    def module(lib):
        m = Module()
        m._finalizer = weakref.finalize(m, unloads.append, lib)
        return m

    def context(**mods):
        return pytypes.SimpleNamespace(modules={int(k[1:]): m for k, m in mods.items()})

    a0, b0, a1, b1, c1 = module(7), module(8), module(7), module(8), module(9)
    a2, d0, d1 = module(7), module(10), module(10)
    d0._finalizer.detach()  # disarmed by an earlier call: not the one that unloads
    devices = {0: pytypes.SimpleNamespace(primary_context=context(k7=a0, k8=b0, k10=d0)),
               3: pytypes.SimpleNamespace(primary_context=None),
               1: pytypes.SimpleNamespace(primary_context=context(k7=a1, k8=b1, k9=c1,
                                                                  k10=d1))}
    monkeypatch.setattr(driver, "devices", devices, raising=False)
    launch._unload_each_library_once()
    alive = [m._finalizer.alive for m in (a0, b0, a1, b1, c1, d1)]
    assert alive == [True, True, False, False, True, True]
    # A third device loads library 7 later: its copy is disarmed, and one unload of
    # each library is left for exit (weakref.finalize's exit hook calls them all).
    devices[2] = pytypes.SimpleNamespace(primary_context=context(k7=a2))
    launch._unload_each_library_once()
    assert a0._finalizer.alive and not a2._finalizer.alive
    for m in (a0, b0, a1, b1, c1, a2, d0, d1):
        m._finalizer()
    assert sorted(unloads) == [7, 8, 9, 10]


@pytest.mark.ptx
@pytest.mark.parametrize("kernel", ALL, ids=lambda k: k.name)
def test_helper_kernels_compile_to_ptx(kernel):
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = kernel.ptx()
    assert ".target sm_90" in ptx
    rep = ptxas_report(ptx)
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0, rep
    assert not math.isnan(rep["registers"])


def _helper_factory(scale, flag, shape=(2, 3)):
    def helper(x):
        return x * scale if flag else x + shape[0]
    return helper


def test_helper_intern_keys():
    """inline_device's key: closures of one code with equal closure values (scalars by
    type and bits, tuples element-wise, other objects by identity) share it; a value
    that numba would compile differently does not."""
    from numba_fused.jit import _intern_key

    key = lambda *a: _intern_key(_helper_factory(*a))  # noqa: E731
    assert key(2.0, True) == key(2.0, True)
    assert key(2, True, (2, 3)) == key(2, True, (2, 3))
    for a, b in (((2.0, True), (2, True)), ((0.0, True), (-0.0, True)),
                 ((1, True), (True, True)), ((2.0, True), (2.0, False)),
                 ((2, True, (2, 3)), (2, True, (2.0, 3))),
                 ((np.float32(2), True), (np.float64(2), True))):
        assert key(*a) != key(*b), (a, b)
    assert key(float("nan"), True) == key(float("nan"), True)  # same bits, same code
    obj = object()
    assert key(obj, True) == key(obj, True) and key(obj, True) != key(object(), True)

    def unbound():
        return later  # noqa: F821  (an empty cell until ``later`` is assigned)
    assert _intern_key(unbound) is None
    later = 1  # noqa: F841


@pytest.mark.ptx
def test_inline_device_interns_equal_closures():
    """Two factory calls with equal closure values return one dispatcher (compiled once
    per signature); different values, different dispatchers."""
    from numba_fused.jit import inline_device

    first = inline_device(_helper_factory(2.0, True))
    assert inline_device(_helper_factory(2.0, True)) is first
    assert inline_device(_helper_factory(3.0, True)) is not first


def test_ptx_digest_ignores_only_names_and_env_order():
    """tools/ptx_report.py's digest (the check that a refactor left every kernel's
    PTX as it was): equal for PTX that differs only in the order of numba's
    environment declarations, in the unique-id parts of mangled names and in the
    numbers of shared arrays' symbols, different when an instruction differs."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "tools", "ptx_report.py")
    spec = importlib.util.spec_from_file_location("ptx_report", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    env = [".common .global .align 8 .u64 _ZN08NumbaEnv5dummy3fooB2v1B4abcdEj;",
           ".common .global .align 8 .u64 _ZN08NumbaEnv5dummy3barB2v2B4abcdEj;"]
    body = (".visible .shared .align 4 .b8 _cudapy_smem_{3}[512];\n"
            ".extern .shared .align 4 .b8 _cudapy_smem_{4}[];\n"
            ".visible .entry _ZN6cudapy5k{0}B2v{1}Ej(\n.param .u64 _ZN6cudapy5k{0}B2v{1}Ej_param_0\n)"
            "{{\nld.param.u64 %rd1, [_ZN6cudapy5k{0}B2v{1}Ej_param_0];\n"
            "mov.u64 %rd2, _cudapy_smem_{3};\nmov.u64 %rd3, _cudapy_smem_{4};\n{2}\nret;\n}}\n")
    a = "\n".join(env) + "\n" + body.format("a", 7, "add.f32 %f1, %f2, %f3;", 52, 54)
    b = "\n".join(env[::-1]) + "\n" + body.format("a", 31, "add.f32 %f1, %f2, %f3;", 49, 51)
    c = "\n".join(env) + "\n" + body.format("a", 7, "sub.f32 %f1, %f2, %f3;", 52, 54)
    # The same declarations, but each mov on the other array.
    swap = {"%rd2, _cudapy_smem_52": "%rd2, _cudapy_smem_54",
            "%rd3, _cudapy_smem_54": "%rd3, _cudapy_smem_52"}
    d = re.sub("|".join(swap), lambda m: swap[m.group(0)], a)
    assert tool.ptx_digest(a) == tool.ptx_digest(b)
    assert tool.ptx_digest(a) != tool.ptx_digest(c)
    assert tool.ptx_digest(a) != tool.ptx_digest(d)
    assert tool.compare_digests({"k": "1", "gone": "2"}, {"k": "3", "new": "4"}) == [
        "PTX gone: gone", "PTX changed: k", "PTX new: new"]


# ---- the L1 / shared carveout of kernels whose occupancy the launchers ask for ----

def _smem_kernel(out):
    buf = cuda.shared.array(0, types.float32)
    t = cuda.threadIdx.x
    buf[t] = np.float32(t)
    cuda.syncthreads()
    out[t] = buf[cuda.blockDim.x - 1 - t]


def test_carveout_percent():
    """The carveout preference for a number of resident blocks: their bytes (dynamic,
    static and the driver's reserve) over the SM's shared memory, rounded up, at most
    100 (H200: 233472 bytes an SM, 1024 reserved a block)."""
    per_sm = 233472
    assert carveout_percent(1, 48 * 1024 + 1024, per_sm) == 22
    assert carveout_percent(1, 96 * 1024 + 1024, per_sm) == 43
    assert carveout_percent(4, 48 * 1024 + 1024, per_sm) == 86
    assert carveout_percent(5, 48 * 1024 + 1024, per_sm) == 100
    assert carveout_percent(2, per_sm // 2, per_sm) == 100
    assert carveout_percent(0, 4096, per_sm) == 0


@pytest.mark.parametrize("args", [(-1, 4096, 233472), (1, -1, 233472), (1, 4096, 0),
                                  (1.5, 4096, 233472), (True, 4096, 233472)])
def test_carveout_percent_rejects_bad_counts(args):
    with pytest.raises(ValueError, match="must be an int"):
        carveout_percent(*args)


@pytest.mark.parametrize("threads, shared, blocks", [(0, 64 * 1024, 1), (256, -1, 1),
                                                     (256, 64 * 1024, 0),
                                                     (256, 64 * 1024, 1.0)])
def test_fit_carveout_rejects_bad_counts(threads, shared, blocks):
    """Checked before anything is asked of the driver (so under the simulator too)."""
    k = Kernel("test_smem_fit_bad", _smem_kernel, (F32,))
    with pytest.raises(ValueError, match="must be an int"):
        k.fit_carveout(threads, shared, blocks, 0)


@pytest.mark.parametrize("percent, threads, shared", [(-1, 256, 0), (101, 256, 0),
                                                     (5, 0, 0), (5, 256, -1), (5.0, 256, 0),
                                                     (True, 256, 0)])
def test_prefer_carveout_rejects_bad_counts(percent, threads, shared):
    """Checked before anything is asked of the driver (so under the simulator too)."""
    k = Kernel("test_smem_prefer_bad", _smem_kernel, (F32,))
    with pytest.raises(ValueError, match="must be an int"):
        k.prefer_carveout(percent, threads, shared, 0)


@pytest.mark.gpu
def test_prefer_carveout_sets_the_carveout_where_the_blocks_fit():
    """prefer_carveout(percent): the kernel's carveout preference becomes percent
    where the blocks resident without it still fit, and the kernel launches and reads
    its shared memory back; asked again, the same answer without a driver call.
    Where they would not fit (0: the 8 KB configuration, four blocks of 2 KB against
    eight), the preference is left
    as it was and the answer is None. Occupancy questions are answered as under the
    whole carveout."""
    carve = "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT"
    k = Kernel("test_smem_prefer", _smem_kernel, (F32,))
    k.compile()
    blocks = k.resident_blocks(256, 1024, 0)
    assert k.prefer_carveout(28, 256, 1024, 0) == 28
    assert kernel_attr(k, carve) == 28
    assert k._max_active(256, 1024, 0) == blocks
    assert k.resident_blocks(256, 1024, 0) == blocks
    k._set_carveout(0, 100)
    assert k.prefer_carveout(28, 256, 1024, 0) == 28  # cached: nothing set again
    assert kernel_attr(k, carve) == 100
    k._set_carveout(0, 28)
    out = torch.full((256,), -1.0, device="cuda")
    ka = _arr(out)
    k.launch((132,), (256,), stream_handle(ka), [ka], shared=1024)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(255, -1, -1, dtype=torch.float32))

    tight = Kernel("test_smem_prefer_tight", _smem_kernel, (F32,))
    tight.compile()
    before = kernel_attr(tight, carve)
    assert tight.prefer_carveout(0, 256, 1024, 0) is None
    assert kernel_attr(tight, carve) == before


@pytest.mark.gpu
def test_resident_blocks_keeps_the_l1_for_small_shared_memory():
    """Asking how many blocks with 16 KB of dynamic shared memory fit leaves the
    kernel's carveout preference and shared-memory limit as the driver set them (the
    launchers asked this for the LayerNorm row kernels, and the old answer's side
    effect, a carveout preferring all shared memory, left them ~23 KB of L1: 114 ->
    107 us at fp16 16384 x 4096 with w and b); only a request over the 48 KB default
    raises both, as a launch of that size must."""
    small = Kernel("test_smem_small", _smem_kernel, (F32,))
    small.compile()
    carve0 = kernel_attr(small, "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT")
    limit0 = kernel_attr(small, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES")
    assert small.resident_blocks(256, 16 * 1024, 0) >= 1
    assert kernel_attr(small, "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT") == carve0
    assert kernel_attr(small, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES") == limit0
    out = torch.full((256,), -1.0, device="cuda")
    ka = _arr(out)
    small.launch((1,), (256,), stream_handle(ka), [ka], shared=16 * 1024)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(255, -1, -1, dtype=torch.float32))

    big = Kernel("test_smem_big", _smem_kernel, (F32,))
    big.compile()
    assert big.resident_blocks(256, 96 * 1024, 0) >= 1
    assert kernel_attr(big, "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT") == 100
    assert kernel_attr(big, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES") >= 96 * 1024


@pytest.mark.gpu
def test_fit_carveout_keeps_the_blocks_and_gives_the_rest_to_l1():
    """A persistent grid's kernel over the 48 KB default prefers the carveout that
    holds just the blocks it runs, not all shared memory (v48); a plan of the same
    kernel asking for more blocks raises it and a later smaller one does not lower it
    again; occupancy questions for other sizes are answered as under the whole
    carveout; the kernel still launches and reads its shared memory back."""
    carve = "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT"
    k = Kernel("test_smem_fit", _smem_kernel, (F32,))
    k.compile()
    shared = 96 * 1024
    assert k.resident_blocks(256, shared, 0) == 2
    per_sm, reserved = smem_per_sm(0)
    static = int(k.function(0)[0].attrs.shared)
    one = carveout_percent(1, shared + static + reserved, per_sm)
    assert one < 100
    assert k.fit_carveout(256, shared, 1, 0) == one
    assert kernel_attr(k, carve) == one
    assert k.resident_blocks(256, 100 * 1024, 0) == 2
    assert kernel_attr(k, carve) == one
    two = k.fit_carveout(256, shared, 2, 0)
    assert one < two == carveout_percent(2, shared + static + reserved, per_sm)
    assert kernel_attr(k, carve) == two
    assert k.fit_carveout(256, shared, 1, 0) == two
    out = torch.full((256,), -1.0, device="cuda")
    ka = _arr(out)
    k.launch((132,), (256,), stream_handle(ka), [ka], shared=shared)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(255, -1, -1, dtype=torch.float32))
    small = Kernel("test_smem_fit_small", _smem_kernel, (F32,))
    small.compile()
    before = kernel_attr(small, carve)
    assert small.fit_carveout(256, 16 * 1024, 1, 0) == 100
    assert kernel_attr(small, carve) == before
