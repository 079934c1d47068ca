"""Hopper warpgroup MMA from numba (numba_fused.tensor_core's wgmma primitives).

One warpgroup (128 threads) stages A (64 x K) and B (K x n, stored transposed as
n x K) into shared memory in the layout a descriptor describes (no-swizzle, or the
128-byte swizzle), then runs ``wgmma.mma_async.m64nNk16`` once per 16-wide K step
into float32 accumulator registers. Small-integer data make every product and sum
exact, so the result must equal NumPy's bit for bit. Under the simulator the
emulation runs (CI); on a Hopper GPU the inline PTX does (numba-cuda compiles for
sm_90a there); CPU CI also assembles the kernels for sm_90a and reads HGMMA in their
SASS.
"""

import functools

import numpy as np
import pytest
from numba import cuda, types

import numba_fused  # noqa: F401  (simulator primitives, NumPy shim)
from interop.dlpack import as_kernel_array
from numba_fused import tensor_core as tc
from numba_fused.launch import SIMULATOR, Kernel

HALF = ("float16", "bfloat16")
KSTEPS = 2
# Descriptor strides (bytes) of the two layouts tested, for an operand of ``rows``
# rows per 16-wide K step: core matrices interleaved along K (lbo 128: the two
# K-halves of an 8-row group side by side, sbo 256 between row groups), or the two
# K-halves as separate slabs (lbo = rows * 16, sbo 128).
LAYOUTS = {"interleaved": lambda rows: (128, 256), "slabs": lambda rows: (rows * 16, 128)}
# The 128-byte swizzled layout (wgmma_desc's swizzle=128): a line holds 64 halves, so K
# is one full line, 4 K steps, each descriptor 32 bytes (K-major) or 16 lines (MN-major)
# past the previous one. Its arrays are 1024-byte aligned on the GPU (the simulator
# takes no alignment and the emulation assumes it).
SW128 = "sw128"
SW_KSTEPS = 4
SW_ALIGN = None if SIMULATOR else 1024


def _k_total(layout):
    return 16 * (SW_KSTEPS if layout == SW128 else KSTEPS)


def _on_hopper():
    if SIMULATOR:
        return True
    return cuda.is_available() and cuda.get_current_device().compute_capability >= (9, 0)


