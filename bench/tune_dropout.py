"""GPU sweep of the dropout kernels' launch configurations (issue #3's targets).

    python3 bench/tune_dropout.py --out DIR [--reps 50] [--shape 16384x4096] [--dtype float16]

For ``[M, N]`` (default 16384 x 4096) of one dtype (default float16), p = 0.1,
activations none and gelu, it times

  fwd            dropout_bias_act_forward(x, b, p, ...)
  bwd            dropout_bias_act_backward(g, x, b, p, ...)           (with grad_bias)
  bwd nobias     the same with need_bias_grad=False
  fwd p0, bwd p0 the shipped configuration at p = 0 (no Philox work: the streaming floor)

for the shipped configuration and a few ``LaunchConfig`` variants. Each row has two times:

  call  bench/common.time_cuda with hold=False (CUDA events around each call, calls
        back to back): includes host time whenever the host is slower than the GPU
        (the launchers' Python);
  gpu   the same events with the stream first held by a ~20 ms ``torch.cuda._sleep`` so
        that every call is queued before its predecessor ends: GPU time (kernels and
        the gaps between them) without host time.

Before timing, each (case, configuration) is checked against the float64 reference
(``dropout_bias_act_ref``) on the first 64 rows (the mask is keyed by the linear
element index, so the leading rows need no offset), and grad_bias against the float64
column sums of the returned grad_x; the kept fraction of y against 1 - p. The script
also prints registers per kernel, host microseconds per call (tiny inputs) and the
device copy bandwidth, and writes ``DIR/tune_dropout.json`` and ``DIR/tune_dropout.md``.
Inputs: 3 rotated sets of random normal x, bias, grad (about 800 MB, beyond the L2).
Runs in under 3 minutes on an H200 including compiles.
"""

import argparse
import json
import os
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402

P = 0.1
SEED, OFFSET = 1234, 56
CHECK_ROWS = 64
TOL = 1e-2  # bench/common.CHECK_TOL["float16"]: catches a wrong mask, not rounding
DTYPES = ("float16", "bfloat16", "float32")

