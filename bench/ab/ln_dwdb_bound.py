"""How much of the 16-bit LayerNorm backward is its dW / dB reduction? (fortieth session)

    python3 bench/ab/ln_dwdb_bound.py [--reps 50]

Times the LayerNorm backward (fp16 / bf16, 16384 x 4096) as shipped and with the dW /
dB reduction kernel replaced by one of the same signature, launch mode and launch
bounds that does nothing: the second time is the floor any cheaper reduction (a
cluster's DSMEM sum of the partial rows, say) could reach. Its dw / db are garbage,
so its rows print FAIL in the check column; only their times mean anything. Method:
bench/tune_layer_norm.py's (CUDA events, a GPU sleep before each call, median).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _noop(p0, p1, o0, o1, r, n):
    """Writes nothing: the reduction's launch without its work."""


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args(argv)

    from noop_kernel import noop_factory  # this script's folder is on the path

    from bench import tune_layer_norm as T
    from numba_fused import layer_norm as ln

    real = ln.make_dwdb_kernel
    noop_kernel = noop_factory(real, _noop)

    copy = T.copy_tbps()
    sleep = T._sleep_cycles()
    rows = []
    for dname in ("float16", "bfloat16"):
        for label in ("shipped", "noop", "shipped"):
            ln.make_dwdb_kernel = noop_kernel if label == "noop" else real
            rows.append(T.run_case(16384, 4096, getattr(T.torch, dname), args.reps, sleep,
                                   {}, torch_too=False))
            rows[-1]["tune"] = label
            print(T.table(rows[-1:], copy).splitlines()[-1], flush=True)
    ln.make_dwdb_kernel = real


if __name__ == "__main__":
    main()
