"""TMA primitives (``numba_fused.tma``, ``tensor_core.tma_load_2d``): one thread copies
a box of a 2-D operand into shared memory through a tensor map, its bytes completing
an mbarrier phase that ``mbarrier_arrive_expect_tx`` announced; the block then writes
shared memory out raw. The bytes must equal ``tma.box_layout_ref``'s, with and
without the 128-byte swizzle, for boxes inside, across and past the operand's edges
(negative coordinates included). The simulator runs the emulation; CPU CI also
compiles the kernel for sm_90."""

import numpy as np
import pytest
import torch
from numba import cuda, types

import numba_fused  # noqa: F401  (simulator primitives, NumPy shim)
from interop.dlpack import as_kernel_array
from numba_fused import tensor_core as tc
from numba_fused import tma
from numba_fused.launch import SIMULATOR, Kernel

BOX_ROWS = 16
BOX_BYTES = 128  # one box row: 128 bytes, as the 128-byte swizzle needs
TILE_WORDS = BOX_ROWS * BOX_BYTES // 4
ALIGN = None if SIMULATOR else 1024  # the simulator takes no alignment argument
# (col0, row0) of each copy, in elements: inside, inside, across the bottom-right
# corner, before the top-left one.
COORDS = [(0, 0), (1, 8), (5, 32), (-1, -4)]


