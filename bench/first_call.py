"""What a process's first call of each op costs, with and without the kernel cache.

Each op's first call in a process compiles its kernels (numba typing and lowering,
NVVM, the link); the kernel cache (numba_fused.kernel_cache, on by default) stores
them for later processes. Three fresh processes run the same calls in the same order:

- ``no cache``: ``NUMBA_FUSED_DISABLE_CACHE=1`` (every process compiles; what a user
  gets on a machine's first run, or where the cache is off);
- ``cold``: the cache directory empty (compiles, then stores);
- ``warm``: the same directory again (loads, compiles nothing).

Each times every op's first call (synchronised, seconds: compile or load plus one
run), then a second call (the steady state, for scale), and hashes every output: the
three processes must write the same bits, and the warm one must load every kernel the
cold one stored (no miss, no store). fp16 throughout, deterministic backwards.

Usage: python bench/first_call.py [--json FILE] [--cache-dir DIR]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _cases(torch, nf):
    """(name, call) pairs; each call returns its outputs (a tensor or a tuple)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    h = torch.float16

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", dtype=h, generator=g)

    x, w, b, dy = rnd(4096, 1024), rnd(1024), rnd(1024), rnd(4096, 1024)
    q, k, v, do = rnd(2, 256, 4, 64), rnd(2, 256, 4, 64), rnd(2, 256, 4, 64), rnd(2, 256, 4, 64)
    a, wt, bl = rnd(512, 1024), rnd(1024, 1024), rnd(1024)
    keep = {}

    def ln_fwd():
        keep["ln"] = nf.layer_norm_forward(x, w, b)
        return keep["ln"]

    def ln_bwd():
        _, mean, rstd = keep["ln"]
        return nf.layer_norm_backward(dy, x, w, b, mean, rstd, deterministic=True)

    def attn_fwd():
        keep["attn"] = nf.attention_forward(q, k, v, causal="top_left")
        return keep["attn"]

    def attn_bwd():
        out, lse = keep["attn"]
        return nf.attention_backward(do, q, k, v, out, lse, causal="top_left",
                                     deterministic=True)[:3]

    return [
        ("layer_norm fwd", ln_fwd),
        ("layer_norm bwd", ln_bwd),
        ("rms_norm fwd", lambda: nf.rms_norm_forward(x, w)),
        ("dropout(gelu(x+b)) fwd", lambda: nf.dropout_bias_act_forward(
            x, b, p=0.1, seed=3, activation="gelu")),
        ("dropout(gelu(x+b)) bwd", lambda: nf.dropout_bias_act_backward(
            dy, x, b, p=0.1, seed=3, activation="gelu")),
        ("attention fwd", attn_fwd),
        ("attention bwd", attn_bwd),
        ("linear+gelu fwd", lambda: nf.linear_act_forward(a, wt, bl, activation="gelu")),
    ]


def child():
    """One process: the cases' first and second calls, timed; the outputs' hash."""
    import torch

    import numba_fused as nf
    from numba_fused import kernel_cache

    torch.cuda.init()
    rows, digest = [], hashlib.sha256()
    for name, call in _cases(torch, nf):
        times = []
        for _ in range(2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = call()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        for t in out if isinstance(out, tuple) else (out,):
            if t is not None:
                t = torch.as_tensor(t)
                digest.update(t.contiguous().view(-1).view(torch.uint8).cpu().numpy().tobytes())
        rows.append({"op": name, "first_s": times[0], "second_s": times[1]})
    print(json.dumps({"rows": rows, "bits": digest.hexdigest(), "stats": kernel_cache.stats(),
                      "misses": kernel_cache.misses()}))


def _run(cache_dir):
    env = dict(os.environ)
    env.pop("NUMBA_FUSED_CACHE_DIR", None)
    env.pop("NUMBA_FUSED_DISABLE_CACHE", None)
    if cache_dir:
        env["NUMBA_FUSED_CACHE_DIR"] = cache_dir
    else:
        env["NUMBA_FUSED_DISABLE_CACHE"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"child failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cache-dir", default=None,
                    help="an empty directory for the cache (default: a new temporary one)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child()
    from numba import config, cuda

    if config.ENABLE_CUDASIM or not cuda.is_available():
        print("first_call: needs a CUDA GPU (compile and load times are a device's)")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache_dir or os.path.join(tmp, "cache")
        runs = {"no cache": _run(None), "cold": _run(cache), "warm": _run(cache)}
    bits = {k: r["bits"] for k, r in runs.items()}
    ok = (len(set(bits.values())) == 1 and runs["warm"]["stats"]["misses"] == 0
          and runs["warm"]["stats"]["stores"] == 0
          and runs["warm"]["stats"]["hits"] == runs["cold"]["stats"]["stores"] > 0)
    print("| op | first call, no cache (s) | cold cache (s) | warm cache (s) | second call (ms) |")
    print("|---|---|---|---|---|")
    for i, row in enumerate(runs["no cache"]["rows"]):
        print(f"| {row['op']} | {row['first_s']:.3f} | {runs['cold']['rows'][i]['first_s']:.3f} "
              f"| {runs['warm']['rows'][i]['first_s']:.3f} | {1e3 * row['second_s']:.3f} |")
    totals = {k: sum(r["first_s"] for r in v["rows"]) for k, v in runs.items()}
    print(f"| all first calls | {totals['no cache']:.2f} | {totals['cold']:.2f} "
          f"| {totals['warm']:.2f} | |")
    print("processes (s, start to exit): " + ", ".join(
        f"{k} {v['process_s']:.1f}" for k, v in runs.items()))
    print(f"cache: cold {runs['cold']['stats']}, warm {runs['warm']['stats']}; "
          f"same bits and every kernel loaded: {'yes' if ok else 'NO'}")
    for name, why in sorted(runs["warm"]["misses"].items()):
        print(f"warm miss {name}: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "ok": ok}, f, indent=1)
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() in (True, None) else 1)
