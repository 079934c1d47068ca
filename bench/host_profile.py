"""Where the host time of one op call goes, at a real shape (issue #20's evidence).

For each op (our torch front end beside torch's own), forward + backward in a loop:
- wall clock per iteration back to back (host and GPU together);
- GPU time per iteration with a long ``torch.cuda._sleep`` queued first, so the host
  runs ahead and only the kernels count;
- host time per call while that sleep holds the GPU (a call that waits on the device
  shows up here as the sleep's length);
- a cProfile of the back-to-back loop (top functions by own time);
- the CUDA runtime/driver calls torch's profiler sees;
- with ``--pieces``: host microseconds of each piece of our LayerNorm's path (key,
  allocations, launches, plan replay, the autograd wrapper) beside the floors of an
  empty ``autograd.Function`` and an empty ``torch.library.custom_op`` (no profiler:
  perf_counter over many calls, best of three);
- with ``--floor``: a ladder of ``autograd.Function``s from empty up to the full front
  end (allocations only; + torch's own launches; + our plans; our layer_norm), timed
  back to back in interleaved rounds beside torch's: how much of the gap a Python
  Function leaves to remove (issue #20).

Usage: python bench/host_profile.py [--shape 8192,1024] [--dtype bfloat16] [--iters 200]
       [--out DIR] [--pieces | --detail | --floor]
"""

import argparse
import cProfile
import io
import math
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cases(shape, dtype):
    import torch

    from interop.torch import FusedLayerNorm

    n = shape[-1]
    x = torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)
    g = torch.randn_like(x)
    ours = FusedLayerNorm(n, device="cuda", dtype=dtype)
    ref = torch.nn.LayerNorm(n, device="cuda", dtype=dtype)

    def step(mod):
        def run():
            y = mod(x)
            y.backward(g)
        return run

    return {"layer_norm ours": step(ours), "layer_norm torch": step(ref)}


def _wall(fn, iters):
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def _busy(fn, iters):
    """(GPU us per iteration, host us per iteration) with the GPU held by a sleep."""
    import torch

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # ~1 s of spinning: the host runs ahead of it
    start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host = (time.perf_counter() - t0) / iters * 1e6
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters, host


def _per_call(fn, iters, repeats=3):
    """Best-of-``repeats`` host microseconds per call of ``fn`` over ``iters`` calls."""
    import torch

    for _ in range(10):
        fn()
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / iters / 1e3)
    torch.cuda.synchronize()
    return best