# (label, LaunchConfig kwargs); the first is the shipped default.
CONFIGS = [
    ("shipped", {}),
    ("unroll=2", {"unroll": 2}),
    ("threads=128", {"threads": 128}),
    ("threads=512", {"threads": 512}),
    ("rows=256", {"rows_per_block": 256}),
    ("rows=64", {"rows_per_block": 64}),
    ("v4 reduce kernel", {"bias_reduce": "kernel"}),
    ("v4 reduce kernel rows=256", {"bias_reduce": "kernel", "rows_per_block": 256}),
    ("unroll=4", {"unroll": 4}),
    ("threads=1024", {"threads": 1024}),
    ("threads=512 unroll=2", {"threads": 512, "unroll": 2}),
    ("threads=128 unroll=2", {"threads": 128, "unroll": 2}),
    ("threads=1024 unroll=2", {"threads": 1024, "unroll": 2}),
    ("step=1", {"final_step": 1}),
    ("step=4", {"final_step": 4}),
    ("rows=512", {"rows_per_block": 512}),
    ("rows=512 step=4", {"rows_per_block": 512, "final_step": 4}),
    ("rows=256 step=4", {"rows_per_block": 256, "final_step": 4}),
    # v5's half-wave plans at 16384 x 4096 (before v6's one round): fp16 none / gelu
    # 504 / 512 rows a block, float32 992.
    ("rows=504", {"rows_per_block": 504}),
    ("rows=992", {"rows_per_block": 992}),
    # v5's 16 x 33 grid with v4's reduction kernel: no arrival count, fence or last block.
    ("v4 reduce kernel rows=504", {"bias_reduce": "kernel", "rows_per_block": 504}),
    # v7 candidate: the epilogue's tiles summed by one thread a column, no shuffles.
    ("tile=direct", {"tile_reduce": "direct"}),
    # H200 (twenty-fifth session): unroll=4 read the 'none' backward 3 us faster; with
    # the bias-grad epilogue's geometry.
    ("unroll=4 rows=128", {"unroll": 4, "rows_per_block": 128}),
    ("unroll=4 rows=256", {"unroll": 4, "rows_per_block": 256}),
    ("unroll=4 rows=512", {"unroll": 4, "rows_per_block": 512}),
    ("unroll=4 step=4", {"unroll": 4, "final_step": 4}),
    ("unroll=4 v4 reduce kernel", {"unroll": 4, "bias_reduce": "kernel"}),
    # The gelu forward, issue-bound on the H200 (Philox + gelu, 28.6 instructions an
    # element): one row a batch leaves fewer registers, more warps to hide latency.
    ("unroll=1", {"unroll": 1}),
    # The grid as whole waves of the kernel's real resident blocks (v8's 4 rows a
    # batch at 93 registers leave 2 an SM, not 8); v10's backward takes 1 with a bias
    # grad, 2 without; fill=0 is the nominal plan it replaced.
    ("fill=1", {"fill": 1}),
    ("fill=2", {"fill": 2}),
    ("fill=1 step=4", {"fill": 1, "final_step": 4}),
    ("fill=0", {"fill": 0}),
    # v13: the 16-bit passes' rows through a cp.async ring of 2-4 shared slots, 1-3
    # rows in flight a thread (forward 32 registers, backward 40-48).
    ("stages=2", {"stages": 2}),
    ("stages=3", {"stages": 3}),
    ("stages=4", {"stages": 4}),
    # v13's backward with a bias grad ran 8-12 us behind its run without one (shipped:
    # 2-3): its one-wave grid (fill 1 at 5 blocks an SM) against two waves, the nominal
    # plan, the reduction kernel and the last block's step.
    ("stages=3 fill=2", {"stages": 3, "fill": 2}),
    ("stages=3 fill=3", {"stages": 3, "fill": 3}),
    ("stages=3 fill=0", {"stages": 3, "fill": 0}),
    ("stages=3 reduce kernel", {"stages": 3, "bias_reduce": "kernel"}),
    ("stages=3 step=4", {"stages": 3, "final_step": 4}),
    ("stages=2 fill=2", {"stages": 2, "fill": 2}),
    # Its trace (bench/ab/pending_s38c.sh a): with its predecessor's dirty L2 the staged
    # kernel with a bias grad ran 82 us, after a 512 MB read 72; through the reduction
    # kernel (no fence, no counter) 69.7 + 4.4. Fewer, larger blocks: one fence and one
    # arrival per 16 warps, 264 blocks as shipped's.
    ("stages=3 threads=512", {"stages": 3, "threads": 512}),
    ("stages=2 threads=512", {"stages": 2, "threads": 512}),
    ("stages=3 threads=512 fill=2", {"stages": 3, "threads": 512, "fill": 2}),
    ("stages=3 threads=512 step=4", {"stages": 3, "threads": 512, "final_step": 4}),
    # v13 ships stages 3 at three waves for the 16-bit backward without a bias grad
    # (Philox draws); stages=0 is v10's register batches there.
    ("stages=0", {"stages": 0}),
    ("stages=4 fill=3", {"stages": 4, "fill": 3}),
    # v14 (refuted, thirty-ninth session: 1-2 us behind the last block at best): the
    # bias grad's reduction kernel as a dependent launch (no fence, no counter: the
    # epilogue that costs 5-13 us back to back with a dirty L2).
    ("reduce pdl", {"bias_reduce": "kernel_pdl"}),
    ("reduce pdl fill=1", {"bias_reduce": "kernel_pdl", "fill": 1}),
    ("reduce pdl fill=2", {"bias_reduce": "kernel_pdl", "fill": 2}),
    ("stages=3 reduce pdl", {"stages": 3, "bias_reduce": "kernel_pdl"}),
    ("stages=3 reduce pdl fill=3", {"stages": 3, "bias_reduce": "kernel_pdl", "fill": 3}),
    ("fill=3", {"fill": 3}),
    # Thirty-ninth session: the gelu forward's blocks as more, shorter waves (one wave
    # read 5 us slower than two: do blocks that start together compute together and
    # leave the DRAM idle? 1 us gained; fill 4 shipped as v15), and the backward with a
    # bias grad on fewer, larger blocks (one fence and one arrival per 16 warps) or
    # narrower column strips (gains at some N, losses at others: not taken).
    ("rows=32", {"rows_per_block": 32}),
    ("fill=4", {"fill": 4}),
    ("fill=8", {"fill": 8}),
    # Fifty-fifth session: the gelu forward's waves around v15's 4 after v23.
    ("fill=5", {"fill": 5}),
    ("fill=6", {"fill": 6}),
    # v24's gelu forward runs 128-thread blocks; this is v23's 256.
    ("threads=256", {"threads": 256}),
    ("bx=16", {"block_x": 16}),
    ("bx=8", {"block_x": 8}),
    ("threads=128 rows=64", {"threads": 128, "rows_per_block": 64}),
    ("threads=512 fill=1", {"threads": 512, "fill": 1}),
    ("threads=128 fill=1", {"threads": 128, "fill": 1}),
    ("bx=16 fill=1", {"block_x": 16, "fill": 1}),
]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for tune_dropout.json / .md")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--shape", default="16384x4096")
    ap.add_argument("--dtype", default="float16", choices=DTYPES)
    ap.add_argument("--configs", default=None,
                    help="comma-separated labels to run, in order (default: all of "
                         + ", ".join(label for label, _ in CONFIGS) + ")")
    ap.add_argument("--cases", default="fwd,bwd,bwd nobias",
                    help="comma-separated cases to time: fwd, bwd, bwd nobias (the "
                         "shipped configuration's p = 0 rows come with fwd / bwd)")
    ap.add_argument("--acts", default="none,gelu",
                    help="comma-separated activations to time (default: none,gelu)")
    return ap.parse_args(argv)


