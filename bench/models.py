"""Issue #19's model table: Hugging Face GPT-2, BERT and Llama training steps, stock vs
patched, tokens per second and peak memory.

Each model is built from a config (random weights, no download), bf16 parameters,
dropout 0, AdamW, random token batches (the same for every variant). Variants:

- ``eager``: stock with ``attn_implementation="eager"`` (transformers' own math);
- ``sdpa``: stock with torch's ``scaled_dot_product_attention`` (flash / efficient);
- ``compile``: ``sdpa`` under ``torch.compile`` (inductor; its compile time is spent
  in the warm-up steps, not timed);
- ``patched``: ``sdpa`` after ``interop.torch.patch(model)`` (norms, attention and
  MLPs on our kernels where they apply: ``PatchReport`` in the JSON).

Every variant starts from the same weights. Per variant: ``--warmup`` untimed steps,
``--steps`` timed ones (CUDA events around forward + backward + ``AdamW.step``);
median step time, tokens/s at the median, peak memory of the training loop, and
the largest relative loss difference against ``sdpa`` over all steps (a check: within
``--tol``).

  python -m bench.models [--models llama gpt2 bert] [--variants eager sdpa compile patched]
      [--size realistic|small] [--steps 10] [--warmup 3] [--out DIR]

Needs a GPU and transformers (skipped with a note otherwise). The realistic sizes
take several minutes per model: run one model per call on the lent GPU.
"""

import argparse
import json
import os
import statistics
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.model_step import _quantile, train, unavailable  # noqa: E402

# name -> {size: (hidden, layers, heads, intermediate, seq, batch)}
SIZES = {
    "llama": {"realistic": (2048, 16, 16, 5632, 2048, 4), "small": (256, 2, 4, 688, 256, 4)},
    "gpt2": {"realistic": (1024, 24, 16, 4096, 1024, 8), "small": (256, 2, 4, 1024, 256, 4)},
    "bert": {"realistic": (1024, 24, 16, 4096, 512, 16), "small": (256, 2, 4, 1024, 128, 8)},
}
VARIANTS = ("eager", "sdpa", "compile", "patched")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--size", default="realistic", choices=("realistic", "small"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for models.json")
    return ap.parse_args(argv)


def build(name, size, attn, seed, device="cuda"):
    """A bf16 model of family ``name`` with attention implementation ``attn``."""
    import torch
    import transformers as tf

    hid, layers, heads, inter, seq, _ = SIZES[name][size]
    torch.manual_seed(seed)
    if name == "llama":
        conf = tf.LlamaConfig(hidden_size=hid, num_hidden_layers=layers,
                              num_attention_heads=heads, num_key_value_heads=heads,
                              intermediate_size=inter, max_position_embeddings=seq,
                              vocab_size=32000, attn_implementation=attn)
        cls = tf.LlamaForCausalLM
    elif name == "gpt2":
        conf = tf.GPT2Config(n_embd=hid, n_layer=layers, n_head=heads, n_inner=inter,
                             n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                             attn_implementation=attn)
        cls = tf.GPT2LMHeadModel
    else:
        conf = tf.BertConfig(hidden_size=hid, num_hidden_layers=layers,
                             num_attention_heads=heads, intermediate_size=inter,
                             max_position_embeddings=seq, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0, attn_implementation=attn)
        cls = tf.BertForMaskedLM
    return cls(conf).to(device=device, dtype=torch.bfloat16)


