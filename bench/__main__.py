"""numba-fused benchmark CLI: ``python -m bench`` (the README's main job).

With a GPU: measures the device copy bandwidth, runs each op's benchmark
(``bench/<op>.py``: ours through torch and CuPy beside torch eager, torch.compile
and the other baselines installed; every provider's output checked against float64
before it is timed), measures the host launch cost, then runs the two end-to-end
examples (``bench/example_cupy_mlp.py``: a CuPy MLP block, gradient check and timing;
``bench/example_torch_train.py``: our torch modules vs torch's in a 200-step training
run; ``bench/model_step.py``: a Hugging Face GPT-2 training step, stock vs our modules,
where transformers is installed; ``--no-examples`` skips them), and writes a markdown report to stdout and
``results.md``, ``results.json`` (GPU name, package versions, every row, the
examples' results) and PNG plots (one per op, the training loss curves) under
``--out``. Exit status 1 if a provider's check or an example's check failed.

Without a GPU: says so and runs the simulator correctness demo (``bench/demo.py``,
every op on tiny inputs under numba's CUDA simulator, and example 1's gradient check
at a tiny size unless ``--no-examples``; no timings).
"""

import argparse
import datetime
import importlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OPS = ("dropout", "layer_norm", "attention", "linear_act", "gated_linear")

# Which way in each provider measures (the report prints it above the tables).
PROVIDER_LEGEND = """Providers: **ours** — `numba`, `numba_fused`, `numba_det`, `numba_lock`,
`numba_mask`, `numba_seed`, `numba_wgmma`: the array-level functions (`numba_fused.*`, validation and planning on
every call); `numba_torch`: `interop.torch` through autograd, the path PyTorch users
call (per-signature plans; forward timed under `no_grad`, backward as
`torch.autograd.grad`); `numba_cupy`: `interop.cupy` on CuPy arrays. **Baselines** —
`torch` / `eager`: torch's own ops; `compile`, `torch.compile`: inductor; `flash`,
`efficient`, `math`: torch SDPA backends; `liger`: Liger-Kernel. GPU times come from
CUDA events with the GPU held busy first, so they measure device work; host cost per
call is the separate launch-cost table."""


def _gpu_available():
    from numba import config

    if config.ENABLE_CUDASIM:
        return False
    from numba import cuda

    return cuda.is_available()


def _versions():
    out = {"python": sys.version.split()[0]}
    for mod in ("numpy", "numba", "numba_cuda", "torch", "cupy", "triton", "liger_kernel"):
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


TABLE_COLUMNS = ["op", "case", "dtype", "pass", "provider", "median_ms", "p20_ms", "p80_ms",
                 "GB/s", "TFLOP/s", "%copy", "speedup", "peak_MB", "check", "note"]


def markdown_table(rows):
    """The timed rows (those with a ``median_ms``) as one markdown table."""
    cols = TABLE_COLUMNS
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if r.get("median_ms") is None:
            continue
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def _is_ours(provider):
    return str(provider).startswith("numba")


def speedup_table(rows):
    """Per (op, case, dtype, pass): ours through the front door (``numba_torch``; the
    array-level row where there is none) against every baseline timed beside it, as
    baseline time / our time (> 1: ours is faster)."""
    groups = {}
    for r in rows:
        if r.get("median_ms") is not None:
            key = (r.get("op"), r.get("case"), r.get("dtype"), r.get("pass"))
            groups.setdefault(key, []).append(r)
    lines = ["| op | case | dtype | pass | ours (provider) ms | speedup over each baseline |",
             "|---|---|---|---|---|---|"]
    for (op, case, dtype, pas), group in groups.items():
        ours = [r for r in group if r["provider"] == "numba_torch"] or \
            [r for r in group if r["provider"] in ("numba", "numba_fused")]
        bases = [r for r in group if not _is_ours(r["provider"])]
        if not ours or not bases:
            continue
        o = ours[0]
        cells = ", ".join(f"{b['provider']} {b['median_ms'] / o['median_ms']:.2f}x" for b in bases)
        lines.append(f"| {op} | {case} | {dtype} | {pas} | {o['median_ms']:.3f} "
                     f"({o['provider']}) | {cells} |")
    return "\n".join(lines)


def notes(rows, errors):
    """Lines for the report's "Not run" section: ops that failed, providers that were
    not run (each reason once per op and provider), and checks that failed."""
    out = [f"- {op}: {msg}" for op, msg in errors.items()]
    seen = set()
    for r in rows:
        if r.get("median_ms") is None and r.get("note"):
            key = (r.get("op"), r.get("provider"), r["note"])
            if key not in seen:
                seen.add(key)
                out.append(f"- {r.get('op')} / {r.get('provider')}: {r['note']}")
    for r in rows:
        if str(r.get("check", "")).startswith("FAIL"):
            out.append(f"- check failed: {r.get('op')} {r.get('case')} {r.get('dtype')} "
                       f"{r.get('pass')} {r.get('provider')}: {r['check']}")
    return out


def _plot(rows, out_dir):
    from bench.common import pyplot, save_figure

    plt = pyplot()
    if plt is None:
        return []
    paths = []
    for op in sorted({r["op"] for r in rows if r.get("median_ms") is not None}):
        sub = [r for r in rows if r["op"] == op and r.get("median_ms") is not None]
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
        save_figure(fig, out_dir, f"{op}.png", paths)
    return paths


