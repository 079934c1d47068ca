"""mbarrier primitives (``numba_fused.tensor_core``): a producer warp fills a 2-slot
ring in shared memory by cp.async and signals each slot's "full" barrier with
``cp_async_mbarrier_arrive``; a consumer warp waits on it, reads the slot, and
signals the slot's "empty" barrier with ``mbarrier_arrive``, which the producer waits
on before refilling (the parity trick: a fresh barrier's phase of parity 1 counts as
complete). The sums must be exact. Under the simulator the emulation runs (a missing
arrival deadlocks into an error there, as it would hang the GPU); CPU CI also
assembles the kernel for sm_90a (setmaxnreg needs it)."""

import numpy as np
import pytest
from numba import cuda, types

import numba_fused  # noqa: F401  (simulator primitives, NumPy shim)
from interop.dlpack import as_kernel_array
from numba_fused import tensor_core as tc
from numba_fused.launch import SIMULATOR, Kernel

SLOTS = 2
TILES = 5
WORDS = 4 * 32  # one tile: 32 lanes x one 16-byte cp.async each
RING_WORDS = SLOTS * WORDS
BARS = 2 * SLOTS


def _ring(src, out):
    """out[lane] = sum over tiles t of src[t, lane, :] (uint32, 4 words per lane)."""
    ring = cuda.shared.array(RING_WORDS, np.uint32)
    bars = cuda.shared.array(BARS, np.uint64)
    tid = cuda.threadIdx.x
    lane = tid & 31
    if tid == 0:
        for s in range(SLOTS):
            tc.mbarrier_init(bars, s, 32)          # full[s]: the producer's 32 lanes
            tc.mbarrier_init(bars, SLOTS + s, 32)  # empty[s]: the consumer's 32 lanes
    cuda.syncthreads()
    if tid < 32:
        tc.setmaxnreg_dec(40)
        for t in range(TILES):
            s = t % SLOTS
            # Round r = t // SLOTS of slot s: wait for the consumer's round r - 1.
            tc.mbarrier_wait(bars, SLOTS + s, ((t // SLOTS) & 1) ^ 1)
            tc.cp_async_16(ring, s * WORDS + 4 * lane, src, t * WORDS + 4 * lane, 16)
            tc.cp_async_mbarrier_arrive(bars, s)
    else:
        tc.setmaxnreg_inc(232)
        acc = np.uint32(0)
        for t in range(TILES):
            s = t % SLOTS
            tc.mbarrier_wait(bars, s, (t // SLOTS) & 1)
            for j in range(4):
                acc += ring[s * WORDS + 4 * lane + j]
            tc.mbarrier_arrive(bars, SLOTS + s)
        out[lane] = acc


U32 = types.Array(types.uint32, 1, "C")
RING = Kernel("test_mbarrier_ring", _ring, (U32, U32))


@pytest.mark.skipif(not SIMULATOR and not (cuda.is_available() and
                                           cuda.get_current_device().compute_capability >= (9, 0)),
                    reason="needs sm_90 (or the simulator)")
def test_producer_consumer_ring_is_exact():
    import torch

    dev = "cpu" if SIMULATOR else "cuda"
    rng = np.random.default_rng(0)
    src = rng.integers(0, 2**20, TILES * WORDS, dtype=np.uint32)
    s = torch.from_numpy(src.view(np.int32)).to(dev).view(torch.uint32)
    out = torch.zeros(32, dtype=torch.int32, device=dev)
    RING.launch(1, 64, 0 if SIMULATOR else torch.cuda.current_stream().cuda_stream,
                [as_kernel_array(s, "src"), as_kernel_array(out.view(torch.uint32), "out")])
    if not SIMULATOR:
        torch.cuda.synchronize()
    want = src.reshape(TILES, 32, 4).astype(np.uint64).sum(axis=(0, 2)).astype(np.uint32)
    assert np.array_equal(out.cpu().numpy().view(np.uint32), want)


@pytest.mark.skipif(not SIMULATOR, reason="the emulation's deadlock report")
def test_missing_arrival_is_reported_not_hung(monkeypatch):
    """A consumer waiting on a phase nobody completes: the emulation raises after its
    backstop instead of hanging."""
    import torch

    monkeypatch.setattr(tc, "_BACKSTOP_S", 1.0)

    def never(out):
        bars = cuda.shared.array(1, np.uint64)
        if cuda.threadIdx.x == 0:
            tc.mbarrier_init(bars, 0, 2)
        cuda.syncthreads()
        tc.mbarrier_wait(bars, 0, 0)
        out[0] = 1

    k = Kernel("test_mbarrier_never", never, (U32,))
    out = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(Exception, match="did not complete"):
        k.launch(1, 1, 0, [as_kernel_array(out.view(torch.uint32), "out")])


@pytest.mark.ptx
def test_ring_assembles_for_sm90a():
    from numba_fused.registry import offline_compile, ptxas_report

    with offline_compile((9, 0, "a")):
        ptx = RING.ptx(cc=(9, 0, "a"))
    for marker in ("mbarrier.init.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
                   "mbarrier.arrive.shared::cta.b64", "cp.async.mbarrier.arrive.noinc",
                   "setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232"):
        assert marker in ptx, marker
    rep = ptxas_report(ptx, arch="sm_90a")
    assert rep["spill_stores"] == 0, rep
