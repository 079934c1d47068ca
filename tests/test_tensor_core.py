"""Tensor-core primitives (numba_fused.tensor_core): mma.sync m16n8k16, ldmatrix,
cp.async, 16-byte vector accesses and half packing.

The same kernels run under the simulator (checking the emulation) and on a GPU
(checking the inline PTX): per-lane results are compared with the NumPy statement
of the PTX ISA's fragment layouts, bit for bit wherever the exact result is
representable, and whole tiles (cp.async -> ldmatrix -> mma) with NumPy matmul.
"""

import math

import numpy as np
import pytest
from numba import cuda, types

import numba_fused  # noqa: F401  (simulator primitives, NumPy shim)
from interop.dlpack import as_kernel_array
from numba_fused import tensor_core as tc
from numba_fused.launch import SIMULATOR, Kernel

SMEM_ALIGN = None if SIMULATOR else 16
HALF = ("float16", "bfloat16")


def _arr(dtype, ndim=1):
    return types.Array(dtype, ndim, "C")


U16, U32, I32, F32 = _arr(types.uint16), _arr(types.uint32), _arr(types.int32), _arr(types.float32)


def _run(kernel, block, *arrays):
    """Launch one block of ``block`` threads over NumPy inputs; returns host copies."""
    devs = [cuda.to_device(np.ascontiguousarray(a).ravel()) for a in arrays]
    kernel.launch(1, block, 0, [as_kernel_array(d, "arg") for d in devs])
    if not SIMULATOR:
        cuda.synchronize()
    return [d.copy_to_host() for d in devs]


def _bits(x, dtype):
    """16-bit patterns of float values ``x`` in ``dtype``."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float16":
        return x.astype(np.float16).view(np.uint16)
    return np.vectorize(lambda v: int(tc.pack_pair(v, 0.0, "bfloat16")) & 0xFFFF,
                        otypes=[np.uint16])(x)


def _mma_fn(dtype):
    return tc.mma_f16 if dtype == "float16" else tc.mma_bf16


# ---- kernels -----------------------------------------------------------------------


def _make_mma_regs_kernel(dtype):
    mma = _mma_fn(dtype)

    def k(a, b, c, d):
        """d[l, :] = mma of lane l's registers a[l, :4], b[l, :2], c[l, :4] (flat (32, n))."""
        lane = cuda.threadIdx.x
        r = mma(a[4 * lane], a[4 * lane + 1], a[4 * lane + 2], a[4 * lane + 3],
                b[2 * lane], b[2 * lane + 1],
                c[4 * lane], c[4 * lane + 1], c[4 * lane + 2], c[4 * lane + 3])
        for i in range(4):
            d[4 * lane + i] = r[i]

    return Kernel(f"tc_mma_regs_{dtype}", k, (U32, U32, F32, F32))


MMA_REGS = {dt: _make_mma_regs_kernel(dt) for dt in HALF}


def _make_ldmatrix_kernel(num, trans):
    fn = getattr(tc, f"ldmatrix_x{num}{'_trans' if trans else ''}")

    def k(mem, rows, out):
        """out[l, i] = register i of lane l for ldmatrix over shared copy of ``mem``
        (512 uint16), lane l addressing element rows[l]."""
        sm = cuda.shared.array(512, np.uint16, alignment=SMEM_ALIGN)
        lane = cuda.threadIdx.x
        for j in range(16):
            sm[16 * lane + j] = mem[16 * lane + j]
        cuda.syncthreads()
        r = fn(sm, rows[lane])
        if num == 1:
            out[lane] = r
        else:
            for i in range(num):
                out[num * lane + i] = r[i]

    return Kernel(f"tc_ldmatrix_x{num}{'_trans' if trans else ''}", k, (U16, I32, U32))


LDMATRIX = {(n, t): _make_ldmatrix_kernel(n, t) for n in (1, 2, 4) for t in (False, True)}


def _make_ldmatrix_at_kernel(num, trans):
    fn = getattr(tc, f"ldmatrix_x{num}{'_trans' if trans else ''}_at")

    def k(mem, rows, out):
        """As the ldmatrix kernel, addressing by shared_address + byte offset."""
        sm = cuda.shared.array(512, np.uint16, alignment=SMEM_ALIGN)
        lane = cuda.threadIdx.x
        for j in range(16):
            sm[16 * lane + j] = mem[16 * lane + j]
        cuda.syncthreads()
        r = fn(tc.shared_address(sm, 0) + rows[lane] * 2)
        if num == 1:
            out[lane] = r
        else:
            for i in range(num):
                out[num * lane + i] = r[i]

    return Kernel(f"tc_ldmatrix_x{num}{'_trans' if trans else ''}_at", k, (U16, I32, U32))