def _save_partial(out_dir, rows, errors):
    """The rows so far, in case the run is cut short (removed when the report is written)."""
    with open(os.path.join(out_dir, "partial.json"), "w") as f:
        json.dump({"rows": rows, "errors": errors}, f, indent=1, default=str)


def run_examples(args):
    """Run the end-to-end examples in this process (their kernels are compiled once
    for the op tables and the examples); returns ``{name: result}`` and markdown."""
    results, md = {}, []
    from bench import example_cupy_mlp as ex1

    from bench.common import cupy_or_none

    _, note = cupy_or_none()
    if note:
        results["cupy_mlp"] = {"ok": None, "skipped": note}
        md.append(f"### Example 1: CuPy MLP block\n\nskipped: {note}")
    else:
        print("[examples] 1/3: CuPy MLP block (gradient check, timing)", file=sys.stderr,
              flush=True)
        try:
            r1 = ex1.run(ex1.parse_args(["--reps", "10" if args.quick else "30"]))
            results["cupy_mlp"] = r1
            md.append("### Example 1: CuPy MLP block (`bench/example_cupy_mlp.py`)\n\n"
                      + ex1.markdown(r1))
        except Exception as exc:  # report it, run the other example
            results["cupy_mlp"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            md.append(f"### Example 1: CuPy MLP block\n\nfailed: {type(exc).__name__}: {exc}")
    from bench import example_torch_train as ex2

    print("[examples] 2/3: training our torch modules vs torch's", file=sys.stderr, flush=True)
    try:
        r2 = ex2.run(ex2.parse_args(["--out", args.out]))
        results["torch_train"] = r2
        md.append("### Example 2: training our torch modules vs torch's "
                  "(`bench/example_torch_train.py`)\n\n" + ex2.markdown(r2)
                  + ("\n\n![loss curves](train_loss.png)" if r2.get("png") else ""))
    except Exception as exc:  # report it
        results["torch_train"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        md.append(f"### Example 2: training\n\nfailed: {type(exc).__name__}: {exc}")
    from bench import model_step as ex3

    print("[examples] 3/3: GPT-2 training step, stock vs our modules", file=sys.stderr,
          flush=True)
    try:
        r3 = ex3.run(ex3.parse_args(["--out", args.out] + (["--config", "gpt2-512"]
                                                           if args.quick else [])))
        if r3[0].get("skipped"):
            results["model_step"] = {"ok": None, "skipped": r3[0]["skipped"]}
            md.append(f"### Model step (GPT-2)\n\nskipped: {r3[0]['skipped']}")
        else:
            results["model_step"] = {"ok": all(r["ok"] for r in r3), "configs": r3}
            md.append("### Model step: GPT-2, stock vs our modules (`bench/model_step.py`)"
                      "\n\n" + ex3.markdown(r3))
    except Exception as exc:  # report it
        results["model_step"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        md.append(f"### Model step (GPT-2)\n\nfailed: {type(exc).__name__}: {exc}")
    return results, "\n\n".join(md)


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
        _save_partial(args.out, rows, errors)
        print(f"\n## {op}\n\n{markdown_table(op_rows)}\n", flush=True)
        torch.cuda.empty_cache()
    from bench import launch_cost

    try:
        launch = launch_cost.measure(calls=1000 if args.quick else 3000)
    except Exception as exc:  # the tables above still count
        launch = []
        errors["launch_cost"] = f"{type(exc).__name__}: {exc}"
    examples, examples_md = {}, ""
    if not args.no_examples:
        torch.cuda.empty_cache()
        examples, examples_md = run_examples(args)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": info, "versions": _versions(), "copy_gbps": bw,
        "rows": rows, "launch_cost_us": launch, "errors": errors, "examples": examples,
    }
    table = markdown_table(rows)
    launch_md = "| call | host us / call |\n|---|---|\n" + "\n".join(
        f"| {r['what']} | {r['us_per_call']:.1f} |" for r in launch)
    not_run = notes(rows, errors)
    md = (f"# numba-fused benchmark results\n\n{report['date']} — {info['name']} "
          f"({info['sm_count']} SMs), copy bandwidth {bw:.0f} GB/s\n\n"
          f"Versions: {report['versions']}\n\n{PROVIDER_LEGEND}\n\n{table}\n\n"
          f"## Speedup over each baseline\n\n{speedup_table(rows)}\n\n## Host launch cost\n\n{launch_md}\n")
    if not_run:
        md += "\n## Not run, and failed checks\n\n" + "\n".join(not_run) + "\n"
    if examples_md:
        md += f"\n## End-to-end examples\n\n{examples_md}\n"
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    partial = os.path.join(args.out, "partial.json")
    if os.path.exists(partial):
        os.remove(partial)
    _plot(rows, args.out)
    print(md)
    failed_checks = [r for r in rows if str(r.get("check", "")).startswith("FAIL")]
    failed_examples = [k for k, v in examples.items() if v.get("ok") is False]
    if failed_checks or failed_examples:
        print(f"FAILED: {len(failed_checks)} provider checks, examples {failed_examples}",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    ap.add_argument("--out", default=os.path.join("results", datetime.date.today().isoformat()))
    ap.add_argument("--no-examples", action="store_true",
                    help="skip the end-to-end examples (bench/example_*.py)")
    args = ap.parse_args(argv)
    if not _gpu_available():
        print("No CUDA GPU found: no timings. Running the correctness demo of every op "
              "under numba's CUDA simulator instead.", flush=True)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        extra = [] if args.no_examples else ["--example"]
        return subprocess.call([sys.executable, "-m", "bench.demo", *extra, *args.ops], env=env)
    return run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
