"""The 16-bit dropout backward ('none', 16384 x 4096 fp16, p = 0.1) timed as
tune_dropout times it (CUDA events around each call, the stream first held by a GPU
sleep so every call is queued), with and without the bias grad, under an nsys CUDA
trace: the trace gives each launch's own duration and the gaps, the events the
loop's. Twenty-ninth session: ncu read the kernel 73.06 us alone with the bias grad,
tune_dropout's loop 76.3. The lent image has no nsys: torch.profiler (CUPTI) records
the kernels; each launch's duration and the gap before it are printed.

    python3 bench/ab/dropout_bwd_trace.py      # DROPOUT_FILL=k: LaunchConfig(fill=k)
                                               # DROPOUT_STAGES=s: LaunchConfig(stages=s)
                                               # DROPOUT_CFG='{...}': more fields, JSON
                                               # DROPOUT_CLEAN=1: a 512 MB read first

DROPOUT_CLEAN: before each call a reduction reads a 512 MB buffer, so the call starts
with an L2 of clean lines rather than its predecessor's dirty grad_x.
"""
import json
import os
import statistics

import torch

import numba_fused.dropout as D

M, N, P, REPS = 16384, 4096, 0.1, 20


def main():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _loops()
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA"
                      and e.time_range.elapsed_us() > 1
                      and "dropout" in e.name), key=lambda e: e.time_range.start)
    prev = None
    for e in kernels:
        gap = e.time_range.start - prev if prev is not None else 0.0
        prev = e.time_range.end
        print(f"{e.time_range.elapsed_us():8.1f} us  gap {gap:8.1f}  {e.name}")


def _loops():
    fill = os.environ.get("DROPOUT_FILL")
    stages = os.environ.get("DROPOUT_STAGES")
    extra = json.loads(os.environ.get("DROPOUT_CFG") or "{}")
    cfg = D.LaunchConfig(fill=int(fill) if fill else None,
                         stages=int(stages) if stages else None, **extra)
    clean = torch.empty(128 << 20, device="cuda") if os.environ.get("DROPOUT_CLEAN") else None
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = [tuple(torch.randn(M, N, device="cuda", dtype=torch.float16, generator=gen)
                  for _ in range(2)) + (torch.randn(N, device="cuda", dtype=torch.float16,
                                                    generator=gen),) for _ in range(3)]
    for need in (True, False, True, False):
        def call(i):
            g, x, b = sets[i % 3]
            if clean is not None:
                clean.sum()
            return D.dropout_bias_act_backward(g, x, b, P, 1, 0, "none", need_bias_grad=need,
                                               config=cfg)

        for i in range(5):
            call(i)
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
        torch.cuda._sleep(200_000_000)
        for i in range(REPS):
            starts[i].record()
            call(i)
            ends[i].record()
        torch.cuda.synchronize()
        t = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3
        print(f"need_bias_grad={need}: events median {t:.1f} us", flush=True)


if __name__ == "__main__":
    main()
