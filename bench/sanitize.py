"""Run every op's kernels once on small inputs: the workload for compute-sanitizer.

    compute-sanitizer --tool memcheck --report-api-errors no python3 bench/sanitize.py [op ...]
    compute-sanitizer --tool racecheck python3 bench/sanitize.py [op[:dtype] ...]

(``attention:float16`` runs one dtype of one op: the harness can then split a slow
op's instrumented run over several processes.)

(torch and CuPy probe driver entry points that this driver lacks at start-up:
``--report-api-errors no`` keeps those CUDA_ERROR_INVALID_VALUE API returns out of
memcheck's error count.)

Each op present in this checkout runs forward and backward over its flags and
dtypes on small, awkward shapes (rows not a multiple of the block, odd lengths),
so every kernel specialisation the launchers pick at such sizes is launched at
least once. Prints one line per op; exits non-zero if a call raised.
"""

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _dropout(nf, torch, dt):
    x = torch.randn(37, 263, device="cuda", dtype=dt)
    b = torch.randn(263, device="cuda", dtype=dt)
    g = torch.randn_like(x)
    for act in ("none", "relu", "gelu", "gelu_tanh", "squared_relu", "leaky_relu", "silu"):
        for p in (0.0, 0.3):
            nf.dropout_bias_act_forward(x, b, p=p, seed=3, offset=8, activation=act)
            nf.dropout_bias_act_backward(g, x, b, p=p, seed=3, offset=8, activation=act)
    # The 16-byte vector path (N % 8 == 0) at its default geometry (v5: two rows a
    # batch, float32 at 512 threads), rows not a multiple of the batch.
    xv = torch.randn(37, 264, device="cuda", dtype=dt)
    bv = torch.randn(264, device="cuda", dtype=dt)
    gv = torch.randn_like(xv)
    # v8: 16-bit 'none' backward at four rows a batch, gelu forward and silu at one
    # (v24: the 16-bit gelu forward in blocks of 128); v13: without the bias grad the
    # 16-bit backward's 3-slot cp.async ring.
    for act in ("none", "gelu", "silu"):
        nf.dropout_bias_act_forward(xv, bv, p=0.3, seed=3, offset=8, activation=act)
        nf.dropout_bias_act_backward(gv, xv, bv, p=0.3, seed=3, offset=8, activation=act)
        nf.dropout_bias_act_backward(gv, xv, bv, p=0.3, seed=3, offset=8, activation=act,
                                     need_bias_grad=False)
    # The last block's bias-grad sum at each final_step, and the tiles summed directly
    # (v7 candidate), over 37 partial rows.
    from numba_fused.dropout import LaunchConfig

    for step in (1, 4):
        nf.dropout_bias_act_backward(gv, xv, bv, p=0.3, seed=3, offset=8, activation="gelu",
                                     config=LaunchConfig(rows_per_block=1, final_step=step))
    nf.dropout_bias_act_backward(gv, xv, bv, p=0.3, seed=3, offset=8, activation="none",
                                 config=LaunchConfig(rows_per_block=1, tile_reduce="direct"))
    # v14 (opt-in): the reduction kernel as a dependent launch (trigger and wait).
    for reduce in ("kernel", "kernel_pdl"):
        nf.dropout_bias_act_backward(gv, xv, bv, p=0.3, seed=3, offset=8, activation="gelu",
                                     config=LaunchConfig(rows_per_block=3, bias_reduce=reduce))
    # v23: row pieces after the first add their first Philox group (g64 kernels); the
    # per-launch limit lowered so that a small tensor takes four pieces.
    from numba_fused import dropout as D

    limit = D._MAX_GROUPS
    D._MAX_GROUPS = 5
    xs, gs, bs = xv[:7, :16].contiguous(), gv[:7, :16].contiguous(), bv[:16].contiguous()
    try:
        for act in ("none", "gelu"):
            nf.dropout_bias_act_forward(xs, bs, p=0.3, seed=3, offset=8, activation=act)
            nf.dropout_bias_act_backward(gs, xs, bs, p=0.3, seed=3, offset=8, activation=act)
    finally:
        D._MAX_GROUPS = limit
    nf.dropout_bias_act_forward(x, None, p=0.5, seed=1)
    nf.dropout_bias_act_backward(g, x, None, p=0.5, seed=1)
    # The mask variant: uint8 mask written by the forward, read by the backward.
    y, mask = nf.dropout_bias_act_forward(x, b, p=0.3, seed=3, activation="gelu",
                                          return_mask=True)
    nf.dropout_bias_act_backward(g, x, b, p=0.3, seed=3, activation="gelu", mask=mask)


def _dropout_staged(nf, torch, dt):
    # LaunchConfig.stages (v13): the 16-bit passes' cp.async ring, rows a
    # thread not a multiple of the ring, with and without draws, the mask output and
    # the bias grad.
    from numba_fused.dropout import LaunchConfig

    x = torch.randn(301, 264, device="cuda", dtype=dt)
    b = torch.randn(264, device="cuda", dtype=dt)
    g = torch.randn_like(x)
    for stages in (2, 3, 4):
        cfg = LaunchConfig(stages=stages, rows_per_block=37)
        for act in ("none", "gelu"):
            for p in (0.0, 0.3):
                nf.dropout_bias_act_forward(x, b, p=p, seed=3, offset=8, activation=act,
                                            config=cfg)
        nf.dropout_bias_act_forward(x, b, p=0.3, seed=3, activation="gelu", return_mask=True,
                                    config=cfg)
        for act in ("none", "gelu"):
            for p in (0.0, 0.3):
                nf.dropout_bias_act_backward(g, x, b, p=p, seed=3, offset=8, activation=act,
                                             config=cfg)
            nf.dropout_bias_act_backward(g, x, b, p=0.3, seed=3, offset=8, activation=act,
                                         need_bias_grad=False, config=cfg)


