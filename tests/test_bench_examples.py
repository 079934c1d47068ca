"""The benchmark scripts' CPU-checkable parts (simulator, no GPU):

- end-to-end example 1 (CuPy MLP block): its finite-difference gradient check passes
  with torch made unimportable, and fails when a backward step is wrong;
- end-to-end example 2 (training ours vs torch's): a two-step run on CPU tensors;
- the op scripts accept their providers, and their ``run()`` (checks, providers, note
  rows) goes through on tiny CPU inputs with the GPU timing stubbed out;
- the CLI's report assembly.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.sim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_example_cupy_mlp_gradient_check_without_torch(tmp_path):
    """Run as a script (which makes ``import torch`` fail), under the simulator."""
    out = tmp_path / "ex1.json"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.example_cupy_mlp", "--check-only", "--check-size", "8x16x32",
         "--check-p", "0.1", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all gradient checks passed" in proc.stdout
    assert "torch imported: no" in proc.stdout
    result = json.loads(out.read_text())
    assert result["ok"] and not result["torch_imported"]
    assert [r["tensor"] for r in result["checks"]] == ["x", "gamma", "beta", "w1", "b1", "w2",
                                                      "b2", "all"]
    assert all(r["rel_err"] < 1e-2 for r in result["checks"])


def test_example_cupy_mlp_check_catches_wrong_backward():
    """A backward that drops gelu' from the fc2 dgrad must fail the check."""
    import numpy as np

    import numba_fused
    from bench import example_cupy_mlp as ex

    class WrongDgrad:
        def __getattr__(self, name):
            return getattr(numba_fused, name)

        @staticmethod
        def linear_act_dgrad(grad_out, weight, activation="none", preact=None):
            return numba_fused.linear_act_dgrad(grad_out, weight, "none", preact)

    rows = ex.gradient_check(np, WrongDgrad(), 4, 16, 32, 0.1)
    bad = {r["tensor"] for r in rows if not r["ok"]}
    assert {"x", "w1", "b1", "all"} <= bad
    assert {"w2", "b2"}.isdisjoint(bad)  # their gradients do not go through gelu'


def test_example_cupy_mlp_arguments():
    from bench import example_cupy_mlp as ex

    args = ex.parse_args([])
    assert (args.tokens, args.d, args.hidden, args.dtype) == (8192, 1024, 4096, "float16")
    assert args.check_size == (16, 32, 64) and args.check_p == [0.0, 0.1]
    args = ex.parse_args(["--check-only", "--check-size", "4x8x16", "--check-p", "0.2"])
    assert args.check_only and args.check_size == (4, 8, 16) and args.check_p == [0.2]
    for bad in (["--check-size", "4x8"], ["--check-p", "1.0"], ["--tokens", "0"],
                ["--dtype", "bfloat16"]):
        with pytest.raises(SystemExit):
            ex.parse_args(bad)


def test_example_torch_train_two_steps(tmp_path):
    from bench import example_torch_train as ex

    args = ex.parse_args(["--steps", "2", "--batch", "1", "--seq", "8", "--d", "32", "--heads",
                          "2", "--hidden", "32", "--out", str(tmp_path)])
    result = ex.run(args)
    assert result["ok"] and result["compared"], ex.markdown(result)
    assert len(result["ours"]["losses"]) == len(result["torch"]["losses"]) == 2
    assert result["max_rel_diff"] <= args.tol
    saved = json.loads((tmp_path / "train_loss.json").read_text())
    assert saved["ours"]["losses"] == result["ours"]["losses"]
    assert "max relative loss difference" in ex.markdown(result)


def test_example_torch_train_blocks_and_comparison():
    import torch

    from bench import example_torch_train as ex

    ours, ref = ex.build_pair(32, 2, 64, 0.0, torch.device("cpu"))
    assert type(ours.ln1).__name__ == "FusedLayerNorm" and type(ref.ln1) is torch.nn.LayerNorm
    assert ours.state_dict().keys() == ref.state_dict().keys()
    for k, v in ours.state_dict().items():
        assert torch.equal(v, ref.state_dict()[k]), k
    _, worst, ok = ex.compare([1.0, 0.5], [1.0, 0.5 * (1 + 1e-6)], 1e-4)
    assert ok and worst < 1e-5
    assert not ex.compare([1.0, 0.6], [1.0, 0.5], 1e-4)[2]
    assert not ex.compare([1.0, float("nan")], [1.0, 0.5], 1e-4)[2]
    with pytest.raises(SystemExit):
        ex.parse_args(["--d", "30", "--heads", "4"])


