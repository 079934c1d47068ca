"""Kernel timeline of back-to-back LayerNorm forwards (or backwards): ours against
inductor's and eager (and Liger's backward).

    python3 bench/ab/ln_timeline.py --out DIR [--calls 30] [--direction bwd]

Why: bench/layer_norm.py times ours 1-3% behind torch.compile at every N below 65536,
while ncu (one launch, caches flushed) has our kernel 12% faster. This script looks at
what the benchmark's CUDA events cannot separate: for each provider, CUPTI's (through
torch.profiler) start and end of every kernel in a run of ``--calls`` back-to-back calls
queued behind a GPU sleep, so no host time enters. Per provider and shape it reports

  kernel_us   median kernel duration;
  period_us   median start-to-start time of consecutive calls' first kernels (what the
              benchmark's events measure, less the events themselves);
  gap_us      median idle time between one call's last kernel end and the next call's
              first kernel start;
  kernels     kernels a call launches; per_kernel_us: each one's median duration (a
              backward's dW/dB reduction apart from its row kernel, with the L2 as the
              previous kernel left it, which ncu's cache flush does not show);
  event_us    the benchmark's own timing (bench/common.time_cuda) of the same calls.

The callables and input sets are bench/layer_norm.py's own. Two modes: ``plain``
(calls only) and ``events`` (an event pair around each call, as the
benchmark records them). Writes DIR/ln_<direction>_timeline<tag>.json and prints a
table.
"""

import argparse
import json
import os
import statistics
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench import common  # noqa: E402

CASES = (("float16", 16384, 4096), ("float16", 65536, 1024), ("float16", 8192, 8192),
         ("float32", 16384, 4096))


PROVIDERS = (("numba", "numba"), ("compile", "compile"), ("eager", "torch"))
BWD_PROVIDERS = PROVIDERS + (("liger", "liger"),)


def _callable(provider, direction, sets):
    """The benchmark's own callable and argument sets for ``provider`` (bench/layer_norm.py:
    the same compile options, a fresh dynamo state per case, no_grad forwards, backwards
    prepared once per input set)."""
    from bench import layer_norm as bln

    fwd, make_bwd = bln._provider_fns(provider, "layer_norm")
    if direction == "fwd":
        return fwd, sets
    return (lambda c: c()), [(make_bwd(*s),) for s in sets]


def _kernel_events(trace_path):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    kernels.sort(key=lambda e: e["ts"])
    return [(e["name"], float(e["ts"]), float(e["dur"])) for e in kernels]


def _run_profiled(torch, fn, sets, calls, with_events, trace_path):
    from torch.profiler import ProfilerActivity, profile

    for i in range(5):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(int(50 * common._sleep_cycles_per_ms()))
        for i in range(calls):
            args = sets[i % len(sets)]
            if with_events:
                s = torch.cuda.Event(enable_timing=True)
                e = torch.cuda.Event(enable_timing=True)
                s.record()
                fn(*args)
                e.record()
            else:
                fn(*args)
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    return _kernel_events(trace_path)


def _summarise(kernels, calls):
    kernels = [k for k in kernels if "spin_kernel" not in k[0] and "sleep" not in k[0].lower()]
    if not kernels or len(kernels) % calls:
        return {"error": f"{len(kernels)} kernels for {calls} calls",
                "names": sorted({k[0] for k in kernels})[:8]}
    per = len(kernels) // calls
    groups = [kernels[i * per:(i + 1) * per] for i in range(calls)]
    per_kernel = {f"{j}:{groups[0][j][0][:48]}":
                  round(statistics.median(g[j][2] for g in groups), 2) for j in range(per)}
    dur = [sum(k[2] for k in g) for g in groups]
    starts = [g[0][1] for g in groups]
    ends = [g[-1][1] + g[-1][2] for g in groups]
    period = [b - a for a, b in zip(starts, starts[1:])]
    gaps = [s - e for e, s in zip(ends, starts[1:])]
    return {"kernels": per, "names": sorted({k[0][:60] for k in kernels}),
            "kernel_us": round(statistics.median(dur), 2),
            "period_us": round(statistics.median(period), 2),
            "gap_us": round(statistics.median(gaps), 2),
            "gap_max_us": round(max(gaps), 2), "per_kernel_us": per_kernel}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--direction", choices=("fwd", "bwd"), default="fwd")
    ap.add_argument("--providers", default=None,
                    help="comma-separated subset of numba,compile,eager,liger")
    ap.add_argument("--tuning", default="{}",
                    help="numba_fused.layer_norm.tuning overrides for ours, JSON")
    ap.add_argument("--tag", default="", help="suffix of the JSON file's name")
    args = ap.parse_args(argv)
    import torch

    os.makedirs(args.out, exist_ok=True)
    from numba_fused import layer_norm as ln

    with ln.tuning(**json.loads(args.tuning)):
        rows = _cases(args, torch)
    with open(os.path.join(args.out, f"ln_{args.direction}_timeline{args.tag}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "tuning": json.loads(args.tuning),
                   "rows": rows}, f, indent=1)
    _table(rows)


def _cases(args, torch):
    from bench import layer_norm as bln

    rows = []
    for dtype, m, n in CASES:
        tdtype = getattr(torch, dtype)
        count = common.rotations(2 * m * n * tdtype.itemsize)
        sets = bln._make_sets("layer_norm", m, n, dtype, count)
        wanted = args.providers.split(",") if args.providers else None
        for name, provider in (PROVIDERS if args.direction == "fwd" else BWD_PROVIDERS):
            if wanted is not None and name not in wanted:
                continue
            try:
                fn, fsets = _callable(provider, args.direction, sets)
            except ImportError as exc:
                print(f"{name}: skipped ({exc})", flush=True)
                continue
            row = {"dtype": dtype, "shape": [m, n], "provider": name, "sets": count,
                   "direction": args.direction}
            row["event_us"] = round(1e3 * common.time_cuda(fn, fsets, reps=50)["median_ms"], 2)
            for mode in ("plain", "events"):
                path = os.path.join(args.out, f"trace_{name}_{dtype}_{m}x{n}_{mode}.json")
                kernels = _run_profiled(torch, fn, fsets, args.calls, mode == "events", path)
                row[mode] = _summarise(kernels, args.calls)
                os.remove(path)
            rows.append(row)
            print(json.dumps(row), flush=True)
        del sets
        torch.cuda.empty_cache()
    return rows


def _table(rows):
    print("| dtype, shape | provider | event us | plain: kernel / period / gap us | "
          "events: kernel / period / gap us |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = []
        for mode in ("plain", "events"):
            s = r[mode]
            cells.append(s.get("error") or f"{s['kernel_us']} / {s['period_us']} / {s['gap_us']}")
        print(f"| {r['dtype']} {r['shape'][0]}x{r['shape'][1]} | {r['provider']} | "
              f"{r['event_us']} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
