"""``interop.torch.patch`` on Hugging Face models built from small configs with random
weights (issue #19): the patched model (our norms, our attention through
transformers' attention registry) gives the stock model's logits, loss and gradients
(same weights, with and without a padding mask); the state_dict is unchanged (keys and the very tensors);
variants we do not implement are left alone and reported. Under the simulator a
one-layer, tiny-width config (float32); on the GPU larger ones in float32 and bfloat16
and a short training run."""

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.util import device  # noqa: E402

TINY = dict(vocab=64, hidden=16, heads=2, layers=1, inter=32, seq=8, batch=2)
SMALL = dict(vocab=512, hidden=128, heads=4, layers=2, inter=256, seq=64, batch=4)


def _model(kind, size, dtype):
    s = size
    common = dict(vocab_size=s["vocab"], attn_implementation="eager")
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_embd=s["hidden"], n_layer=s["layers"], n_head=s["heads"],
                                      n_positions=s["seq"], resid_pdrop=0.0, embd_pdrop=0.0,
                                      attn_pdrop=0.0, **common)
        cls = transformers.GPT2LMHeadModel
    elif kind == "bert":
        cfg = transformers.BertConfig(hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                                      num_attention_heads=s["heads"],
                                      intermediate_size=s["inter"],
                                      max_position_embeddings=s["seq"],
                                      hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0, **common)
        cls = transformers.BertForMaskedLM
    else:
        cfg = transformers.LlamaConfig(hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                                       num_attention_heads=s["heads"], num_key_value_heads=1,
                                       intermediate_size=s["inter"],
                                       max_position_embeddings=s["seq"], **common)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    return cls(cfg).to(device=device(), dtype=dtype)


EXPECTED = {"gpt2": ("LayerNorm", "FusedLayerNorm"), "bert": ("LayerNorm", "FusedLayerNorm"),
            "llama": ("LlamaRMSNorm", "FusedRMSNorm")}
EXPECTED_MLP = {"gpt2": ("GPT2MLP", "ConvMLP"), "bert": ("BertIntermediate", "LinearActIntermediate"),
                "llama": ("LlamaMLP", "GatedMLP")}


def _step(model, ids, mask=None):
    out = model(input_ids=ids, attention_mask=mask, labels=ids)
    out.loss.backward()
    return out.logits.detach().float(), float(out.loss.detach())


def _check_parity(kind, size, dtype, tol, padded=False):
    from interop.torch import patch

    stock = _model(kind, size, dtype)
    ours = copy.deepcopy(stock)
    before = ours.state_dict()
    report = patch(ours)
    old, new = EXPECTED[kind]
    n_norms = sum(type(m).__name__ == old for m in stock.modules())
    norms = [r for r in report.replaced if r[2] == new]
    assert n_norms > 0 and len(norms) == n_norms, str(report)
    assert all(r[1:] == (old, new) for r in norms)
    mlp_old, mlp_new = EXPECTED_MLP[kind]
    n_mlps = sum(type(m).__name__ == mlp_old for m in stock.modules())
    mlps = [r for r in report.replaced if r[1] == mlp_old]
    assert n_mlps > 0 and len(mlps) == n_mlps and all(r[2] == mlp_new for r in mlps), \
        str(report)
    assert not report.skipped, str(report)
    assert [r for r in report.replaced if not r[0]] == [("", "attention eager",
                                                        "attention numba_fused")]
    assert ours.config._attn_implementation == "numba_fused"
    from interop.torch.patch import hf_attention

    fallbacks = hf_attention.fallbacks
    assert sum(type(m).__name__ == new for m in ours.modules()) == n_norms
    after = ours.state_dict()
    assert list(after) == list(before)
    assert all(after[k] is before[k] or after[k].data_ptr() == before[k].data_ptr()
               for k in before)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=gen)
    ids = ids.to(device())
    mask = None
    if padded:  # the last 3 tokens of the second sequence are padding: a real mask
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
    # 16-bit gradients are also held against a float64 copy of the same weights: stock's
    # own float16 gradients of BERT's query/key weights are ~30% off float64 (tiny
    # gradients underflow to float16 subnormals), so there "ours within 2x of stock's
    # error" is the bound, as for every op that torch also has.
    ref = copy.deepcopy(stock).double() if dtype != torch.float32 else None
    logits_s, loss_s = _step(stock, ids, mask)
    logits_o, loss_o = _step(ours, ids, mask)
    assert hf_attention.fallbacks == fallbacks, "every attention call took our kernels"
    rel = float((logits_o - logits_s).norm() / logits_s.norm())
    assert rel < tol, f"logits differ by {rel:.2e}"
    assert abs(loss_o - loss_s) <= tol * abs(loss_s)
    if ref is not None:
        _step(ref, ids, mask)
    # Some gradients are zero up to rounding (BERT's key bias: softmax ignores a shift
    # shared by every key): each is held relative to at least 1e-3 of the largest.
    truth = stock if ref is None else ref
    top = max(float(p.grad.float().norm()) for p in truth.parameters() if p.grad is not None)
    for (n, ps), po, pt in zip(stock.named_parameters(), ours.parameters(), truth.parameters()):
        if ps.grad is None:
            assert po.grad is None, n
            continue
        scale = max(float(pt.grad.double().norm()), 1e-3 * top)
        g_rel = float((po.grad.double() - pt.grad.double()).norm()) / scale
        if ref is None:
            assert g_rel < 10 * tol, f"{n}: gradient differs by {g_rel:.2e}"
            continue
        s_rel = float((ps.grad.double() - pt.grad.double()).norm()) / scale
        assert g_rel < max(2 * s_rel, 10 * tol), \
            f"{n}: gradient error {g_rel:.2e} against float64 (stock's {s_rel:.2e})"