def _parser(script):
    """The argument parser entry of an op script: argv -> namespace."""
    import importlib

    mod = importlib.import_module(f"bench.{script}")
    return mod, {"dropout": lambda: mod.parse_args, "attention": lambda: mod.parse_args,
                 "layer_norm": lambda: mod.build_parser().parse_args,
                 "linear_act": lambda: mod.parser().parse_args}[script]()


@pytest.mark.parametrize("script, argv", [
    ("dropout", ["--providers", "numba,numba_cupy,numba_torch,eager,compile"]),
    ("layer_norm", ["--providers", "numba", "numba_cupy", "numba_torch", "liger"]),
    ("attention", ["--providers", "numba,numba_cupy,flash,math"]),
    ("linear_act", ["--providers", "numba_fused,numba_cupy,torch"]),
])
def test_op_scripts_accept_new_providers(script, argv):
    mod, parse = _parser(script)
    providers = parse(argv).providers
    if isinstance(providers, str):
        providers = providers.split(",")
    assert "numba_cupy" in providers and "numba_cupy" in mod.PROVIDERS
    default = parse([]).providers
    assert "numba_cupy" in default
    with pytest.raises(SystemExit):
        parse(["--providers", "no_such_provider"])


@pytest.fixture
def cpu_bench(monkeypatch):
    """Run the op scripts' run() on CPU tensors under the simulator: tensors on the
    CPU, GPU-only measurements replaced by one plain call each."""
    import torch

    from bench import common

    def fake_time(fn, arg_sets, reps=100, warmup=10):
        for args in arg_sets:
            fn(*args)
        return common.Timing(median_ms=1.0, p20_ms=0.9, p80_ms=1.1, reps=1)

    def fake_peak(fn, args, cupy_alloc=False):
        fn(*args)
        return 0.0

    monkeypatch.setattr(common, "DEVICE", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)

    def patch(mod):
        for name, value in (("time_cuda", fake_time), ("peak_mb", fake_peak),
                            ("rotations", lambda *a, **k: 2),
                            ("copy_bandwidth", lambda *a, **k: 1000.0),
                            ("gpu_info", lambda: {"name": "sim", "sm_count": 1, "memory_gb": 0}),
                            ("_peak_mb", lambda *a: 0.0), ("_kernel_info", lambda *a: {})):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, value)
        return mod

    patch(common)
    return patch


def _cupy_missing():
    from bench.common import cupy_or_none

    return cupy_or_none()[0] is None


def test_dropout_script_runs_and_checks(cpu_bench, tmp_path):
    """Runs, checks, tabulates; then the table and plots again from its JSON alone."""
    from bench import dropout

    cpu_bench(dropout)
    partial = tmp_path / "partial.json"
    args = dropout.parse_args(["--shapes", "4x64", "--dtypes", "float32", "--activations", "gelu",
                               "--providers", "numba,numba_torch,numba_cupy,eager", "--p", "0.3",
                               "--no-host-overhead", "--json", str(partial)])
    results = dropout.run(args)
    # run() itself rewrites the JSON after every (shape, dtype): a sweep cut short by a
    # time limit keeps what it measured.
    assert [r["provider"] for r in json.loads(partial.read_text())] == [
        r["provider"] for r in results]
    timed = [r for r in results if r["kind"] == "timing"]
    assert {(r["provider"], r["direction"]) for r in timed} == {
        (p, d) for p in ("numba", "numba_torch", "eager") for d in ("fwd", "bwd")}
    assert all(r["check"] == "ok" for r in timed), [(r["provider"], r["check"]) for r in timed]
    assert all(r["peak_MB"] == 0.0 and 0.0 < r["keep_rate"] <= 1.0 for r in timed)
    if _cupy_missing():
        assert any(r["kind"] == "note" and r["provider"] == "numba_cupy" for r in results)
    assert "| check |" in dropout.markdown(results)
    path = tmp_path / "dropout.json"
    path.write_text(json.dumps(results))
    again = dropout.main(["--from-json", str(path), "--plot", str(tmp_path)])
    assert dropout.markdown(again) == dropout.markdown(results)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "dropout_gelu_sweep.png").stat().st_size > 0


