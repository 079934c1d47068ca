"""LayerNorm tuning sweep on the GPU (issue 4): numba-fused forward and backward (lock
and deterministic dW/dB) against torch eager, fp16, M x N = 16384 x 4096 elements
for N in {768, 1024, 4096, 8192, 16384}, plus a few launch knobs at 16384 x 4096.

    python3 bench/tune_layer_norm.py --out DIR [--reps 50] [--quick]
    python3 bench/tune_layer_norm.py --out DIR --ns 4096,8192 --dtypes float32 \
        --tunes '{}' '{"bwd_red_direct": false}'      # an A/B: each tuning at each (N, dtype)
    python3 bench/tune_layer_norm.py --op rms ...   # the same for RMSNorm (w, no b)

Method (bench/common.py): every output is first checked against float64 (y, mean, rstd, dx on a
slice of rows through ``layer_norm_ref``; dw, db over all rows in float64 on the GPU);
then CUDA events around each call, a GPU sleep queued before every timed call (so the
host's launch work never shows as GPU idle time), median of ``--reps`` calls over 3
rotated input sets larger than L2. Writes DIR/tune_layer_norm.json and .md and prints
the table. Registers per kernel and resident blocks per SM are reported too.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import numba_fused  # noqa: E402,F401
from bench.common import _sleep_cycles_per_ms  # noqa: E402
from numba_fused import layer_norm as ln  # noqa: E402

TOTAL = 16384 * 4096
NS = (768, 1024, 4096, 8192, 16384)
TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}
SLICE_ROWS = 48


def _sleep_cycles():
    """GPU cycles for ~200 us (enough for the host to queue one op's launches)."""
    clock_khz = torch.cuda.get_device_properties(0).clock_rate if hasattr(
        torch.cuda.get_device_properties(0), "clock_rate") else 1_980_000
    return int(clock_khz * 1e3 * 200e-6)


def host_ms(fn, sets, calls, hold):
    """Host milliseconds a call of fn(*set) over ``calls`` calls cycling through sets,
    queued behind a GPU sleep of ``hold`` cycles (so no launch waits on the device)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(hold))
    t0 = time.perf_counter()
    for i in range(calls):
        fn(*sets[i % len(sets)])
    ms = (time.perf_counter() - t0) * 1e3 / calls
    torch.cuda.synchronize()
    return ms


def time_fn(fn, sets, reps, sleep):
    """Median GPU milliseconds of fn(*set) over reps calls cycling through sets.

    Each call follows a GPU sleep of ``sleep`` cycles or three times the host time of
    a call, whichever is longer, so the host has queued the call's launches before the
    GPU reaches them. (A fixed 200 us was shorter than the array-level LayerNorm
    backward's 155-212 us of Python on the lent H100: its times at 8192-16384 rows
    then came out 20-50 us long, 76th session.)
    """
    for s in sets:  # warm-up: compiles, caches, allocator
        fn(*s)
        fn(*s)
    probe = 2 * len(sets)
    host = host_ms(fn, sets, probe, sleep * 4 * probe)
    sleep = max(sleep, int(3 * host * _sleep_cycles_per_ms()))
    times = []
    for i in range(reps):
        s = sets[i % len(sets)]
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep)
        start.record()
        fn(*s)
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in times)


def copy_tbps():
    a = torch.empty(2**29, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        ts.append((s, e))
    torch.cuda.synchronize()
    ms = statistics.median(s.elapsed_time(e) for s, e in ts)
    return 2 * a.numel() / (ms * 1e-3) / 1e12


def make_sets(m, n, dtype, count=3, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for i in range(count):
        x = torch.randn((m, n), generator=g, device="cuda", dtype=torch.float32)
        x = (x * 2.0 + 0.5).to(dtype)
        w = (torch.randn(n, generator=g, device="cuda") * 0.5 + 1.0).to(dtype)
        b = torch.randn(n, generator=g, device="cuda").to(dtype)
        dy = torch.randn((m, n), generator=g, device="cuda").to(dtype)
        out.append((x, w, b, dy))
    return out


def rel(out, ref):
    out = out.detach().double().cpu().numpy() if torch.is_tensor(out) else np.asarray(out, np.float64)
    ref = ref.detach().double().cpu().numpy() if torch.is_tensor(ref) else np.asarray(ref, np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(out - ref) / (den if den else 1.0))


def fwd(op, x, w, b):
    """(y, mean or None, rstd) of LayerNorm (w, b) or RMSNorm (w; b unused)."""
    if op == "rms":
        y, rstd = ln.rms_norm_forward(x, w)
        return y, None, rstd
    return ln.layer_norm_forward(x, w, b)


def bwd(op, dy, x, w, b, mean, rstd, det=False):
    """(dx, dw, db or None) of LayerNorm or RMSNorm."""
    if op == "rms":
        return ln.rms_norm_backward(dy, x, w, rstd, deterministic=det) + (None,)
    return ln.layer_norm_backward(dy, x, w, b, mean, rstd, deterministic=det)


def check(x, w, b, dy, dtype_name, op="ln"):
    """Max relative error of our outputs against float64 (lock and deterministic)."""
    y, mean, rstd = fwd(op, x, w, b)
    errs = {}
    sl = slice(0, SLICE_ROWS)
    x64 = x.double()
    if op == "rms":
        yr, rr, dxr, _ = ln.rms_norm_ref(x[sl], w, grad_out=dy[sl], rstd=rstd[sl])
        xhat = x64 * rstd.double()[:, None]
    else:
        yr, mr, rr, dxr, _, _ = ln.layer_norm_ref(x[sl], w, b, grad_out=dy[sl])
        errs["mean"] = rel(mean[sl], mr)
        mu = x64.mean(-1, keepdim=True)
        xhat = (x64 - mu) * torch.rsqrt(((x64 - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
    errs["y"] = rel(y[sl], yr)
    errs["rstd"] = rel(rstd[sl], rr)
    dwr = (dy.double() * xhat).sum(0)
    dbr = dy.double().sum(0)
    del x64, xhat
    for det in (False, True):
        gx, gw, gb = bwd(op, dy, x, w, b, mean, rstd, det)
        tag = "det" if det else "lock"
        errs[f"dx_{tag}"] = rel(gx[sl], dxr)
        errs[f"dw_{tag}"] = rel(gw, dwr)
        if gb is not None:
            errs[f"db_{tag}"] = rel(gb, dbr)
    worst = max(errs.values())
    return worst, errs, worst < TOL[dtype_name]


def kernel_info(sets, op="ln"):
    """What the launchers launch for one forward and one backward (lock scheme) call on
    ``sets[0]``, recorded at their executor: per pass the main kernel's name,
    registers, block, grid and resident blocks per SM (the backward's statistics pass
    and dW/dB reduction are left out)."""
    launched = []
    real = ln.NOW.launch

    def spy(kernel, grid, block, stream, args, shared=0, dynamic=()):
        launched.append((kernel, grid, block, shared))
        return real(kernel, grid, block, stream, args, shared=shared, dynamic=dynamic)

    x, w, b, dy = sets[0]
    info = {}
    ln.NOW.launch = spy
    try:
        for direction in ("fwd", "bwd"):
            launched.clear()
            if direction == "fwd":
                fwd(op, x, w, b)
            else:
                y, mean, rstd = fwd(op, x, w, b)
                launched.clear()
                bwd(op, dy, x, w, b, mean, rstd)
            rows = [r for r in launched
                    if "dwdb" not in r[0].name and "stats" not in r[0].name]
            k, grid, block, shared = rows[0]
            threads = block[0] * (block[1] if len(block) > 1 else 1)
            per_sm = k.resident_blocks(threads, shared, x.device.index or 0)
            info[direction] = {"kernel": k.name, "regs": k.regs_per_thread,
                               "block": list(block), "grid": list(grid), "shared": shared,
                               "blocks_per_sm": per_sm}
    finally:
        del ln.NOW.launch
    torch.cuda.synchronize()
    return info


def _kdesc(k):
    """Short form of a kernel_info entry: block, registers, blocks an SM."""
    return f"{'x'.join(map(str, k['block']))} {k['regs']}r {k['blocks_per_sm']}/SM"


def run_case(m, n, dtype, reps, sleep, tune=None, torch_too=True, op="ln"):
    dname = str(dtype).replace("torch.", "")
    sets = make_sets(m, n, dtype)
    res = {"m": m, "n": n, "dtype": dname, "tune": tune or {}, "op": op}
    with ln.tuning(**(tune or {})):
        worst, errs, ok = check(*sets[0], dname, op)
        res.update(check_ok=ok, worst_err=worst, errors=errs)
        res["kernels"] = kernel_info(sets, op)
        fsets = [(x, w, b) for x, w, b, dy in sets]
        res["fwd_ms"] = time_fn(lambda x, w, b: fwd(op, x, w, b), fsets, reps, sleep)
        bsets = []
        for x, w, b, dy in sets:
            y, mean, rstd = fwd(op, x, w, b)
            bsets.append((dy, x, w, b, mean, rstd))
        for det in (False, True):
            res[f"bwd_{'det' if det else 'lock'}_ms"] = time_fn(
                lambda dy, x, w, b, mean, rstd, det=det: bwd(
                    op, dy, x, w, b, mean, rstd, det), bsets, reps, sleep)
    if torch_too and op == "rms":
        res["torch_fwd_ms"] = time_fn(lambda x, w, b: F.rms_norm(x, (n,), w, 1e-6),
                                      fsets, reps, sleep)
    elif torch_too:
        res["torch_fwd_ms"] = time_fn(lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5),
                                      fsets, reps, sleep)
        tsets = []
        for x, w, b, dy in sets:
            _, tm, tr = torch.ops.aten.native_layer_norm(x, (n,), w, b, 1e-5)
            tsets.append((dy, x, tm, tr, w, b))
        res["torch_bwd_ms"] = time_fn(
            lambda dy, x, tm, tr, w, b: torch.ops.aten.native_layer_norm_backward(
                dy, x, (n,), tm, tr, w, b, [True, True, True]), tsets, reps, sleep)
    del sets, fsets, bsets
    torch.cuda.empty_cache()
    return res


def fmt_us(ms):
    return f"{ms * 1e3:7.1f}" if ms is not None else "      -"


def table(rows, copy):
    lines = ["| M x N dtype | fwd us (torch) | bwd lock us | bwd det us (torch) | "
             "fwd/bwd % of copy | worst err | fwd block regs SM | bwd block regs SM | tune |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        el = r["m"] * r["n"] * (4 if r["dtype"] == "float32" else 2)
        fwd_pct = 2 * el / (r["fwd_ms"] * 1e-3) / (copy * 1e12) * 100
        bwd = min(r["bwd_lock_ms"], r["bwd_det_ms"])
        bwd_pct = 3 * el / (bwd * 1e-3) / (copy * 1e12) * 100
        kf, kb = r["kernels"]["fwd"], r["kernels"]["bwd"]
        lines.append(
            f"| {r['m']}x{r['n']} {r['dtype']}{' rms' if r.get('op') == 'rms' else ''} | {fmt_us(r['fwd_ms'])} ({fmt_us(r.get('torch_fwd_ms'))}) | "
            f"{fmt_us(r['bwd_lock_ms'])} | {fmt_us(r['bwd_det_ms'])} ({fmt_us(r.get('torch_bwd_ms'))}) | "
            f"{fwd_pct:4.0f} / {bwd_pct:4.0f} | {r['worst_err']:.1e}{'' if r['check_ok'] else ' FAIL'} | "
            f"{_kdesc(kf)} | {_kdesc(kb)} | "
            f"{r['tune'] or ''} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="N = 4096 only, no knob sweep")
    ap.add_argument("--ns", default=None,
                    help="A/B mode: comma-separated row lengths (M = 2^26 / N)")
    ap.add_argument("--m", type=int, default=None,
                    help="A/B mode: rows (default 2^26 / N; small M: one wave, latency)")
    ap.add_argument("--dtypes", default="float16",
                    help="A/B mode: comma-separated dtypes (float16, bfloat16, float32)")
    ap.add_argument("--op", choices=("ln", "rms"), default="ln",
                    help="A/B mode: LayerNorm (w, b) or RMSNorm (w)")
    ap.add_argument("--tunes", nargs="+", default=["{}"],
                    help="A/B mode: tuning overrides as JSON objects, one per variant "
                         "(torch is timed beside the first)")
    args = ap.parse_args(argv)
    if args.m is not None and args.m < 1:
        ap.error(f"--m must be >= 1, got {args.m}")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    dev = torch.cuda.get_device_name(0)
    copy = copy_tbps()
    sleep = _sleep_cycles()
    print(f"{dev}: copy {copy:.2f} TB/s (read + write)", flush=True)
    rows = []
    if args.ns:
        tunes = [json.loads(t) for t in args.tunes]
        for dname in args.dtypes.split(","):
            for n in (int(v) for v in args.ns.split(",")):
                m = args.m or TOTAL // n
                for i, tune in enumerate(tunes):
                    rows.append(run_case(m, n, getattr(torch, dname), args.reps,
                                         sleep, tune, torch_too=i == 0, op=args.op))
                    print(table(rows[-1:], copy).splitlines()[-1],
                          f"[{time.time() - t0:.0f} s]", flush=True)
        return _finish(args, dev, copy, rows, t0)
    for n in ((4096,) if args.quick else NS):
        rows.append(run_case(TOTAL // n, n, torch.float16, args.reps, sleep))
        print(table(rows[-1:], copy).splitlines()[-1], f"[{time.time() - t0:.0f} s]", flush=True)
    if not args.quick:
        m, n = 16384, 4096
        for tune in ({"prefetch": False}, {"fwd_blocks_per_sm": 2, "bwd_blocks_per_sm": 1},
                     {"fwd_block": 128, "bwd_block": 512}):
            rows.append(run_case(m, n, torch.float16, args.reps, sleep, tune, torch_too=False))
            print(table(rows[-1:], copy).splitlines()[-1], f"[{time.time() - t0:.0f} s]", flush=True)
        for dt in (torch.bfloat16, torch.float32):
            rows.append(run_case(m, n, dt, args.reps, sleep))
            print(table(rows[-1:], copy).splitlines()[-1], f"[{time.time() - t0:.0f} s]", flush=True)
    return _finish(args, dev, copy, rows, t0)


def _finish(args, dev, copy, rows, t0):
    what = "RMSNorm (w)" if args.op == "rms" else "LayerNorm (w, b)"
    md = f"{dev}, copy {copy:.2f} TB/s, numba-fused {what}, median of {args.reps}\n\n"
    md += table(rows, copy) + "\n"
    print("\n" + md)
    with open(os.path.join(args.out, "tune_layer_norm.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "tune_layer_norm.json"), "w") as f:
        json.dump({"device": dev, "copy_tbps": copy, "rows": rows}, f, indent=1, default=str)
    print(f"total {time.time() - t0:.0f} s")
    return 0 if all(r["check_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