def _norm_passes(nf, x, w, b, g, det):
    """Forward and backward of LayerNorm with w and b, LayerNorm without them, and
    RMSNorm with w (``det``: the backward's deterministic flag)."""
    y, mean, rstd = nf.layer_norm_forward(x, w, b)
    nf.layer_norm_backward(g, x, w, b, mean, rstd, deterministic=det)
    y, mean, rstd = nf.layer_norm_forward(x)
    nf.layer_norm_backward(g, x, None, None, mean, rstd, deterministic=det)
    y, rstd = nf.rms_norm_forward(x, w)
    nf.rms_norm_backward(g, x, w, rstd, deterministic=det)


def _layer_norm_plain(nf, torch, dt):
    """The plain forward kernel at _PLAIN_PICKS's layouts (v28: 16-bit LayerNorm N =
    768 a warp a block, float32 RMSNorm N = 2048-12288, ...; v29: 16-bit LayerNorm N
    = 512 in sub-warp rows, float32 LayerNorm N = 768 two rows a block, N = 16384
    with launch bounds, ...; v33: float32 LayerNorm N = 4096 and RMSNorm N = 16384
    with w / b late under launch bounds; v50: LayerNorm N = 8192 at eight words with
    w / b early, the float32 kernel without its statistics unbounded; v52: float32
    RMSNorm N = 12288 at four words, w late, bounds for two blocks) and in sub-warp
    rows of eight a block (tuning
    fwd_plain_layout); 29 rows, so blocks of several rows have spare slots. Each also
    without its statistics (stats=False: the ``_nostats`` kernels), and RMSNorm's lean
    kernel of one row a slot with and without them."""
    from numba_fused.layer_norm import tuning

    x = torch.randn(29, 512, device="cuda", dtype=dt)
    w = torch.randn(512, device="cuda", dtype=dt)
    with tuning(fwd_plain=True, fwd_plain_layout=(8 if dt == torch.float32 else 4, 8)):
        for stats in (True, False):
            nf.layer_norm_forward(x, w, torch.randn_like(w), stats=stats)
            nf.rms_norm_forward(x, w, stats=stats)
    with tuning(fwd_plain=True):
        for n in (512, 768, 1024, 2048, 4096, 5120, 8192, 12288, 16384):
            x = torch.randn(29, n, device="cuda", dtype=dt)
            w = torch.randn(n, device="cuda", dtype=dt)
            for stats in (True, False):
                nf.layer_norm_forward(x, w, torch.randn_like(w), stats=stats)
                nf.rms_norm_forward(x, w, stats=stats)
    # RMSNorm's lean kernel of one row a slot, with and without rstd (_nostats).
    with tuning(fwd_lean=True, fwd_early=True, fwd_once=True):
        for n in (768, 1024, 2048):
            x = torch.randn(29, n, device="cuda", dtype=dt)
            w = torch.randn(n, device="cuda", dtype=dt)
            for stats in (True, False):
                nf.rms_norm_forward(x, w, stats=stats)