def test_dropout_check_flags_wrong_outputs():
    """check_outputs: a mask that differs between forward and backward, and a missing
    1/(1-p) scale, fail; torch's own dropout passes."""
    import torch
    import torch.nn.functional as F

    from bench import dropout

    torch.manual_seed(0)
    x, g = torch.randn(256, 128), torch.randn(256, 128)
    b = torch.randn(128)
    p = 0.2
    xr, br = x.clone().requires_grad_(), b.clone().requires_grad_()
    y = F.dropout(F.gelu(xr + br), p)
    gx, gb = torch.autograd.grad(y, (xr, br), g)
    y = y.detach()
    assert dropout.check_outputs("gelu", p, "float32", x, b, g, y, (gx, gb))[0] == "ok"
    y2 = F.dropout(F.gelu(xr + br), p)
    gx2, gb2 = torch.autograd.grad(y2, (xr, br), g)
    assert dropout.check_outputs("gelu", p, "float32", x, b, g, y, (gx2, gb2))[0].startswith("FAIL")
    assert dropout.check_outputs("gelu", p, "float32", x, b, g, y * (1 - p))[0].startswith("FAIL")


def test_layer_norm_script_runs_and_checks(cpu_bench):
    from bench import layer_norm

    cpu_bench(layer_norm)
    args = layer_norm.build_parser().parse_args(
        ["--ops", "layer_norm", "--shapes", "4x64", "--dtypes", "float32", "--providers", "numba",
         "numba_torch", "numba_cupy", "torch", "liger", "--no-overhead"])
    results = layer_norm.run(args, copy_gbps=1000.0)
    timed = [r for r in results if "median_ms" in r]
    assert {(r["provider"], r["dir"]) for r in timed} == {
        (p, d) for p in ("numba", "numba_torch", "torch") for d in ("fwd", "bwd")}
    assert all(r["check"] == "ok" for r in timed), [(r["provider"], r["check"]) for r in timed]
    assert set(timed[-1]["rel_err"]) == {"dx", "dw", "db"}
    notes = {r["provider"]: r["note"] for r in results if "note" in r}
    if _cupy_missing():
        assert "numba_cupy" in notes
    if importlib.util.find_spec("liger_kernel") is None:
        assert notes["liger"] == "liger_kernel not installed"
        assert "liger_kernel not installed" in layer_norm.markdown(results)


def test_attention_script_runs_and_checks(cpu_bench):
    from bench import attention

    cpu_bench(attention)
    args = attention.parse_args(["--shapes", "1x2x8x16", "--dtypes", "float32", "--causal", "yes",
                                 "--providers", "numba,numba_torch,numba_cupy,math",
                                 "--no-host-overhead"])
    results = attention.run(args)
    timed = [r for r in results if "median_ms" in r]
    assert {(r["provider"], r["pass"]) for r in timed} == {
        (p, d) for p in ("numba", "numba_torch", "math") for d in ("fwd", "bwd")}
    assert all(r["check"] == "ok" for r in timed), [(r["provider"], r["check"]) for r in timed]
    if _cupy_missing():
        assert any(r["provider"] == "numba_cupy" and "note" in r for r in results)
    assert "| check |" in attention.markdown(results)


def test_linear_act_script_runs_and_checks(cpu_bench):
    from bench import linear_act

    cpu_bench(linear_act)
    args = linear_act.parser().parse_args(["--shapes", "8x16x24", "--dtypes", "float32",
                                           "--providers", "numba_fused,numba_cupy,torch"])
    rows = linear_act.run(args)
    timed = [r for r in rows if "median_ms" in r]
    assert {(r["provider"], r["pass"]) for r in timed} == {
        (p, d) for p in ("numba_fused", "torch") for d in ("fwd", "bwd")}
    assert all(r["check"] == "ok" for r in timed), [(r["provider"], r["check"]) for r in timed]
    assert set(timed[-1]["rel_err"]) == {"gx", "gw", "gb"}
    if _cupy_missing():
        assert any(r["provider"] == "numba_cupy" and "note" in r for r in rows)


