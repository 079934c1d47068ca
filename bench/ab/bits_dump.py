"""Digests of LayerNorm / RMSNorm outputs at the launchers' default layouts, to check on
a GPU that a change keeps every bit (run it in two trees, then compare the files).

    python3 bench/ab/bits_dump.py --out A.json          # in each tree
    python3 bench/ab/bits_dump.py --out B.json --tune '{"bwd_rms_sum1": true}'
    python3 bench/ab/bits_dump.py --compare A.json B.json

Inputs are fixed by seed; each row length of the sweep (M x N = 2^24, so the
persistent grids and layouts are the sweep's but for M), every dtype, LayerNorm with
w and b and RMSNorm with w, forward and backward (deterministic). A digest is the
SHA-256 of an output's bytes. ``--tune``: a JSON dict of ``layer_norm.tuning`` keys
every call runs under (one tree, two tunings; fix ``bwd_grid`` in both when the two
forms' registers may differ, since the deterministic dW's grouping follows the grid).
"""

import argparse
import hashlib
import json
import sys

import torch

NS = (512, 768, 1024, 2048, 4096, 5120, 8192, 12288, 16384, 65536)
DTYPES = ("float16", "bfloat16", "float32")


def digest(t):
    return hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).cpu().numpy()
                          .tobytes()).hexdigest()


def dump(path, tune=None):
    from numba_fused import layer_norm as ln

    with ln.tuning(**(tune or {})):
        return _dump(ln, path)


def inputs(n, dtype):
    """x, w, b, dy of row length ``n`` (M x N = 2^24) in torch dtype ``dtype``, seeded by
    ``n`` (so every tree and tool draws the same)."""
    m = max(1, (1 << 24) // n)
    g = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    w = (torch.randn(n, device="cuda", generator=g) * 0.5 + 1).to(dtype)
    b = torch.randn(n, device="cuda", generator=g).to(dtype)
    dy = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    return x, w, b, dy


def _dump(ln, path):
    out = {}
    for dtype in DTYPES:
        for n in NS:
            x, w, b, dy = inputs(n, getattr(torch, dtype))
            y, mean, rstd = ln.layer_norm_forward(x, w, b, 1e-5)
            grads = ln.layer_norm_backward(dy, x, w, b, mean, rstd, deterministic=True)
            for name, t in zip(("y", "mean", "rstd", "dx", "dw", "db"), (y, mean, rstd) + grads):
                out[f"ln {dtype} {n} {name}"] = digest(t)
            y, rstd = ln.rms_norm_forward(x, w, 1e-6)
            grads = ln.rms_norm_backward(dy, x, w, rstd, deterministic=True)
            for name, t in zip(("y", "rstd", "dx", "dw"), (y, rstd) + grads):
                out[f"rms {dtype} {n} {name}"] = digest(t)
    torch.cuda.synchronize()
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    return 0


def compare(a, b):
    with open(a) as f:
        da = json.load(f)
    with open(b) as f:
        db = json.load(f)
    differ = sorted(k for k in da if da[k] != db.get(k))
    missing = sorted(set(da) ^ set(db))
    print(f"{len(da)} outputs, {len(differ)} differ, {len(missing)} in one file only")
    for k in differ + missing:
        print("  ", k)
    return 1 if differ or missing or not da else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2)
    ap.add_argument("--tune", type=json.loads, default={})
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("--out or --compare")
    return dump(args.out, args.tune)


if __name__ == "__main__":
    sys.exit(main())
