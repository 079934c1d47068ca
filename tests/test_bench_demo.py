"""The main job's CPU-only path: the simulator demo runs every op and its checks pass."""

import pytest


@pytest.mark.sim
def test_simulator_demo_all_ops_pass(capsys):
    from bench import demo

    assert demo.main([]) == 0
    out = capsys.readouterr().out
    for op in demo.DEMOS:
        assert f"| {op} |" in out
    assert "all checks passed" in out


@pytest.mark.sim
def test_demo_runs_example_check_when_asked(capsys, monkeypatch):
    from bench import demo

    calls = []
    monkeypatch.setattr(demo, "example_check", lambda: calls.append("ex") or 0)
    assert demo.main(["--example", "dropout"]) == 0
    assert calls == ["ex"]
    out = capsys.readouterr().out
    assert "| dropout |" in out and "| layer_norm |" not in out
    monkeypatch.setattr(demo, "example_check", lambda: 2)
    assert demo.main(["--example", "dropout"]) == 1


@pytest.mark.sim
def test_cli_without_gpu_runs_demo(monkeypatch):
    """No GPU: the CLI hands over to the demo, with example 1's check unless --no-examples."""
    import importlib

    cli = importlib.import_module("bench.__main__")
    seen = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, env: seen.append(cmd) or 0)
    assert cli.main(["--ops", "dropout"]) == 0
    assert cli.main(["--ops", "dropout", "--no-examples"]) == 0
    assert seen[0][-3:] == ["bench.demo", "--example", "dropout"]
    assert seen[1][-2:] == ["bench.demo", "dropout"]


def test_speedup_table_compares_the_front_door_with_every_baseline():
    from bench.__main__ import speedup_table

    def row(provider, ms, case="c"):
        return {"op": "op", "case": case, "dtype": "float16", "pass": "fwd",
                "provider": provider, "median_ms": ms}

    rows = [row("numba", 1.0), row("numba_torch", 2.0), row("eager", 4.0), row("compile", 1.0),
            row("numba", 1.0, "d"), row("torch", 3.0, "d"), row("numba_cupy", 9.0, "e")]
    lines = speedup_table(rows).splitlines()
    assert len(lines) == 4  # header, rule, cases c and d (e has no baseline)
    assert "2.000 (numba_torch) | eager 2.00x, compile 0.50x" in lines[2]
    assert "1.000 (numba) | torch 3.00x" in lines[3]