@cuda.jit(device=True)
def _stage(dst, src, size, k_total, tile, lbo, sbo, mn_major, tid):
    """Operand ``src`` (rows of k_total) into shared ``dst``: element (r, kk) of K step
    s at byte kmajor_offset(r, kk % 16) (mnmajor_offset with ``mn_major``) of tile s
    (``tile`` elements per step); the warpgroup's 128 threads share the copies."""
    for e in range(tid, size, 128):
        r = e // k_total
        kk = e % k_total
        q = kk % 16
        if mn_major:
            inner = (q % 8) * 16 + (r % 8) * 2
        else:
            inner = (r % 8) * 16 + (q % 8) * 2
        dst[(kk // 16) * tile + ((r // 8) * sbo + (q // 8) * lbo + inner) // 2] = src[e]


@cuda.jit(device=True)
def _stage_sw128(dst, src, size, k_total, lbo, mn_major, tid):
    """Operand ``src`` (rows of k_total = 64) into shared ``dst`` in the 128-byte
    swizzled layout: K-major, row r is line r (8-line atoms 1024 bytes apart), its
    16-byte chunk kk // 8 at chunk (kk // 8) ^ (r % 8); MN-major, k-line kk of atom r //
    64 (atoms lbo bytes apart) holds r % 64, its chunk (r % 64) // 8 at that ^ (kk % 8)."""
    for e in range(tid, size, 128):
        r = e // k_total
        kk = e % k_total
        if mn_major:
            b = (r // 64) * lbo + kk * 128 + ((((r % 64) // 8) ^ (kk % 8)) * 16) + (r % 8) * 2
        else:
            b = (r // 8) * 1024 + (r % 8) * 128 + (((kk // 8) ^ (r % 8)) * 16) + (kk % 8) * 2
        dst[b // 2] = src[e]


@functools.lru_cache(maxsize=None)
def make_wgmma_kernel(n, dtype, layout, trans_a=False, trans_b=False):
    """Kernel ``(a, bt, c, d, use_c)``: d = a @ bt.T (+ c when use_c[0] != 0) for a
    ``64 x K``, bt ``n x K`` (uint16 bit patterns of ``dtype``), c, d float32 ``64 x
    n``; K = ``_k_total(layout)``. A / B staged K-major, or MN-major with ``trans_a`` /
    ``trans_b``. Launch: one block of 128 threads."""
    sw = layout == SW128
    k_total = _k_total(layout)
    ksteps = k_total // 16
    m = n // 2
    size_a, size_b = 64 * k_total, n * k_total
    if sw:
        # MN-major: one 64-wide atom per 64 rows, its 64 k-lines (8 KiB) together.
        lbo_a, sbo_a = (k_total * 128 if trans_a else 16), 1024
        lbo_b, sbo_b = (k_total * 128 if trans_b else 16), 1024
        # Elements from one K step's descriptor start to the next.
        tile_a = 16 * 64 if trans_a else 16
        tile_b = 16 * 64 if trans_b else 16
        swizzle = 128
    else:
        lbo_a, sbo_a = LAYOUTS[layout](64)
        lbo_b, sbo_b = LAYOUTS[layout](n)
        tile_a, tile_b = 64 * 16, n * 16  # elements per K step
        swizzle = 0
    op = tc.wgmma_op(n, dtype, trans_a, trans_b)

    def k(a, bt, c, d, use_c):
        if sw:
            sa = cuda.shared.array(size_a, np.uint16, alignment=SW_ALIGN)
            sb = cuda.shared.array(size_b, np.uint16, alignment=SW_ALIGN)
        else:
            sa = cuda.shared.array(size_a, np.uint16)
            sb = cuda.shared.array(size_b, np.uint16)
        acc = cuda.local.array(m, np.float32)
        tid = cuda.threadIdx.x
        if sw:
            _stage_sw128(sa, a, size_a, k_total, lbo_a, trans_a, tid)
            _stage_sw128(sb, bt, size_b, k_total, lbo_b, trans_b, tid)
        else:
            _stage(sa, a, size_a, k_total, tile_a, lbo_a, sbo_a, trans_a, tid)
            _stage(sb, bt, size_b, k_total, tile_b, lbo_b, sbo_b, trans_b, tid)
        # Ordinary stores read next by the tensor cores: proxy fence, then barrier.
        tc.fence_proxy_async()
        cuda.syncthreads()
        w = tid // 32
        g = (tid % 32) // 4
        t = tid % 4
        for i in range(m):
            acc[i] = c[(16 * w + g + 8 * ((i % 4) // 2)) * n + 8 * (i // 4) + 2 * t + i % 2]
        tc.wgmma_fence()
        for s in range(ksteps):
            da = tc.wgmma_desc(sa, s * tile_a, lbo_a, sbo_a, swizzle)
            db = tc.wgmma_desc(sb, s * tile_b, lbo_b, sbo_b, swizzle)
            op(acc, da, db, use_c[0] if s == 0 else 1)
        tc.wgmma_commit()
        tc.wgmma_wait(0)
        for i in range(m):
            d[(16 * w + g + 8 * ((i % 4) // 2)) * n + 8 * (i // 4) + 2 * t + i % 2] = acc[i]

    u16 = types.Array(types.uint16, 1, "C")
    f32 = types.Array(types.float32, 1, "C")
    i32 = types.Array(types.int32, 1, "C")
    name = f"wgmma_m64n{n}_{dtype}_{layout}{'_ta' if trans_a else ''}{'_tb' if trans_b else ''}"
    return Kernel(name, k, (u16, u16, f32, f32, i32))


def _bits(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float16":
        return x.astype(np.float16).view(np.uint16)
    return (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # exact for small ints


def _run(kernel, *arrays):
    devs = [cuda.to_device(np.ascontiguousarray(a).ravel()) for a in arrays]
    kernel.launch(1, 128, 0, [as_kernel_array(x, "arg") for x in devs])
    if not SIMULATOR:
        cuda.synchronize()
    return [x.copy_to_host() for x in devs]


# ---- NumPy statement of the layouts --------------------------------------------------


@pytest.mark.parametrize("n", [8, 24, 256])
def test_accumulator_layout_covers_the_tile_once(n):
    rows, cols = tc.wgmma_acc_layout(n)
    assert rows.shape == cols.shape == (128, n // 2)
    seen = np.zeros((64, n), dtype=int)
    np.add.at(seen, (rows, cols), 1)
    assert (seen == 1).all()
    # Warp w owns rows 16w .. 16w + 15; lane 0 of warp 0 starts at D[0, 0], D[0, 1].
    assert set(np.unique(rows[32:64])) == set(range(16, 32))
    assert list(rows[0, :2]) == [0, 0] and list(cols[0, :2]) == [0, 1]


def test_mnmajor_offsets_form_core_matrices():
    # Core matrix (i, j): 8 k-lines of 16 bytes (8 consecutive rows) at i * sbo + j * lbo.
    off = tc.mnmajor_offset(np.arange(64)[:, None], np.arange(16)[None, :], 1024, 128)
    assert off[0, 0] == 0 and off[7, 0] == 14 and off[0, 1] == 16 and off[8, 0] == 128
    assert off[0, 8] == 1024 and np.unique(off).size == 64 * 16


def test_kmajor_offsets_form_core_matrices():
    # Core matrix (i, j) is 8 rows of 16 contiguous bytes at i * sbo + j * lbo.
    off = tc.kmajor_offset(np.arange(64)[:, None], np.arange(16)[None, :], 128, 256)
    assert off[0, 0] == 0 and off[0, 7] == 14 and off[1, 0] == 16 and off[0, 8] == 128
    assert off[8, 0] == 256 and np.unique(off).size == 64 * 16


def test_sw128_kmajor_offsets_swizzle_16_byte_chunks_within_lines():
    # Line r of 64 halves (128 bytes), chunk c at chunk c ^ (r % 8); 8-line atoms 1024
    # bytes apart: a permutation of the 64 x 64 tile's bytes.
    r = np.arange(64)[:, None]
    k = np.arange(64)[None, :]
    off = tc.sw128_kmajor_offset(r, k, 1024)
    assert (off == r * 128 + ((k // 8) ^ (r % 8)) * 16 + (k % 8) * 2).all()
    assert np.unique(off).size == 64 * 64 and off.max() == 64 * 128 - 2
    assert off[0, 8] == 16 and off[1, 0] == 128 + 16 and off[7, 56] == 7 * 128
    # K step j: the descriptor starts 32 j bytes into the line, the XOR is on the sum.
    for j in range(4):
        step = tc.sw128_kmajor_offset(r, k[:, :16], 1024, start=32 * j)
        assert (step == off[:, 16 * j:16 * j + 16]).all()


def test_sw128_mnmajor_offsets_swizzle_16_byte_chunks_within_lines():
    # k-line kk of 64 consecutive r; chunk (r % 64) // 8 at that ^ (kk % 8); 64-wide
    # atoms lbo apart, 8-line groups sbo apart.
    r = np.arange(128)[:, None]
    k = np.arange(64)[None, :]
    off = tc.sw128_mnmajor_offset(r, k, 8192, 1024)
    want = (r // 64) * 8192 + k * 128 + (((r % 64) // 8) ^ (k % 8)) * 16 + (r % 8) * 2
    assert (off == want).all() and np.unique(off).size == 128 * 64
    for j in range(4):
        step = tc.sw128_mnmajor_offset(r, k[:, :16], 8192, 1024, start=2048 * j)
        assert (step == off[:, 16 * j:16 * j + 16]).all()


def test_bad_n_is_rejected():
    with pytest.raises(ValueError, match="multiple of 8"):
        tc.wgmma_acc_layout(12)
    with pytest.raises(ValueError, match="multiple of 8"):
        tc.wgmma_op(264, "float16")


# ---- the microkernel ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("n", [8, 64, 256])
@pytest.mark.parametrize("layout", sorted(LAYOUTS) + [SW128])
@pytest.mark.parametrize("use_c", [0, 1])
def test_wgmma_matches_numpy_exactly(dtype, n, layout, use_c):
    if not _on_hopper():
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    rng = np.random.default_rng(n + 7 * use_c)
    k_total = _k_total(layout)
    a = rng.integers(-4, 5, (64, k_total)).astype(np.float32)
    bt = rng.integers(-4, 5, (n, k_total)).astype(np.float32)
    c = rng.integers(-64, 65, (64, n)).astype(np.float32)
    d = np.full((64, n), np.nan, dtype=np.float32)  # poisoned: every element is written
    kernel = make_wgmma_kernel(n, dtype, layout)
    got = _run(kernel, _bits(a, dtype), _bits(bt, dtype), c, d,
               np.array([use_c], dtype=np.int32))[3].reshape(64, n)
    want = a.astype(np.float64) @ bt.astype(np.float64).T + (c if use_c else 0)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # The per-step reference agrees with the whole product.
    ref = c if use_c else None
    for k0 in range(0, k_total, 16):
        ref = tc.wgmma_reference(_bits(a[:, k0:k0 + 16], dtype),
                                 _bits(bt[:, k0:k0 + 16], dtype), ref, dtype)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("n,layout", [(n, lay) for lay in sorted(LAYOUTS) for n in (8, 64)]
                         + [(64, SW128), (128, SW128)])
@pytest.mark.parametrize("trans", [(True, False), (False, True), (True, True)],
                         ids=["ta", "tb", "ta_tb"])
def test_wgmma_transposed_operands_match_numpy_exactly(dtype, n, layout, trans):
    """MN-major A and / or B (imm-trans-a / -b): the same products. Swizzled, n = 128
    puts B's two 64-wide atoms LBO apart."""
    if not _on_hopper():
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    rng = np.random.default_rng(n + 3)
    k_total = _k_total(layout)
    a = rng.integers(-4, 5, (64, k_total)).astype(np.float32)
    bt = rng.integers(-4, 5, (n, k_total)).astype(np.float32)
    c = rng.integers(-64, 65, (64, n)).astype(np.float32)
    d = np.full((64, n), np.nan, dtype=np.float32)
    kernel = make_wgmma_kernel(n, dtype, layout, *trans)
    got = _run(kernel, _bits(a, dtype), _bits(bt, dtype), c, d,
               np.array([1], dtype=np.int32))[3].reshape(64, n)
    want = a.astype(np.float64) @ bt.astype(np.float64).T + c
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.skipif(not SIMULATOR, reason="emulation checks")
def test_emulation_rejects_threads_that_disagree():
    def k(out):
        sa = cuda.shared.array(64 * 16, np.uint16)
        sb = cuda.shared.array(8 * 16, np.uint16)
        acc = cuda.local.array(4, np.float32)
        for i in range(4):
            acc[i] = 0.0
        # Thread 0 points at another A tile start than the others.
        da = tc.wgmma_desc(sa, 8 if cuda.threadIdx.x == 0 else 0, 128, 256)
        db = tc.wgmma_desc(sb, 0, 128, 256)
        tc.wgmma_op(8, "float16")(acc, da, db, 0)
        out[cuda.threadIdx.x] = acc[0]

    kern = Kernel("wgmma_disagree", k, (types.Array(types.float32, 1, "C"),))
    with pytest.raises(Exception, match="different descriptors"):
        _run(kern, np.zeros(128, dtype=np.float32))


# ---- sm_90a: PTX, ptxas and SASS without a GPU ---------------------------------------


@pytest.mark.ptx
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("n,trans,layout",
                         [(8, (False, False), "interleaved"), (64, (False, False), "interleaved"),
                          (256, (False, False), "interleaved"), (64, (True, True), "interleaved"),
                          (64, (False, False), SW128), (128, (True, True), SW128)],
                         ids=["8", "64", "256", "64-ta_tb", "64-sw128", "128-ta_tb-sw128"])
def test_wgmma_kernels_assemble_for_sm90a_with_hgmma(dtype, n, trans, layout):
    from numba_fused.registry import find_nvdisasm, offline_compile, ptxas_report, sass

    kernel = make_wgmma_kernel(n, dtype, layout, *trans)
    with offline_compile((9, 0, "a")):
        ptx = kernel.ptx(cc=(9, 0, "a"))
    assert ".target sm_90a" in ptx
    if layout == SW128:
        # Both operand arrays 1024-byte aligned: the swizzle XORs absolute address bits.
        assert ptx.count(".shared .align 1024") == 2, "swizzled operands not 1024-aligned"
    kind = "f16" if dtype == "float16" else "bf16"
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind}" in ptx
    assert f"p, 1, 1, {int(trans[0])}, {int(trans[1])};" in ptx
    for marker in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                   "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"):
        assert marker in ptx
    rep = ptxas_report(ptx, arch="sm_90a")
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0, rep
    # Up to n = 128 LLVM unrolls the accumulator copy loops and the accumulators are
    # registers; at n = 256 (128 of them) it does not, and the run-time-indexed
    # array stays in local memory (a 512-byte frame): a GEMM must index them with
    # constants.
    assert rep["stack"] == (0 if n <= 128 else 512), rep
    if find_nvdisasm() is None:
        pytest.skip("no nvdisasm to read the SASS (pip install numba-fused[ci])")
    text = sass(ptx, arch="sm_90a")
    assert f"HGMMA.64x{n}x16.F32" in text, "no HGMMA in the SASS"


# ---- linear_act's forward on wgmma (opt-in: use_wgmma) -------------------------------

# (M, K, N): ragged against the tiles (simulator: 64 x 32 x 32; GPU: 128 x 128 x 64), K a
# multiple of 8 (16-byte rows: the wgmma path's condition), several k-tiles.
GEMM_SHAPES = [(70, 72, 50), (1, 8, 8), (64, 96, 33)]
# More k-tiles than ring slots (the sw128 / warp-specialised rings take bk = 64): every
# slot refilled, the empty barriers' phases wrapping.
WRAP_SHAPE = (20, 448, 24)
# Whole tiles (M, N multiples of the tile, K of bk = 64 in the simulator's sw128 / ws
# tilings): the strength-reduced loads of full tiles (tile_loader's load_full).
FULL_SHAPE = (64, 192, 64)
if not SIMULATOR:
    GEMM_SHAPES += [(1000, 1032, 520), (4096, 1024, 4096), (129, 4104, 300)]
# bfloat16 differs from float16 only in the MMA's input format and the epilogue's
# conversions (the operand tiles are bit copies; staging, rings and barriers are the
# same code): under the simulator one bfloat16 case per tiling covers that, the rest
# run on the GPU (marker gpu). Forward: the element-wise epilogue (N = 33) and the
# 16-byte one (N = 24, 64) both in bfloat16.
FWD_VARIANTS = ("v1", "inflight", "sw128", "ws", "ws_pf", "ws_tma", "epi", "epi2", "epi2_hb")
FWD_CASES = ([(s, v) for s in GEMM_SHAPES for v in FWD_VARIANTS]
             + [(WRAP_SHAPE, "sw128"), (WRAP_SHAPE, "ws"), (WRAP_SHAPE, "ws_pf"),
                (WRAP_SHAPE, "ws_tma")]
             + [(FULL_SHAPE, "sw128"), (FULL_SHAPE, "ws"), (FULL_SHAPE, "ws_pf"),
                (FULL_SHAPE, "ws_tma")]
             + [(WRAP_SHAPE, "hoist"), (FULL_SHAPE, "hoist"), (FULL_SHAPE, "epi"),
                (FULL_SHAPE, "epi2"), (FULL_SHAPE, "epi2_hb")]
             # epi 3's register path takes whole tiles with 16-byte rows; N = 33 (not
             # 16-byte rows) and the ragged WRAP_SHAPE check its fallback to epi 2's.
             + [(FULL_SHAPE, "epi3"), (FULL_SHAPE, "epi3_hb"), ((64, 96, 33), "epi3"),
                (WRAP_SHAPE, "epi3")]
             # epi 4 (v10) likewise: its quad-transposed stores on whole tiles.
             + [(FULL_SHAPE, "epi4"), (FULL_SHAPE, "epi4_hb"), ((64, 96, 33), "epi4"),
                (WRAP_SHAPE, "epi4")])
FWD_BF16_SIM = {((64, 96, 33), "v1"), ((64, 96, 33), "inflight"), (WRAP_SHAPE, "sw128"),
                (WRAP_SHAPE, "ws"), (WRAP_SHAPE, "ws_pf"), (FULL_SHAPE, "hoist"),
                (WRAP_SHAPE, "ws_tma"), ((64, 96, 33), "epi"), (FULL_SHAPE, "epi"),
                ((64, 96, 33), "epi2"), (FULL_SHAPE, "epi2"), (FULL_SHAPE, "epi2_hb"),
                (FULL_SHAPE, "epi3"), (FULL_SHAPE, "epi3_hb"), (FULL_SHAPE, "epi4"),
                (FULL_SHAPE, "epi4_hb")}
# The activations held to the mma.sync kernel's error on random data: every one that
# is not exact where epi 1 changes their form (fast_act's branch-free forms).
RANDOM_ACTS = {v: ("gelu_tanh", "gelu", "silu")
               for v in ("epi", "epi2", "epi2_hb", "epi3", "epi3_hb", "epi4", "epi4_hb")}


def _by_dtype(cases, bf16_sim, case_id):
    """pytest params ``(*case, dtype)`` of every case in each of HALF; bfloat16 cases
    outside ``bf16_sim`` (a set of cases with every tiling of ``cases``) GPU-only."""
    assert bf16_sim <= set(cases) and {v for _, v in bf16_sim} == {v for _, v in cases}
    return [pytest.param(*case, dtype, id=f"{case_id(*case)}-{dtype}",
                         marks=pytest.mark.gpu if dtype == "bfloat16" and case not in bf16_sim
                         else ())
            for case in cases for dtype in HALF]


def _gemm_inputs(M, K, N, dtype, seed, integers):
    import torch

    from tests.util import device, torch_dtype

    g = torch.Generator().manual_seed(seed)
    if integers:
        x = torch.randint(-3, 4, (M, K), generator=g).float()
        w = torch.randint(-3, 4, (N, K), generator=g).float()
        b = torch.randint(-8, 9, (N,), generator=g).float()
    else:
        x = torch.randn(M, K, generator=g)
        w = torch.randn(N, K, generator=g) / K ** 0.5
        b = torch.randn(N, generator=g)
    return [t.to(torch_dtype(dtype)).to(device()) for t in (x, w, b)]


def _equal_rounded(ours, exact):
    """``ours`` equals the exact float64 result rounded once to ``ours``' dtype. On
    small integers the float32 accumulation is exact, so the only rounding is the
    store's: bfloat16 holds integers exactly only up to 256, float16 up to 2048."""
    import torch

    ours = torch.as_tensor(ours)
    return torch.equal(ours.double().cpu(), exact.to(ours.dtype).double().cpu())


# variant: (the simulator's tiling, None for WG_SIM's own; the GPU's tiling), by name.
_VARIANT_TILINGS = {
    "v1": (None, "WG_V1"), "sw128": ("WG_SIM_SW128", "WG_LARGE_SW128"),
    "ws": ("WG_SIM_WS", "WG_LARGE_WS"), "ws_pf": ("WG_SIM_WS_PF", "WG_LARGE_WS_PF"),
    "hoist": ("WG_SIM_SW128_HB", "WG_LARGE_WS_HB"),
    "ws_tma": ("WG_SIM_WS_TMA", "WG_LARGE_WS_TMA"),
    "epi": ("WG_SIM_WS_EPI", "WG_LARGE_WS_HB_EPI"),
    "epi2": ("WG_SIM_WS_EPI2", "WG_LARGE_WS_HB_EPI2"),
    "epi2_hb": ("WG_SIM_SW128_HB_EPI2", "WG_LARGE_SW128_HB_EPI2"),
    "epi3": ("WG_SIM_WS_EPI3", "WG_LARGE_WS_HB_EPI3"),
    "epi3_hb": ("WG_SIM_SW128_HB_EPI3", "WG_LARGE_SW128_HB_EPI3"),
    "epi4": ("WG_SIM_WS_EPI4", "WG_LARGE_WS_HB_EPI4"),
    "epi4_hb": ("WG_SIM_SW128_HB_EPI4", "WG_LARGE_SW128_HB_EPI4"),
}


def _use_variant(la, variant, monkeypatch):
    """Point WG_SIM / WG_LARGE at ``variant``'s tiling: 'v1' (no swizzle), 'inflight'
    (one k-tile of MMAs kept in flight), 'sw128' (128-byte swizzled operand tiles),
    'ws' (warp specialised), 'ws_pf' (warp specialised, the producer fences),
    'hoist' (the forward epilogue's bias loaded once per thread and tile), 'ws_tma'
    (warp specialised, the producer's one thread filling slots by TMA; forward only),
    'epi' (warp specialised, the epilogue's activations in fast_act's forms), 'epi2'
    / 'epi2_hb' (epi 2: as epi, its shared-memory indices unsigned; warp specialised,
    or one warpgroup with the bias hoisted), 'epi3' / 'epi3_hb' (epi 3: the forward's
    whole tiles finished from the registers; the same two tilings), 'epi4' /
    'epi4_hb' (epi 4: as epi 3, each quad's words transposed for 16-byte stores)."""
    if variant == "inflight":
        sim, large = la.WG_SIM._replace(inflight=1), la.WG_LARGE_INFLIGHT
    else:
        sim_name, large_name = _VARIANT_TILINGS[variant]
        sim, large = getattr(la, sim_name or "WG_SIM"), getattr(la, large_name)
    monkeypatch.setattr(la, "WG_SIM", sim)
    monkeypatch.setattr(la, "WG_LARGE", large)
    return la.WG_SIM if SIMULATOR else la.WG_LARGE


@pytest.mark.parametrize("shape,variant,dtype", _by_dtype(
    FWD_CASES, FWD_BF16_SIM, lambda s, v: f"{'x'.join(map(str, s))}-{v}"))
def test_linear_act_forward_on_wgmma(dtype, shape, variant, monkeypatch):
    """use_wgmma routes the forward to the wgmma kernel (waiting for each k-tile's
    MMAs, keeping one tile of them in flight, or on 128-byte swizzled tiles); exact on
    small integers (bias, preact and output), and within the mma.sync kernel's error
    on random data with an activation."""
    from interop.dlpack import poison_outputs
    from numba_fused import linear_act as la
    from tests.util import record_calls, rel_err

    if not _on_hopper():
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    cfg = _use_variant(la, variant, monkeypatch)
    made = record_calls(monkeypatch, la, "make_wgmma_kernel")
    M, K, N = shape
    x, w, b = _gemm_inputs(M, K, N, dtype, 1, integers=True)
    with la.use_wgmma(), poison_outputs():
        y, pre = la.linear_act_forward(x, w, b, "relu", save_preact=True)
    assert made and all(args[2] == cfg for args in made), made
    want_pre = x.double() @ w.double().T + b.double()
    assert _equal_rounded(pre, want_pre)
    assert _equal_rounded(y, want_pre.clamp_min(0))

    x, w, b = _gemm_inputs(M, K, N, dtype, 2, integers=False)
    for act in RANDOM_ACTS.get(variant, ("gelu_tanh",)):
        ref = la.linear_act_ref(x, w, b, act)
        with la.use_wgmma():
            ours = la.linear_act_forward(x, w, b, act)
        mma = la.linear_act_forward(x, w, b, act)
        assert rel_err(ours, ref) <= max(1.5 * rel_err(mma, ref), 2.0**-11), act


# dgrad reads grad_out [M, N] and the weight [N, K] by rows: both need 16-byte rows.
DGRAD_SHAPES = [(70, 72, 56), (1, 8, 8), (64, 96, 40), (64, 64, 128)]
if not SIMULATOR:
    DGRAD_SHAPES += [(1000, 1032, 520), (4096, 1024, 4096), (129, 4104, 304)]
# ws_tma: the backward roles run its tiling with the cp.async producer.
BWD_CASES = [(s, v) for v in ("v1", "sw128", "ws", "ws_pf", "ws_tma", "epi", "epi2")
             for s in DGRAD_SHAPES]
# bfloat16 under the simulator (see FWD_BF16_SIM): dgrad's two k-tiles, wgrad's two
# row tiles; every shape's epilogue moves 16-byte vectors.
BWD_BF16_SIM = {((64, 64, 128), v) for _, v in BWD_CASES}


@pytest.mark.parametrize("shape,variant,dtype", _by_dtype(
    BWD_CASES, BWD_BF16_SIM, lambda s, v: f"{v}-{'x'.join(map(str, s))}"))
def test_linear_act_backward_on_wgmma(dtype, shape, variant, monkeypatch):
    """use_wgmma runs the dgrad GEMM (the weight read MN-major, imm-trans-b; act'
    fused) and the wgrad GEMM (both operands MN-major; grad_bias from an m64n8 wgmma
    against ones) on wgmma, on no-swizzle or 128-byte swizzled tiles (a TMA tiling's
    with its cp.async producer): exact on small integers, for linear_act_dgrad and for
    linear_act_backward's three gradients; with epi 1 also act' of the activations
    whose form it changes, on random data, within the mma.sync kernel's error."""
    from interop.dlpack import poison_outputs
    from numba_fused import linear_act as la
    from tests.util import rel_err

    if not _on_hopper():
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    cfg = _use_variant(la, variant, monkeypatch)
    roles = []
    real = la.make_wgmma_kernel

    def spy(role, dt, wg_cfg, pair=False):
        assert wg_cfg == cfg._replace(tma=0) and not pair
        roles.append(role)
        return real(role, dt, wg_cfg, pair)

    monkeypatch.setattr(la, "make_wgmma_kernel", spy)
    M, K, N = shape
    x, w, _ = _gemm_inputs(M, K, N, dtype, 4, integers=True)  # w: [N, K]
    g = _gemm_inputs(M, N, 1, dtype, 5, integers=True)[0]    # grad of y: [M, N]
    pre = _gemm_inputs(M, K, 1, dtype, 6, integers=True)[0]  # preact of x's layer
    with la.use_wgmma(), poison_outputs():
        gx = la.linear_act_dgrad(g, w, "relu", pre)
        gx2, gw, gb = la.linear_act_backward(g, x, w, None, "none")
    assert roles.count("dgrad") == 2 and roles.count("wgrad") == 1
    prod = g.double() @ w.double()
    assert _equal_rounded(gx, prod * (pre.double() > 0))
    assert _equal_rounded(gx2, prod)
    assert _equal_rounded(gw, g.double().T @ x.double())
    assert _equal_rounded(gb, g.double().sum(0))
    # The derivatives' forms (epi 1: fast_act's) on random data, within the mma.sync
    # kernel's error.
    x, w, _ = _gemm_inputs(M, K, N, dtype, 7, integers=False)
    g = _gemm_inputs(M, N, 1, dtype, 8, integers=False)[0]
    pre = _gemm_inputs(M, K, 1, dtype, 9, integers=False)[0]
    for act in RANDOM_ACTS.get(variant, ()):
        ref = la.linear_act_dgrad_ref(g, w, act, pre)
        with la.use_wgmma():
            ours = la.linear_act_dgrad(g, w, act, pre)
        mma = la.linear_act_dgrad(g, w, act, pre)
        assert rel_err(ours, ref) <= max(1.5 * rel_err(mma, ref), 2.0**-11), act


def test_swizzled_gemms_with_two_warpgroups(monkeypatch):
    """The second warpgroup's rows of A (K-major: 8 atoms further; wgrad's MN-major:
    the next 64-wide atom column) in all three GEMMs, at the simulator's pace: 128 x
    64 tiles, a 2-deep ring; exact on small integers (one dtype: the layout is the
    same for both)."""
    from interop.dlpack import poison_outputs
    from numba_fused import linear_act as la

    if not _on_hopper():
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    cfg = la.WgmmaConfig(128, 64, 64, 2, 2, 0, 128)
    monkeypatch.setattr(la, "WG_SIM", cfg)
    monkeypatch.setattr(la, "WG_LARGE", cfg)
    roles = []
    real = la.make_wgmma_kernel
    monkeypatch.setattr(la, "make_wgmma_kernel", lambda role, *a: (roles.append(role),
                                                                    real(role, *a))[1])
    # wgrad's M is N: both warpgroups hold rows there too. M > bm: wgrad's reduction
    # has more k-tiles than ring slots (slots refilled under both warpgroups). K within
    # one bn: dgrad's and wgrad's outputs one tile wide (K = 72 doubled their blocks:
    # half the test's time); the forward then runs one ragged k-tile, and dgrad's
    # K-major A (g, N long) fills both ring slots.
    M, K, N = 130, 56, 104
    assert cfg.bm // 2 < N <= cfg.bm < M and K <= cfg.bn
    assert -(-M // cfg.bk) > cfg.stages and -(-N // cfg.bk) >= cfg.stages
    x, w, b = _gemm_inputs(M, K, N, "float16", 7, integers=True)
    g = _gemm_inputs(M, N, 1, "float16", 8, integers=True)[0]
    with la.use_wgmma(), poison_outputs():
        y = la.linear_act_forward(x, w, b, "none")
        gx, gw, gb = la.linear_act_backward(g, x, w, None, "none")
    assert sorted(set(roles)) == ["dgrad", "fwd", "wgrad"]
    assert _equal_rounded(y, x.double() @ w.double().T + b.double())
    assert _equal_rounded(gx, g.double() @ w.double())
    assert _equal_rounded(gw, g.double().T @ x.double())
    assert _equal_rounded(gb, g.double().sum(0))


def test_swizzled_configs_outside_the_implemented_layout_are_rejected():
    from numba_fused import linear_act as la

    with pytest.raises(ValueError, match="bk = 64"):
        la.WgmmaConfig(128, 128, 32, 4, 8, 0, 128).validate()
    with pytest.raises(ValueError, match="swizzle must be"):
        la.WgmmaConfig(128, 128, 64, 4, 8, 0, 64).validate()
    la.make_wgmma_kernel("fwd", "float16", la.WgmmaConfig(64, 32, 64, 3, 2, 0, 128))
    for role in ("dgrad", "wgrad"):
        with pytest.raises(ValueError, match="multiple of 64"):
            la.make_wgmma_kernel(role, "float16", la.WgmmaConfig(64, 32, 64, 3, 2, 0, 128))


def test_use_wgmma_leaves_other_paths_alone(monkeypatch):
    """GEMMs whose rows are not 16-byte aligned keep mma.sync."""
    from numba_fused import linear_act as la

    roles = []
    real = la.make_wgmma_kernel
    monkeypatch.setattr(la, "make_wgmma_kernel", lambda role, *a: (roles.append(role),
                                                                    real(role, *a))[1])
    x, w, b = _gemm_inputs(9, 13, 16, "float16", 3, integers=True)
    with la.use_wgmma():
        la.linear_act_forward(x, w, b, "none")
        la.linear_act_backward(la.linear_act_forward(x, w, b), x, w)
    assert not roles


def test_default_picks_wgmma_by_output_size(monkeypatch):
    """The default (use_wgmma(None)) on a Hopper GPU: wgmma for outputs with at least
    one 128x128 tile per SM, on the role's tiling (forward v3b with the hoisted bias,
    or v4 with it from K = WG_FWD_LONG_K; dgrad / wgrad v4; all with v7b's epilogue,
    epi 2; WG_LARGE where pinned); mma.sync below and for outputs of a few rows, and
    everywhere under use_wgmma(False). The simulator (no Hopper to pick for) keeps
    mma.sync unless forced."""
    from numba_fused import linear_act as la

    sms = 132
    assert la.wgmma_auto("fwd", 8192, 768, sms, 3072) == la.WG_LARGE_SW128_HB_EPI2
    assert la.wgmma_auto("fwd", 8192, 16384, sms, la.WG_FWD_LONG_K - 1) == \
        la.WG_LARGE_SW128_HB_EPI2
    assert la.wgmma_auto("fwd", 8192, 16384, sms, la.WG_FWD_LONG_K) == la.WG_LARGE_WS_HB_EPI2
    assert la.wgmma_auto("dgrad", 8192, 3072, sms, 768) == la.WG_LARGE_WS_EPI2
    assert la.wgmma_auto("dgrad", 8192, 3072, sms, 8192) == la.WG_LARGE_WS_EPI2
    assert la.wgmma_auto("wgrad", 3072, 768, sms, 8192) == la.WG_LARGE_WS_EPI2
    # 11 x 12 = 132 tiles: one wave; 1024^3 (64 tiles) and 64 x 4096 (32) are not.
    assert la.wgmma_auto("fwd", 1408, 1536, sms, 1024) == la.WG_LARGE_SW128_HB_EPI2
    assert la.wgmma_auto("fwd", 1408, 1408, sms, 8192) is None
    assert la.wgmma_auto("dgrad", 1024, 1024, sms, 1024) is None
    assert la.wgmma_auto("fwd", 64, 4096, sms, 4096) is None
    # Outputs of at most WG_MAX_SKINNY_ROWS rows stay on mma.sync however wide (a
    # decoder's tokens: 172 tiles at 22016 columns).
    assert la.wgmma_auto("fwd", 16, 22016, sms, 4096) is None
    assert la.wgmma_auto("dgrad", la.WG_MAX_SKINNY_ROWS, 22016, sms, 4096) is None
    assert la.wgmma_auto("fwd", la.WG_MAX_SKINNY_ROWS + 1, 22016, sms, 4096) == \
        la._role_tiling("fwd", 4096)
    monkeypatch.setattr(la, "WG_LARGE", la.WG_V1)
    assert la.wgmma_auto("wgrad", 4096, 4096, sms, 4096) == la.WG_V1
    assert la.wgmma_auto("fwd", 4096, 4096, sms, 8192) == la.WG_V1
    if SIMULATOR:
        assert la._wgmma_for("fwd", "float16", True, None, 4096, 4096, 4096) is None
        with la.use_wgmma():
            assert la._wgmma_for("fwd", "float16", True, None, 4096, 4096, 4096) == la.WG_SIM
    with la.use_wgmma(False):
        assert la._wgmma_for("fwd", "float16", True, None, 4096, 4096, 4096) is None
    assert la._wgmma_for("fwd", "float32", True, None, 4096, 4096, 4096) is None
    assert la._wgmma_for("fwd", "float16", False, None, 4096, 4096, 4096) is None


@pytest.mark.ptx
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("cfg_name", ["WG_V1", "WG_LARGE_INFLIGHT", "WG_LARGE_SW128",
                                      "WG_LARGE_WS", "WG_LARGE_WS_PF", "WG_LARGE_SW128_HB",
                                      "WG_LARGE_WS_HB"])
@pytest.mark.parametrize("role", ["fwd", "dgrad", "wgrad"])
def test_wgmma_gemm_assembles_for_sm90a_with_hgmma(dtype, cfg_name, role):
    from numba_fused import linear_act as la
    from numba_fused.registry import find_nvdisasm, offline_compile, ptxas_report, sass

    cfg = getattr(la, cfg_name)
    kernel = la.make_wgmma_kernel(role, dtype, cfg)
    with offline_compile((9, 0, "a")):
        ptx = kernel.ptx(cc=(9, 0, "a"))
    # The swizzle XORs absolute shared-address bits: the ring must sit on 1024 bytes.
    assert (".extern .shared .align 1024" in ptx) == bool(cfg.swizzle)
    rep = ptxas_report(ptx, arch="sm_90a")
    # The 64 accumulators must be registers (constant indices everywhere).
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0 and rep["stack"] == 0, rep
    assert rep["registers"] <= 65536 // cfg.threads, rep
    if cfg.ws:
        # setmaxnreg moves registers within the block's launch allocation: the split
        # ws_register_split assumed must be the one ptxas gave.
        producer, consumer = la.ws_register_split(cfg.threads, cfg.threads - 128)
        assert rep["registers"] == min(255, 65536 // cfg.threads) // 8 * 8, rep
        assert 128 * producer + (cfg.threads - 128) * consumer <= rep["registers"] * cfg.threads
    if find_nvdisasm() is None:
        pytest.skip("no nvdisasm to read the SASS (pip install numba-fused[ci])")
    text = sass(ptx, arch="sm_90a")
    assert f"HGMMA.64x{cfg.bn}x16.F32" in text
    # The k-loop's wait leaves `inflight` groups running (ptxas did not serialise it).
    assert f"WARPGROUP.DEPBAR.LE gsb0, 0x{cfg.inflight}" in text


def _forward_sass_without_stack(cfg, dtype, pair):
    """The sm_90a SASS of the wgmma forward on tiling ``cfg``, after asserting ptxas
    gave it no stack frame and no spills (skips without nvdisasm)."""
    from numba_fused import linear_act as la
    from numba_fused.registry import find_nvdisasm, offline_compile, ptxas_report, sass

    with offline_compile((9, 0, "a")):
        ptx = la.make_wgmma_kernel("fwd", dtype, cfg, pair).ptx(cc=(9, 0, "a"))
    rep = ptxas_report(ptx, arch="sm_90a")
    assert rep["stack"] == 0 and rep["spill_stores"] == 0 and rep["spill_loads"] == 0, rep
    if not find_nvdisasm():
        pytest.skip("no nvdisasm to read the SASS (pip install numba-fused[ci])")
    return sass(ptx, arch="sm_90a")


@pytest.mark.ptx
@pytest.mark.parametrize("cfg_name,pair,dtype", [
    ("WG_LARGE_WS_HB_EPI3", False, "bfloat16"), ("WG_LARGE_WS_HB_EPI3", True, "float16"),
    ("WG_LARGE_SW128_HB_EPI3", True, "bfloat16")])
def test_register_epilogue_keeps_the_accumulators_in_registers(cfg_name, pair, dtype):
    """epi 3 (v9): the forward's register epilogue indexes the accumulators only at
    constants (its 16 steps written out by unrolled_over_acc), so they stay in
    registers: no stack frame and no spills, where a rolled loop over the steps put
    the 128 accumulators in 512 bytes of local memory. Its stores are there, bn / 16
    steps of 8 a form (4 pre-activation words and 4 outputs): the plain and gated
    forms' 16 a step in the plain kernel; the pair kernel (always gated) only the
    gated form's 8 (fewer than 16 a step: its plain steps are not compiled)."""
    import re

    from numba_fused import linear_act as la

    cfg = getattr(la, cfg_name)
    text = _forward_sass_without_stack(cfg, dtype, pair)
    assert not re.search(r"\b(LDL|STL)\b", text)
    steps, per_step = cfg.bn // 16, 8 if pair else 16
    assert per_step * steps <= len(re.findall(r"\bSTG\.E\b", text)) < (per_step + 8) * steps


@pytest.mark.ptx
@pytest.mark.parametrize("cfg_name,pair,dtype", [
    ("WG_LARGE_WS_HB_EPI4", False, "bfloat16"), ("WG_LARGE_WS_HB_EPI4", True, "float16"),
    ("WG_LARGE_SW128_HB_EPI4", True, "bfloat16")])
def test_quad_epilogue_stores_whole_chunks(cfg_name, pair, dtype):
    """epi 4 (v10): the register epilogue's words go out transposed over each quad,
    so its stores are 16-byte chunks of rows (the gated h: 8 bytes), no 32-bit ones.
    bn / 32 steps of four column tiles: the plain form's 16 shuffles a step (two
    rows of pre-activations and of outputs, 4 a row) and the gated form's 12 (two
    rows of pairs, one of h words), its two 8-byte h stores a step; no stack, no
    spills."""
    import re

    from numba_fused import linear_act as la

    cfg = getattr(la, cfg_name)
    text = _forward_sass_without_stack(cfg, dtype, pair)
    base = _forward_sass_without_stack(cfg._replace(epi=2), dtype, pair)
    steps = cfg.bn // 32

    def count(op, t):
        return len(re.findall(rf"\b{op}\b", t))

    assert count("LDL", text) == count("STL", text) == 0
    assert count(r"SHFL\.BFLY", text) == (12 if pair else 28) * steps
    assert count(r"STG\.E\.64", text) - count(r"STG\.E\.64", base) == 2 * steps
    assert count(r"STG\.E\.128", text) - count(r"STG\.E\.128", base) == (2 if pair else 6) * steps
    # 32-bit stores (v9's) only where epi 2's kernel has them (its edge paths).
    assert count(r"STG\.E(?![.\w])", text) == count(r"STG\.E(?![.\w])", base)


@pytest.mark.ptx
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("role,pair", [("fwd", False), ("fwd", True), ("dgrad", False),
                                       ("dgrad", True)])
def test_fast_epilogue_assembles_without_division_checks(dtype, role, pair):
    """epi 1 (v7): the epilogue's activations in fast_act's forms leave no IEEE
    division check (FCHK, an element's branch to the slow path in epi 0's silu) in
    the SASS, no spills, and no more registers than epi 0; epi 2 (v7b) likewise, its
    accumulator stores to the C tile 8 bytes each (half epi 1's STS)."""
    import re

    from numba_fused import linear_act as la
    from numba_fused.registry import find_nvdisasm, offline_compile, ptxas_report, sass

    reps, texts = [], []
    for epi in (0, 1, 2):
        cfg = (la.WG_LARGE_WS_HB if role == "fwd" else la.WG_LARGE_WS)._replace(epi=epi)
        with offline_compile((9, 0, "a")):
            ptx = la.make_wgmma_kernel(role, dtype, cfg, pair).ptx(cc=(9, 0, "a"))
        reps.append(ptxas_report(ptx, arch="sm_90a"))
        texts.append(sass(ptx, arch="sm_90a") if find_nvdisasm() else None)
    for rep in reps[1:]:
        assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0, rep
        assert rep["registers"] <= reps[0]["registers"], reps
    if texts[1] is None:
        pytest.skip("no nvdisasm to read the SASS (pip install numba-fused[ci])")
    assert "FCHK" in texts[0] and "FCHK" not in texts[1] and "FCHK" not in texts[2]
    sts = [len(re.findall(r"\bSTS\b", t)) for t in texts[1:]]
    assert sts[1] <= sts[0] // 2 + 1, sts


@pytest.mark.ptx
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("role", ["fwd", "fwd_long_k", "dgrad", "wgrad"])
def test_wgmma_pair_gemm_assembles_like_the_plain_one(dtype, role):
    """The pair kernels (a gated unit's gate and up weights in place: B's rows or
    k-rows from two arrays, wgrad's output rows to two) at the tilings the default
    picks (WG_ROLE): no spills, and no more registers than the plain kernel (the
    plain fwd tiling runs two blocks an SM)."""
    from numba_fused import linear_act as la
    from numba_fused.registry import offline_compile, ptxas_report

    cfg = la.WG_ROLE[role]
    base = "fwd" if role == "fwd_long_k" else role
    reps = []
    for pair in (False, True):
        kernel = la.make_wgmma_kernel(base, dtype, cfg, pair)
        with offline_compile((9, 0, "a")):
            reps.append(ptxas_report(kernel.ptx(cc=(9, 0, "a")), arch="sm_90a"))
    plain, pair = reps
    assert pair["spill_stores"] == 0 and pair["spill_loads"] == 0 and pair["stack"] == 0, pair
    assert pair["registers"] <= plain["registers"], (plain, pair)


def test_ws_register_split_stays_within_the_launch_allocation():
    """setmaxnreg.inc past what the producers' decrease freed waits forever (the first
    split, 64 / 224 from the SM's 64K instead of the block's 168 x 384, hung on the
    H100): the split must fit the launch allocation."""
    from numba_fused import linear_act as la

    for cfg in (la.WG_LARGE_WS, la.WG_SIM_WS):
        threads = cfg.threads
        producer, consumer = la.ws_register_split(threads, threads - 128)
        launch = min(255, 65536 // threads) // 8 * 8
        assert producer % 8 == 0 and consumer % 8 == 0
        assert consumer >= launch > producer
        assert 128 * producer + (threads - 128) * consumer <= launch * threads
    assert la.ws_register_split(384, 256) == (72, 216)
    with pytest.raises(ValueError, match="producer warpgroup"):
        la.ws_register_split(384, 384)
    with pytest.raises(ValueError, match="setmaxnreg"):
        la.ws_register_split(384, 256, producer=200)


@pytest.mark.ptx
@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("dtype", HALF)
def test_tma_forward_assembles_with_bulk_tensor_copies(dtype, pair):
    """v6 (WG_LARGE_WS_TMA), plain and pair: the producer's copies are TMA loads
    (UTMALDG), none of the cp.async ones (LDGSTS) remain, the consumers keep their
    HGMMA with no spills."""
    from numba_fused import linear_act as la
    from numba_fused.registry import find_nvdisasm, offline_compile, ptxas_report, sass

    cfg = la.WG_LARGE_WS_TMA
    kernel = la.make_wgmma_kernel("fwd", dtype, cfg, pair)
    with offline_compile((9, 0, "a")):
        ptx = kernel.ptx(cc=(9, 0, "a"))
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile" in ptx
    assert "cp.async.cg.shared.global" not in ptx
    rep = ptxas_report(ptx, arch="sm_90a")
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0 and rep["stack"] == 0, rep
    assert rep["registers"] == min(255, 65536 // cfg.threads) // 8 * 8, rep
    if find_nvdisasm() is None:
        pytest.skip("no nvdisasm to read the SASS (pip install numba-fused[ci])")
    text = sass(ptx, arch="sm_90a")
    assert "UTMALDG" in text and "LDGSTS" not in text
    assert f"HGMMA.64x{cfg.bn}x16.F32" in text


def test_tma_tiling_only_where_implemented():
    """The TMA producer needs the warp-specialised, 128-byte swizzled forward (plain
    or pair): other tilings with it are refused, and the backward roles fall back to
    the same tiling's cp.async producer (as plans do; test_linear_act_backward_on_wgmma
    runs them so)."""
    from numba_fused import linear_act as la

    with pytest.raises(ValueError, match="tma 1 needs ws = 1"):
        la.WG_LARGE_SW128._replace(tma=1).validate()
    with pytest.raises(ValueError, match="tma 1 needs ws = 1"):
        la.WG_LARGE_WS_PF._replace(tma=1).validate()
    for role, pair in (("dgrad", False), ("wgrad", False), ("wgrad", True)):
        with pytest.raises(ValueError, match="TMA producer is implemented for the forward"):
            la.make_wgmma_kernel(role, "float16", la.WG_SIM_WS_TMA, pair)
    with pytest.raises(ValueError, match="bn / 2 a multiple of 8"):
        la.make_wgmma_kernel("fwd", "float16", la.WG_SIM_WS_TMA._replace(bn=24), True)


@pytest.mark.gpu
def test_front_end_plans_with_a_tma_tiling_match_the_array_level(monkeypatch):
    """The torch front end records plans; with a TMA tiling a plan makes (or finds)
    the tensor maps from each call's pointers (Executor.derived): every call, on new
    inputs at other addresses too, bit for bit what the array level gives, and the
    recorded kernel is the TMA one."""
    import importlib

    import torch

    from interop.torch import linear_act
    from numba_fused import linear_act as la
    from numba_fused.plan import PlanCache
    from tests.util import record_calls

    if not _on_hopper():
        pytest.skip("wgmma needs a Hopper (sm_90) GPU")
    _use_variant(la, "ws_tma", monkeypatch)
    # Plans of this signature recorded by earlier tests ran other tilings.
    front = importlib.import_module("interop.torch.linear_act")
    monkeypatch.setattr(front, "_FWD_PLANS", PlanCache())
    made = record_calls(monkeypatch, la, "make_wgmma_kernel")
    for seed in (7, 8):
        x, w, b = _gemm_inputs(1000, 1032, 520, "float16", seed, integers=False)
        with la.use_wgmma():
            want = la.linear_act_forward(x, w, b, "gelu")
            got = [linear_act(x.clone(), w, b, "gelu") for _ in range(3)]
        for y in got:
            assert torch.equal(y, want)
    assert made and all(args[2].tma == 1 for args in made if args[0] == "fwd"), made
