"""Test-suite setup: which tests run where.

- Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, CPU CI) every test runs
  except those marked ``gpu`` (real hardware only) and ``ptx`` (real NVVM).
- Without the simulator and without a GPU, only ``ptx`` tests run (compiling every
  kernel to PTX needs NVVM, not a device).
- On a GPU everything runs except ``sim``-marked tests.

``NUMBA_FUSED_TEST_ON=split,pairs,skinny`` / ``NUMBA_FUSED_TEST_OFF=...`` run the
suite with those default-path switches (``linear_act.SPLITK_BY_DEFAULT``,
``linear_act.GATED_PAIRS_EVERYWHERE``, ``linear_act.SKINNY_BY_DEFAULT``) on / off:
the run that verifies a path before it becomes the default, and the paths the
defaults replaced (all three on since the eighty-third session).
"""

import os

import pytest
from numba import config

SIMULATOR = bool(config.ENABLE_CUDASIM)


def _gpu_present():
    if SIMULATOR:
        return False
    from numba import cuda

    return cuda.is_available()


GPU = _gpu_present()


_TEST_ON = {"split": "SPLITK_BY_DEFAULT", "pairs": "GATED_PAIRS_EVERYWHERE",
            "skinny": "SKINNY_BY_DEFAULT"}


def _switches(var):
    names = [n for n in os.environ.get(var, "").split(",") if n]
    bad = sorted(set(names) - set(_TEST_ON))
    if bad:
        raise pytest.UsageError(f"{var}: unknown {bad}, expected some of {sorted(_TEST_ON)}")
    return names


def pytest_configure(config):
    on, off = _switches("NUMBA_FUSED_TEST_ON"), _switches("NUMBA_FUSED_TEST_OFF")
    if set(on) & set(off):
        raise pytest.UsageError(f"NUMBA_FUSED_TEST_ON and _OFF both name "
                                f"{sorted(set(on) & set(off))}")
    if on or off:
        from numba_fused import linear_act

        for names, value in ((on, True), (off, False)):
            for name in names:
                setattr(linear_act, _TEST_ON[name], value)


def pytest_report_header(config):
    mode = "CUDA simulator" if SIMULATOR else ("GPU" if GPU else "no GPU (PTX compile only)")
    extra = [f"{word}: {os.environ[var]}" for word, var in
             (("on", "NUMBA_FUSED_TEST_ON"), ("off", "NUMBA_FUSED_TEST_OFF"))
             if os.environ.get(var)]
    return "; ".join([f"numba-fused test mode: {mode}"] + extra)


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a real CUDA GPU")
    skip_ptx = pytest.mark.skip(reason="PTX compile runs without the simulator")
    skip_sim = pytest.mark.skip(reason="simulator-only test")
    skip_nogpu = pytest.mark.skip(reason="no GPU and no simulator: set NUMBA_ENABLE_CUDASIM=1")
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        if "ptx" in marks:
            if SIMULATOR:
                item.add_marker(skip_ptx)
            continue
        if "gpu" in marks and not GPU:
            item.add_marker(skip_gpu)
        elif "sim" in marks and not SIMULATOR:
            item.add_marker(skip_sim)
        elif not SIMULATOR and not GPU:
            item.add_marker(skip_nogpu)
