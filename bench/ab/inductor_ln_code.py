"""What inductor launches for the norm forwards our sweep compares against: for each
(op, dtype, N) at M x N = 2^26, the generated Triton source (``run_and_get_code``)
and, from a CUPTI trace of compiled calls, each kernel's grid, block, registers and
shared memory. Writes DIR/<op>_<dtype>_<N>.py (the source) and prints one line per
kernel.

    python3 bench/ab/inductor_ln_code.py --out DIR [--cases layer_norm:float32:16384 ...]
"""

import argparse
import json
import os

import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

CASES = ["layer_norm:float16:4096", "layer_norm:float32:4096", "layer_norm:float32:16384",
         "layer_norm:float32:65536", "rms_norm:float32:65536", "layer_norm:float16:16384"]


def _fn(op, n):
    if op == "layer_norm":
        return lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5)
    return lambda x, w, b: F.rms_norm(x, (n,), w, 1e-6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", nargs="+", default=CASES)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for case in args.cases:
        op, dt, n = case.split(":")
        n = int(n)
        dtype = getattr(torch, dt)
        x = torch.randn(2**26 // n, n, device="cuda", dtype=dtype)
        w = torch.randn(n, device="cuda", dtype=dtype)
        b = torch.randn(n, device="cuda", dtype=dtype)
        torch._dynamo.reset()
        f = torch.compile(_fn(op, n))
        with torch.no_grad():
            _, code = run_and_get_code(f, x, w, b)
            with open(os.path.join(args.out, f"{op}_{dt}_{n}.py"), "w") as fh:
                fh.write("\n\n# ----\n".join(code))
            for _ in range(3):
                f(x, w, b)
            torch.cuda.synchronize()
            trace = os.path.join(args.out, f"trace_{op}_{dt}_{n}.json")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    f(x, w, b)
                torch.cuda.synchronize()
            prof.export_chrome_trace(trace)
        seen = {}
        for ev in json.load(open(trace))["traceEvents"]:
            if ev.get("cat") != "kernel":
                continue
            a = ev.get("args", {})
            k = (ev["name"], str(a.get("grid")), str(a.get("block")))
            seen.setdefault(k, []).append(ev["dur"])
            seen[k + ("meta",)] = (a.get("registers per thread"), a.get("shared memory"),
                                   a.get("est. achieved occupancy %"))
        os.remove(trace)
        for k, durs in seen.items():
            if k[-1] == "meta":
                continue
            regs, smem, occ = seen[k + ("meta",)]
            durs.sort()
            print(f"{case}: {k[0][:60]} grid {k[1]} block {k[2]} regs {regs} smem {smem} "
                  f"occ {occ} median {durs[len(durs) // 2]:.1f} us")


if __name__ == "__main__":
    main()
