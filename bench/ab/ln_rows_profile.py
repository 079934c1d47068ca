"""Per-kernel GPU times of the LayerNorm / RMSNorm backward at a few row counts, to
find where float32 LayerNorm 16384 x 512 loses time (76th session: 68-81 us against
26.6 at 8192 rows and 76.5 at 32768, RMSNorm 43).

    python3 bench/ab/ln_rows_profile.py [--ms 8192,16384,32768] [--n 512]
        [--dtype float32] [--tunes '{}' '{"bwd_pdl": false}']

Each case: CUDA-event median of 40 calls through bench/tune_layer_norm.py's time_fn
(a GPU sleep before each of at least --sleep-us, default 200, or three times the host
time of a call; 3 rotated input sets), the host time of a call while the GPU sleeps,
then torch.profiler's per-kernel mean over 20 calls, each after a --sleep-us sleep.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from bench.tune_layer_norm import (  # noqa: E402
    _sleep_cycles, bwd, fwd, host_ms, make_sets, time_fn)
from numba_fused import layer_norm as ln  # noqa: E402


def case(op, m, n, dtype, tune, sleep):
    sets = make_sets(m, n, getattr(torch, dtype))
    with ln.tuning(**tune):
        bsets = []
        for x, w, b, dy in sets:
            y, mean, rstd = fwd(op, x, w, b)
            bsets.append((dy, x, w, b, mean, rstd))
        ms = time_fn(lambda *a: bwd(op, *a), bsets, 40, sleep)
        host = host_ms(lambda *a: bwd(op, *a), bsets, 20, sleep * 20) * 1e3
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(20):
                torch.cuda._sleep(sleep)
                bwd(op, *bsets[i % 3])
            torch.cuda.synchronize()
    kern = []
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" and "sleep" not in e.key:
            t = getattr(e, "device_time_total", None) or e.cuda_time_total
            kern.append(f"{e.key[:48]} x{e.count} {t / e.count:.1f}us")
    del sets, bsets
    torch.cuda.empty_cache()
    return ms * 1e3, host, kern


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="ln,rms")
    ap.add_argument("--ms", default="8192,12288,16384,20480,24576,32768")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--tunes", nargs="+", default=["{}"])
    ap.add_argument("--sleep-us", type=float, default=200.0,
                    help="GPU sleep queued before each timed call")
    a = ap.parse_args()
    sleep = int(_sleep_cycles() * a.sleep_us / 200.0)
    print(torch.cuda.get_device_name(), flush=True)
    for op in a.ops.split(","):
        for m in map(int, a.ms.split(",")):
            for t in a.tunes:
                us, host, kern = case(op, m, a.n, a.dtype, json.loads(t), sleep)
                print(f"{op} {m}x{a.n} {a.dtype} {t}: {us:.1f} us, host {host:.0f} us | "
                      + " | ".join(kern),
                      flush=True)


if __name__ == "__main__":
    main()
