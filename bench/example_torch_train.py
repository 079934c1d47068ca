"""End-to-end example 2: train a small transformer block built from our torch modules
beside the same block built from torch's, and compare the loss curves.

The block (pre-LN, causal self-attention then an MLP, both with residuals)::

    h = x + drop1(proj(attn(qkv(ln1(x)))))     drop1(t) = dropout(t + drop1.bias, p)
    y = h + drop2(mlp(ln2(h)))                 mlp(t)   = fc2(gelu(fc1(t))), fc2 without bias
                                               drop2(t) = dropout(t + drop2.bias, p)

| piece | ours (``interop.torch``) | torch |
|---|---|---|
| ln1, ln2 | ``FusedLayerNorm`` | ``nn.LayerNorm`` |
| qkv, proj | ``FusedLinearAct`` | ``nn.Linear`` |
| attn | ``FusedAttention(causal=True)`` | ``F.scaled_dot_product_attention(is_causal=True)`` |
| mlp | ``FusedMLP(activation="gelu", bias2=False)`` | ``nn.Linear``, ``F.gelu``, ``nn.Linear`` |
| drop1, drop2 | ``FusedDropoutBiasAct(p, bias_shape=d)`` | ``F.dropout(t + bias, p)`` |

Both blocks have the same parameter names; torch's block is loaded with our block's
initial state_dict. Task: teacher-student regression (targets from a third block,
random and fixed, on random inputs; MSE loss), AdamW, the same batches in the same
order for both. Dropout is off (p = 0) for the comparison: the two use different
random streams.

Check: for every step, ``|loss_ours - loss_torch| / loss_torch <= --tol`` (default
1e-4). Justification: in float32 the two blocks differ only by rounding (other
summation orders in the matmuls, reductions and attention; docs/API.md bounds our float32
error at 1e-5 relative per op). Measured with torch alone on the CPU at the default
size over 200 steps: multiplying every module's output by ``1 + 1e-5 * N(0, 1)`` moves
the loss by at most 9e-7 relative (``1e-4 * N(0, 1)``: 6e-6), while a wrong activation
(gelu's tanh approximation in place of erf's) moves it by 2.8e-4 and a missing
LayerNorm weight gradient by 3.4e-3. 1e-4 is 100x above rounding at that bound and
below both bugs. (A gradient off by a constant factor does not show: AdamW divides it
out.) Exit status 1 if the curves diverge beyond the tolerance.

Reports each block's median step time (CUDA events, after 10 warm-up steps) and the
peak memory of its training loop beyond what was allocated before it (the models and
the data; optimizer state, activations and gradients count), and writes ``train_loss.json`` and ``train_loss.png`` under ``--out``.
Our float32 attention runs on CUDA cores (fp32 FMA tiles), torch's on its efficient
kernel: step times are reported, not compared to a target.

  python -m bench.example_torch_train [--steps 200] [--batch 8 --seq 256 --d 256 --heads 4
      --hidden 1024] [--lr 1e-3] [--tol 1e-4] [--out DIR]

Under the CUDA simulator (no GPU) it runs on CPU tensors; keep the sizes tiny there.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WARMUP_STEPS = 10


class DropoutBias(nn.Module):
    """``dropout(t + bias, p)``: torch's counterpart of ``FusedDropoutBiasAct(p, bias_shape=d)``."""

    def __init__(self, p, d, device=None, dtype=None):
        super().__init__()
        self.p = p
        self.bias = nn.Parameter(torch.zeros(d, device=device, dtype=dtype))

    def forward(self, t):
        return F.dropout(t + self.bias, self.p, self.training)


class MLP(nn.Module):
    """``fc2(gelu(fc1(t)))``, fc2 without bias: torch's counterpart of ``FusedMLP``."""

    def __init__(self, d, hidden, device=None, dtype=None):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden, device=device, dtype=dtype)
        self.fc2 = nn.Linear(hidden, d, bias=False, device=device, dtype=dtype)

    def forward(self, t):
        return self.fc2(F.gelu(self.fc1(t)))


