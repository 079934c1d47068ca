"""numba_fused.plan's bookkeeping, with a stand-in kernel (runs everywhere): which
buffer feeds each array argument, alignment seen by the launcher, outputs, zeroed
workspaces. The real replay is checked on the GPU by tests/test_fast_path.py."""

from numba import types

from interop.dlpack import KernelArray
from numba_fused.plan import Recorder


class _Prepared:
    def __init__(self, log, args):
        self.log = log
        self.args = args

    def launch(self, stream, ptrs):
        self.log.append((stream, tuple(ptrs)))


class _FakeKernel:
    argtypes = (types.Array(types.float32, 1, "C"), types.int64, types.Array(types.float32, 1, "C"))
    _array_idx = (0, 2)

    def __init__(self):
        self.log = []

    def prepare(self, grid, block, shared, args):
        return _Prepared(self.log, args)


def _arr(ptr, n=8, dtype="float32"):
    return KernelArray(None, "torch", dtype, (n,), (1,), ptr=ptr, device=0)


def test_recorder_maps_buffers_and_replays():
    k = _FakeKernel()
    x, w = _arr(0x7000_0004), _arr(0x9000_0000)
    rec = Recorder([x, None, w])
    sx, none, sw = rec.inputs
    assert none is None
    # The launcher sees each input's alignment, not its address.
    assert sx.ptr % 16 == 4 and sw.ptr % 16 == 0 and sx.ptr != x.ptr
    out = rec.alloc(sx, (8,), "float32")
    ws = rec.alloc(sx, (3,), "int32", zero=lambda a: None)
    assert out.ptr % 16 == 0 and out.device == 0 and out.shape == (8,)
    rec.launch(k, 1, 32, 0, [sx, 5, out])
    rec.launch(k, 1, 32, 0, [ws, 6, sw])
    plan = rec.plan((out, None))
    assert plan.allocs == (((8,), "float32", False), ((3,), "int32", True))
    made = []

    def new(shape, dtype, zero):
        made.append((shape, dtype, zero))
        return f"array{len(made)}", 1000 * len(made)

    res = plan.run(77, (11, 0, 33), new)
    assert res == ("array1", None)
    assert k.log == [(77, (11, 1000)), (77, (2000, 33))]
    assert made == [((8,), "float32", False), ((3,), "int32", True)]
