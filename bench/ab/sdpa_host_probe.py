"""Where does ``interop.torch.scaled_dot_product_attention``'s no-grad call spend its
time? (seventy-seventh session: `bench/launch_cost.py` read 241 us a call on the lent
H100's host, against 32 when its plans landed and 24 for ``interop.cupy``'s plan.)

On tiny fp16 inputs ``[1, 2, 16, 64]`` (torch's [B, H, S, D]): the plan cache's size
after warm-up, host us a call back to back (no sync), wall us a call with a sync
after each, GPU us a call (CUDA events around 200 calls queued behind a GPU sleep),
and a cProfile of 300 calls (top 20 by cumulative time). The same for the kernels'
own layout ([B, S, H, D] contiguous, through ``interop.torch.attention._run_forward``).

    python3 bench/ab/sdpa_host_probe.py
"""

import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _synced_us(fn, calls):
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def _gpu_us(fn, calls):
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(2e8))
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def main():
    import torch

    from bench.common import host_overhead_us
    from interop.torch import attention as ta
    from interop.torch import scaled_dot_product_attention as sdpa

    q = torch.randn(1, 2, 16, 64, device="cuda", dtype=torch.float16)
    qs = q.transpose(1, 2).contiguous()
    cases = [
        ("sdpa [B,H,S,D]", lambda: sdpa(q, q, q)),
        ("_run_forward [B,S,H,D] view", lambda: ta._run_forward(
            q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), None, causal=None,
            window=0, dropout_p=0.0, seed=0, offset=0, scale=None)),
        ("_run_forward [B,S,H,D] contiguous", lambda: ta._run_forward(
            qs, qs, qs, None, causal=None, window=0, dropout_p=0.0, seed=0, offset=0,
            scale=None)),
        ("torch F.sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q)),
    ]
    with torch.no_grad():
        for label, fn in cases:
            fn()
            print(f"{label}: plans {len(ta._FWD_PLANS)}, host {host_overhead_us(fn, 1000):.1f} us, "
                  f"synced {_synced_us(fn, 300):.1f} us, gpu {_gpu_us(fn, 200):.1f} us",
                  flush=True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(300):
            sdpa(q, q, q)
        prof.disable()
        torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(20)


if __name__ == "__main__":
    main()