LDMATRIX_AT = {(n, t): _make_ldmatrix_at_kernel(n, t) for n in (1, 2, 4) for t in (False, True)}


def _make_tile_kernel(dtype, trans):
    """Whole m16n8k16 tile: global -> shared by cp.async, fragments by ldmatrix, mma.

    trans=False: a is A (16x16, [m][k]), b is B stored [n][k] (8x16);
    trans=True:  a is A^T ([k][m]) and b is B stored [k][n] (16x8), read with .trans.
    c: C (16x8 float32); d: D = A @ B + C (16x8 float32).
    """
    mma = _mma_fn(dtype)

    def k(a, b, c, d):
        sm = cuda.shared.array(384, np.uint16, alignment=SMEM_ALIGN)
        lane = cuda.threadIdx.x
        tc.cp_async_16(sm, 8 * lane, a, 8 * lane, 16)
        if lane < 16:
            tc.cp_async_16(sm, 256 + 8 * lane, b, 8 * lane, 16)
        tc.cp_async_commit()
        tc.cp_async_wait(0)
        cuda.syncthreads()
        if trans:
            # A^T [k][m]: matrices (k0-7,m0-7) (k0-7,m8-15) (k8-15,m0-7) (k8-15,m8-15).
            ra = tc.ldmatrix_x4_trans(sm, ((lane & 7) + ((lane >> 4) << 3)) * 16
                                      + ((lane >> 3) & 1) * 8)
            # B [k][n]: matrices (k0-7) and (k8-15); lanes 16-31 repeat valid rows.
            rb = tc.ldmatrix_x2_trans(sm, 256 + (lane & 15) * 8)
        else:
            ra = tc.ldmatrix_x4(sm, (lane & 15) * 16 + (lane >> 4) * 8)
            # B [n][k]: matrices (n0-7, k0-7) and (n0-7, k8-15).
            rb = tc.ldmatrix_x2(sm, 256 + (lane & 7) * 16 + ((lane >> 3) & 1) * 8)
        g = lane >> 2
        t = lane & 3
        r = mma(ra[0], ra[1], ra[2], ra[3], rb[0], rb[1],
                c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1],
                c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1])
        d[g * 8 + 2 * t] = r[0]
        d[g * 8 + 2 * t + 1] = r[1]
        d[(g + 8) * 8 + 2 * t] = r[2]
        d[(g + 8) * 8 + 2 * t + 1] = r[3]

    return Kernel(f"tc_tile_{dtype}_{'trans' if trans else 'rowcol'}", k, (U16, U16, F32, F32))


TILE = {(dt, tr): _make_tile_kernel(dt, tr) for dt in HALF for tr in (False, True)}


def _cp_async_k(src, nbytes, out):
    """Thread l copies 16 bytes (first nbytes[l] from src, rest zero) into shared,
    in two commit groups (even / odd lanes' second copy), then dumps shared to out."""
    sm = cuda.shared.array(1024, np.uint16, alignment=SMEM_ALIGN)
    lane = cuda.threadIdx.x
    tc.cp_async_16(sm, 8 * lane, src, 8 * lane, nbytes[lane])
    tc.cp_async_commit()
    tc.cp_async_16(sm, 512 + 8 * lane, src, 8 * (31 - lane), 16)
    tc.cp_async_commit()
    tc.cp_async_wait(1)
    tc.cp_async_wait_all()
    cuda.syncthreads()
    for j in range(32):
        out[32 * lane + j] = sm[32 * lane + j]


CP_ASYNC = Kernel("tc_cp_async", _cp_async_k, (U16, I32, U16))