class CausalSDPA(nn.Module):
    """Torch's counterpart of ``FusedAttention(causal=True)`` ([B, H, S, D] inputs)."""

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    """The pre-LN transformer block of the module docstring; ``fused`` picks our
    modules or torch's (same parameter names either way)."""

    def __init__(self, fused, d, heads, hidden, p=0.0, device=None, dtype=None):
        super().__init__()
        if d % heads:
            raise ValueError(f"d = {d} must be a multiple of heads = {heads}")
        self.heads = heads
        kw = {"device": device, "dtype": dtype}
        if fused:
            from interop.torch import (FusedAttention, FusedDropoutBiasAct, FusedLayerNorm,
                                       FusedLinearAct, FusedMLP)

            self.ln1 = FusedLayerNorm(d, **kw)
            self.qkv = FusedLinearAct(d, 3 * d, **kw)
            self.attn = FusedAttention(causal=True)
            self.proj = FusedLinearAct(d, d, bias=False, **kw)
            self.drop1 = FusedDropoutBiasAct(p, "none", bias_shape=d, **kw)
            self.ln2 = FusedLayerNorm(d, **kw)
            self.mlp = FusedMLP(d, hidden, d, activation="gelu", bias2=False, **kw)
            self.drop2 = FusedDropoutBiasAct(p, "none", bias_shape=d, **kw)
        else:
            self.ln1 = nn.LayerNorm(d, **kw)
            self.qkv = nn.Linear(d, 3 * d, **kw)
            self.attn = CausalSDPA()
            self.proj = nn.Linear(d, d, bias=False, **kw)
            self.drop1 = DropoutBias(p, d, **kw)
            self.ln2 = nn.LayerNorm(d, **kw)
            self.mlp = MLP(d, hidden, **kw)
            self.drop2 = DropoutBias(p, d, **kw)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        o = self.attn(q, k, v).transpose(1, 2).reshape(b, s, d)
        h = x + self.drop1(self.proj(o))
        return h + self.drop2(self.mlp(self.ln2(h)))


def build_pair(d, heads, hidden, p, device, seed=0):
    """(ours, torch's): our block initialised from ``seed``, torch's loaded with its
    state_dict (strict: the parameter names must match)."""
    torch.manual_seed(seed)
    ours = Block(True, d, heads, hidden, p, device=device)
    ref = Block(False, d, heads, hidden, p, device=device)
    ref.load_state_dict(ours.state_dict(), strict=True)
    return ours, ref


def make_batches(steps, batch, seq, d, heads, hidden, device, seed=1):
    """``steps`` (input, target) pairs: random inputs, targets from a fixed random
    torch block (the teacher), computed once so both runs see the very same data."""
    gen = torch.Generator(device=device).manual_seed(seed)
    torch.manual_seed(seed + 1)
    teacher = Block(False, d, heads, hidden, 0.0, device=device).eval()
    out = []
    with torch.no_grad():
        for _ in range(steps):
            x = torch.randn(batch, seq, d, device=device, generator=gen)
            out.append((x, teacher(x)))
    return out


def _timer(device):
    """(start(), stop() -> ms of the step) for one step."""
    if device.type == "cuda":
        marks = []

        def start():
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            marks.append([ev, None])

        def stop():
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            marks[-1][1] = ev

        def collect():
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in marks]

        return start, stop, collect
    times = []

    def start_cpu():
        times.append([time.perf_counter(), None])

    def stop_cpu():
        times[-1][1] = time.perf_counter()

    return start_cpu, stop_cpu, lambda: [(b - a) * 1e3 for a, b in times]


def train(model, batches, lr, seed=2):
    """Train on ``batches`` (one AdamW step each); returns losses, median step ms
    (after the warm-up steps) and the peak MB allocated beyond what existed before."""
    device = batches[0][0].device
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    start, stop, collect = _timer(device)
    losses = []
    for x, target in batches:
        start()
        loss = F.mse_loss(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        stop()
        losses.append(loss.detach())
    times = collect()
    timed = times[WARMUP_STEPS:] if len(times) > WARMUP_STEPS else times
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else None
    return {"losses": torch.stack(losses).double().cpu().tolist(),
            "step_ms": statistics.median(timed), "peak_MB": peak}


def compare(ours, ref, tol):
    """Max relative loss difference over the steps, and whether it is within ``tol``."""
    diffs = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, ref)]
    worst = max(diffs)
    finite = all(v == v and abs(v) != float("inf") for v in ours + ref)
    return diffs, worst, bool(finite and worst <= tol)