@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
@pytest.mark.parametrize("padded", [False, True])
def test_patch_tiny_models_match_stock(kind, padded):
    _check_parity(kind, TINY, torch.float32, 1e-4, padded)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
# Whole models at twice the dtype's single-op tolerance (bf16 1e-2, fp16 2e-3).
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2),
                                       (torch.float16, 4e-3)])
@pytest.mark.parametrize("padded", [False, True])
def test_patch_small_models_match_stock(kind, dtype, tol, padded):
    _check_parity(kind, SMALL, dtype, tol, padded)


def _train(model, batches, steps, lr=1e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for step in range(steps):
        ids = batches[step % len(batches)]
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return torch.tensor(losses)


def _batches(n, seed=2):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, SMALL["vocab"], (SMALL["batch"], SMALL["seq"]), generator=gen)
            .to(device()) for _ in range(n)]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-3), (torch.bfloat16, 3e-2)],
                         ids=["float32", "bfloat16"])
def test_patched_training_follows_stock(kind, dtype, tol):
    """100 AdamW steps on random tokens (issue #19): the patched model's loss curve
    follows stock's within ``tol`` (float32: 1e-3; bfloat16: 3e-2, both models round
    every op to bf16 from the first step on) and falls."""
    from interop.torch import patch

    stock = _model(kind, SMALL, dtype)
    ours = copy.deepcopy(stock)
    patch(ours)
    batches = _batches(4)
    s, o = _train(stock, batches, 100), _train(ours, batches, 100)
    assert torch.isfinite(o).all()
    assert float(((o - s).abs() / s.abs()).max()) < tol
    assert float(o[-10:].mean()) < 0.8 * float(o[:10].mean())


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
def test_patched_training_converges_with_dropout(kind):
    """Dropout on (0.1 in attention and residuals where the model has them; our
    attention draws its own masks, so the curves differ from stock's run to run):
    100 steps still converge like stock's (float32)."""
    from interop.torch import patch

    size = dict(SMALL)
    stock = _model(kind, size, torch.float32)
    cfg = stock.config
    for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout_prob",
                 "attention_probs_dropout_prob", "attention_dropout"):
        if hasattr(cfg, name):
            setattr(cfg, name, 0.1)
    torch.manual_seed(0)
    stock = type(stock)(cfg).to(device())
    ours = copy.deepcopy(stock)
    patch(ours)
    batches = _batches(4, seed=3)
    torch.manual_seed(5)
    s = _train(stock, batches, 100)
    torch.manual_seed(5)
    o = _train(ours, batches, 100)
    assert torch.isfinite(o).all()
    assert float(o[-10:].mean()) < 0.8 * float(o[:10].mean())
    assert abs(float(o[-10:].mean()) - float(s[-10:].mean())) < 0.2 * float(s[-10:].mean())


def test_patch_leaves_unknown_variants_and_reports_them():
    """Gemma's RMSNorm multiplies by (1 + weight): not ours; left as is and reported
    (attention left to the other tests)."""
    from interop.torch import patch

    cfg = transformers.GemmaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                   intermediate_size=32, max_position_embeddings=8)
    torch.manual_seed(0)
    model = transformers.GemmaForCausalLM(cfg).to(device())
    report = patch(model, attention=False, mlp=False)
    assert not report.replaced
    names = {type(m).__name__ for m in model.modules()}
    assert "GemmaRMSNorm" in names and "FusedRMSNorm" not in names
    assert report.skipped and all(r[1] == "GemmaRMSNorm" for r in report.skipped)
    assert "does not implement" in str(report)


def test_patch_rejects_non_modules_and_respects_flags():
    from interop.torch import patch

    with pytest.raises(TypeError, match="torch.nn.Module"):
        patch("model")
    net = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 8))
    assert not patch(net, layer_norm=False).replaced
    assert type(net[0]) is torch.nn.LayerNorm
    assert [r[0] for r in patch(net).replaced] == ["0"]
    assert type(net[0]).__name__ == "FusedLayerNorm"
    assert not patch(net).replaced  # already ours
