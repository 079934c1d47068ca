"""numba_fused.plan's bookkeeping, with a stand-in kernel (runs everywhere): which
buffer feeds each array argument, alignment seen by the launcher, outputs, the
merged workspace and its zeroed parts. The real replay is checked on the GPU by
tests/test_fast_path.py."""

import pytest
from numba import types

from interop.dlpack import KernelArray
from numba_fused import plan as plan_mod
from numba_fused.plan import Recorder


class _Prepared:
    def __init__(self, log):
        self.log = log

    def launch(self, stream, ptrs, values=()):
        self.log.append((stream, tuple(ptrs)) + ((tuple(values),) if values else ()))


class _FakeKernel:
    argtypes = (types.Array(types.float32, 1, "C"), types.int64, types.Array(types.float32, 1, "C"))
    _array_idx = (0, 2)

    def __init__(self):
        self.log = []

    def prepare(self, grid, block, shared, args, dynamic=()):
        self.dynamic = dynamic
        return _Prepared(self.log)


def _arr(ptr, n=8, dtype="float32"):
    return KernelArray(None, "torch", dtype, (n,), (1,), ptr=ptr, device=0)


def test_recorder_maps_buffers_and_replays(monkeypatch):
    k = _FakeKernel()
    x, w = _arr(0x7000_0004), _arr(0x9000_0000)
    rec = Recorder([x, None, w])
    sx, none, sw = rec.inputs
    assert none is None
    # The launcher sees each input's alignment, not its address.
    assert sx.ptr % 16 == 4 and sw.ptr % 16 == 0 and sx.ptr != x.ptr
    part = rec.alloc(sx, (100,), "float32")  # workspace: 400 bytes -> 512
    out = rec.alloc(sx, (8,), "float32")
    locks = rec.alloc(sx, (3,), "int32", zero=lambda a: None)  # workspace, zeroed
    assert out.ptr % 16 == 0 and out.device == 0 and out.shape == (8,)
    rec.launch(k, 1, 32, 0, [sx, 5, part])
    rec.launch(k, 1, 32, 0, [locks, 6, out])
    rec.launch(k, 1, 32, 0, [sw, 7, sw])
    p = rec.plan((out, None))
    assert p.allocs == (((8,), "float32", False),)
    assert p.ws_bytes == 512 + 256 and p.ws_zero == ((512, 12),)
    made, zeroed = [], []
    monkeypatch.setattr(plan_mod, "memset_zero", lambda *a: zeroed.append(a))

    def new(shape, dtype, zero):
        made.append((shape, dtype, zero))
        return f"array{len(made)}", 1000 * len(made)

    res = p.run(77, (11, 0, 33), new, 0)
    assert res == ("array1", None)
    assert made == [((8,), "float32", False), ((768,), "uint8", False)]
    assert zeroed == [(2000 + 512, 12, 77, 0)]
    assert k.log == [(77, (11, 2000)), (77, (2512, 1000)), (77, (33, 33))]


def _view_at(a, nbytes, n=4):
    return KernelArray(None, a.lib, a.dtype, (n,), (1,), ptr=a.ptr + nbytes, device=a.device)


def test_recorder_keeps_view_offsets_dynamic_scalars_and_stream_buffers(monkeypatch):
    k = _FakeKernel()
    x = _arr(0x7000_0008, n=64)
    made_for = []

    def counters(stream):
        made_for.append(stream)
        return KernelArray(None, "torch", "uint32", (16,), (1,), ptr=0x5000_0000 + stream, device=0)

    rec = Recorder([x])
    (sx,) = rec.inputs
    ws = rec.alloc(sx, (64,), "float32")
    cnt = rec.stream_buffer(counters, 3)
    assert made_for == [3] and cnt.shape == (16,) and cnt.dtype == "uint32"
    out = rec.alloc(sx, (64,), "float32")
    # Views 40 bytes into the input, 16 into the workspace, 8 into the output.
    rec.launch(k, 1, 32, 3, [_view_at(sx, 40), 1, _view_at(ws, 16)], dynamic=(1,))
    assert k.dynamic == (1,)
    rec.launch(k, 1, 32, 3, [cnt, 2, _view_at(out, 8)])
    p = rec.plan((out,))
    assert p.allocs == (((64,), "float32", False),) and p.ws_bytes == 256
    monkeypatch.setattr(plan_mod, "memset_zero", lambda *a: None)

    def new(shape, dtype, zero):
        return "out" if dtype == "float32" else "ws", 1000 if dtype == "float32" else 5000

    assert p.run(9, (100,), new, 0, values=(7, 8)) == ("out",)
    # The input's real pointer + 40, the workspace + 16; the stream buffer is looked
    # up for the replay's stream; only the dynamic step gets the values.
    assert made_for == [3, 9]
    assert k.log == [(9, (140, 5016), (7, 8)), (9, (0x5000_0000 + 9, 1008))]


def test_recorder_rejects_foreign_arrays():
    k = _FakeKernel()
    rec = Recorder([_arr(0x7000_0000)])
    (sx,) = rec.inputs
    with pytest.raises(ValueError, match="neither an input"):
        rec.launch(k, 1, 32, 0, [sx, 1, _arr(0x7000_0000)])


def test_recorder_derives_arrays_from_each_replays_pointers(monkeypatch):
    """Executor.derived (a TMA map from its operand's address): the plan calls make
    once a replay, with the source at that call's address (an input's, plus a view's
    offset; or a workspace part's) and the replay's stream, and launches with what
    make returned."""
    k = _FakeKernel()
    x = _arr(0x7000_0000, n=64)
    calls = []

    def make(src, stream):
        calls.append((src.ptr, src.shape, src.dtype, src.lib, src.device, stream))
        return KernelArray(None, "torch", "int64", (16,), (1,), ptr=0x6000_0000 + src.ptr,
                           device=0)

    rec = Recorder([x])
    (sx,) = rec.inputs
    ws = rec.alloc(sx, (32,), "float32")
    m_in = rec.derived(_view_at(sx, 64, n=8), make, (16,), "int64", 5)
    m_ws = rec.derived(_view_at(ws, 32, n=4), make, (16,), "int64", 5)
    assert calls == [] and m_in.shape == (16,) and m_in.dtype == "int64"
    out = rec.alloc(sx, (64,), "float32")
    rec.launch(k, 1, 32, 5, [m_in, 1, out])
    rec.launch(k, 1, 32, 5, [m_ws, 2, ws])
    p = rec.plan((out,))
    assert p.allocs == (((64,), "float32", False),) and p.ws_bytes == 256
    monkeypatch.setattr(plan_mod, "memset_zero", lambda *a: None)

    def new(shape, dtype, zero):
        return ("out", 1000) if dtype == "float32" else ("ws", 5000)

    for stream, xp in ((9, 100), (4, 300)):
        del calls[:], k.log[:]
        assert p.run(stream, (xp,), new, 0) == ("out",)
        assert calls == [(xp + 64, (8,), "float32", "torch", 0, stream),
                         (5032, (4,), "float32", "torch", 0, stream)]
        assert k.log == [(stream, (0x6000_0000 + xp + 64, 1000)),
                         (stream, (0x6000_0000 + 5032, 5000))]


def test_executor_derives_at_once():
    src = _arr(0x7000_0000)
    got = plan_mod.NOW.derived(src, lambda a, s: (a.ptr, s), (16,), "int64", 3)
    assert got == (0x7000_0000, 3)
