"""Reliability on the GPU (issue #18, items 3 and 5): the atomic-lock schemes under
heavy contention repeated many times, deterministic modes bit-identical run to run,
memory and caches bounded over many calls, and ops called from several threads each
on its own stream. GPU only: the simulator runs blocks one after another, so nothing
contends there. Each test runs under a watchdog (pytest-timeout's ``timeout`` mark
where the plugin is installed, as on the lent GPU's image)."""

import importlib
import threading

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]

torch = pytest.importorskip("torch")

from tests.util import assert_close  # noqa: E402


def _randn(*shape, dtype=torch.float16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)


def test_layer_norm_locks_under_contention():
    """A block per row (the seed's per-row locking: 8192 row blocks) over 4 row buffers,
    200 times: every dW/dB within tolerance of the deterministic result, no NaN, no
    hang; the deterministic scheme bit-identical over 20 runs."""
    from numba_fused import layer_norm as ln

    M, N = 8192, 256
    x, g = _randn(M, N, seed=1), _randn(M, N, seed=2)
    w, b = _randn(N, seed=3), _randn(N, seed=4)
    y, mean, rstd = ln.layer_norm_forward(x, w, b)
    ref = ln.layer_norm_backward(g, x, w, b, mean, rstd, deterministic=True)
    for _ in range(19):
        again = ln.layer_norm_backward(g, x, w, b, mean, rstd, deterministic=True)
        assert all(torch.equal(a, r) for a, r in zip(again, ref))
    with ln.tuning(bwd_grid=M, group_size=4, bwd_scheme="lock"):
        for i in range(200):
            gx, gw, gb = ln.layer_norm_backward(g, x, w, b, mean, rstd, deterministic=False)
            assert torch.equal(gx, ref[0]), i
            assert torch.isfinite(gw).all() and torch.isfinite(gb).all(), i
            assert_close(gw, ref[1], "float16", f"grad_weight, run {i}")
            assert_close(gb, ref[2], "float16", f"grad_bias, run {i}")


@pytest.mark.parametrize("dq_scheme", ["lock", "atomic"])
def test_attention_split_keys_lock_under_contention(dq_scheme):
    """dQ accumulated by 64 splits (under the split-keys lock, or by atomic adds),
    100 times: within tolerance of the deterministic result every time; deterministic
    mode bit-identical over 20 runs."""
    from numba_fused.attention import attention_backward, attention_forward

    q = _randn(1, 256, 4, 64, seed=5)
    k, v = _randn(1, 4096, 4, 64, seed=6), _randn(1, 4096, 4, 64, seed=7)
    go = _randn(1, 256, 4, 64, seed=8)
    out, lse = attention_forward(q, k, v)
    ref = attention_backward(go, q, k, v, out, lse, deterministic=True, num_splits=64)
    for _ in range(19):
        again = attention_backward(go, q, k, v, out, lse, deterministic=True, num_splits=64)
        assert all(torch.equal(a, r) for a, r in zip(again[:3], ref[:3]))
    for i in range(100):
        gq, gk, gv, _ = attention_backward(go, q, k, v, out, lse, num_splits=64,
                                           dq_scheme=dq_scheme)
        assert torch.equal(gk, ref[1]) and torch.equal(gv, ref[2]), i
        assert torch.isfinite(gq).all(), i
        assert_close(gq, ref[0], "float16", f"grad_q, run {i}")


