"""The workload for ncu behind the few-row kernel's gap to cuBLAS (eighty-fourth
session): Llama-7B's down projection ``[M, 11008] x [4096, 11008]^T`` (39.5 / 42.4 us
at M = 1 / 16 against cuBLAS 35.9 / 37.5, H100) beside gate+up ``[M, 4096] x
[22016, 4096]^T`` (at or ahead of cuBLAS), bf16, no bias.

    ncu --nvtx --nvtx-include "prof/" --clock-control none --section SpeedOfLight \\
        --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \\
        python3 bench/ab/skinny_ncu.py [--ms 1 16] [--gemms down gate_up]

Each (M, GEMM) runs linear_act_forward (its default: the few-row kernel at these rows)
and F.linear three times unprofiled, then once each inside the range ``prof`` (the
report lists the kernels in the order of the "profiled next" lines). The
question ncu answers: where the down projection's time goes that gate+up's does not
(its grid is 256 blocks, one short wave on 132 SMs, against gate+up's 1376): DRAM
throughput, achieved occupancy, warps' stall reasons, against cuBLAS's kernel on the
same GEMM. Nothing is checked here (skinny_ab.py and the tests check these launches).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

GEMMS = {"down": (4096, 11008), "gate_up": (22016, 4096)}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--ms", nargs="+", type=int, default=[1, 16])
    p.add_argument("--gemms", nargs="+", choices=list(GEMMS), default=list(GEMMS))
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.common import profile_once
    from numba_fused import linear_act as la

    dt = torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name in args.gemms:
        n, k = GEMMS[name]
        w = torch.randn(n, k, device="cuda", dtype=dt, generator=gen) / 64
        for m in args.ms:
            x = torch.randn(m, k, device="cuda", dtype=dt, generator=gen)
            for label, call in (("ours", lambda: la.linear_act_forward(x, w)),
                                ("cublas", lambda: F.linear(x, w))):
                profile_once(f"{name} M={m} {label}", call)


if __name__ == "__main__":
    main()
