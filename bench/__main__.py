"""numba-fused benchmark CLI: ``python -m bench`` (the README's main job).

With a GPU: measures the device copy bandwidth, runs each op's benchmark
(``bench/<op>.py``: ours through torch and CuPy beside torch eager, torch.compile
and the other baselines installed), measures the host launch cost, then writes a
markdown table to stdout and ``results.md``, ``results.json`` (GPU name, package
versions, every row) and one PNG plot per op under ``--out``.

Without a GPU: says so and runs the simulator correctness demo (``bench/demo.py``,
every op on tiny inputs under numba's CUDA simulator; no timings).
"""

import argparse
import datetime
import importlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OPS = ("dropout", "layer_norm", "attention", "linear_act")


def _gpu_available():
    from numba import config

    if config.ENABLE_CUDASIM:
        return False
    from numba import cuda

    return cuda.is_available()


def _versions():
    out = {"python": sys.version.split()[0]}
    for mod in ("numpy", "numba", "numba_cuda", "torch", "cupy", "triton"):
        try:
            m = importlib.import_module(mod)
            out[mod] = getattr(m, "__version__", "?")
        except ImportError:
            pass
    return out


def _progress(iterable, desc):
    try:
        from tqdm import tqdm

        return tqdm(iterable, desc=desc, file=sys.stderr)
    except ImportError:
        items = list(iterable)

        def gen():
            for i, item in enumerate(items):
                print(f"[{desc}] {i + 1}/{len(items)}: {item}", file=sys.stderr, flush=True)
                yield item

        return gen()


def _fmt(v, nd=3):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def markdown_table(rows):
    cols = ["op", "case", "dtype", "pass", "provider", "median_ms", "p20_ms", "p80_ms",
            "GB/s", "TFLOP/s", "%copy", "speedup", "peak_MB"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def _plot(rows, out_dir):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    for op in sorted({r["op"] for r in rows}):
        sub = [r for r in rows if r["op"] == op and r.get("median_ms")]
        if not sub:
            continue
        labels = sorted({f"{r['case']} {r['dtype']} {r['pass']}" for r in sub})
        providers = sorted({r["provider"] for r in sub})
        fig, ax = plt.subplots(figsize=(max(6, len(labels) * 0.9), 4))
        width = 0.8 / max(1, len(providers))
        for j, prov in enumerate(providers):
            xs, ys = [], []
            for i, lab in enumerate(labels):
                for r in sub:
                    if r["provider"] == prov and f"{r['case']} {r['dtype']} {r['pass']}" == lab:
                        xs.append(i + j * width)
                        ys.append(r["median_ms"])
            ax.bar(xs, ys, width, label=prov)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))])
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("median time (ms)")
        ax.set_title(f"{op}: time per call (lower is better)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{op}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def run_gpu(args):
    import torch

    from bench.common import copy_bandwidth, gpu_info

    os.makedirs(args.out, exist_ok=True)
    info = gpu_info()
    bw = copy_bandwidth()
    print(f"# numba-fused benchmarks on {info['name']} — copy bandwidth {bw:.0f} GB/s", flush=True)
    rows = []
    errors = {}
    for op in _progress([o for o in OPS if o in args.ops], "ops"):
        try:
            mod = importlib.import_module(f"bench.{op}")
        except ModuleNotFoundError as exc:
            errors[op] = f"not in this checkout ({exc.name})"
            continue
        try:
            op_rows = mod.cli_rows(quick=args.quick, copy_gbps=bw)
        except Exception as exc:  # one op's failure must not hide the others' results
            errors[op] = f"{type(exc).__name__}: {exc}"
            continue
        for r in op_rows:
            r.setdefault("op", op)
        rows.extend(op_rows)
        torch.cuda.empty_cache()
    from bench import launch_cost

    launch = launch_cost.measure(calls=1000 if args.quick else 3000)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": info, "versions": _versions(), "copy_gbps": bw,
        "rows": rows, "launch_cost_us": launch, "errors": errors,
    }
    table = markdown_table(rows)
    launch_md = "| call | host us / call |\n|---|---|\n" + "\n".join(
        f"| {r['what']} | {r['us_per_call']:.1f} |" for r in launch)
    err_md = "\n".join(f"- {op}: {msg}" for op, msg in errors.items())
    md = (f"# numba-fused benchmark results\n\n{report['date']} — {info['name']} "
          f"({info['sm_count']} SMs), copy bandwidth {bw:.0f} GB/s\n\n"
          f"Versions: {report['versions']}\n\n{table}\n\n## Host launch cost\n\n{launch_md}\n")
    if err_md:
        md += f"\n## Not run\n\n{err_md}\n"
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    _plot(rows, args.out)
    print(md)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    ap.add_argument("--out", default=os.path.join("results", datetime.date.today().isoformat()))
    args = ap.parse_args(argv)
    if not _gpu_available():
        print("No CUDA GPU found: no timings. Running the correctness demo of every op "
              "under numba's CUDA simulator instead.", flush=True)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        return subprocess.call([sys.executable, "-m", "bench.demo", *args.ops], env=env)
    return run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