class _Backlogged:
    """fn wrapper for time_cuda: the first timed call (after ``warmup`` calls) first
    queues a ~20 ms sleep on the stream, so the host gets ahead and every later event
    pair measures GPU time only (that first sample is an outlier the median ignores)."""

    def __init__(self, fn, warmup):
        self.fn, self.warmup, self.calls = fn, warmup, 0

    def __call__(self, *args):
        import torch

        if self.calls == self.warmup and common.DEVICE == "cuda":
            torch.cuda._sleep(40_000_000)
        self.calls += 1
        return self.fn(*args)


def _rel(out, ref):
    import torch

    out = out.detach().double().cpu()
    ref = torch.as_tensor(ref, dtype=torch.float64)
    if not bool(torch.isfinite(out).all()):
        return float("inf")
    den = float(torch.linalg.vector_norm(ref))
    return float(torch.linalg.vector_norm(out - ref)) / (den or 1.0)


def _sync():
    import torch

    if common.DEVICE == "cuda":
        torch.cuda.synchronize()


def _check(D, direction, act, cfg, x, b, g, need_bias_grad=True):
    """Max relative error against float64 (first CHECK_ROWS rows; grad_bias against the
    column sums of the returned grad_x) and the kept fraction; raises on failure."""
    import torch

    xs, gs = x[:CHECK_ROWS], g[:CHECK_ROWS]
    if direction == "fwd":
        y = D.dropout_bias_act_forward(x, b, P, SEED, OFFSET, act, config=cfg)
        _sync()
        ref = D.dropout_bias_act_ref(xs.cpu(), b.cpu(), P, SEED, OFFSET, act)
        errs = {"y": _rel(y[:CHECK_ROWS], ref)}
        out = y[:CHECK_ROWS]
        live = D.dropout_bias_act_ref(xs.cpu(), b.cpu(), 0.0, SEED, OFFSET, act)
    else:
        gx, gb = D.dropout_bias_act_backward(g, x, b, P, SEED, OFFSET, act,
                                             need_bias_grad=need_bias_grad, config=cfg)
        _sync()
        _, gx_ref, _ = D.dropout_bias_act_ref(xs.cpu(), b.cpu(), P, SEED, OFFSET, act,
                                              grad_out=gs.cpu())
        errs = {"grad_x": _rel(gx[:CHECK_ROWS], gx_ref)}
        if need_bias_grad:
            errs["grad_bias"] = _rel(gb, gx.double().sum(0).cpu())
        elif gb is not None:
            raise AssertionError("need_bias_grad=False returned a grad_bias")
        out = gx[:CHECK_ROWS]
        live = D.dropout_bias_act_ref(xs.cpu(), b.cpu(), 0.0, SEED, OFFSET, act,
                                      grad_out=gs.cpu())[1]
    # Kept fraction among the elements the activation leaves nonzero (relu and its
    # kin zero about half before any dropout).
    live = torch.as_tensor(live) != 0
    kept = float((out.cpu()[live] != 0).float().mean())
    bad = {k: v for k, v in errs.items() if not v < TOL}
    if bad or abs(kept - (1 - P)) > 0.02:
        raise AssertionError(f"{direction} {act} {cfg}: errors {errs}, kept {kept:.4f}")
    return max(errs.values()), kept