def _layer_norm(nf, torch, dt):
    from numba_fused.layer_norm import tuning

    # 256, 512: the lean forward on sub-warp rows (8 or 16 threads a row); 12288:
    # float32's forward with 3 groups a thread; 12288 / 12296: the 16-bit backward's
    # lean kernel (v13), 12296 with idle lanes; float32's 16-byte streaming backward
    # (shared-memory dW/dB accumulators; the 16-bit one below); 65536: the same over
    # several column chunks.
    for n in (1, 97, 256, 512, 1000, 4096, 12288, 12296, 65536):
        x = torch.randn(29, n, device="cuda", dtype=dt)
        w = torch.randn(n, device="cuda", dtype=dt)
        b = torch.randn(n, device="cuda", dtype=dt)
        g = torch.randn_like(x)
        # Both dW/dB schemes: the seed's locks and the per-block partials.
        for det, scheme in ((False, "lock"), (True, "partials")):
            with tuning(bwd_scheme=scheme):
                _norm_passes(nf, x, w, b, g, det)
        # The staged forward (opt-in): the row in shared memory through cp.async, at
        # its picked layout and at one with idle lanes.
        for words in (None, 6):
            if n < 1000:
                continue
            with tuning(fwd_staged=True, fwd_words=words):
                nf.layer_norm_forward(x, w, b)
                nf.rms_norm_forward(x)
        # The wide backward row kernels (bwd_wide2, the default): float32 N = 4096 as
        # v10c's two groups in 512 threads; v10b's two groups at 1024 threads with idle
        # lanes: N = 8000 (by default since v44; bwd_lean_f32 False keeps it so under
        # any later default).
        if n == 4096 and dt == torch.float32:
            x2 = torch.randn(29, 8000, device="cuda", dtype=dt)
            w2 = torch.randn(8000, device="cuda", dtype=dt)
            rows = [(x, w, b, g), (x2, w2, torch.randn_like(w2), torch.randn_like(x2))]
            with tuning(bwd_wide2=True, bwd_lean_f32=False):
                for xx, ww, bb, gg in rows:
                    for det in (False, True):
                        y, mean, rstd = nf.layer_norm_forward(xx, ww, bb)
                        nf.layer_norm_backward(gg, xx, ww, bb, mean, rstd, deterministic=det)
        # v46's form, opt-in since the fifty-second session: the streaming backward of
        # rows with w alone with dw in a global partial row.
        if n == 12288:
            with tuning(bwd_global_dw=True):
                nf.rms_norm_backward(g, x, w, nf.rms_norm_forward(x, w)[1],
                                     deterministic=True)
        # Thirteenth-session candidate (opt-in): the dW/dB reduction's 16 loads in
        # flight.
        with tuning(dwdb_unroll=16):
            y, mean, rstd = nf.layer_norm_forward(x, w, b)
            nf.layer_norm_backward(g, x, w, b, mean, rstd, deterministic=True)
        # v26 (the default at 16-bit, _fwd_early_once): the lean forward with w / b
        # loaded with the row, the statistics stored before y and one row a slot (no
        # grid-stride loop); here on every dtype and row length, and early with its
        # loop on a persistent grid of two blocks.
        with tuning(fwd_early=True, fwd_once=True):
            nf.layer_norm_forward(x, w, b)
            nf.rms_norm_forward(x, w)
        with tuning(fwd_early=True, fwd_grid=2):
            nf.layer_norm_forward(x, w, b)
            nf.rms_norm_forward(x, w)
        # The plain forward kernel (v27: rows of whole warps of whole 16-byte words;
        # others keep the default kernel), its w / b early and late.
        for tune in ({"fwd_plain": True}, {"fwd_plain": True, "fwd_early": False}):
            with tuning(**tune):
                nf.layer_norm_forward(x, w, b)
                nf.rms_norm_forward(x, w)
        # Fifteenth-session candidate (opt-in): the register-capped float32 lean
        # forward of two groups (N = 4096: 512 threads, 3 blocks an SM; N = 1000
        # has idle lanes and keeps the default bounds).
        if dt == torch.float32 and n in (1000, 4096):
            with tuning(fwd_lean=True, fwd_words=2, fwd_lean_regs=40):
                nf.layer_norm_forward(x, w, b)
                nf.rms_norm_forward(x, w)
        # v22 (the default) runs these 29-row 16-bit batches at N = 4096 as one group a
        # thread (512 threads a row); past a wave, v21's RMSNorm rows of two groups
        # capped at 48 registers (5 blocks of 256 an SM), and LayerNorm's two groups.
        if n == 4096:
            with tuning(fwd_wave=False):
                nf.rms_norm_forward(x, w)
                nf.rms_norm_forward(x)
            with tuning(fwd_words=2):
                nf.layer_norm_forward(x, w, b)
            # v23: 16-bit RMSNorm N = 5120 (blocks of 320 at 48 registers) and fp16
            # N = 8192 (512 at 40); N = 12288 (768 at 40) runs above by default.
            for n2 in (5120, 8192):
                x2 = torch.randn(29, n2, device="cuda", dtype=dt)
                nf.rms_norm_forward(x2, torch.randn(n2, device="cuda", dtype=dt))
                nf.rms_norm_forward(x2)
            # v24: 16-bit LayerNorm N = 1024 / 2048, two groups in one-row blocks of
            # 64 / 128 threads at 48 registers (without fwd_wave's one group); v25:
            # N = 512, two groups a warp, eight rows a block (RMSNorm too).
            with tuning(fwd_wave=False):
                for n2 in (512, 1024, 2048):
                    x2 = torch.randn(29, n2, device="cuda", dtype=dt)
                    w2 = torch.randn(n2, device="cuda", dtype=dt)
                    nf.layer_norm_forward(x2, w2, torch.randn(n2, device="cuda", dtype=dt))
                    nf.layer_norm_forward(x2)
                    if n2 == 512:
                        nf.rms_norm_forward(x2, w2)
        # v12 (the default) compiles exact-layout backward row kernels of one-row
        # blocks with the slot constant; here the general kernel they replace, which
        # bwd_one_row=False keeps (N = 4096: 256 threads a 16-bit row, 512 a float32
        # one, both schemes, with and without affine parameters).
        if n == 4096:
            with tuning(bwd_one_row=False):
                for det in (False, True):
                    _norm_passes(nf, x, w, b, g, det)
        # v13 (the default at 16-bit N = 8200-16384) runs the lean wide backward at
        # N = 12288 (768 threads of two groups, w and dW/dB in 144 KiB of shared
        # memory); here the streaming kernels it replaces there.
        if n == 12288 and dt != torch.float32:
            with tuning(bwd_lean=False):
                for det in (False, True):
                    _norm_passes(nf, x, w, b, g, det)
        # bwd_lean_f32 (v15; by default, v44, over float32 N = 4100-7936): v13's lean
        # backward on float32 rows, here 512 threads of two groups at N = 4096.
        if n == 4096 and dt == torch.float32:
            with tuning(bwd_lean_f32=True, bwd_lean_min=0):
                for det in (False, True):
                    _norm_passes(nf, x, w, b, g, det)
        # v14 (the default on 16-byte streaming rows): the streaming LayerNorm
        # forward's one-pass statistics, 256 threads over rows of 12296 (idle lanes),
        # 1024 over 65536.
        if n in (12296, 65536):
            with tuning(fwd_welford=True, fwd_lean=False, fwd_staged=False,
                        max_tpr=256 if n == 12296 else 1024):
                nf.layer_norm_forward(x, w, b)
                nf.layer_norm_forward(x)
            # The streaming forward over fewer threads under capping launch bounds
            # (fwd_stream_tpr, fwd_stream_blocks candidates).
            with tuning(fwd_stream=True, fwd_stream_tpr=256, fwd_stream_blocks=6):
                nf.layer_norm_forward(x, w, b)
                nf.rms_norm_forward(x, w)
        # The staged forward with register groups (fwd_staged_regs candidate): float32
        # N = 65536 as 14 groups a thread in 224 KiB of shared memory and 2 in registers.
        if n == 65536 and dt == torch.float32:
            with tuning(fwd_staged_regs=2):
                nf.layer_norm_forward(x, w, b)
                nf.rms_norm_forward(x, w)
        # v11 (by default 16-bit, and float32 with w since v45; here every dtype): the
        # chunked streaming backward on given row statistics (N = 65536 has three
        # chunks; 12296 one, so the pass does not run there).
        if n >= 12288:
            with tuning(bwd_stats_pass=True):
                for det in (False, True):
                    y, mean, rstd = nf.layer_norm_forward(x, w, b)
                    nf.layer_norm_backward(g, x, w, b, mean, rstd, deterministic=det)
                    y, rstd = nf.rms_norm_forward(x, w)
                    nf.rms_norm_backward(g, x, w, rstd, deterministic=det)
    _layer_norm_plain(nf, torch, dt)