def _cp_async_order_k(src, out):
    """wait(1) with two groups outstanding retires the older: its data is visible."""
    sm = cuda.shared.array(512, np.uint16, alignment=SMEM_ALIGN)
    lane = cuda.threadIdx.x
    tc.cp_async_16(sm, 8 * lane, src, 8 * lane, 16)
    tc.cp_async_commit()
    tc.cp_async_16(sm, 256 + 8 * lane, src, 256 + 8 * lane, 16)
    tc.cp_async_commit()
    tc.cp_async_wait(1)
    for j in range(8):
        out[8 * lane + j] = sm[8 * lane + j]
    tc.cp_async_wait(0)
    for j in range(8):
        out[256 + 8 * lane + j] = sm[256 + 8 * lane + j]


CP_ASYNC_ORDER = Kernel("tc_async_order", _cp_async_order_k, (U16, U16))


def _vec_k(src, dst, dst32, dst64):
    """16-byte copy src -> dst per thread; 4-byte copy of src's first words -> dst32;
    the first 8 bytes of each thread's 16 -> dst64 (8-byte stores)."""
    i = cuda.threadIdx.x
    v = tc.ld_global_v4(src, 8 * i)
    tc.st_global_v4(dst, 8 * i, v[0], v[1], v[2], v[3])
    tc.st_global_b32(dst32, 2 * i, tc.ld_global_b32(src, 2 * i))
    tc.st_global_v2(dst64, 4 * i, v[0], v[1])


VEC = Kernel("tc_vec", _vec_k, (U16, U16, U16, U16))


def _pack_k(x, f16, bf16, back16, backbf):
    """Pack x[2i], x[2i+1] both ways; unpack the packed words again."""
    i = cuda.threadIdx.x
    p = tc.pack_f16x2(x[2 * i], x[2 * i + 1])
    q = tc.pack_bf16x2(x[2 * i], x[2 * i + 1])
    f16[i] = p
    bf16[i] = q
    u = tc.unpack_f16x2(p)
    w = tc.unpack_bf16x2(q)
    back16[2 * i] = u[0]
    back16[2 * i + 1] = u[1]
    backbf[2 * i] = w[0]
    backbf[2 * i + 1] = w[1]


PACK = Kernel("tc_pack", _pack_k, (F32, U32, U32, F32, F32))


def _red_k(vals, acc):
    """Thread i adds vals[2i], vals[2i+1] into the pair of slots (i % 4): 8 threads
    meet on every pair."""
    i = cuda.threadIdx.x
    tc.red_add_v2_f32(acc, np.uint32(2 * (i % 4)), vals[2 * i], vals[2 * i + 1])


RED = Kernel("tc_red", _red_k, (F32, F32))

ALL = [*MMA_REGS.values(), *LDMATRIX.values(), *LDMATRIX_AT.values(), *TILE.values(),
       CP_ASYNC, CP_ASYNC_ORDER, VEC, PACK, RED]


