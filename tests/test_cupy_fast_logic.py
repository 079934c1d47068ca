"""``interop.cupy._fast.cached``'s bookkeeping without a GPU: the module loaded against a
stand-in ``cupy`` (arrays that only carry a shape, dtype, strides, size and a data
pointer; a recording stream and device), so CPU CI checks what reaches a plan and
what takes the validating path. The real plans run in tests/test_cupy_fast.py (GPU)."""

import contextlib
import importlib.util
import os
import sys
import types

import numpy as np
import pytest

from numba_fused.plan import PlanCache

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Mem:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


class _Array:
    """What the fast path reads of a cupy.ndarray."""

    def __init__(self, shape, ptr=4096, device=0, dtype="float16", strides=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.size = int(np.prod(self.shape))
        self.strides = strides or tuple(
            int(np.prod(self.shape[i + 1:])) * self.dtype.itemsize for i in range(len(shape)))
        self.data = _Mem(ptr, device)


class _Sub(_Array):
    pass


@pytest.fixture
def fast(monkeypatch):
    """The module, loaded against the stand-in; ``fast.log`` records the devices
    entered and the streams taken."""
    log = []
    current = [0]

    @contextlib.contextmanager
    def device(d):
        log.append(("enter", d))
        old, current[0] = current[0], d
        try:
            yield
        finally:
            current[0] = old

    class Stream:
        @property
        def ptr(self):
            return 1000 + current[0]

    cuda = types.SimpleNamespace(Device=device, get_current_stream=Stream,
                                 runtime=types.SimpleNamespace(getDevice=lambda: current[0]))
    fake = types.ModuleType("cupy")
    fake.ndarray = _Array
    fake.cuda = cuda
    fake.empty = lambda shape, dtype: _Array(shape, dtype=dtype)
    fake.zeros = fake.empty
    monkeypatch.setitem(sys.modules, "cupy", fake)
    spec = importlib.util.spec_from_file_location(
        "cupy_fast_under_test", os.path.join(_ROOT, "interop", "cupy", "_fast.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.ENABLED[0] = True
    mod.log = log
    return mod


class _Plan:
    def __init__(self):
        self.runs = []

    def run(self, stream, ptrs, new, device, values):
        self.runs.append((stream, list(ptrs), device, values))
        return ("replayed",)


class _Op:
    """An op's slow path and recorder, counting their calls."""

    def __init__(self, fail=None):
        self.slow_calls = self.records = 0
        self.fail = fail
        self.plan = _Plan()

    def slow(self):
        self.slow_calls += 1
        if self.fail:
            raise self.fail
        return ("array-level",)

    def record(self):
        self.records += 1
        return self.plan


def test_second_call_replays_with_new_pointers(fast):
    cache, op = PlanCache(), _Op()
    x, w = _Array((4, 64), ptr=4096), _Array((64,), ptr=8192)
    assert fast.cached(cache, (x, w, None), (1e-5, True), op.slow, op.record) == ("array-level",)
    assert (op.slow_calls, op.records) == (1, 1)
    x2, w2 = _Array((4, 64), ptr=4096 * 7), _Array((64,), ptr=8192 * 3)
    assert fast.cached(cache, (x2, w2, None), (1e-5, True), op.slow, op.record) == ("replayed",)
    assert op.slow_calls == 1
    assert op.plan.runs == [(1000, [4096 * 7, 8192 * 3, 0], 0, ())]


@pytest.mark.parametrize("change", ["shape", "dtype", "strides", "align", "device", "absent"])
def test_signature_parts_miss(fast, change):
    cache, op = PlanCache(), _Op()
    fast.cached(cache, (_Array((4, 64)), _Array((64,))), (), op.slow, op.record)
    other = {"shape": (_Array((8, 32)), _Array((32,))),
             "dtype": (_Array((4, 64), dtype="float32"), _Array((64,), dtype="float32")),
             "strides": (_Array((4, 64), strides=(256, 2)), _Array((64,))),
             "align": (_Array((4, 64), ptr=4096 + 2), _Array((64,))),
             "device": (_Array((4, 64), device=1), _Array((64,), device=1)),
             "absent": (_Array((4, 64)), None)}[change]
    fast.cached(cache, other, (), op.slow, op.record)
    assert op.slow_calls == 2 and not op.plan.runs


def test_flags_keep_their_types(fast):
    """deterministic=1 must reach the array-level check (which refuses it) even where
    a plan exists for True (1 == True, hash(1) == hash(True))."""
    cache, ok = PlanCache(), _Op()
    x = _Array((4, 64))
    fast.cached(cache, (x,), (True,), ok.slow, ok.record)
    bad = _Op(fail=TypeError("deterministic must be a bool"))
    with pytest.raises(TypeError, match="deterministic"):
        fast.cached(cache, (x,), (1,), bad.slow, bad.record)
    assert bad.records == 0 and len(cache) == 1


def test_failed_call_is_never_cached(fast):
    cache, op = PlanCache(), _Op(fail=ValueError("bad"))
    for _ in range(3):
        with pytest.raises(ValueError):
            fast.cached(cache, (_Array((4, 64)),), (), op.slow, op.record)
    assert (op.slow_calls, op.records, len(cache)) == (3, 0, 0)


@pytest.mark.parametrize("arrays", [(_Sub((4, 64)),), (np.zeros((4, 64), np.float16),),
                                    (_Array((4, 64)), _Array((0,)))])
def test_other_types_and_empty_arrays_take_the_array_path(fast, arrays):
    cache, op = PlanCache(), _Op()
    for _ in range(2):
        assert fast.cached(cache, arrays, (), op.slow, op.record) == ("array-level",)
    assert (op.slow_calls, op.records, len(cache)) == (2, 0, 0)


def test_disabled_records_nothing(fast):
    cache, op = PlanCache(), _Op()
    fast.ENABLED[0] = False
    for _ in range(2):
        fast.cached(cache, (_Array((4, 64)),), (), op.slow, op.record)
    assert (op.slow_calls, op.records) == (2, 0)


def test_values_are_taken_on_replay_only_and_may_raise(fast):
    cache, op = PlanCache(), _Op()
    x = _Array((4, 64))
    taken = []

    def values():
        taken.append(1)
        return (7, 8)

    fast.cached(cache, (x,), (), op.slow, op.record, values=values)
    assert not taken
    fast.cached(cache, (x,), (), op.slow, op.record, values=values)
    assert taken == [1] and op.plan.runs[-1][3] == (7, 8)

    def bad():
        raise ValueError("seed must be in [0, 2**64 - 1]")

    with pytest.raises(ValueError, match="seed"):
        fast.cached(cache, (x,), (), op.slow, op.record, values=bad)
    assert len(op.plan.runs) == 1


def test_replay_runs_on_the_inputs_device(fast):
    cache, op = PlanCache(), _Op()
    args = (_Array((4, 64), device=1),)
    fast.cached(cache, args, (), op.slow, op.record)
    fast.cached(cache, args, (), op.slow, op.record)
    # Current device 0: the replay enters device 1 and takes its current stream.
    assert fast.log == [("enter", 1)]
    assert op.plan.runs == [(1001, [4096], 1, ())]


def test_allocator_poisons_like_the_array_path(fast):
    from interop.dlpack import poison_outputs

    filled = []
    _Array.fill = lambda self, v: filled.append((self.dtype.name, v))
    try:
        with poison_outputs():
            fast._new((3,), "float32", False)
            fast._new((3,), "uint8", False)
            fast._new((3,), "int32", True)
        fast._new((3,), "float16", False)
    finally:
        del _Array.fill
    assert filled[0][0] == "float32" and np.isnan(filled[0][1])
    assert filled[1:] == [("uint8", 255)]


def test_seeded_checks_seed_and_offset(fast):
    words = fast.seeded(lambda s, o: (s, o), 2**64 - 1, 3)
    assert words() == (2**64 - 1, 3)
    for seed, offset, err in ((-1, 0, ValueError), (1.5, 0, TypeError), (True, 0, TypeError),
                              (0, 2**64, ValueError), (0, np.float32(2), TypeError)):
        with pytest.raises(err, match="seed" if seed != 0 else "offset"):
            fast.seeded(lambda s, o: (s, o), seed, offset)()


def test_signature_without_a_plan_keeps_the_array_path(fast):
    """record() returning None (a gated unit's weights that are not read in place):
    the signature always takes the array-level path, and is not recorded again."""
    cache, op = PlanCache(), _Op()
    op.record = lambda: (setattr(op, "records", op.records + 1), None)[1]
    x = _Array((4, 64))
    for _ in range(3):
        assert fast.cached(cache, (x,), (), op.slow, op.record) == ("array-level",)
    assert (op.slow_calls, op.records, len(cache)) == (3, 1, 1)
    other = _Op()
    assert fast.cached(cache, (_Array((4, 32)),), (), other.slow, other.record) == (
        "array-level",)
    assert fast.cached(cache, (_Array((4, 32)),), (), other.slow, other.record) == ("replayed",)
