"""The PyTorch front end as a whole (issue #15): a transformer block built from our
modules under torch.compile(fullgraph=True), every op and the block captured in a CUDA
graph and replayed on new values, and no op path synchronising with the GPU.

The per-op custom-op tests (opcheck, fullgraph compile of one op) live beside each op's
other tests (tests/test_<op>.py)."""

import pytest

torch = pytest.importorskip("torch")

from tests.util import (SIMULATOR, assert_close, compile_backend, compiled_targets,  # noqa: E402
                        device, torch_dtype)

FORWARD_OPS = {"numba_fused.layer_norm_fwd.default", "numba_fused.linear_act_fwd.default",
               "numba_fused.attention_fwd.default", "numba_fused.dropout_bias_act_fwd.default",
               "numba_fused.mlp_fwd.default"}
BACKWARD_OPS = {op.replace("_fwd", "_bwd") for op in FORWARD_OPS}


def _block(d=16, heads=2, hidden=32, p=0.1, dtype=torch.float32, seed=0):
    """LayerNorm -> attention -> dropout+bias -> LayerNorm -> FusedMLP, pre-norm residual,
    all from interop.torch's modules."""
    from interop.torch import (FusedAttention, FusedDropoutBiasAct, FusedLayerNorm,
                               FusedLinearAct, FusedMLP)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.ln1 = FusedLayerNorm(d, deterministic=True)
            self.qkv = FusedLinearAct(d, 3 * d)
            self.attn = FusedAttention(dropout=p, causal=True)
            self.proj = FusedLinearAct(d, d, bias=False)
            self.drop = FusedDropoutBiasAct(p, bias_shape=d)
            self.ln2 = FusedLayerNorm(d, deterministic=True)
            self.mlp = FusedMLP(d, hidden, d, activation="gelu_tanh")

        def forward(self, x):
            B, S, _ = x.shape
            qkv = self.qkv(self.ln1(x)).view(B, S, 3, self.heads, d // self.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            a = self.attn(q, k, v).transpose(1, 2).reshape(B, S, d)
            x = x + self.drop(self.proj(a))
            return x + self.mlp(self.ln2(x))

    torch.manual_seed(seed)
    block = Block()
    with torch.no_grad():
        for prm in block.parameters():  # LayerNorm weights 1 and dropout bias 0 test little
            prm.add_(0.1 * torch.randn(prm.shape))
    return block.to(device=device(), dtype=dtype)


def _aot_targets(fn, *args):
    """Call targets of the forward and backward graphs AOTAutograd makes of ``fn``."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    seen = {"fw": set(), "bw": set()}

    def collect(kind):
        def compiler(gm, example_inputs):
            seen[kind].update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
            return make_boxed_func(gm)
        return compiler

    torch._dynamo.reset()
    out = torch.compile(fn, backend=aot_autograd(fw_compiler=collect("fw"),
                                                 bw_compiler=collect("bw")), fullgraph=True)(*args)
    out.sum().backward()
    torch._dynamo.reset()
    return seen


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transformer_block_compiles_fullgraph(dtype):
    """One graph, no break; every forward op in the forward graph and every backward op
    in the backward graph; compiled output and gradients match eager (dropout off:
    eval mode) and torch.manual_seed reproduces a compiled training step."""
    if SIMULATOR and dtype != "float32":
        pytest.skip("the simulator runs the float32 block (time)")
    tdt = torch_dtype(dtype)
    block = _block(dtype=tdt)
    x = (0.5 * torch.randn(2, 6, 16)).to(device=device(), dtype=tdt)
    go = torch.randn(2, 6, 16).to(device=device(), dtype=tdt)

    assert FORWARD_OPS <= compiled_targets(block, x)
    seen = _aot_targets(block, x.clone().requires_grad_())
    assert FORWARD_OPS <= seen["fw"], seen["fw"]
    assert BACKWARD_OPS <= seen["bw"], seen["bw"]

    compiled = torch.compile(block, backend=compile_backend(), fullgraph=True)

    def step(run):
        block.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_()
        y = run(xi)
        y.backward(go)
        return [y.detach(), xi.grad] + [p.grad for p in block.parameters()]

    block.eval()
    eager, comp = step(block), step(compiled)
    for i, (a, b) in enumerate(zip(eager, comp)):
        assert_close(b, a, dtype, f"eval tensor {i}")
    block.train()
    runs = []
    for _ in range(2):
        torch.manual_seed(5)
        runs.append(step(compiled))
    for a, b in zip(*runs):
        assert torch.isfinite(a).all()
    assert torch.equal(runs[0][0], runs[1][0])


# ---------------------------------------------------------------------------
# GPU: CUDA graphs and sync-debug mode
# ---------------------------------------------------------------------------

def _op_cases():
    """name -> (make() -> (fn(*inputs) -> outputs, inputs)); fn returns the output and
    the gradients of the inputs and parameters, so forward and backward are captured."""
    from interop.torch import (FusedMLP, dropout_bias_act, layer_norm, linear_act, rms_norm,
                               scaled_dot_product_attention)

    dt = torch.float16

    def grads(out, leaves):
        g = torch.autograd.grad(out, leaves, torch.ones_like(out))
        return [out.detach(), *g]

    def rand(*shape, grad=True):
        return torch.randn(*shape, device="cuda", dtype=dt).requires_grad_(grad)

    def case_layer_norm():
        w, b = rand(256), rand(256)
        return (lambda x: grads(layer_norm(x, (256,), w, b, deterministic=True), [x, w, b]),
                [rand(64, 256)])

    def case_rms_norm():
        w = rand(256)
        return (lambda x: grads(rms_norm(x, (256,), w, deterministic=True), [x, w]),
                [rand(64, 256)])

    def case_dropout():
        b = rand(256)
        return (lambda x: grads(dropout_bias_act(x, b, p=0.0, activation="gelu"), [x, b]),
                [rand(64, 256)])

    def case_sdpa():
        return (lambda q, k, v: grads(scaled_dot_product_attention(q, k, v, is_causal=True),
                                      [q, k, v]),
                [rand(2, 4, 64, 64) for _ in range(3)])

    def case_linear_act():
        w, b = rand(128, 256), rand(128)
        return (lambda x: grads(linear_act(x, w, b, "gelu_tanh"), [x, w, b]), [rand(64, 256)])

    def case_mlp():
        mlp = FusedMLP(256, 512, 256, device="cuda", dtype=dt)
        return (lambda x: grads(mlp(x), [x, *mlp.parameters()]), [rand(64, 256)])

    def case_block():
        block = _block(d=128, heads=2, hidden=256, p=0.0, dtype=dt)
        return (lambda x: grads(block(x), [x, *block.parameters()]), [rand(4, 64, 128)])

    return {"layer_norm": case_layer_norm, "rms_norm": case_rms_norm, "dropout": case_dropout,
            "sdpa": case_sdpa, "linear_act": case_linear_act, "mlp": case_mlp,
            "block": case_block}


OPS = ["layer_norm", "rms_norm", "dropout", "sdpa", "linear_act", "mlp", "block"]


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_cuda_graph_replay_matches_eager(op):
    """Forward and backward captured with torch.cuda.graph, replayed on new input
    values: the eager results of those values (workspaces come from torch's allocator,
    launches go to the capturing stream)."""
    fn, inputs = _op_cases()[op]()
    static = [t.detach().clone().requires_grad_() for t in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # compile, build plans, allocate per-stream state
            fn(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = fn(*static)
    for _ in range(2):
        fresh = [torch.randn_like(t) for t in inputs]
        with torch.no_grad():
            for s, f in zip(static, fresh):
                s.copy_(f)
        graph.replay()
        eager = fn(*[f.requires_grad_() for f in fresh])
        torch.cuda.synchronize()
        for i, (a, b) in enumerate(zip(outs, eager)):
            assert_close(a, b, "float16", f"{op} output {i}")


@pytest.mark.gpu
def test_cuda_graph_capture_of_dropout_raises():
    """Dropout with p > 0 cannot be captured (its seed would be frozen): a clear error,
    not one mask replayed every step."""
    from interop.torch import dropout_bias_act

    x = torch.randn(8, 64, device="cuda")
    dropout_bias_act(x, None, p=0.1)
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="cannot be captured in a CUDA graph"):
        with torch.cuda.graph(graph, stream=side):
            dropout_bias_act(x, None, p=0.1)


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_no_sync_in_sync_debug_mode(op):
    """torch.cuda.set_sync_debug_mode('error') raises on any synchronising torch call:
    the op's forward and backward make none."""
    fn, inputs = _op_cases()[op]()
    fn(*inputs)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn(*inputs)
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_function_apply_shortcut_matches_function_apply():
    """The front ends call the C ``_FunctionBase.apply`` (interop.torch._fast.
    function_apply): the transformer block's outputs, gradients and graph nodes are
    those of torch's Python ``Function.apply``; under a functorch transform the
    shortcut steps aside (the same error as Function.apply gives: our Functions have
    no setup_context)."""
    from interop.torch import _fast, layer_norm

    x = torch.randn(2, 5, 16, device=device())
    results = []
    for fast in (True, False):
        _fast.FAST_APPLY[0] = fast
        try:
            block = _block(p=0.0)
            xi = x.clone().requires_grad_()
            y = block(xi)
            y.backward(torch.ones_like(y))
            node = type(y.grad_fn).__name__
            grads = [xi.grad] + [prm.grad for prm in block.parameters()]
            results.append((y.detach(), grads, node))
            w = torch.ones(16, device=device())
            with pytest.raises(RuntimeError, match="setup_context"):
                torch.func.grad(lambda t: layer_norm(t, (16,), w).sum())(x)
        finally:
            _fast.FAST_APPLY[0] = True
    (y1, g1, n1), (y2, g2, n2) = results
    assert torch.equal(y1, y2) and n1 == n2
    for a, b in zip(g1, g2):
        assert torch.equal(a, b)