# ---- tests -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", HALF)
def test_fragment_helpers_round_trip(dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**16, (16, 16), dtype=np.uint16)
    b = rng.integers(0, 2**16, (16, 8), dtype=np.uint16)
    regs = tc.a_fragments(a)
    # Lane 5 (g=1, t=1): a0 = A[1, 2:4], a3 = A[9, 10:12] (PTX ISA figure).
    assert regs[5, 0] == (int(a[1, 2]) | int(a[1, 3]) << 16)
    assert regs[5, 3] == (int(a[9, 10]) | int(a[9, 11]) << 16)
    breg = tc.b_fragments(b)
    assert breg[5, 1] == (int(b[10, 1]) | int(b[11, 1]) << 16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_array_equal(tc.d_from_fragments(tc.c_fragments(c)), c)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("data", ["integers", "random"])
def test_mma_registers_match_layout_reference(dtype, data):
    rng = np.random.default_rng(1 if data == "integers" else 2)
    if data == "integers":
        a = rng.integers(-8, 9, (16, 16)).astype(np.float32)
        b = rng.integers(-8, 9, (16, 8)).astype(np.float32)
        c = rng.integers(-64, 65, (16, 8)).astype(np.float32)
    else:
        a = rng.standard_normal((16, 16)).astype(np.float32)
        b = rng.standard_normal((16, 8)).astype(np.float32)
        c = rng.standard_normal((16, 8)).astype(np.float32)
    ar = tc.a_fragments(_bits(a, dtype))
    br = tc.b_fragments(_bits(b, dtype))
    cr = tc.c_fragments(c)
    (_, _, _, d) = _run(MMA_REGS[dtype], 32, ar, br, cr, np.full((32, 4), np.nan, np.float32))
    d = d.reshape(32, 4)
    want = tc.mma_reference(ar, br, cr, dtype)
    if data == "integers":
        # Exact in float32 whatever the accumulation order: bit for bit.
        np.testing.assert_array_equal(d, want)
        np.testing.assert_array_equal(tc.d_from_fragments(d), a @ b + c)
    else:
        a64 = tc.bits_to_f64(_bits(a, dtype), dtype)
        b64 = tc.bits_to_f64(_bits(b, dtype), dtype)
        exact = a64 @ b64 + c
        # Hardware accumulates in float32 in an unspecified order: 17 terms of
        # magnitude <= |a||b| give at most ~17 ulp of the largest partial sum.
        scale = np.abs(a64) @ np.abs(b64) + np.abs(c)
        assert np.all(np.abs(tc.d_from_fragments(d) - exact) <= 17 * 2**-24 * scale)
        if SIMULATOR:
            np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("form", ["index", "address"])
def test_ldmatrix_matches_reference(num, trans, form):
    rng = np.random.default_rng(num + 10 * trans)
    mem = rng.integers(0, 2**16, 512, dtype=np.uint16)
    # Any 16-byte aligned row start, in any order, repeats allowed.
    rows = (rng.integers(0, 512 // 8 - 1, 32) * 8).astype(np.int32)
    rows[:8] = np.arange(8) * 16  # matrix 0: a plain 8x8 block of a 16-wide tile
    kernel = (LDMATRIX if form == "index" else LDMATRIX_AT)[(num, trans)]
    (_, _, out) = _run(kernel, 32, mem, rows, np.zeros(32 * num, np.uint32))
    want = tc.ldmatrix_reference(mem, rows, num, trans)
    np.testing.assert_array_equal(out.reshape(32, num), want)
    if trans:
        # Matrix 0 transposed: lane l holds (row 2t, col g) and (row 2t+1, col g).
        block = mem[:128].reshape(8, 16)[:, :8]
        lane = 13
        g, t = lane // 4, lane % 4
        assert want[lane, 0] == int(block[2 * t, g]) | int(block[2 * t + 1, g]) << 16


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("trans", [False, True], ids=["rowcol", "trans"])
@pytest.mark.parametrize("data", ["integers", "random"])
def test_mma_tile_cp_async_ldmatrix_vs_numpy(dtype, trans, data):
    rng = np.random.default_rng(3)
    if data == "integers":
        a = rng.integers(-6, 7, (16, 16)).astype(np.float32)
        b = rng.integers(-6, 7, (16, 8)).astype(np.float32)
        c = rng.integers(-50, 51, (16, 8)).astype(np.float32)
    else:
        a = rng.standard_normal((16, 16)).astype(np.float32)
        b = rng.standard_normal((16, 8)).astype(np.float32)
        c = rng.standard_normal((16, 8)).astype(np.float32)
    abits, bbits = _bits(a, dtype), _bits(b, dtype)
    a_mem = abits.T.copy() if trans else abits
    b_mem = bbits if trans else bbits.T.copy()  # [k][n] or [n][k]
    (_, _, _, d) = _run(TILE[(dtype, trans)], 32, a_mem.ravel(), b_mem.ravel(), c.ravel(),
                        np.full(128, np.nan, np.float32))
    exact = tc.bits_to_f64(abits, dtype) @ tc.bits_to_f64(bbits, dtype) + c
    d = d.reshape(16, 8)
    if data == "integers":
        np.testing.assert_array_equal(d, exact)
    else:
        a64, b64 = tc.bits_to_f64(abits, dtype), tc.bits_to_f64(bbits, dtype)
        scale = np.abs(a64) @ np.abs(b64) + np.abs(c)
        assert np.all(np.abs(d - exact) <= 17 * 2**-24 * scale)


def test_cp_async_zero_fill_and_groups():
    rng = np.random.default_rng(4)
    src = rng.integers(1, 2**16, 256, dtype=np.uint16)
    nbytes = np.array([0, 16, 2, 4, 6, 8, 10, 12, 14] + [16, 0] * 11 + [1, 3, 15], np.int32)
    (_, _, out) = _run(CP_ASYNC, 32, src, nbytes, np.full(1024, 0xDEAD, np.uint16))
    b = src.view(np.uint8)
    for lane in range(32):
        chunk = out[8 * lane:8 * lane + 8].view(np.uint8)
        n = nbytes[lane]
        np.testing.assert_array_equal(chunk[:n], b[16 * lane:16 * lane + n], err_msg=f"lane {lane}")
        assert not chunk[n:].any(), f"lane {lane}: bytes after {n} not zero-filled"
        np.testing.assert_array_equal(out[512 + 8 * lane:512 + 8 * lane + 8],
                                      src[8 * (31 - lane):8 * (31 - lane) + 8])


def test_cp_async_wait_retires_oldest_group():
    src = np.arange(512, dtype=np.uint16) * 3 + 1
    (_, out) = _run(CP_ASYNC_ORDER, 32, src, np.zeros(512, np.uint16))
    np.testing.assert_array_equal(out, src)


@pytest.mark.sim
def test_emulated_cp_async_lands_only_at_wait():
    """The emulation defers copies to the wait that retires them, so a kernel that
    reads shared memory too early reads stale data under the simulator too."""
    def k(src, out):
        sm = cuda.shared.array(256, np.uint16)
        lane = cuda.threadIdx.x
        sm[8 * lane] = 7
        tc.cp_async_16(sm, 8 * lane, src, 8 * lane, 16)
        tc.cp_async_commit()
        out[lane] = sm[8 * lane]
        tc.cp_async_wait(0)
        out[32 + lane] = sm[8 * lane]

    src = np.arange(256, dtype=np.uint16) + 100
    (_, out) = _run(Kernel("tc_cp_async_early", k, (U16, U16)), 32, src, np.zeros(64, np.uint16))
    assert (out[:32] == 7).all()
    np.testing.assert_array_equal(out[32:], src[::8])


@pytest.mark.sim
def test_emulation_rejects_misaligned_and_partial_warps():
    def k(src, dst):
        v = tc.ld_global_v4(src, 4 * cuda.threadIdx.x + 1)
        tc.st_global_v4(dst, 0, v[0], v[1], v[2], v[3])

    with pytest.raises(ValueError, match="aligned"):
        _run(Kernel("tc_misaligned", k, (U32, U32)), 1, np.zeros(64, np.uint32),
             np.zeros(4, np.uint32))
    with pytest.raises(RuntimeError, match="full warp"):
        _run(MMA_REGS["float16"], 16, np.zeros((32, 4), np.uint32), np.zeros((32, 2), np.uint32),
             np.zeros((32, 4), np.float32), np.zeros((32, 4), np.float32))


def test_vector_loads_and_stores_copy_exactly():
    rng = np.random.default_rng(5)
    src = rng.integers(0, 2**16, 8 * 32, dtype=np.uint16)
    (_, dst, dst32, dst64) = _run(VEC, 32, src, np.zeros_like(src), np.zeros(128, np.uint16),
                                  np.zeros(128, np.uint16))
    np.testing.assert_array_equal(dst, src)
    np.testing.assert_array_equal(dst32[:64], src[:64])
    np.testing.assert_array_equal(dst64, src.reshape(32, 8)[:, :4].reshape(-1))


def test_red_add_v2_adds_every_pair_atomically():
    # Small integers: every order of the additions gives the exact sum.
    rng = np.random.default_rng(7)
    vals = rng.integers(-1000, 1000, 64).astype(np.float32)
    acc = np.arange(8, dtype=np.float32)
    (_, got) = _run(RED, 32, vals, acc)
    want = acc.astype(np.float64)
    for i in range(32):
        want[2 * (i % 4)] += vals[2 * i]
        want[2 * (i % 4) + 1] += vals[2 * i + 1]
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_pack_unpack_round_to_nearest_even():
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(64) * 10).astype(np.float32)
    # Ties both ways for each format, overflow, signed zero, infinities, subnormals.
    x[:14] = [1.0 + 2**-11, 1.0 + 3 * 2**-11, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 65520.0, 1e6,
              -0.0, np.inf, -np.inf, 2**-24, 3e-41, 70000.0, 3.4e38, -3.0e-8]
    (_, f16, bf16, back16, backbf) = _run(PACK, 32, x, np.zeros(32, np.uint32),
                                          np.zeros(32, np.uint32), np.zeros(64, np.float32),
                                          np.zeros(64, np.float32))
    want16 = np.array([tc.pack_pair(x[2 * i], x[2 * i + 1], "float16") for i in range(32)])
    wantbf = np.array([tc.pack_pair(x[2 * i], x[2 * i + 1], "bfloat16") for i in range(32)])
    np.testing.assert_array_equal(f16, want16)
    np.testing.assert_array_equal(bf16, wantbf)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(back16, x.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(backbf, tc.bits_to_f64(_bits(x, "bfloat16"), "bfloat16")
                                  .astype(np.float32))
    # Cross-check the bf16 rounding against torch's.
    import torch

    tb = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(_bits(x, "bfloat16"), tb)


def test_half_packers_pick_the_dtype_pair():
    assert tc.half_packers("float16") == (tc.pack_f16x2, tc.unpack_f16x2)
    assert tc.half_packers("bfloat16") == (tc.pack_bf16x2, tc.unpack_bf16x2)
    with pytest.raises(ValueError, match="'float16' or 'bfloat16'"):
        tc.half_packers("float32")


_PTX_MARKERS = {
    "tc_mma_regs": ["mma.sync.aligned.m16n8k16.row.col.f32"],
    "tc_ldmatrix": ["ldmatrix.sync.aligned.m8n8"],
    "tc_tile": ["cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group 0",
                "ldmatrix.sync.aligned.m8n8.x4", "mma.sync.aligned.m16n8k16"],
    "tc_cp_async": ["cp.async.wait_group 1", "cp.async.wait_all"],
    "tc_async_order": ["cp.async.wait_group 1", "cp.async.wait_group 0"],
    "tc_vec": ["ld.global.v4.u32", "st.global.v4.u32", "ld.global.u32", "st.global.u32",
               "st.global.v2.u32"],
    "tc_pack": ["cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32", "cvt.f32.f16"],
    "tc_red": ["red.global.add.v2.f32"],
}


@pytest.mark.ptx
@pytest.mark.parametrize("kernel", ALL, ids=lambda k: k.name)
def test_primitive_kernels_compile_to_ptx(kernel):
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = kernel.ptx()
    for prefix, markers in _PTX_MARKERS.items():
        if kernel.name.startswith(prefix):
            for m in markers:
                assert m in ptx, f"{kernel.name}: {m!r} not in the PTX"
    if "ldmatrix" in kernel.name and "trans" in kernel.name:
        assert ".trans.shared.b16" in ptx
    rep = ptxas_report(ptx)
    assert rep["spill_stores"] == 0 and rep["spill_loads"] == 0 and rep["stack"] == 0, rep
    assert not math.isnan(rep["registers"])


def test_ld_global_v4_prefetch_sizes():
    """ld_global_v4_prefetch: None is the plain load itself, each PTX prefetch size
    has its own load, anything else is refused with the sizes named."""
    assert tc.ld_global_v4_prefetch(None) is tc.ld_global_v4
    loads = {size: tc.ld_global_v4_prefetch(size) for size in tc.L2_PREFETCH_SIZES}
    assert tc.L2_PREFETCH_SIZES == (64, 128, 256)
    assert all(callable(f) for f in loads.values())
    for bad in (0, 32, 512, "256", 128.5):
        with pytest.raises(ValueError, match=r"one of \(64, 128, 256\)"):
            tc.ld_global_v4_prefetch(bad)


def test_ld_global_v4_evict_policies():
    """ld_global_v4_evict: None is the plain load itself, each PTX L1 eviction
    priority ("first", "last", "no_allocate"), L2 cache policy ("L2first", "L2last")
    and the pairs of LOAD_POLICIES has its own load, anything else is refused with
    the policies named."""
    assert tc.ld_global_v4_evict(None) is tc.ld_global_v4
    assert tc.L1_EVICT_POLICIES == ("first", "last", "no_allocate")
    assert tc.LOAD_POLICIES == tc.L1_EVICT_POLICIES + (
        "L2first", "L2last", "first+L2first", "last+L2last", "no_allocate+L2first")
    loads = {p: tc.ld_global_v4_evict(p) for p in tc.LOAD_POLICIES}
    assert all(callable(f) for f in loads.values())
    for bad in ("normal", "LAST", 1, "evict_first", "unchanged", "L2normal", "L2first+first"):
        with pytest.raises(ValueError, match=r"one of \('first', 'last', 'no_allocate', "
                                             r"'L2first'"):
            tc.ld_global_v4_evict(bad)