def _time(fn, sets, reps, warmup):
    call = common.time_cuda(fn, sets, reps, warmup, hold=False)["median_ms"] * 1e3
    gpu = common.time_cuda(_Backlogged(fn, warmup), sets, reps, warmup,
                           hold=False)["median_ms"] * 1e3
    return call, gpu


def _case(direction, need_bias_grad):
    """A row's case: fwd, bwd (with the bias grad) or bwd nobias."""
    return direction if direction == "fwd" or need_bias_grad else "bwd nobias"


def _device():
    import torch

    return torch.cuda.current_device()


def _regs(D, dtype, act, cfg, n_cols):
    """Registers of the kernels the p > 0 rows launch (vector path, Philox compiled in)."""
    out = {}
    for direction in ("fwd", "bwd"):
        unroll = cfg.unroll or D._default_unroll(dtype, direction == "bwd", act)
        if direction == "fwd":
            fill = D._default_fwd_fill(dtype, act, True, n_cols, True, cfg.unroll,
                                       cfg.stages or 0, False)
            threads = cfg.threads or D._default_fwd_threads(dtype, True, fill)
            k = D.make_forward_kernel(dtype, act, True, threads, unroll, False, 1,
                                      cfg.stages or 0)
        else:
            threads = cfg.threads or D._default_threads(dtype, True)
            k = D.make_backward_kernel(dtype, act, True, threads, unroll, D.MODE_PHILOX,
                                       cfg.fence or "block", cfg.final_step or D._FINAL_STEP,
                                       D._tile_reduce_for(cfg, True), cfg.stages or 0)
        try:
            out[direction] = (f"{k.regs_per_thread} registers, "
                              f"{k.resident_blocks(threads, 0, _device())} blocks an SM")
        except Exception as exc:  # noqa: BLE001 (reported, not fatal)
            out[direction] = f"? ({type(exc).__name__})"
    return out