def _floor_ops():
    """(autograd.Function, custom_op) that only allocate: the wrappers' own cost."""
    import torch

    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, g):
            return torch.empty_like(g)

    @torch.library.custom_op("numba_fused_host_profile::empty", mutates_args=())
    def empty_op(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    @empty_op.register_fake
    def _(x):
        return torch.empty_like(x)

    def bwd(ctx, g):
        return torch.empty_like(g)

    empty_op.register_autograd(bwd)
    return Empty.apply, empty_op


def _pieces(shape, dtype, iters):
    """Lines: host us per call of each piece of FusedLayerNorm's path."""
    import importlib

    import torch

    from interop.torch import FusedLayerNorm
    from interop.torch._fast import allocator, raw_stream
    from numba_fused import launch

    tln = importlib.import_module("interop.torch.layer_norm")
    n = shape[-1]
    x = torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)
    g = torch.randn_like(x)
    xd = x.detach()
    ours = FusedLayerNorm(n, device="cuda", dtype=dtype)
    ref = torch.nn.LayerNorm(n, device="cuda", dtype=dtype)
    w, b = ours.weight.detach(), ours.bias.detach()
    y = ours(x)
    y.backward(g)
    fplan = next(iter(tln._FWD_PLANS.values()))
    bplan = next(iter(tln._BWD_PLANS.values()))
    _, mean, rstd = tln._norm_forward(xd, w, b, ours.eps, False)
    dev = x.device
    alloc = allocator(dev)
    stream = raw_stream(dev)
    lib = launch._libcuda()
    step, srcs = fplan.steps[0]
    fptrs = (xd.data_ptr(), w.data_ptr(), b.data_ptr())
    ws = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
    empty_fn, empty_op = _floor_ops()

    # Every array argument of the step (inputs, outputs, workspace) gets a real
    # pointer, as Plan.run would give it: the template's stand-ins are not addresses.
    bufs = list(fptrs)
    keep = []
    for a_shape, a_dtype, a_zero in fplan.allocs:
        arr, ptr = alloc(a_shape, a_dtype, a_zero)
        keep.append(arr)
        bufs.append(ptr)
    if fplan.ws_bytes:
        keep.append(torch.zeros(fplan.ws_bytes, dtype=torch.uint8, device=dev))
        bufs.append(keep[-1].data_ptr())
    step_ptrs = [bufs[i] + off for i, off in srcs]
    step.launch(stream, step_ptrs)
    bind_launch, bind_kernel, _ = step._bind
    bind_buf = step._tls.buf
    bind_stream = launch._cu_stream(stream)

    def launch_only():
        gx, gy, gz, bx, by, bz = step.dims
        bind_launch(bind_kernel, gx, gy, gz, bx, by, bz, step.shared, bind_stream,
                    bind_buf.address, 0)

    def enter():
        prev = launch._enter(lib, 0)
        if prev is not None:
            lib.cuCtxSetCurrent(prev)

    def fwd_key():
        key = (xd.shape, xd.dtype, xd.device, False, False, 1e-5, False,
               tln.aligned16(xd), tln.aligned16(w), tln.aligned16(b))
        return tln._FWD_PLANS.get(key)

    def fwd_bwd(fn):
        def run():
            fn(x).backward(g)
        return run

    def fwd_only(fn):
        def run():
            fn(x)
        return run

    cases = [
        ("python call floor", lambda: None),
        ("x.shape / x.device / x.data_ptr()", lambda: (xd.shape, xd.device, xd.data_ptr())),
        ("torch.empty [M, N]", lambda: torch.empty(shape, dtype=dtype, device=dev)),
        ("torch.empty [M] float32", lambda: torch.empty(shape[0], dtype=torch.float32,
                                                        device=dev)),
        ("plan allocator [M, N]", lambda: alloc(tuple(shape), "bfloat16", False)),
        ("torch.empty_like(x)", lambda: torch.empty_like(xd)),
        ("x.new_empty([M, N])", lambda: xd.new_empty(shape)),
        ("torch.empty [M, N], device index", lambda: torch.empty(shape, dtype=dtype,
                                                                  device=dev.index)),
        ("cuLaunchKernel alone (cuda.bindings)", launch_only),
        ("raw_stream(device)", lambda: raw_stream(dev)),
        ("fwd plan key + lookup", fwd_key),
        ("_enter + restore", enter),
        ("PreparedLaunch.launch (fwd kernel)", lambda: step.launch(stream, step_ptrs)),
        ("memset_zero 4 KiB", lambda: launch.memset_zero(ws.data_ptr(), 4096, stream, 0)),
        ("fwd Plan.run", lambda: fplan.run(stream, fptrs, alloc, 0)),
        ("bwd Plan.run", lambda: bplan.run(stream, (g.data_ptr(), xd.data_ptr(), w.data_ptr(),
                                                    b.data_ptr(), mean.data_ptr(),
                                                    rstd.data_ptr()), alloc, 0)),
        ("_norm_forward", lambda: tln._norm_forward(xd, w, b, 1e-5, False)),
        ("_norm_backward", lambda: tln._norm_backward(g, xd, w, b, mean, rstd, False, False)),
        ("layer_norm() fwd, no grad", lambda: tln.layer_norm(xd, (n,), w, b)),
        ("FusedLayerNorm fwd (graph built)", fwd_only(ours)),
        ("torch LayerNorm fwd (graph built)", fwd_only(ref)),
        ("empty autograd.Function fwd (graph built)", fwd_only(empty_fn)),
        ("empty custom_op fwd (graph built)", fwd_only(empty_op)),
        ("empty autograd.Function fwd+bwd", fwd_bwd(empty_fn)),
        ("empty custom_op fwd+bwd", fwd_bwd(empty_op)),
        ("FusedLayerNorm fwd+bwd", fwd_bwd(ours)),
        ("torch LayerNorm fwd+bwd", fwd_bwd(ref)),
    ]
    lines = [f"## host us per call, {shape} {dtype}, best of 3 x {iters} calls (no profiler)",
             "| piece | us |", "|---|---|"]
    for name, fn in cases:
        lines.append(f"| {name} | {_per_call(fn, iters):.1f} |")
    return lines


