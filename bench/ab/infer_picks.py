"""The plain forward's layouts again, at the norms forwards still behind (issue #16,
fifty-ninth session): an A/B of ``fwd_plain_layout`` picks, timed with and without
the statistics.

    python3 bench/ab/infer_picks.py [--cells f32_ln_4096,...] [--suffix e] [--passes 3] [--reps 30]

Why. ``_PLAIN_PICKS``' layouts were chosen (v28, v29, v33) by the forward with its
statistics. Since v49 torch.compile, which writes y alone under no_grad, is held to
``stats=False`` (the ``_nostats`` kernels, which have fewer registers live at the end);
the 19 forwards behind in the fifty-eighth session's sweep are all plain-kernel rows
but the float32 RMSNorm 12288 (plain too) -- so this asks whether another layout of
the same kernel is faster there now. A layout is ``words.rpb[.mb][.e|.l]``: groups a
thread, rows a block, launch bounds for ``mb`` blocks an SM (``-`` for none), w / b
early or late (the default: early up to four words); ``default`` is the launcher's
own pick. Each candidate's y is checked against the default's (relative difference
under the dtype's tolerance; the reduction order differs between layouts), then
every layout is timed with ``stats=False`` (``inf``) and with the statistics
(``st``), ``gpu`` us as tune_layer_norm.py times (a GPU sleep before each call,
median over 3 rotated input sets), in alternating order over the passes.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from numba_fused import layer_norm as ln  # noqa: E402

from tune_layer_norm import _sleep_cycles, time_fn  # noqa: E402

TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}

# cell -> (op, dtype, N, candidate layouts); M = 2^26 / N. The default comes first.
CELLS = {
    "f32_ln_2048": ("ln", "float32", 2048, ["2.1", "8.1", "1.1", "4.1.-.l"]),
    "f32_ln_4096": ("ln", "float32", 4096, ["4.1.-.e", "2.1", "8.1", "4.1.-.l", "1.1"]),
    "f32_ln_8192": ("ln", "float32", 8192, ["4.1", "8.1.-.e", "4.1.-.l", "2.1"]),
    "f32_rms_2048": ("rms", "float32", 2048, ["4.1", "1.1", "8.1", "2.1.-.l"]),
    "f32_rms_4096": ("rms", "float32", 4096, ["4.1", "8.1", "1.1", "2.1.-.l"]),
    "f32_rms_5120": ("rms", "float32", 5120, ["2.1", "8.1", "5.1", "4.1.-.l"]),
    "f32_rms_8192": ("rms", "float32", 8192, ["8.1", "2.1", "4.1.-.l", "8.1.-.e"]),
    "f32_rms_12288": ("rms", "float32", 12288, ["4.1", "6.1", "3.1", "8.1.-.e"]),
    "f32_rms_16384": ("rms", "float32", 16384, ["8.1", "4.1.2.e", "8.1.-.e"]),
    "f16_rms_8192": ("rms", "float16", 8192, ["4.1", "8.1", "1.1", "2.1.-.l"]),
    "f16_rms_12288": ("rms", "float16", 12288, ["8.1", "2.1", "3.1", "6.1"]),
    "f16_ln_16384": ("ln", "float16", 16384, ["4.1", "2.1", "8.1.-.e"]),
    # Second call: w / b early where the registers still leave 2+ blocks an SM (float32
    # LayerNorm 8192 at eight words early: 130 registers with the statistics, one block
    # of 256 an SM; 128 without them, two; bounds for two: 127).
    "f32_ln_8192e": ("ln", "float32", 8192, ["8.1.2.e", "8.1.-.e", "8.1.2"]),
    "f32_ln_12288e": ("ln", "float32", 12288, ["8.1.-.e"]),
    "f32_ln_4096e": ("ln", "float32", 4096, ["4.1.3.e", "4.1.-.e"]),
    "f16_ln_8192e": ("ln", "float16", 8192, ["8.1.4.e", "8.1.-.e"]),
    "bf16_ln_8192e": ("ln", "bfloat16", 8192, ["8.1.4.e"]),
    "f16_ln_12288e": ("ln", "float16", 12288, ["8.1.-.e", "8.1.2"]),
    "f16_ln_16384e": ("ln", "float16", 16384, ["8.1.2.e"]),
    "bf16_ln_16384e": ("ln", "bfloat16", 16384, ["8.1.2.e", "8.1.-.e"]),
    # Third call: RMSNorm at eight (six) words with w early (v50 took it for LayerNorm).
    "f16_rms_8192r": ("rms", "float16", 8192, ["8.1.4.e", "8.1.-.e", "4.1.-.e"]),
    "bf16_rms_8192r": ("rms", "bfloat16", 8192, ["8.1.4.e", "8.1.-.e"]),
    "f16_rms_12288r": ("rms", "float16", 12288, ["8.1.-.e", "8.1.3.e", "6.1.-.e"]),
    "bf16_rms_12288r": ("rms", "bfloat16", 12288, ["8.1.-.e", "8.1.3.e"]),
    "f32_rms_2048r": ("rms", "float32", 2048, ["8.1.-.e"]),
    "f32_rms_4096r": ("rms", "float32", 4096, ["8.1.4.e"]),
    "f32_rms_12288r": ("rms", "float32", 12288, ["6.1.-.e"]),
    # Fourth call: occupancy caps (v51 candidate, refuted and removed: the tuning
    # fwd_plain_max_blocks and launch.Kernel.cap_shared exist at commit 39b8d80 only). Blocks an SM (ptxas 13.0 on the CPU)
    # without / with the statistics: RMSNorm 2048 (two words, 256 threads) 8 / 6,
    # 4096 (two, 512) 4 / 3, 5120 (four, 320) 3 / 3; LayerNorm 2048 (four, 128) 7 / 6,
    # 4096 (four, 256, bounds for 5) 5 / 5.
    "f32_rms_2048c": ("rms", "float32", 2048, ["c6", "c5", "c4"]),
    "f32_rms_4096c": ("rms", "float32", 4096, ["c3", "c2"]),
    "f32_rms_5120c": ("rms", "float32", 5120, ["c2"]),
    "f32_ln_2048c": ("ln", "float32", 2048, ["c6", "c5", "c4"]),
    "f32_ln_4096c": ("ln", "float32", 4096, ["c4", "c3"]),
    # Sixtieth session: x's loads with the L2 prefetch-size hint (fwd_plain_prefetch)
    # at the launcher's own layout, pN: .L2::<N>B. (Refuted and removed in the
    # sixty-fifth session: the tuning exists at commit 5035c28 and before.)
    "f32_rms_2048p": ("rms", "float32", 2048, ["p256", "p128"]),
    "f32_rms_4096p": ("rms", "float32", 4096, ["p256", "p128"]),
    "f32_ln_4096p": ("ln", "float32", 4096, ["p256", "p128"]),
    "f32_rms_12288p": ("rms", "float32", 12288, ["p256", "p128"]),
    "f32_ln_8192p": ("ln", "float32", 8192, ["p256", "p128"]),
    "f16_rms_8192p": ("rms", "float16", 8192, ["p256", "p128"]),
    "f16_ln_1024p": ("ln", "float16", 1024, ["p256", "p128"]),
    "f16_ln_4096p": ("ln", "float16", 4096, ["p256", "p128"]),
    # Sixtieth session: inductor's occupancy (64 warps an SM) at 16 float32 values a
    # thread -- four words, w late, launch bounds that hold 32 registers without
    # spills (ptxas 13.0, CPU) -- where the picks run 24-48 warps.
    "f32_rms_2048q": ("rms", "float32", 2048, ["4.1.16.l", "2.1.8.l"]),
    "f32_rms_4096q": ("rms", "float32", 4096, ["4.1.8.l", "4.1.6.l"]),
    "f32_rms_5120q": ("rms", "float32", 5120, ["4.1.6.l"]),
    "f32_rms_8192q": ("rms", "float32", 8192, ["4.1.4.l"]),
    "f32_rms_12288q": ("rms", "float32", 12288, ["4.1.2.l"]),
    "f32_rms_16384q": ("rms", "float32", 16384, ["4.1.2.l"]),
    "f32_ln_2048q": ("ln", "float32", 2048, ["2.1.8.l"]),
    "f32_ln_4096q": ("ln", "float32", 4096, ["4.1.6.l", "2.1.4.l"]),
    # The same at 16-bit RMSNorm N = 8192 / 12288 (behind inductor by 0.1-1.6 us):
    # w late, bounds for 64 warps an SM at 32 registers (or 48 at 40), no spills.
    "f16_rms_8192h": ("rms", "float16", 8192, ["4.1.8.l", "2.1.4.l", "4.1.6.l"]),
    "bf16_rms_8192h": ("rms", "bfloat16", 8192, ["4.1.8.l", "2.1.4.l"]),
    "f16_rms_12288h": ("rms", "float16", 12288, ["4.1.4.l", "2.1.2.l"]),
    "bf16_rms_12288h": ("rms", "bfloat16", 12288, ["4.1.4.l", "2.1.2.l"]),
    # Sixty-first session: inductor's two-loop shape (fwd_plain_reload, ``r``): x read
    # again from L1 for y, not held across the reductions; at the launcher's own layout
    # and at inductor's block (512 threads at N <= 4096, 1024 above; ncu: 25-32
    # registers, 64 warps an SM), w late.
    "f32_rms_2048x": ("rms", "float32", 2048, ["r", "1.1.-.l.r", "2.1.-.l.r"]),
    "f32_rms_4096x": ("rms", "float32", 4096, ["r", "2.1.4.l.r", "4.1.-.l.r"]),
    "f32_rms_5120x": ("rms", "float32", 5120, ["r", "5.1.-.l.r"]),
    "f32_rms_8192x": ("rms", "float32", 8192, ["r", "2.1.-.l.r", "4.1.4.l.r"]),
    "f32_rms_12288x": ("rms", "float32", 12288, ["r", "3.1.-.l.r"]),
    "f32_rms_16384x": ("rms", "float32", 16384, ["r", "4.1.2.l.r"]),
    "f32_ln_4096x": ("ln", "float32", 4096, ["r", "2.1.-.l.r", "2.1.4.l.r"]),
    "f16_rms_8192x": ("rms", "float16", 8192, ["r", "2.1.-.l.r", "4.1.-.l.r"]),
    "bf16_rms_8192x": ("rms", "bfloat16", 8192, ["r", "2.1.-.l.r"]),
    # Sixty-first session, from ncu's per-instruction counts at float32 RMSNorm 4096
    # (ours 150 instructions a warp, inductor's 111): ``k`` n compiled in and lanes by
    # masks (no 64-bit signed % and //, no division by a runtime n: same bits), ``t``
    # the warps' partials summed pairwise (depth 4 at 16 warps, not a chain of 15).
    # At the launcher's own layout. Not t at RMSNorm 16384 (32 partials: spills).
    # (Refuted, v54, and removed in the sixty-fifth session: fwd_plain_const_n and
    # fwd_plain_tree exist at commit 5035c28 and before.)
    "f32_rms_2048k": ("rms", "float32", 2048, ["k", "k.t"]),
    "f32_rms_4096k": ("rms", "float32", 4096, ["k", "k.t"]),
    "f32_rms_5120k": ("rms", "float32", 5120, ["k", "k.t"]),
    "f32_rms_8192k": ("rms", "float32", 8192, ["k", "k.t"]),
    "f32_rms_12288k": ("rms", "float32", 12288, ["k", "k.t"]),
    "f32_rms_16384k": ("rms", "float32", 16384, ["k"]),
    "f32_ln_2048k": ("ln", "float32", 2048, ["k", "k.t"]),
    "f32_ln_4096k": ("ln", "float32", 4096, ["k", "k.t"]),
    "f16_rms_8192k": ("rms", "float16", 8192, ["k", "k.t"]),
    "bf16_rms_12288k": ("rms", "bfloat16", 12288, ["k", "k.t"]),
}


def parse_layout(text):
    """``words.rpb[.mb][.e|.l][.cN|.pN]`` or ``cN`` / ``pN`` (the default layout) ->
    tuning overrides (None for ``default``); ``cN``: at most N blocks an SM
    (fwd_plain_max_blocks, with and without the statistics; removed, commit 39b8d80);
    ``pN``: x's loads with the L2 prefetch-size hint of N bytes (fwd_plain_prefetch;
    removed, commit 5035c28); ``r``: x read again for y (fwd_plain_reload); ``k``: n
    compiled in, lanes by masks (fwd_plain_const_n); ``t``: the warps' partials summed
    pairwise (fwd_plain_tree; both removed, commit 5035c28); these three in any order
    at the end."""
    if text == "default":
        return None
    parts = text.split(".")
    tune = {}
    flags = {"r": "fwd_plain_reload", "k": "fwd_plain_const_n", "t": "fwd_plain_tree"}
    while parts and parts[-1] in flags:
        tune[flags[parts.pop()]] = True
    if not parts:
        return tune
    if parts[-1].startswith("p"):
        tune["fwd_plain_prefetch"] = int(parts.pop()[1:])
        if not parts:
            return tune
    if parts[-1].startswith("c"):
        tune["fwd_plain_max_blocks"] = int(parts.pop()[1:])
        if not parts:
            return tune
    tune.update(fwd_plain=True, fwd_plain_layout=(int(parts[0]), int(parts[1])))
    if len(parts) > 2 and parts[2] != "-":
        tune["fwd_plain_min_blocks"] = int(parts[2])
    if len(parts) > 3:
        tune["fwd_early"] = {"e": True, "l": False}[parts[3]]
    return tune


def _fwd(op, x, w, b, stats):
    if op == "rms":
        return ln.rms_norm_forward(x, w, stats=stats)[0]
    return ln.layer_norm_forward(x, w, b, stats=stats)[0]


def _call(op, tune, stats):
    def run(x, w, b):
        if tune is None:
            return _fwd(op, x, w, b, stats)
        with ln.tuning(**tune):
            return _fwd(op, x, w, b, stats)
    return run


def _kernels_of(run, args):
    """The plain kernels ``run(*args)`` launches (their names and registers)."""
    seen = []
    orig = ln.make_plain_forward_kernel

    def record(*a, **k):
        kern = orig(*a, **k)
        seen.append(kern)
        return kern

    ln.make_plain_forward_kernel = record
    try:
        run(*args)
    finally:
        ln.make_plain_forward_kernel = orig
    return [f"{k.name.split('_vec_')[-1]} {k.regs_per_thread}r" for k in seen]


def run_cell(name, passes, reps, sleep):
    op, dname, n, cands = CELLS[name]
    m = 2**26 // n
    dt = getattr(torch, dname)
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(3):
        x = torch.randn(m, n, device="cuda", generator=g).to(dt)
        w = (torch.rand(n, device="cuda", generator=g) + 0.5).to(dt)
        b = torch.randn(n, device="cuda", generator=g).to(dt) if op == "ln" else None
        sets.append((x, w, b))
    layouts = ["default"] + cands
    ref = _call(op, None, True)(*sets[0]).float()
    ok = []
    for lay in layouts:
        try:
            y = _call(op, parse_layout(lay), False)(*sets[0]).float()
        except Exception as exc:  # a layout that does not split this row: report, skip
            print(f"| {name} | {lay} | error: {type(exc).__name__}: {exc} |", flush=True)
            continue
        err = ((y - ref).norm() / ref.norm()).item()
        good = err < TOL[dname] and bool(torch.isfinite(y).all())
        kern = _kernels_of(_call(op, parse_layout(lay), False), sets[0])
        print(f"| {name} | {lay} | check {err:.2e} {'ok' if good else 'FAIL'} | "
              f"{', '.join(kern)} |", flush=True)
        if good:
            ok.append(lay)
    times = {(lay, st): [] for lay in ok for st in (False, True)}
    for p in range(passes):
        order = ok if p % 2 == 0 else ok[::-1]
        for lay in order:
            for st in (False, True):
                ms = time_fn(_call(op, parse_layout(lay), st), sets, reps, sleep)
                times[(lay, st)].append(ms * 1e3)
    base_inf = sorted(times[("default", False)])[len(times[("default", False)]) // 2]
    for lay in ok:
        inf = ", ".join(f"{v:.1f}" for v in times[(lay, False)])
        st = ", ".join(f"{v:.1f}" for v in times[(lay, True)])
        mid = sorted(times[(lay, False)])[passes // 2]
        print(f"| {name} | {lay} | inf {inf} | st {st} | inf median - default "
              f"{mid - base_inf:+.2f} |", flush=True)
    del sets
    torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=None, help="comma-separated (default: every cell)")
    ap.add_argument("--suffix", default=None,
                    help="the cells whose names end with this (one call's set: e, r, c, p, q, h, x, k)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    sleep = _sleep_cycles()
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    names = args.cells.split(",") if args.cells else list(CELLS)
    if args.suffix:
        names = [c for c in names if c.endswith(args.suffix)]
    for name in names:
        run_cell(name, args.passes, args.reps, sleep)


if __name__ == "__main__":
    main()