def run(args):
    import torch

    from numba_fused import dropout as D
    from numba_fused.activations import ACTIVATIONS

    m, n = (int(v) for v in args.shape.lower().split("x"))
    dtype = args.dtype
    tdtype = getattr(torch, dtype)
    size = torch.empty((), dtype=tdtype).element_size()
    t0 = time.perf_counter()
    dev = common.DEVICE
    gen = torch.Generator(device=dev).manual_seed(0)
    sets = []
    for _ in range(3):
        x = torch.randn((m, n), device=dev, generator=gen).to(tdtype)
        b = torch.randn((n,), device=dev, generator=gen).to(tdtype)
        g = torch.randn((m, n), device=dev, generator=gen).to(tdtype)
        sets.append((x, b, g))
    copy = common.copy_bandwidth()  # GB/s, read + write
    # Bytes that must move: fwd x in, y out; bwd grad in, grad_x out (+ x in for any
    # activation but 'none').
    floor_us = {"fwd": 2 * size * m * n / copy / 1e3, "bwd none": 2 * size * m * n / copy / 1e3,
                "bwd x": 3 * size * m * n / copy / 1e3}
    labels = [c.strip() for c in args.configs.split(",")] if args.configs else None
    acts = [a.strip() for a in args.acts.split(",")]
    wanted = {c.strip() for c in args.cases.split(",")}
    if not wanted <= {"fwd", "bwd", "bwd nobias"}:
        raise SystemExit(f"unknown --cases {sorted(wanted)}; choose from fwd, bwd, bwd nobias")
    bad = [a for a in acts if a not in ACTIVATIONS]
    if bad:
        raise SystemExit(f"unknown --acts {bad}; choose from {ACTIVATIONS}")
    known = dict(CONFIGS)
    unknown = [label for label in labels or () if label not in known]
    if unknown:
        raise SystemExit(f"unknown --configs labels {unknown}")
    # In the order given (a label may repeat: the shipped one first and last shows the
    # run-to-run spread); the rows keep each label.
    configs = CONFIGS if labels is None else [(label, known[label]) for label in labels]
    rows = []
    regs = {}
    for label, kw in configs:
        cfg = D.LaunchConfig(**kw)
        for act in acts:
            regs[f"{label} {act}"] = _regs(D, dtype, act, cfg, n)
            cases = [("fwd", True, P), ("bwd", True, P), ("bwd", False, P)]
            if label == "shipped":
                cases += [("fwd", True, 0.0), ("bwd", True, 0.0)]
            cases = [c for c in cases if _case(c[0], c[1]) in wanted]
            for direction, nbg, p in cases:
                x, b, g = sets[0]
                err, kept = _check(D, direction, act, cfg, x, b, g, nbg) if p else (0.0, 1.0)
                if direction == "fwd":
                    def fn(x, b, g, act=act, cfg=cfg, p=p):
                        return D.dropout_bias_act_forward(x, b, p, SEED, OFFSET, act, config=cfg)
                else:
                    def fn(x, b, g, act=act, cfg=cfg, p=p, nbg=nbg):
                        return D.dropout_bias_act_backward(g, x, b, p, SEED, OFFSET, act,
                                                           need_bias_grad=nbg, config=cfg)
                call, gpu = _time(fn, sets, args.reps, args.warmup)
                case = _case(direction, nbg)
                if p == 0.0:
                    case += " p0"
                floor = floor_us["fwd" if direction == "fwd" else
                                 ("bwd none" if act == "none" else "bwd x")]
                rows.append({"config": label, "activation": act, "case": case,
                             "call_us": round(call, 1), "gpu_us": round(gpu, 1),
                             "floor_us": round(floor, 1),
                             "pct_copy_gpu": round(100 * floor / gpu, 1),
                             "max_rel_err": float(f"{err:.2e}"), "kept": round(kept, 4)})
                print(f"{label:12s} {act:5s} {case:14s} call {call:7.1f} us  gpu {gpu:7.1f} us"
                      f"  ({100 * floor / gpu:5.1f}% of copy)  err {err:.1e}", flush=True)
    # Host cost per call (tiny inputs, launches queued without synchronisation).
    xt = torch.randn((8, 64), device=dev).to(tdtype)
    bt = torch.randn((64,), device=dev).to(tdtype)
    host = {
        "fwd": common.host_overhead_us(
            lambda: D.dropout_bias_act_forward(xt, bt, P, 1, 0, "gelu"), 1000),
        "bwd": common.host_overhead_us(
            lambda: D.dropout_bias_act_backward(xt, xt, bt, P, 1, 0, "gelu"), 1000),
        "bwd nobias": common.host_overhead_us(lambda: D.dropout_bias_act_backward(
            xt, xt, bt, P, 1, 0, "gelu", need_bias_grad=False), 1000),
    }
    result = {"shape": [m, n], "dtype": dtype, "p": P, "copy_gbps": round(copy, 1),
              "device": torch.cuda.get_device_name() if dev == "cuda" else dev,
              "rows": rows, "registers": regs,
              "host_us_per_call": {k: round(v, 1) for k, v in host.items()},
              "seconds": round(time.perf_counter() - t0, 1)}
    return result


def markdown(res):
    lines = [f"dropout sweep, {res['dtype']} {res['shape'][0]}x{res['shape'][1]}, p={res['p']}, "
             f"{res['device']}, copy {res['copy_gbps']} GB/s",
             "",
             "| config | act | case | call us | gpu us | % of copy (gpu) | max rel err |",
             "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['config']} | {r['activation']} | {r['case']} | {r['call_us']} | "
                     f"{r['gpu_us']} | {r['pct_copy_gpu']} | {r['max_rel_err']:.1e} |")
    lines += ["", "registers (fwd / bwd): " + "; ".join(
        f"{k} {v['fwd']}/{v['bwd']}" for k, v in res["registers"].items()),
        "host us per call (tiny inputs): " + ", ".join(
            f"{k} {v}" for k, v in res["host_us_per_call"].items()),
        f"total {res['seconds']} s"]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    res = run(args)
    md = markdown(res)
    print(md)
    with open(os.path.join(args.out, "tune_dropout.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(args.out, "tune_dropout.md"), "w") as f:
        f.write(md + "\n")


if __name__ == "__main__":
    main()
