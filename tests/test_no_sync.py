"""No op's host path waits for the GPU (issue #20): queued behind a long-running
kernel, a call (forward and backward) must return to Python while that kernel still
runs. A call that synchronised would return only after the GPU caught up, and the
event recorded after it would then complete soon after."""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

# ~0.5 s of spinning at the H200's clock: far longer than any call below takes on the host.
_SLEEP_CYCLES = int(1e9)


def _calls():
    from interop.torch import (FusedGatedMLP, FusedMLP, dropout_bias_act, layer_norm,
                               linear_act, rms_norm, scaled_dot_product_attention)

    dt = torch.float16
    x = torch.randn(64, 256, device="cuda", dtype=dt, requires_grad=True)
    w = torch.randn(256, device="cuda", dtype=dt, requires_grad=True)
    b = torch.randn(256, device="cuda", dtype=dt, requires_grad=True)
    q, k, v = (torch.randn(2, 4, 64, 64, device="cuda", dtype=dt, requires_grad=True)
               for _ in range(3))
    lw = torch.randn(128, 256, device="cuda", dtype=dt, requires_grad=True)
    mlp = FusedMLP(256, 512, 256, device="cuda", dtype=dt)
    gated = FusedGatedMLP(256, 344, 256, device="cuda", dtype=dt)
    return {
        "layer_norm": lambda: layer_norm(x, (256,), w, b).sum().backward(),
        "rms_norm": lambda: rms_norm(x, (256,), w).sum().backward(),
        "dropout_bias_act": lambda: dropout_bias_act(x, b, p=0.1, activation="gelu").sum()
        .backward(),
        "sdpa": lambda: scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward(),
        "linear_act": lambda: linear_act(x, lw, None, "gelu_tanh").sum().backward(),
        "mlp": lambda: mlp(x).sum().backward(),
        "gated_mlp": lambda: gated(x).sum().backward(),
    }


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "dropout_bias_act", "sdpa",
                                "linear_act", "mlp", "gated_mlp"])
def test_op_returns_before_the_gpu_catches_up(op):
    call = _calls()[op]
    for _ in range(2):  # compile, then build any per-signature plan
        call()
    torch.cuda.synchronize()
    torch.cuda._sleep(_SLEEP_CYCLES)
    call()
    after = torch.cuda.Event()
    after.record()
    still_running = not after.query()
    torch.cuda.synchronize()
    assert still_running, f"{op}: the call returned only after the queued GPU work finished"