def test_cli_report_assembly(cpu_bench, monkeypatch, tmp_path):
    """run_gpu with the op rows and examples stubbed: tables, notes, failed checks and
    the examples' section end up in results.md / results.json, and the exit status
    says a check failed."""
    import importlib

    main = importlib.import_module("bench.__main__")
    from bench import dropout, launch_cost

    timed = {"op": "dropout", "case": "c", "dtype": "float16", "pass": "fwd",
             "provider": "numba", "median_ms": 0.1, "p20_ms": 0.1, "p80_ms": 0.1, "check": "ok"}
    failed = dict(timed, provider="eager", check="FAIL (y 1.0e-01 >= 1e-02)")
    note = {"op": "dropout", "provider": "numba_cupy", "note": "CuPy not importable"}
    monkeypatch.setattr(dropout, "cli_rows", lambda quick, copy_gbps: [timed, failed, note, note])
    monkeypatch.setattr(launch_cost, "measure", lambda calls: [{"what": "x", "us_per_call": 1.0}])
    monkeypatch.setattr(main, "run_examples",
                        lambda args: ({"torch_train": {"ok": True}}, "example section"))
    rc = main.run_gpu(main.argparse.Namespace(ops=["dropout"], quick=True, out=str(tmp_path),
                                              no_examples=False))
    assert rc == 1
    md = (tmp_path / "results.md").read_text()
    assert md.count("CuPy not importable") == 1
    assert "check failed: dropout c float16 fwd eager" in md
    assert "example section" in md
    report = json.loads((tmp_path / "results.json").read_text())
    assert report["examples"] == {"torch_train": {"ok": True}}
    assert len(report["rows"]) == 4


def test_model_step_swaps_every_layer_norm():
    """bench/model_step.py's swap replaces each nn.LayerNorm, nested too, by a
    FusedLayerNorm sharing its parameters, and leaves other modules alone."""
    import torch

    from bench import model_step

    model = torch.nn.Sequential(torch.nn.LayerNorm(8),
                                torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)))
    weight = model[0].weight
    assert model_step.swap_modules(model, ("layer_norm",)) == 2
    assert type(model[0]).__name__ == "FusedLayerNorm" and model[0].weight is weight
    assert type(model[1][1]).__name__ == "FusedLayerNorm"
    assert type(model[1][0]) is torch.nn.Linear
    with pytest.raises(SystemExit):
        model_step.parse_args(["--swap", "attention_typo"])


def test_gated_linear_script_runs_and_checks(cpu_bench):
    """bench/gated_linear.py on CPU tensors under the simulator: every provider asked
    for gives a timed row with a small error against the float32 reference."""
    from bench import gated_linear

    cpu_bench(gated_linear)
    args = gated_linear.parser().parse_args(["--shapes", "8x16x12", "--dtypes", "float32",
                                             "--providers", "numba_torch", "numba_fused",
                                             "torch"])
    rows = gated_linear.run(args)
    timed = {(r["provider"], r["pass"]): r for r in rows if "median_ms" in r}
    assert set(timed) == {("numba_torch", "fwd"), ("numba_torch", "fwd+bwd"),
                          ("numba_fused", "fwd"), ("torch", "fwd"), ("torch", "fwd+bwd")}
    for r in timed.values():
        assert float(r["check"].split()[1]) < 1e-5, r
    assert "| numba_torch |" in gated_linear.markdown(rows)


def test_models_script_arguments_and_builders():
    """bench/models.py: its arguments, and every family's small model builds with the
    attention implementation asked for (the GPU run is the benchmark itself)."""
    pytest.importorskip("transformers")
    from bench import models

    args = models.parse_args(["--models", "llama", "--variants", "sdpa", "patched",
                              "--size", "small"])
    assert args.models == ["llama"] and args.variants == ["sdpa", "patched"]
    with pytest.raises(SystemExit):
        models.parse_args(["--variants", "no_such_variant"])
    for name in models.SIZES:
        m = models.build(name, "small", "eager", 0, device="cpu")
        assert m.config._attn_implementation == "eager"


