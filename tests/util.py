"""Shared test helpers: where test tensors live, tolerances, relative error."""

import numpy as np
from numba import config

from numba_fused.dtypes import to_float64

SIMULATOR = bool(config.ENABLE_CUDASIM)

# docs/API.md, "Conventions": ||out - ref|| / ||ref|| against float64.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}
DTYPES = ("float32", "float16", "bfloat16")


def device():
    """'cpu' under the simulator (kernels take host data there), else 'cuda'."""
    return "cpu" if SIMULATOR else "cuda"


def torch_dtype(name):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def torch_act(activation):
    """torch's own activation named ``activation`` (numba_fused.activations' names), as a
    callable of one tensor."""
    import torch.nn.functional as F

    from numba_fused.activations import LEAKY_SLOPE

    return {"none": lambda z: z, "relu": F.relu, "gelu": F.gelu,
            "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
            "squared_relu": lambda z: F.relu(z) ** 2,
            "leaky_relu": lambda z: F.leaky_relu(z, LEAKY_SLOPE), "silu": F.silu}[activation]


def rel_err(out, ref):
    """||out - ref|| / ||ref|| in float64; inf if out has a NaN/inf where ref does not."""
    out = to_float64(out)
    ref = to_float64(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if not np.all(np.isfinite(out) == np.isfinite(ref)):
        return float("inf")
    fin = np.isfinite(ref)
    if not np.array_equal(out[~fin], ref[~fin]):
        return float("inf")
    den = np.linalg.norm(ref[fin])
    num = np.linalg.norm(out[fin] - ref[fin])
    if den == 0.0:
        return float(num)
    return float(num / den)


def assert_close(out, ref, dtype, what="", tol=None):
    tol = TOL[dtype] if tol is None else tol
    err = rel_err(out, ref)
    assert err < tol, f"{what}: relative error {err:.3e} >= {tol:.1e} ({dtype})"
    return err


def compile_backend():
    """torch.compile backend for the custom-op tests: inductor on a GPU; under the
    simulator (CPU tensors, which inductor would compile C++ around) aot_eager, which
    traces the same graphs (Dynamo, fake tensors, AOTAutograd)."""
    return "aot_eager" if SIMULATOR else "inductor"


def compiled_targets(fn, *args):
    """Check that ``fn(*args)`` compiles to one graph with no break, and return the
    call targets of that graph (strings such as 'numba_fused.layer_norm_fwd.default')."""
    import torch
    import torch._dynamo

    explain = torch._dynamo.explain(fn)(*args)
    assert explain.graph_break_count == 0 and explain.graph_count == 1, explain.break_reasons
    seen = set()

    def backend(gm, example_inputs):
        seen.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    torch._dynamo.reset()
    return seen


def griddep_pair_reports(pairs):
    """ptxas reports of ``(kernel, instruction)`` pairs listed plain form first, then
    its dependent-launch form: each dependent form's PTX has its griddepcontrol
    ``instruction`` and the plain form has no griddepcontrol at all. Compiles offline
    (sm_90, no GPU needed); returns the reports in the pairs' order."""
    from numba_fused.registry import offline_compile, ptxas_report

    reports = []
    with offline_compile():
        for i, (kernel, instruction) in enumerate(pairs):
            ptx = kernel.ptx()
            assert (instruction in ptx) == (i % 2 == 1), kernel.name
            assert ("griddepcontrol" in ptx) == (i % 2 == 1), kernel.name
            reports.append(ptxas_report(ptx))
    return reports


def kernel_attr(kernel, attr):
    """A launch.Kernel's function attribute ``attr`` (a CUfunction_attribute name, e.g.
    "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT") on device 0, as the driver
    reads it (cuKernelGetAttribute)."""
    from numba.cuda.cudadrv.driver import binding, driver

    cufunc = kernel.function(0)[0]
    return int(driver.cuKernelGetAttribute(getattr(binding.CUfunction_attribute, attr),
                                           cufunc.handle, cufunc.device.id))


def record_calls(monkeypatch, owner, name):
    """Wrap ``owner.name`` (a module's function) so each call's positional arguments
    are appended to the returned list; the real function still runs."""
    calls = []
    real = getattr(owner, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls
