"""Timing method shared by the benchmark scripts (SPEC "Benchmarks").

- CUDA events around the timed call, warm-up first, median (and p20/p80) of
  ``reps`` runs;
- inputs rotated among enough copies that together they exceed the L2 (so a run
  does not read what the previous one left in cache);
- random data, never zeros;
- the device copy bandwidth measured in the same process, to express memory-bound
  ops as a fraction of what the card really moves;
- host launch cost: wall time per call of a tiny problem, no synchronisation.
"""

import statistics
import time

__all__ = ["Timing", "time_cuda", "copy_bandwidth", "host_overhead_us", "rotations", "gpu_info"]

L2_BYTES = 60 * 2**20


class Timing(dict):
    """{'median_ms', 'p20_ms', 'p80_ms', 'reps'}"""


def rotations(bytes_per_set, budget=L2_BYTES * 3):
    """How many input sets to rotate so that they overflow the L2 several times."""
    return max(2, min(32, int(budget // max(1, bytes_per_set)) + 1))


def _quantile(sorted_vals, q):
    idx = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[idx]


def time_cuda(fn, arg_sets, reps=100, warmup=10):
    """Median time of ``fn(*args)`` over ``reps`` runs, cycling through ``arg_sets``."""
    import torch

    for i in range(warmup):
        fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        args = arg_sets[i % len(arg_sets)]
        starts[i].record()
        fn(*args)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return Timing(median_ms=statistics.median(times), p20_ms=_quantile(times, 0.2),
                  p80_ms=_quantile(times, 0.8), reps=reps)


def copy_bandwidth(nbytes=2 * 2**30, reps=20):
    """Device-to-device copy rate in GB/s, counting bytes read plus bytes written."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    t = time_cuda(lambda: dst.copy_(src), [()], reps=reps, warmup=3)
    del src, dst
    return 2 * nbytes / (t["median_ms"] * 1e-3) / 1e9


def host_overhead_us(fn, calls=2000):
    """Host-side microseconds per call of ``fn()`` (a tiny problem): launches are
    queued without synchronisation, so this is what the Python side costs."""
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def gpu_info():
    import torch

    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "sm_count": p.multi_processor_count,
            "memory_gb": round(p.total_memory / 2**30, 1)}