def test_profile_op_builds_every_op():
    """bench/profile_op.py (ncu's workload): every op's callable runs on tiny inputs and
    returns the op's outputs (finite, the input's row shape); the LayerNorm forward
    matches torch's."""
    torch = pytest.importorskip("torch")
    from bench import profile_op

    for op in profile_op.OPS:
        args = profile_op.parse_args([op, "--shape", "3x40", "--dtype", "float32",
                                      "--activation", "gelu"])
        out = profile_op.build(args, torch, device="cpu")()
        outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
        first = torch.as_tensor(outs[0])
        assert first.shape == (3, 40), (op, first.shape)
        assert all(bool(torch.isfinite(torch.as_tensor(o)).all()) for o in outs), op
        if op == "ln_fwd":
            gen = torch.Generator(device="cpu").manual_seed(0)
            x = torch.randn((3, 40), generator=gen)
            torch.randn((3, 40), generator=gen)
            w = torch.randn(40, generator=gen) * 0.5 + 1.0
            b = torch.randn(40, generator=gen)
            want = torch.nn.functional.layer_norm(x, (40,), w, b, 1e-5)
            assert torch.allclose(first, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(SystemExit):
        profile_op.parse_args(["no_such_op"])
    with pytest.raises(SystemExit):  # the baselines' side: the norm ops only
        profile_op.parse_args(["dropout_bwd", "--provider", "compile"])
    assert profile_op.parse_args(["rms_fwd", "--provider", "compile"]).provider == "compile"
    assert profile_op.parse_args(["ln_bwd", "--provider", "liger"]).provider == "liger"
    # --affine: the norm backward without w / b returns None for the missing grads.
    for op, affine, missing in (("ln_bwd", "none", (1, 2)), ("ln_bwd", "b", (1,)),
                                ("ln_bwd", "w", (2,)), ("rms_bwd", "none", (1,))):
        args = profile_op.parse_args([op, "--shape", "3x40", "--dtype", "float32",
                                      "--affine", affine])
        out = profile_op.build(args, torch, device="cpu")()
        assert all(out[i] is None for i in missing), (op, affine)
        assert all(out[i] is not None for i in range(len(out)) if i not in missing), (op, affine)
        assert bool(torch.isfinite(torch.as_tensor(out[0])).all()), (op, affine)
    # --no-stats: our norm forwards return y alone.
    for op in ("ln_fwd", "rms_fwd"):
        args = profile_op.parse_args([op, "--shape", "3x40", "--dtype", "float32",
                                      "--no-stats"])
        out = profile_op.build(args, torch, device="cpu")()
        assert all(o is None for o in out[1:]) and out[0] is not None, op
    for bad in (["rms_bwd", "--affine", "b"], ["dropout_fwd", "--affine", "none"],
                ["ln_bwd", "--provider", "compile", "--affine", "w"],
                ["ln_bwd", "--no-stats"], ["rms_fwd", "--provider", "compile", "--no-stats"]):
        with pytest.raises(SystemExit):
            profile_op.parse_args(bad)


def test_sweep_table_from_committed_runs():
    """bench/sweep_table.py on issue #16's committed sweeps: the loss counts the notes
    quote, the cell format, and the disturbed-measurement mark."""
    from bench import sweep_table

    root = pathlib.Path(__file__).resolve().parents[1] / "bench" / "results"
    runs = {name: json.loads((root / f"{name}.json").read_text())
            for name in ("dropout_sweep_h100_v3", "dropout_sweep_h100_v5",
                         "norms_sweep_h100_v11")}
    lines, lost, ties, compared = sweep_table.table(runs["dropout_sweep_h100_v3"], "dropout")
    assert (lost, ties, compared) == (12, 0, 120)
    row = next(line for line in lines if line.startswith("| none fwd fp32 |"))
    assert row.count("**") == 20 and row.count("c |") == 10  # lost to torch.compile
    assert sweep_table.table(runs["dropout_sweep_h100_v5"], "dropout")[1:] == (0, 0, 120)
    lines, lost, ties, compared = sweep_table.table(runs["norms_sweep_h100_v11"], "norms")
    assert (lost, ties, compared) == (63, 3, 120)
    rms = next(line for line in lines if line.startswith("| RMS fwd fp32 |")).split(" | ")
    assert rms[4].startswith("0.543! **0.33**c")  # N = 2048: p80 1.24 ms, p20 0.184


def test_sass_mix_counts_the_row_loop():
    """bench/ab/sass_mix.py: the innermost loop with a 16-byte load and a shuffle is the
    one counted, by class and opcode; a file without one says so."""
    from bench.ab import sass_mix

    text = "\n".join([
        "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
        ".L_x_0:",
        "        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;",
        "        /*0020*/                   FFMA R8, R4, R5, R6 ;",
        "        /*0030*/                   SHFL.BFLY PT, R9, R8, 0x1, 0x1f ;",
        "        /*0040*/                   IADD3 R2, R2, 0x10, RZ ;",
        "        /*0050*/               @P0 BRA `(.L_x_0) ;",
        ".L_x_1:",
        "        /*0060*/                   FADD R8, R8, R9 ;",
        "        /*0070*/               @P1 BRA `(.L_x_1) ;",
    ])
    n, classes, ops = sass_mix.row_loop_mix(text)
    assert n == 5
    assert classes == {"memory": 1, "float": 1, "sync": 1, "integer/control": 2}
    assert ops["BRA"] == 1 and ops["LDG"] == 1
    assert sass_mix.row_loop_mix(".L_x_1:\n        /*0000*/  FADD R1, R1, R1 ;\n") is None


def test_bandwidth_plot_keeps_each_providers_colour(monkeypatch, tmp_path):
    """bench.common.plot_bandwidth_sweep draws a provider in one colour in every
    panel, so a forward-only provider (numba_infer) does not shift the others'
    colours in the backward panels (the fifty-ninth session's first norms plots did),
    and its one legend names every provider drawn, in the order given. matplotlib is
    stood in for, so this runs where it is not installed."""
    sys.path.insert(0, ROOT)
    from bench import common

    drawn, legends = [], []

    class Ax:
        def __init__(self, panel):
            self.panel = panel

        def plot(self, xs, ys, **kw):
            drawn.append((self.panel, kw["label"], kw["color"]))

        def legend(self, handles=None, **kw):
            legends.append([h.label for h in handles])

        def __getattr__(self, name):  # axhline, set_xscale, set_title, ...
            return lambda *a, **kw: None

    class Line:
        def __init__(self, *a, color=None, label=None, **kw):
            self.label = label

    class Fig:
        def suptitle(self, *a, **kw):
            pass

    class Plt:
        rcParams = {"axes.prop_cycle": type("C", (), {"by_key": lambda self: {
            "color": ["c0", "c1", "c2", "c3"]}})()}
        Line2D = Line

        @staticmethod
        def subplots(nr, nc, **kw):
            return Fig(), [[Ax((i, j)) for j in range(nc)] for i in range(nr)]

    monkeypatch.setattr(common, "pyplot", lambda: Plt)
    monkeypatch.setattr(common, "save_figure",
                        lambda fig, d, name, paths, dpi=0: paths.append(name))
    rows = [dict(dir=d, dtype="float16", provider=p, N=n, **{"GB/s": 1.0, "copy_GB/s": 2.0})
            for d, provs in (("fwd", ("numba", "numba_infer", "torch")),
                             ("bwd", ("numba", "torch")))
            for p in provs for n in (512, 1024)]
    paths = common.plot_bandwidth_sweep(rows, str(tmp_path), "x.png", "t",
                                        ("numba", "numba_infer", "torch"), ("float16",))
    assert paths == ["x.png"]
    colours = {}
    for _, prov, colour in drawn:
        assert colours.setdefault(prov, colour) == colour, (prov, drawn)
    assert colours == {"numba": "c0", "numba_infer": "c1", "torch": "c2"}
    assert legends == [["numba", "numba_infer", "torch", "copy"]]