def _train_calls(shape_index):
    """One forward + backward of every torch front-end op at one of several shapes."""
    from interop.torch import (dropout_bias_act, layer_norm, linear_act,
                               scaled_dot_product_attention)

    rows = (7, 64, 130, 257, 1000)[shape_index % 5]
    n = (64, 128, 96)[shape_index % 3]
    x = torch.randn(rows, n, device="cuda", dtype=torch.float16, requires_grad=True)
    w = torch.randn(n, device="cuda", dtype=torch.float16, requires_grad=True)
    W = torch.randn(32, n, device="cuda", dtype=torch.float16, requires_grad=True)
    q = torch.randn(1, 2, rows % 97 + 1, 64, device="cuda", dtype=torch.float16,
                    requires_grad=True)
    loss = (layer_norm(x, (n,), w, w).float().sum()
            + dropout_bias_act(x, w, 0.1, "gelu").float().sum()
            + linear_act(x, W, None, "relu").float().sum()
            + scaled_dot_product_attention(q, q, q, is_causal=True).float().sum())
    loss.backward()


def test_memory_returns_to_start_over_many_calls():
    """2,000 forward + backward rounds of every op over 15 shapes: torch's allocated
    memory afterwards equals what it was after one round of each shape (no workspace,
    plan or saved tensor is kept), and the plan caches stay within their bounds."""
    tln = importlib.import_module("interop.torch.layer_norm")
    tla = importlib.import_module("interop.torch.linear_act")
    for i in range(15):
        _train_calls(i)
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    for i in range(2000):
        _train_calls(i)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == start
    for cache in (tln._FWD_PLANS, tln._BWD_PLANS, tla._FWD_PLANS):
        assert len(cache) <= cache.limit


def test_plan_cache_is_bounded():
    """More signatures than a plan cache holds: it keeps at most its limit."""
    tln = importlib.import_module("interop.torch.layer_norm")
    w = torch.randn(64, device="cuda", dtype=torch.float16)
    for rows in range(1, tln._FWD_PLANS.limit + 40):
        tln.layer_norm(torch.randn(rows, 64, device="cuda", dtype=torch.float16), (64,), w)
    assert 0 < len(tln._FWD_PLANS) <= tln._FWD_PLANS.limit


def test_threads_each_on_its_own_stream():
    """4 Python threads, each on its own CUDA stream, call every op (forward and
    backward) 30 times at once: every result equals the one computed alone."""
    from interop.torch import layer_norm, linear_act, scaled_dot_product_attention
    from numba_fused import dropout_bias_act_backward, dropout_bias_act_forward

    def work(seed):
        x = _randn(300, 128, seed=seed).requires_grad_()
        w = _randn(128, seed=seed + 1).requires_grad_()
        W = _randn(64, 128, seed=seed + 2).requires_grad_()
        q = _randn(2, 2, 70, 64, seed=seed + 3).requires_grad_()
        y = layer_norm(x, (128,), w, w, deterministic=True)
        z = linear_act(y, W, None, "gelu_tanh")
        a = scaled_dot_product_attention(q, q, q, is_causal=True)
        d = dropout_bias_act_forward(x.detach(), w.detach(), p=0.2, seed=seed, offset=8,
                                     activation="gelu")
        gd, gb = dropout_bias_act_backward(z.detach()[:, :1].expand(300, 128).contiguous(),
                                           x.detach(), w.detach(), p=0.2, seed=seed, offset=8,
                                           activation="gelu")
        (z.float().sum() + a.float().sum()).backward()
        return [y.detach(), z.detach(), a.detach(), d, gd, gb, x.grad, w.grad, W.grad, q.grad]

    alone = {s: work(s) for s in (10, 20, 30, 40)}
    torch.cuda.synchronize()
    errors, results = [], {}

    def run(seed):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for _ in range(30):
                    out = work(seed)
                stream.synchronize()
            results[seed] = out
        except Exception as exc:  # reported below with the seed
            errors.append((seed, exc))

    threads = [threading.Thread(target=run, args=(s,)) for s in alone]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    for seed, ref in alone.items():
        for i, (a, b) in enumerate(zip(results[seed], ref)):
            if i == 9:  # q's grad: attention's dQ lock accumulates in arrival order
                assert_close(a, b, "float16", f"thread {seed} tensor {i}")
            else:
                assert torch.equal(a, b), (seed, i)