def plot(result, path):
    """Loss curves and their relative difference; returns the path, or None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steps = range(1, len(result["ours"]["losses"]) + 1)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    ax.plot(steps, result["torch"]["losses"], label="torch modules", lw=2.5, alpha=0.6)
    ax.plot(steps, result["ours"]["losses"], label="numba-fused modules", lw=1)
    ax.set_yscale("log")
    ax.set_ylabel("training loss (MSE)")
    ax.legend()
    ax.set_title("transformer block, float32: ours vs torch (same init, same data)")
    ax2.semilogy(steps, [max(v, 1e-12) for v in result["rel_diff"]])
    ax2.axhline(result["tol"], color="r", ls="--", label=f"tolerance {result['tol']:g}")
    ax2.set_ylabel("|ours - torch| / torch")
    ax2.set_xlabel("step")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--p", type=float, default=0.0,
                    help="dropout probability; above 0 the curves are reported, not compared")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="max relative loss difference per step (default %(default)s)")
    ap.add_argument("--out", default=None, help="folder for train_loss.json / .png")
    args = ap.parse_args(argv)
    if min(args.steps, args.batch, args.seq, args.d, args.heads, args.hidden) < 1:
        ap.error("sizes and --steps must be >= 1")
    if args.d % args.heads:
        ap.error(f"--d ({args.d}) must be a multiple of --heads ({args.heads})")
    if not 0.0 <= args.p < 1.0:
        ap.error("--p must be in [0, 1)")
    return args


def run(args):
    """Train both blocks; returns the result dict (``ok`` False if the curves diverge)."""
    from numba import config

    device = torch.device("cpu" if config.ENABLE_CUDASIM or not torch.cuda.is_available()
                          else "cuda")
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 for the baseline too
    try:
        ours_model, ref_model = build_pair(args.d, args.heads, args.hidden, args.p, device)
        batches = make_batches(args.steps, args.batch, args.seq, args.d, args.heads,
                               args.hidden, device)
        ours = train(ours_model, batches, args.lr)
        ref = train(ref_model, batches, args.lr)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    diffs, worst, ok = compare(ours["losses"], ref["losses"], args.tol)
    compared = args.p == 0.0
    result = {"device": str(device), "config": {k: getattr(args, k) for k in
                                                ("steps", "batch", "seq", "d", "heads", "hidden",
                                                 "lr", "p")},
              "ours": ours, "torch": ref, "rel_diff": diffs, "max_rel_diff": worst,
              "tol": args.tol, "compared": compared, "ok": ok or not compared}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        result["png"] = plot(result, os.path.join(args.out, "train_loss.png"))
        with open(os.path.join(args.out, "train_loss.json"), "w") as f:
            json.dump(result, f, indent=1)
    return result


def markdown(result):
    c = result["config"]
    lines = [f"Block: batch {c['batch']}, seq {c['seq']}, d {c['d']}, heads {c['heads']}, "
             f"hidden {c['hidden']}, float32, AdamW lr {c['lr']}, {c['steps']} steps, "
             f"dropout {c['p']}, on {result['device']}.", "",
             "| block | first loss | last loss | median step ms | peak MB of the loop |",
             "|---|---|---|---|---|"]
    for name, key in (("numba-fused modules", "ours"), ("torch modules", "torch")):
        r = result[key]
        peak = "-" if r["peak_MB"] is None else f"{r['peak_MB']:.1f}"
        lines.append(f"| {name} | {r['losses'][0]:.6f} | {r['losses'][-1]:.6f} | "
                     f"{r['step_ms']:.2f} | {peak} |")
    if result["compared"]:
        verdict = "within" if result["ok"] else "BEYOND"
        lines += ["", f"max relative loss difference over the steps: "
                      f"{result['max_rel_diff']:.2e} ({verdict} tolerance {result['tol']:g})"]
    else:
        lines += ["", "dropout on: the two use different random streams, curves not compared"]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    print(markdown(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
