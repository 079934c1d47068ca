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