def _detail(shape, dtype, iters):
    """Lines: where FusedLayerNorm's backward time goes, measured inside autograd's
    device thread (cProfile on the main thread does not see it), and a cProfile of
    the forward wrapper."""
    import importlib

    import torch

    from interop.torch import FusedLayerNorm
    from interop.torch import layer_norm as ln_fn

    tln = importlib.import_module("interop.torch.layer_norm")
    n = shape[-1]
    x = torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)
    g = torch.randn_like(x)
    ours = FusedLayerNorm(n, device="cuda", dtype=dtype)
    ref = torch.nn.LayerNorm(n, device="cuda", dtype=dtype)
    lines = []
    prof = cProfile.Profile()
    marks = {}
    orig = tln._LayerNormFunction.__dict__["backward"]

    def wrapped(ctx, grad_y):
        marks["in"] = time.perf_counter_ns()
        prof.enable()
        try:
            return orig.__func__(ctx, grad_y)
        finally:
            prof.disable()
            marks["out"] = time.perf_counter_ns()

    def split(make_y, label, pause=0.0):
        fwd = handoff = body = back = paused = 0
        marks["in"] = marks["out"] = 0
        for i in range(iters + 10):
            if pause:
                p0 = time.perf_counter_ns()
                time.sleep(pause)
                paused += time.perf_counter_ns() - p0
            if i == 10:
                torch.cuda.synchronize()
                start = time.perf_counter_ns()
            t0 = time.perf_counter_ns()
            y = make_y()
            t1 = time.perf_counter_ns()
            y.backward(g)
            t2 = time.perf_counter_ns()
            if i >= 10:
                fwd += t1 - t0
                if marks["in"]:
                    handoff += marks["in"] - t1
                    body += marks["out"] - marks["in"]
                    back += t2 - marks["out"]
                else:
                    handoff += t2 - t1
        total = time.perf_counter_ns() - start - paused * iters // (iters + 10)
        torch.cuda.synchronize()
        lines.append("| " + " | ".join([label] + [f"{v / iters / 1e3:.1f}" for v in
                                                    (total, fwd, handoff, body, back)]) + " |")

    class Marked(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return torch.empty_like(t)

        @staticmethod
        def backward(ctx, grad):
            marks["in"] = time.perf_counter_ns()
            out = torch.empty_like(grad)
            marks["out"] = time.perf_counter_ns()
            return out

    lines += [f"## one fwd+bwd iteration split at the Python backward's edges, {shape} {dtype}, "
              f"{iters} iterations back to back (us per iteration)",
              "| case | loop total | forward | y.backward() to backward body (all of "
              "y.backward() where no Python body) | body | body end to y.backward() return |",
              "|---|---|---|---|---|---|"]
    split(lambda: Marked.apply(x), "empty autograd.Function")
    tln._LayerNormFunction.backward = staticmethod(wrapped)
    try:
        split(lambda: ours(x), "FusedLayerNorm (body under cProfile)")

        def plain(ctx, grad_y):
            marks["in"] = time.perf_counter_ns()
            try:
                return orig.__func__(ctx, grad_y)
            finally:
                marks["out"] = time.perf_counter_ns()

        tln._LayerNormFunction.backward = staticmethod(plain)
        split(lambda: ours(x), "FusedLayerNorm")
        split(lambda: ours(x), "FusedLayerNorm, 0.5 ms sleep before each forward (not counted)",
              pause=5e-4)
        fmarks = []
        orig_fwd = tln._LayerNormFunction.__dict__["forward"]

        def fwd_marked(ctx, *args):
            t0 = time.perf_counter_ns()
            out = orig_fwd.__func__(ctx, *args)
            fmarks.append(time.perf_counter_ns() - t0)
            return out

        tln._LayerNormFunction.forward = staticmethod(fwd_marked)
        try:
            split(lambda: ours(x), "FusedLayerNorm (forward body timed)")
        finally:
            tln._LayerNormFunction.forward = orig_fwd
        fb = sorted(fmarks[10:])
        lines.append(f"| (forward body alone in that loop: median {fb[len(fb) // 2] / 1e3:.1f}, "
                     f"mean {sum(fb) / len(fb) / 1e3:.1f}) | | | | | |")
    finally:
        tln._LayerNormFunction.backward = orig
    marks["in"] = 0
    split(lambda: ref(x), "torch LayerNorm")
    split(lambda: ref(x), "torch LayerNorm, 0.5 ms sleep before each forward (not counted)",
          pause=5e-4)
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    lines.append(f"## cProfile inside the backward body (device thread), {iters} calls\n"
                 f"{s.getvalue()}")
    xd, w, b = x.detach(), ours.weight.detach(), ours.bias.detach()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(iters):
        ln_fn(xd, (n,), w, b)
    torch.cuda.synchronize()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    lines.append(f"## cProfile of layer_norm() forward, no grad, {iters} calls\n{s.getvalue()}")
    return lines


def _floor(shape, dtype, iters, rounds=5):
    """Lines: LayerNorm fwd+bwd per iteration, back to back, for torch and a ladder of
    Functions (median and best of ``rounds`` interleaved rounds of ``iters``)."""
    import importlib
    import statistics

    import torch

    from interop.torch import FusedLayerNorm
    from interop.torch._fast import allocator, function_apply

    tln = importlib.import_module("interop.torch.layer_norm")
    n = shape[-1]
    m = math.prod(shape) // n
    dev = torch.device("cuda", torch.cuda.current_device())
    x = torch.randn(m, n, device=dev, dtype=dtype, requires_grad=True)
    g = torch.randn_like(x)
    ours = FusedLayerNorm(n, device=dev, dtype=dtype)
    ref = torch.nn.LayerNorm(n, device=dev, dtype=dtype)
    w, b = ours.weight, ours.bias
    tln._FWD_PLANS.clear()
    tln._BWD_PLANS.clear()
    ours(x).backward(g)
    fplan = next(iter(tln._FWD_PLANS.values()))
    bplan = next(iter(tln._BWD_PLANS.values()))
    alloc = allocator(dev)
    stream = torch._C._cuda_getCurrentRawStream
    d = dev.index

    class Outputs(torch.autograd.Function):
        """Allocates y and the three gradients, nothing else."""

        @staticmethod
        def forward(ctx, x, w, b):
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, gy):
            return torch.empty_like(gy), torch.empty_like(w), torch.empty_like(b)

    class Allocs(torch.autograd.Function):
        """Our plans' allocations (y, mean, rstd; grad_x, workspace, dW, dB) and
        saved tensors, no launch."""

        @staticmethod
        def forward(ctx, x, w, b):
            y = torch.empty_like(x)
            mean = torch.empty(m, dtype=torch.float32, device=dev)
            rstd = torch.empty(m, dtype=torch.float32, device=dev)
            ctx.save_for_backward(x, w, b, mean, rstd)
            return y

        @staticmethod
        def backward(ctx, gy):
            ctx.saved_tensors
            torch.empty(max(bplan.ws_bytes, 1), dtype=torch.uint8, device=dev)
            return torch.empty_like(gy), torch.empty_like(w), torch.empty_like(b)

    class TorchLaunches(Allocs):
        """Allocs plus three cheap torch kernels (torch's own launch cost)."""

        @staticmethod
        def forward(ctx, x, w, b):
            return Allocs.forward(ctx, x, w, b).zero_()

        @staticmethod
        def backward(ctx, gy):
            gx, gw, gb = Allocs.backward(ctx, gy)
            gx.zero_()
            gw.zero_()
            return gx, gw, gb

    class Plans(torch.autograd.Function):
        """Our plans replayed with no other glue (no checks, keys or casts)."""

        @staticmethod
        def forward(ctx, x, w, b):
            y, mean, rstd = fplan.run(stream(d), (x.data_ptr(), w.data_ptr(), b.data_ptr()),
                                      alloc, d)
            ctx.save_for_backward(x, w, b, mean, rstd)
            return y

        @staticmethod
        def backward(ctx, gy):
            x, w, b, mean, rstd = ctx.saved_tensors
            return bplan.run(stream(d), (gy.data_ptr(), x.data_ptr(), w.data_ptr(),
                                         b.data_ptr(), mean.data_ptr(), rstd.data_ptr()),
                             alloc, d)

    def through(fn):
        fn = function_apply(fn)
        return lambda: fn(x, w, b).backward(g)

    cases = {
        "torch nn.LayerNorm": lambda: ref(x).backward(g),
        "torch F.layer_norm": lambda: torch.nn.functional.layer_norm(x, (n,), w, b).backward(g),
        "Function: allocates y, grad_x, dW, dB only": through(Outputs),
        "Function: our 7 allocations + saves, no launch": through(Allocs),
        "Function: that + 3 torch kernels (zero_)": through(TorchLaunches),
        "Function: our plans, no other glue": through(Plans),
        "ours layer_norm()": lambda: tln.layer_norm(x, (n,), w, b).backward(g),
        "ours FusedLayerNorm": lambda: ours(x).backward(g),
    }
    for fn in cases.values():
        for _ in range(20):
            fn()
    walls = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fn in cases.items():
            walls[k].append(_wall(fn, iters))
    lines = [f"## fwd+bwd back to back, {shape} {dtype}, us per iteration: median and best "
             f"of {rounds} interleaved rounds x {iters}", "| case | median | best |",
             "|---|---|---|"]
    for k, v in walls.items():
        lines.append(f"| {k} | {statistics.median(v):.1f} | {min(v):.1f} |")
    return lines


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8192,1024")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default=None, help="folder for profile.txt")
    ap.add_argument("--pieces", action="store_true",
                    help="only the per-piece host table (no profiles)")
    ap.add_argument("--detail", action="store_true",
                    help="only the backward split and the wrapper profiles")
    ap.add_argument("--floor", action="store_true",
                    help="only the ladder of Functions against torch (issue #20)")
    args = ap.parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    dtype = getattr(torch, args.dtype)
    lines = [f"# host profile, {torch.cuda.get_device_name()}, shape {shape}, {args.dtype}"]
    if args.floor:
        _write(lines + _floor(shape, dtype, args.iters), args.out)
        return
    if args.pieces or args.detail:
        lines += _pieces(shape, dtype, args.iters) if args.pieces else []
        lines += _detail(shape, dtype, args.iters) if args.detail else []
        _write(lines, args.out)
        return
    cases = _cases(shape, dtype)
    for name, fn in cases.items():
        wall = _wall(fn, args.iters)
        gpu, host = _busy(fn, min(args.iters, 50))
        lines.append(f"{name}: wall {wall:.1f} us/iter back to back; GPU {gpu:.1f} us/iter; "
                     f"host {host:.1f} us/iter with the GPU busy")
    for name, fn in cases.items():
        if "ours" not in name:
            continue
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.iters):
            fn()
        torch.cuda.synchronize()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
        lines.append(f"## cProfile {name}, {args.iters} iterations (tottime)\n{s.getvalue()}")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(40)
        lines.append(f"## cProfile {name} (cumulative)\n{s.getvalue()}")
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        lines.append(f"## torch.profiler {name}, 20 iterations\n"
                     + p.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    _write(lines, args.out)


def _write(lines, out):
    text = "\n".join(lines)
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "host_profile.txt"), "w") as f:
            f.write(text)
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
