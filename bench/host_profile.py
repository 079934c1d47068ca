"""Where the host time of one op call goes, at a real shape (issue #20's evidence).

For each op (our torch front end beside torch's own), forward + backward in a loop:
- wall clock per iteration back to back (host and GPU together);
- GPU time per iteration with a long ``torch.cuda._sleep`` queued first, so the host
  runs ahead and only the kernels count;
- host time per call while that sleep holds the GPU (a call that waits on the device
  shows up here as the sleep's length);
- a cProfile of the back-to-back loop (top functions by own time);
- the CUDA runtime/driver calls torch's profiler sees.

Usage: python bench/host_profile.py [--shape 8192,1024] [--dtype bfloat16] [--iters 200]
       [--out DIR]
"""

import argparse
import cProfile
import io
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


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8192,1024")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default=None, help="folder for profile.txt")
    args = ap.parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    dtype = getattr(torch, args.dtype)
    lines = [f"# host profile, {torch.cuda.get_device_name()}, shape {shape}, {args.dtype}"]
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
    text = "\n".join(lines)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "host_profile.txt"), "w") as f:
            f.write(text)
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