def run_model(name, args):
    import time

    import torch

    start = time.perf_counter()

    hid, layers, heads, inter, seq, batch = SIZES[name][args.size]
    base = build(name, args.size, "sdpa", args.seed)
    gen = torch.Generator(device="cuda").manual_seed(args.seed + 1)
    vocab = base.config.vocab_size
    batches = [torch.randint(0, vocab, (batch, seq), device="cuda", generator=gen)
               for _ in range(args.warmup + args.steps)]
    state = {k: v.detach().clone() for k, v in base.state_dict().items()}
    result = {"model": name, "size": args.size, "hidden": hid, "layers": layers,
              "heads": heads, "intermediate": inter, "seq": seq, "batch": batch,
              "params_M": sum(p.numel() for p in base.parameters()) / 1e6, "variants": {}}
    del base
    torch.cuda.empty_cache()
    losses = {}
    for variant in args.variants:
        model = build(name, args.size, "eager" if variant == "eager" else "sdpa", args.seed)
        model.load_state_dict(state)
        row = {}
        if variant == "patched":
            from interop.torch import patch

            report = patch(model)
            row["replaced"] = len(report.replaced)
            row["skipped"] = [list(s) for s in report.skipped]
        runner = model
        if variant == "compile":
            runner = torch.compile(model)
        try:
            times, loss, peak = train(runner, batches, args.warmup, args.lr)
        except Exception as exc:  # noqa: BLE001 (one variant's failure is a row, not a crash)
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            result["variants"][variant] = row
            del model, runner
            torch.cuda.empty_cache()
            continue
        med = statistics.median(times)
        row.update({"median_ms": med, "p20_ms": _quantile(times, 0.2),
                    "p80_ms": _quantile(times, 0.8), "tokens_per_s": batch * seq / (med / 1e3),
                    "peak_MB": peak / 2**20, "losses": loss})
        losses[variant] = loss
        result["variants"][variant] = row
        del model, runner
        torch.cuda.empty_cache()
        if variant == "compile":
            torch._dynamo.reset()
    ref = losses.get("sdpa")
    for variant, row in result["variants"].items():
        if ref is not None and variant in losses:
            rel = [abs(a - b) / abs(b) for a, b in zip(losses[variant], ref)]
            row["max_rel_loss_diff"] = max(rel)
            row["ok"] = max(rel) <= args.tol
    result["wall_s"] = time.perf_counter() - start
    return result


def markdown(results):
    lines = ["| model | variant | step ms (median) | p20-p80 | tokens/s | peak MB | vs sdpa | "
             "max rel loss diff vs sdpa |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        shape = (f"{r['model']} (d{r['hidden']} L{r['layers']} S{r['seq']} B{r['batch']}, "
                 f"{r['params_M']:.0f}M)")
        sdpa = r["variants"].get("sdpa", {}).get("median_ms")
        for variant, m in r["variants"].items():
            if "error" in m:
                lines.append(f"| {shape} | {variant} | failed: {m['error']} | | | | | |")
                continue
            vs = f"{sdpa / m['median_ms']:.3f}x" if sdpa else "-"
            diff = m.get("max_rel_loss_diff")
            dtxt = "-" if diff is None else f"{diff:.1e} ({'ok' if m.get('ok') else 'FAILED'})"
            lines.append(f"| {shape} | {variant} | {m['median_ms']:.2f} | {m['p20_ms']:.2f}-"
                         f"{m['p80_ms']:.2f} | {m['tokens_per_s']:.0f} | {m['peak_MB']:.0f} | "
                         f"{vs} | {dtxt} |")
    return "\n".join(lines)


def run(args):
    """Results of every model asked for, or ``[{"skipped": why}]``."""
    why = unavailable()
    if why:
        return [{"skipped": why}]
    results = []
    for name in args.models:
        results.append(run_model(name, args))
        if args.out:
            # Rewritten after every model, so a run stopped by a time limit keeps
            # the models that finished.
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "models.json"), "w") as f:
                json.dump(results, f, indent=1)
    return results


def main(argv=None):
    args = parse_args(argv)
    results = run(args)
    if results[0].get("skipped"):
        sys.stdout.write(f"model benchmark skipped: {results[0]['skipped']}\n")
        return 0
    sys.stdout.write(markdown(results) + "\n")
    ok = all(v.get("ok", True) and "error" not in v
             for r in results for v in r["variants"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