def _attention(nf, torch, dt):
    # 256: the forward's Q from shared memory, the backward's column parts.
    for sq, sk, d in ((17, 23, 32), (33, 70, 128), (20, 70, 256)):
        if d > 128 and dt == torch.float32:
            continue
        q = torch.randn(2, sq, 2, d, device="cuda", dtype=dt)
        k = torch.randn(2, sk, 2, d, device="cuda", dtype=dt)
        v = torch.randn(2, sk, 2, d, device="cuda", dtype=dt)
        bias = torch.randn(2, 2, sq, sk, device="cuda", dtype=dt)
        for causal, window, p, bb in ((None, 0, 0.0, None), ("top_left", 0, 0.0, bias),
                                      ("bottom_right", 8, 0.2, None), (None, 0, 0.1, bias)):
            kw = dict(bias=bb, causal=causal, window=window, dropout_p=p, seed=5, offset=0)
            out, lse = nf.attention_forward(q, k, v, **kw)
            nf.attention_backward(torch.randn_like(out), q, k, v, out, lse, **kw)
    # Many key splits on the lock, atomic and deterministic paths, and varlen.
    q = torch.randn(1, 130, 2, 64, device="cuda", dtype=dt)
    k = torch.randn(1, 300, 2, 64, device="cuda", dtype=dt)
    v = torch.randn(1, 300, 2, 64, device="cuda", dtype=dt)
    out, lse = nf.attention_forward(q, k, v, causal="bottom_right")
    g = torch.randn_like(out)
    for det, scheme in ((False, "lock"), (False, "atomic"), (True, None)):
        nf.attention_backward(g, q, k, v, out, lse, causal="bottom_right", deterministic=det,
                              num_splits=5, dq_scheme=scheme)
    cu_q = torch.tensor([0, 40, 41, 130], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, 100, 117, 300], device="cuda", dtype=torch.int32)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, dropout_p=0.1, seed=2)
    out, lse = nf.attention_forward(q, k, v, **kw)
    nf.attention_backward(torch.randn_like(out), q, k, v, out, lse, **kw)


def _linear_act_wgmma(nf, torch, dt):
    # The Hopper warpgroup-MMA GEMMs, every tiling forced: float16 / bfloat16 only; ragged sizes
    # take its edge tiles, (2304, 2048, 256) several full 128x128 tiles; both operand
    # layouts, unswizzled (v1) and 128-byte swizzled (v3), warp specialised (v4), and
    # the shipped forward tilings with the bias hoisted (v5b), the forward's TMA
    # producer (v6; its backward on v4's cp.async producer), the epilogue's
    # activations in fast_act's forms (v7, epi 1), its unsigned shared indices (v7b,
    # epi 2), the forward's whole tiles finished from the registers (v9, epi 3) and
    # the same with quad-transposed 16-byte stores (v10, epi 4).
    from numba_fused import linear_act as la

    _wgmma_tilings(nf, torch, dt, (
        la.WG_V1, la.WG_LARGE_SW128, la.WG_LARGE_WS, la.WG_LARGE_WS_PF, la.WG_LARGE_SW128_HB,
        la.WG_LARGE_WS_HB, la.WG_LARGE_WS_TMA, la.WG_LARGE_SW128_HB_EPI, la.WG_LARGE_WS_HB_EPI,
        la.WG_LARGE_SW128_HB_EPI2, la.WG_LARGE_WS_HB_EPI2, la.WG_LARGE_SW128_HB_EPI3,
        la.WG_LARGE_WS_HB_EPI3, la.WG_LARGE_SW128_HB_EPI4, la.WG_LARGE_WS_HB_EPI4))


def _linear_act_wgmma_reg(nf, torch, dt):
    # linear_act_wgmma's register epilogues only (v9, epi 3; v10, epi 4): the part a
    # sanitizer run of the whole list does not reach in a few minutes.
    from numba_fused import linear_act as la

    _wgmma_tilings(nf, torch, dt, (la.WG_LARGE_SW128_HB_EPI3, la.WG_LARGE_WS_HB_EPI3,
                                   la.WG_LARGE_SW128_HB_EPI4, la.WG_LARGE_WS_HB_EPI4))


def _wgmma_tilings(nf, torch, dt, configs):
    """_linear_act's GEMMs on each wgmma tiling of ``configs`` in turn (16-bit only)."""
    from numba_fused import linear_act as la

    if dt == torch.float32:
        return
    saved = la.WG_LARGE
    try:
        for config in configs:
            la.WG_LARGE = config
            with la.use_wgmma():
                _linear_act(nf, torch, dt)
    finally:
        la.WG_LARGE = saved


