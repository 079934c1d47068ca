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