def _probe(tmap, coords, out):
    """For copy t (coords[2t] = col0 in boxes of BOX_BYTES, coords[2t + 1] = row0):
    out[t * TILE_WORDS:][:TILE_WORDS] = the words the copy left in shared memory."""
    tile = cuda.shared.array(TILE_WORDS, np.uint32, alignment=ALIGN)
    bars = cuda.shared.array(1, np.uint64)
    tid = cuda.threadIdx.x
    if tid == 0:
        tc.mbarrier_init(bars, 0, 1)
        # The initialised barrier, visible to the copy engine (the async proxy).
        tc.fence_proxy_async()
        tc.fence_proxy_tensormap(tmap)
    cuda.syncthreads()
    for t in range(coords.size // 2):
        if tid == 0:
            tc.mbarrier_arrive_expect_tx(bars, 0, TILE_WORDS * 4)
            tc.tma_load_2d(tile, 0, tmap, coords[2 * t], coords[2 * t + 1], bars, 0)
        tc.mbarrier_wait(bars, 0, t & 1)
        for i in range(tid, TILE_WORDS, cuda.blockDim.x):
            out[t * TILE_WORDS + i] = tile[i]
        # Every read of this box before the next copy overwrites it.
        cuda.syncthreads()
        if tid == 0:
            tc.fence_proxy_async()


PROBE = Kernel("test_tma_probe", _probe, (types.Array(types.int64, 1, "C"),
                                          types.Array(types.int32, 1, "C"),
                                          types.Array(types.uint32, 1, "C")))

_BITS = {"float16": np.uint16, "bfloat16": np.uint16, "float32": np.uint32}


def _no_tma():
    if SIMULATOR:
        return False
    return not (cuda.is_available() and cuda.get_current_device().compute_capability >= (9, 0))


@pytest.mark.skipif(_no_tma(), reason="needs sm_90 (or the simulator)")
@pytest.mark.parametrize("written", ["copy", "launch"])
@pytest.mark.parametrize("swizzle", [0, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_tma_boxes_land_in_the_maps_layout(dtype, swizzle, written):
    """``written``: the map's words reach the device by a blocking copy, or by
    WRITE_WORDS on the probe's stream (the simulator has one way)."""
    dev = "cpu" if SIMULATOR else "cuda"
    stream = 0 if SIMULATOR else torch.cuda.current_stream().cuda_stream
    esize = np.dtype(_BITS[dtype]).itemsize
    box_cols = BOX_BYTES // esize
    rows, cols, ld = 40, 6 * box_cols - 3 * (8 // esize), 6 * box_cols + 16 // esize
    rng = np.random.default_rng(7)
    bits = rng.integers(1, 2 ** (8 * esize) - 1, (rows, ld), dtype=np.int64).astype(_BITS[dtype])
    storage = torch.from_numpy(bits.view(np.int16 if esize == 2 else np.int32)).to(dev)
    src = storage.view(getattr(torch, dtype))[:, :cols]
    tmap = tma.tensor_map_2d(as_kernel_array(src, "src"), BOX_ROWS, box_cols, swizzle,
                             stream if written == "launch" else None)
    coords = torch.tensor([v for c0, r0 in COORDS for v in (c0 * box_cols, r0)],
                          dtype=torch.int32, device=dev)
    out = torch.zeros(len(COORDS) * TILE_WORDS, dtype=torch.int32, device=dev)
    PROBE.launch(1, 128, stream, [tmap, as_kernel_array(coords, "coords"),
                                  as_kernel_array(out.view(torch.uint32), "out")])
    got = out.cpu().numpy().view(np.uint8).reshape(len(COORDS), -1)
    a = bits[:, :cols]
    for t, (c0, r0) in enumerate(COORDS):
        want = tma.box_layout_ref(a, r0, c0 * box_cols, BOX_ROWS, box_cols, swizzle)
        assert np.array_equal(got[t], want), (t, c0, r0)
    # The reference itself: the corner box holds zeros past the operand, and the
    # swizzle moves chunks (so the two layouts are not compared to one answer).
    corner = tma.box_layout_ref(a, 32, 5 * box_cols, BOX_ROWS, box_cols, 0)
    assert not corner.reshape(BOX_ROWS, -1)[8:].any()
    if swizzle:
        plain = tma.box_layout_ref(a, 8, box_cols, BOX_ROWS, box_cols, 0)
        assert not np.array_equal(got[1], plain)


@pytest.mark.parametrize("kwargs,match", [
    ({"swizzle": 64}, "swizzle must be one of"),
    ({"box_cols": 32}, "box row must be 128 bytes"),
    ({"box_cols": 4, "swizzle": 0}, "multiple of 16 bytes"),
    ({"box_rows": 300}, r"box dimensions must be in \[1, 256\]"),
])
def test_tensor_map_rejects_what_tma_cannot_copy(kwargs, match):
    dev = "cpu" if SIMULATOR else "cuda"
    src = torch.zeros(8, 64, dtype=torch.float16, device=dev)
    args = {"box_rows": 8, "box_cols": 64, "swizzle": 128, **kwargs}
    with pytest.raises(ValueError, match=match):
        tma.tensor_map_2d(as_kernel_array(src, "src"), **args)


def test_tensor_map_rejects_layouts_and_dtypes():
    dev = "cpu" if SIMULATOR else "cuda"
    with pytest.raises(ValueError, match="unit column stride"):
        tma.tensor_map_2d(as_kernel_array(torch.zeros(64, 8, dtype=torch.float16,
                                                      device=dev).t(), "src"), 8, 64)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        # Rows of 60 halves (120 bytes) apart: not 16-byte aligned.
        rows = torch.zeros(8, 60, dtype=torch.float16, device=dev)
        tma.tensor_map_2d(as_kernel_array(rows, "src"), 8, 64, 0)
    with pytest.raises(TypeError, match="dtype must be one of"):
        tma.tensor_map_2d(as_kernel_array(torch.zeros(8, 16, dtype=torch.float64,
                                                      device=dev), "src"), 8, 16, 128)


@pytest.mark.gpu
@pytest.mark.skipif(_no_tma(), reason="needs sm_90")
def test_map_made_inside_a_graph_capture():
    """A map written on the capture stream (WRITE_WORDS, no host sync, which capture
    would refuse) is recorded with the probe; each replay copies the same boxes."""
    src = torch.randint(-2**15, 2**15, (40, 128), dtype=torch.int16,
                        device="cuda").view(torch.float16)
    coords = torch.tensor([v for c0, r0 in COORDS for v in (c0 * 64, r0)],
                          dtype=torch.int32, device="cuda")
    out = torch.zeros(len(COORDS) * TILE_WORDS, dtype=torch.int32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        stream = torch.cuda.current_stream().cuda_stream
        tmap = tma.tensor_map_2d(as_kernel_array(src, "src"), BOX_ROWS, 64, 128, stream)
        PROBE.launch(1, 128, stream, [tmap, as_kernel_array(coords, "coords"),
                                      as_kernel_array(out.view(torch.uint32), "out")])
    bits = src.view(torch.int16).cpu().numpy().view(np.uint16)
    for _ in range(2):
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        got = out.cpu().numpy().view(np.uint8).reshape(len(COORDS), -1)
        for t, (c0, r0) in enumerate(COORDS):
            want = tma.box_layout_ref(bits, r0, c0 * 64, BOX_ROWS, 64, 128)
            assert np.array_equal(got[t], want), (t, c0, r0)


@pytest.mark.ptx
def test_map_writer_compiles_for_sm90():
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = tma.WRITE_WORDS.ptx()
    assert ptx.count("st.global.u64") == 16
    assert ptxas_report(ptx)["spill_stores"] == 0


@pytest.mark.ptx
def test_probe_compiles_for_sm90():
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile():
        ptx = PROBE.ptx()
    for marker in ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx"
                   "::bytes", "mbarrier.arrive.expect_tx.shared::cta.b64",
                   "fence.proxy.tensormap::generic.acquire.gpu"):
        assert marker in ptx, marker
    rep = ptxas_report(ptx)
    assert rep["spill_stores"] == 0, rep


@pytest.mark.skipif(not SIMULATOR, reason="the emulation's deadlock report")
def test_announced_bytes_that_never_land_are_reported(monkeypatch):
    """A phase whose arrivals are all in but whose announced bytes never land does
    not complete: the emulation raises after its backstop (the GPU would hang)."""
    monkeypatch.setattr(tc, "_BACKSTOP_S", 1.0)

    def never(out):
        bars = cuda.shared.array(1, np.uint64)
        if cuda.threadIdx.x == 0:
            tc.mbarrier_init(bars, 0, 1)
            tc.mbarrier_arrive_expect_tx(bars, 0, 16)
        cuda.syncthreads()
        tc.mbarrier_wait(bars, 0, 0)
        out[0] = 1

    k = Kernel("test_tma_never", never, (types.Array(types.uint32, 1, "C"),))
    out = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(Exception, match="did not complete"):
        k.launch(1, 1, 0, [as_kernel_array(out.view(torch.uint32), "out")])


@pytest.mark.gpu
def test_maps_are_cached_by_what_they_encode():
    """cached_map_2d: the same operand (another view object of the same storage)
    gets the same map; another shape of it gets its own."""
    src = torch.zeros(64, 128, dtype=torch.float16, device="cuda")
    first = tma.cached_map_2d(as_kernel_array(src, "src"), 16, 64)
    assert tma.cached_map_2d(as_kernel_array(src.view(64, 128), "src"), 16, 64) is first
    other = tma.cached_map_2d(as_kernel_array(src[:, :64], "src"), 16, 64)
    assert other is not first and not torch.equal(other.owner, first.owner)
    # Written on a stream: keyed by the stream too; the same words once written.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = tma.cached_map_2d(as_kernel_array(src, "src"), 16, 64, 128, side.cuda_stream)
        assert tma.cached_map_2d(as_kernel_array(src, "src"), 16, 64, 128,
                                 side.cuda_stream) is on_side
    side.synchronize()
    assert on_side is not first and torch.equal(on_side.owner, first.owner)