def _linear_act(nf, torch, dt):
    from numba_fused.gated_linear import gated_linear_forward_pair

    # (2304, 2048, 256) has enough tiles to pick the 128x128 tiling with 68 KiB of
    # dynamic shared memory; the small ones take the 64x64 tiling and edge paths.
    for m, n, k in ((17, 40, 24), (130, 72, 200), (2304, 2048, 256)):
        x = torch.randn(m, k, device="cuda", dtype=dt)
        w = torch.randn(n, k, device="cuda", dtype=dt) * 0.1
        b = torch.randn(n, device="cuda", dtype=dt)
        # dgrad's preact is the previous layer's pre-activation: shaped like x.
        prev = torch.randn(m, k, device="cuda", dtype=dt)
        for act in ("none", "gelu_tanh", "relu"):
            y, pre = nf.linear_act_forward(x, w, b, activation=act, save_preact=True)
            g = torch.randn_like(y)
            nf.linear_act_dgrad(g, w, activation=act, preact=prev)
            nf.linear_act_backward(g, x, w, preact=pre, activation=act)
        # Gated (SwiGLU): n / 2 hidden units, the gate in the epilogues.
        h, z = nf.gated_linear_forward(x, w, b, activation="silu", save_preact=True)
        nf.gated_linear_dgrad(torch.randn(m, 24, device="cuda", dtype=dt),
                              torch.randn(24, n // 2, device="cuda", dtype=dt), z)
        nf.gated_linear_backward(torch.randn_like(h), x, w, z)
        # The gate and up weights read in place (16-bit: the pair kernel; float32: the copy).
        gated_linear_forward_pair(x, w[0::2].contiguous(), w[1::2].contiguous(), b, "silu")
    # Rows not 16-byte aligned (K = 1023, N = 4097): every GEMM copies its operands to
    # aligned rows first (la.RESTRIDE_MIN_MACS) and loads partial edge chunks.
    if dt != torch.float32:
        x = torch.randn(300, 1023, device="cuda", dtype=dt)
        w = torch.randn(4097, 1023, device="cuda", dtype=dt) * 0.03
        b = torch.randn(4097, device="cuda", dtype=dt)
        y, pre = nf.linear_act_forward(x, w, b, activation="gelu_tanh", save_preact=True)
        nf.linear_act_backward(torch.randn_like(y), x, w, preact=pre, activation="gelu_tanh")


def _gated_pair(nf, torch, dt):
    """A gated unit's GEMMs using its gate and up weights in place (the pair kernels at
    16-bit, GATED_PAIRS_EVERYWHERE on; float32 takes the interleaved copy): the forward
    with and without bias and with the pairs kept, then the backward (grad_x reading
    the weights' k-rows in place, the weight gradients written to two arrays); ragged
    rows and columns against both mma.sync tilings, then (16-bit) on wgmma at the
    tilings the default picks."""
    from numba_fused import linear_act as la
    from numba_fused.gated_linear import gated_linear_backward_pair, gated_linear_forward_pair

    def passes():
        for m, hid, k in ((17, 20, 24), (130, 36, 200), (2304, 1024, 256)):
            x = torch.randn(m, k, device="cuda", dtype=dt)
            wg = torch.randn(hid, k, device="cuda", dtype=dt) * 0.1
            wu = torch.randn(hid, k, device="cuda", dtype=dt) * 0.1
            b = torch.randn(2 * hid, device="cuda", dtype=dt)
            for bias in (b, None):
                gated_linear_forward_pair(x, wg, wu, bias, "silu")
            h, z = gated_linear_forward_pair(x, wg, wu, b, "silu", save_preact=True)
            gated_linear_backward_pair(torch.randn_like(h), x, wg, wu, z)

    saved = la.WG_LARGE, la.GATED_PAIRS_EVERYWHERE
    la.GATED_PAIRS_EVERYWHERE = True
    try:
        passes()
        if dt != torch.float32:
            for config in (la.WG_ROLE["fwd"], la.WG_ROLE["fwd_long_k"], la.WG_ROLE["dgrad"]):
                la.WG_LARGE = config
                with la.use_wgmma():
                    passes()
    finally:
        la.WG_LARGE, la.GATED_PAIRS_EVERYWHERE = saved


def _linear_split_k(nf, torch, dt):
    """The split-K forward: Llama-7B's down projection at 1 and 16 rows, 5 ways
    (split_k_auto's choice on 132 SMs), and 3 and 8 ways on ragged shapes (the last
    part empty at 8 ways: 9 k-tiles), with bias, kept pre-activation and the gated
    pair kernel; then a repeat, so that a block of the second launch reads counters
    the first reset."""
    from numba_fused import linear_act as la
    from numba_fused.gated_linear import gated_linear_forward_pair

    w = torch.randn(4096, 11008, device="cuda", dtype=dt) * 0.01
    with la.use_split_k(5):
        for m in (1, 16):
            nf.linear_act_forward(torch.randn(m, 11008, device="cuda", dtype=dt), w)
    for ways in (3, 8):
        with la.use_split_k(ways):
            for m, n, k in ((17, 72, 264), (61, 200, 280)):
                x = torch.randn(m, k, device="cuda", dtype=dt)
                wt = torch.randn(n, k, device="cuda", dtype=dt) * 0.1
                b = torch.randn(n, device="cuda", dtype=dt)
                for _ in range(2):
                    nf.linear_act_forward(x, wt, b, "gelu_tanh", save_preact=True)
                    gated_linear_forward_pair(x, wt[0::2].contiguous(), wt[1::2].contiguous(),
                                              b, "silu")


def _linear_skinny(nf, torch, dt):
    """The few-row forward: Llama-7B's down projection and gate+up GEMM at 1, 16 and 32
    rows on the default layout, and ragged shapes (N past the block's columns, K not
    a multiple of 32, 1-4 token tiles) on two others and on the k-split layouts (2
    and 3 parts: the workspace, the arrival counters, the last block's sum), with
    bias, kept pre-activation and the gated pair kernel."""
    from numba_fused import linear_act as la
    from numba_fused.gated_linear import gated_linear_forward_pair

    saved = la.SKINNY_DEFAULT
    try:
        with la.use_skinny(True):
            for n, k in ((4096, 11008), (22016, 4096)):
                w = torch.randn(n, k, device="cuda", dtype=dt) * 0.01
                for m in (1, 16, 32):
                    nf.linear_act_forward(torch.randn(m, k, device="cuda", dtype=dt), w)
            for cfg in (la.SKINNY_DEFAULT, la.SkinnyConfig(3, 3, 3), la.SkinnyConfig(2, 4, 4),
                        la.SKINNY_DEFAULT._replace(splits=2),
                        la.SkinnyConfig(2, 4, 1, splits=3)):
                la.SKINNY_DEFAULT = cfg
                la._gemm_prepared.cache_clear()
                for m, n, k in ((1, 72, 264), (13, 200, 280), (29, 40, 8)):
                    x = torch.randn(m, k, device="cuda", dtype=dt)
                    wt = torch.randn(n, k, device="cuda", dtype=dt) * 0.1
                    b = torch.randn(n, device="cuda", dtype=dt)
                    nf.linear_act_forward(x, wt, b, "gelu_tanh", save_preact=True)
                    gated_linear_forward_pair(x, wt[0::2].contiguous(), wt[1::2].contiguous(),
                                              b, "silu")
    finally:
        la.SKINNY_DEFAULT = saved
        la._gemm_prepared.cache_clear()


def _layer_norm_staged(nf, torch, dt):
    """The staged forward alone (the row in shared memory through cp.async; LayerNorm's
    deviations about a coarse centre): forced at N = 4096 at its picked layout and at
    one with idle lanes, on a grid of 2 blocks over 29 rows (each block refills its
    shared row), and by default at N = 65536 (16-bit: 8 groups a thread; float32: 14 in
    shared memory and 2 in registers). A short workload for the sanitizers."""
    from numba_fused.layer_norm import tuning

    for n, tune in ((4096, {"fwd_staged": True, "fwd_grid": 2}),
                    (4096, {"fwd_staged": True, "fwd_words": 6, "fwd_grid": 2}),
                    (65536, {})):
        x = torch.randn(29, n, device="cuda", dtype=dt)
        w = torch.randn(n, device="cuda", dtype=dt)
        with tuning(**tune):
            nf.layer_norm_forward(x, w, torch.randn_like(w))
            nf.rms_norm_forward(x, w)


def _layer_norm_bwd(nf, torch, dt):
    """The backward row kernels at N = 512, where v30 drops the next row's prefetch
    (float32, 16-bit RMSNorm; v65 keeps it in float32's blocks of 512 threads), both
    dW / dB schemes, at 29 rows (blocks of several rows with spare slots) and 1, and at
    N = 768 and 2048 (v65's float32 blocks of 5 and 2 rows; v66's 16-bit RMSNorm blocks
    of 4 rows at N = 768, and at N = 640 in the checked form); then N = 4096 under
    tuning(bwd_red_direct=True)
    (v32: one-row blocks of 8 warps at 16 bits, 16 at float32, whose two
    row sums cross warps through shared memory, alternating two buffers) on a grid of
    5 blocks, so each block takes several rows."""
    from numba_fused.layer_norm import tuning

    for m, n in ((29, 512), (1, 512), (29, 768), (29, 640), (29, 2048)):
        x = torch.randn(m, n, device="cuda", dtype=dt)
        w = torch.randn(n, device="cuda", dtype=dt)
        b = torch.randn(n, device="cuda", dtype=dt)
        for det in (False, True):
            _norm_passes(nf, x, w, b, torch.randn_like(x), det)
    x = torch.randn(37, 4096, device="cuda", dtype=dt)
    w = torch.randn(4096, device="cuda", dtype=dt)
    b = torch.randn(4096, device="cuda", dtype=dt)
    with tuning(bwd_red_direct=True, bwd_grid=5):
        for det in (False, True):
            _norm_passes(nf, x, w, b, torch.randn_like(x), det)


def _layer_norm_pdl(nf, torch, dt):
    """The backward under tuning(bwd_pdl=True): the row kernels trigger the dW / dB
    kernel's dependent launch, which waits for their partial rows; rows of 512 and
    4096 (the 16-bit default layouts' one-row kernels) and 16384 (the lean kernels),
    both dW / dB schemes, twice back to back so a dependent launch follows a
    dependent launch."""
    from numba_fused.layer_norm import tuning

    with tuning(bwd_pdl=True):
        for m, n in ((29, 512), (37, 4096), (9, 16384)):
            x = torch.randn(m, n, device="cuda", dtype=dt)
            w = torch.randn(n, device="cuda", dtype=dt)
            b = torch.randn(n, device="cuda", dtype=dt)
            for det in (False, True, True):
                _norm_passes(nf, x, w, b, torch.randn_like(x), det)


def _norm_rows_both_schemes(nf, torch, dt):
    """_norm_passes under both dW / dB schemes at rows of 512 (several a block), 4096
    (one a block) and 1000 (ragged: clamped groups), more rows than the 7 blocks the
    callers' tunings fix."""
    for m, n in ((29, 512), (37, 4096), (23, 1000)):
        x = torch.randn(m, n, device="cuda", dtype=dt)
        w = torch.randn(n, device="cuda", dtype=dt)
        b = torch.randn(n, device="cuda", dtype=dt)
        for det in (False, True):
            _norm_passes(nf, x, w, b, torch.randn_like(x), det)


def _layer_norm_stages(nf, torch, dt):
    """The backward under tuning(bwd_stages=3) (candidate): row kernels reading x and
    dy from a cp.async ring in shared memory, two rows ahead; rows of 512, 4096 (one
    row a block) and 1000 (ragged: clamped groups), more rows than blocks so the ring
    turns over, both dW / dB schemes, each norm _norm_passes runs."""
    from numba_fused.layer_norm import tuning

    with tuning(bwd_stages=3, bwd_grid=7):
        _norm_rows_both_schemes(nf, torch, dt)


def _layer_norm_w_regs(nf, torch, dt):
    """The backward under tuning(bwd_w_regs=True) (v38; by default only 16-bit rows
    of two groups a thread): row kernels keeping w in registers, here at every dtype;
    rows of 512 (several a block), 4096 (one a block) and 1000 (ragged: clamped groups
    past the row's end), more rows than blocks, both dW / dB schemes, LayerNorm and
    RMSNorm (_norm_passes)."""
    from numba_fused.layer_norm import tuning

    with tuning(bwd_w_regs=True, bwd_grid=7):
        _norm_rows_both_schemes(nf, torch, dt)


def _layer_norm_plain_knobs(nf, torch, dt):
    """The plain forward kernel's opt-in variants (v53, v55, v60, off by default):
    fwd_plain_reload True (``_rl``: x read again from L1 for y), "word" (``_rlw``: y
    stored word by word) and "l2" (``_rl2``: with L2 cache policies), each at the
    launcher's own layout and at two rows a block (two words a thread) over 29 rows (a
    ragged block); LayerNorm with w / b and RMSNorm, with and without the statistics,
    at N = 512, 2048 and 4096."""
    from numba_fused.layer_norm import tuning

    knobs = ({"fwd_plain_reload": True}, {"fwd_plain_reload": "word"},
             {"fwd_plain_reload": "l2"})
    for knob in knobs:
        for n in (512, 2048, 4096):
            x = torch.randn(29, n, device="cuda", dtype=dt)
            w = torch.randn(n, device="cuda", dtype=dt)
            for lay in (None, (2, 2)):
                with tuning(fwd_plain=True, fwd_plain_layout=lay, **knob):
                    for stats in (True, False):
                        nf.layer_norm_forward(x, w, torch.randn_like(w), stats=stats)
                        nf.rms_norm_forward(x, w, stats=stats)


def _layer_norm_offgrid(nf, torch, dt):
    """The plain forward kernel at v61's layouts for widths off issue #16's sweep
    (_PLAIN_OFFGRID: five to seven words a thread, sub-warp rows of 16 threads at
    16-bit N = 896, two rows a block at 2560 / 3584), over 29 rows (a ragged last
    block where rows a block > 1); LayerNorm with w / b and RMSNorm, with and
    without the statistics, at N = 896, 1536, 2560, 3584, 6144, 10240 and 14336."""
    from numba_fused.layer_norm import tuning

    for n in (896, 1536, 2560, 3584, 6144, 10240, 14336):
        x = torch.randn(29, n, device="cuda", dtype=dt)
        w = torch.randn(n, device="cuda", dtype=dt)
        with tuning(fwd_plain=True):
            for stats in (True, False):
                nf.layer_norm_forward(x, w, torch.randn_like(w), stats=stats)
                nf.rms_norm_forward(x, w, stats=stats)


def _layer_norm_stats_block(nf, torch, dt):
    """The plain forward kernel storing its statistics a block's rows at a time
    (tuning fwd_plain_stats_block, v62; ``_sb``: through shared memory,
    after y, by the block's first rows-a-block threads) at bench/ab/stats_block.py's
    layouts: warp rows eight a block, 16-thread rows 16 a block, rows of two warps
    eight a block, over 29 rows (a ragged last block) and 64 (whole blocks); LayerNorm
    with w / b and RMSNorm, at N = 512, 768 and 1024; and the default's forward with
    and without the statistics there (v62's rows: since the seventieth session the
    ``_nostats`` kernel runs v62's layout too)."""
    from numba_fused.layer_norm import tuning

    vec = 4 if dt == torch.float32 else 8
    for n in (512, 768, 1024):
        w = torch.randn(n, device="cuda", dtype=dt)
        lays = [(words, rpb) for words in range(2, 9) if n // vec % words == 0
                for tpr in (n // vec // words,) if tpr in (16, 32, 64)
                for rpb in ((256 // tpr,) if tpr < 64 else (8,))]
        for m in (29, 64):
            x = torch.randn(m, n, device="cuda", dtype=dt)
            for lay in lays:
                with tuning(fwd_plain=True, fwd_plain_layout=lay, fwd_plain_stats_block=True):
                    nf.layer_norm_forward(x, w, torch.randn_like(w))
                    nf.rms_norm_forward(x, w)
            for stats in (True, False):
                nf.layer_norm_forward(x, w, torch.randn_like(w), stats=stats)
                nf.rms_norm_forward(x, w, stats=stats)


def _layer_norm_checked(nf, torch, dt):
    """The plain forward kernel over rows no exact layout splits (tuning
    fwd_plain_checked, v63; ``_chk``: the thread's last word read, summed
    and stored only where it lies in the row), at the rule's layouts for N = 1152 and
    1600 (16-bit: 8- / 16-thread rows would be exact elsewhere; here whole warps four a
    block) and at two words (rows of two or more warps), over 29 rows (a ragged last
    block) and 64; LayerNorm with w / b and RMSNorm (16-bit RMSNorm's under v64,
    fwd_plain_checked_only: the lean kernel would run one group a thread at both N),
    with and without the statistics."""
    from numba_fused.layer_norm import tuning

    for n in (1152, 1600):
        w = torch.randn(n, device="cuda", dtype=dt)
        for m in (29, 64):
            x = torch.randn(m, n, device="cuda", dtype=dt)
            for extra in ({}, {"fwd_plain": True, "fwd_plain_layout": (2, 1)}):
                with tuning(fwd_plain_checked=True, fwd_plain_checked_only=True, **extra):
                    for stats in (True, False):
                        nf.layer_norm_forward(x, w, torch.randn_like(w), stats=stats)
                        nf.rms_norm_forward(x, w, stats=stats)


def _layer_norm_row_bar(nf, torch, dt):
    """The backward under tuning(bwd_row_bar=True, bwd_block=512) (v39's 16-bit
    default, forced here for float32 too): blocks of several rows of several warps,
    each row's cross-warp step at its own named barrier; rows of 4096 (two a block),
    1000 (four a block, ragged: clamped groups) and 512 (one warp a row: the shuffled
    step, no barrier), more rows than blocks, both dW / dB schemes, LayerNorm and
    RMSNorm (_norm_passes)."""
    from numba_fused.layer_norm import tuning

    with tuning(bwd_row_bar=True, bwd_block=512, bwd_grid=7):
        _norm_rows_both_schemes(nf, torch, dt)


def _layer_norm_rms_sum1(nf, torch, dt):
    """RMSNorm's backward under tuning(bwd_rms_sum1=True) (v37, everywhere: the row step
    reduces one sum): rows of 512 (several a block) and 4096 (one a block, shuffled and
    direct cross-warp steps), 16384 (the lean kernel), and rows of 3000 streamed in
    column chunks with the statistics pass; more rows than blocks, both dW schemes,
    with w and without."""
    from numba_fused.layer_norm import tuning

    cases = (((29, 512), {}), ((37, 4096), {"bwd_red_direct": False}),
             ((37, 4096), {"bwd_red_direct": True}), ((9, 16384), {}),
             ((7, 3000), {"max_tpr": 64, "sacc_bytes": 2048, "bwd_stats_pass": True}))
    for (m, n), tune in cases:
        x = torch.randn(m, n, device="cuda", dtype=dt)
        w = torch.randn(n, device="cuda", dtype=dt)
        g = torch.randn_like(x)
        with tuning(bwd_rms_sum1=True, bwd_grid=5, **tune):
            for wt in (w, None):
                y, rstd = nf.rms_norm_forward(x, wt)
                for det in (False, True):
                    nf.rms_norm_backward(g, x, wt, rstd, deterministic=det)


CASES = {
    "dropout": ("dropout_bias_act_forward", _dropout),
    "dropout_staged": ("dropout_bias_act_forward", _dropout_staged),
    "layer_norm": ("layer_norm_forward", _layer_norm),
    "layer_norm_plain": ("layer_norm_forward", _layer_norm_plain),
    "layer_norm_plain_knobs": ("layer_norm_forward", _layer_norm_plain_knobs),
    "layer_norm_offgrid": ("layer_norm_forward", _layer_norm_offgrid),
    "layer_norm_stats_block": ("layer_norm_forward", _layer_norm_stats_block),
    "layer_norm_checked": ("layer_norm_forward", _layer_norm_checked),
    "layer_norm_staged": ("layer_norm_forward", _layer_norm_staged),
    "layer_norm_bwd": ("layer_norm_backward", _layer_norm_bwd),
    "layer_norm_pdl": ("layer_norm_backward", _layer_norm_pdl),
    "layer_norm_stages": ("layer_norm_backward", _layer_norm_stages),
    "layer_norm_w_regs": ("layer_norm_backward", _layer_norm_w_regs),
    "layer_norm_row_bar": ("layer_norm_backward", _layer_norm_row_bar),
    "layer_norm_rms_sum1": ("rms_norm_backward", _layer_norm_rms_sum1),
    "attention": ("attention_forward", _attention),
    "linear_act": ("linear_act_forward", _linear_act),
    "linear_act_wgmma": ("linear_act_forward", _linear_act_wgmma),
    "linear_act_wgmma_reg": ("linear_act_forward", _linear_act_wgmma_reg),
    "gated_pair": ("gated_linear_forward", _gated_pair),
    "linear_split_k": ("linear_act_forward", _linear_split_k),
    "linear_skinny": ("linear_act_forward", _linear_skinny),
}


# Cases that exercise part of another op's module.
_MODULES = {"dropout_staged": "dropout", "linear_act_wgmma": "linear_act",
            "linear_act_wgmma_reg": "linear_act",
            "gated_pair": "gated_linear", "linear_split_k": "linear_act",
            "linear_skinny": "linear_act",
            "layer_norm_plain": "layer_norm",
            "layer_norm_plain_knobs": "layer_norm", "layer_norm_staged": "layer_norm",
            "layer_norm_offgrid": "layer_norm", "layer_norm_stats_block": "layer_norm",
            "layer_norm_checked": "layer_norm",
            "layer_norm_bwd": "layer_norm", "layer_norm_pdl": "layer_norm",
            "layer_norm_stages": "layer_norm", "layer_norm_rms_sum1": "layer_norm",
            "layer_norm_w_regs": "layer_norm", "layer_norm_row_bar": "layer_norm"}


def main(argv):
    import importlib

    import torch

    import numba_fused as nf

    failed = 0
    wanted = {}
    for arg in argv:
        op, _, dtype = arg.partition(":")
        if op not in CASES:
            raise SystemExit(f"unknown op {op!r}; known: {', '.join(CASES)}")
        wanted.setdefault(op, set()).add(dtype)
    for op, (probe, fn) in CASES.items():
        if wanted and op not in wanted:
            continue
        try:
            importlib.import_module(f"numba_fused.{_MODULES.get(op, op)}")
            getattr(nf, probe)
        except (ImportError, AttributeError):
            print(f"{op}: not in this checkout, skipped")
            continue
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            if wanted and "" not in wanted[op] and str(dt).removeprefix("torch.") not in wanted[op]:
                continue
            try:
                fn(nf, torch, dt)
                torch.cuda.synchronize()
                print(f"{op} {dt}: ran")
            except Exception:
                failed += 1
                print(f"{op} {dt}: FAILED")
                traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
