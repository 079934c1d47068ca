"""The 16-bit gelu forward with Phi(z) as a sigmoid of an odd polynomial: a timing and
accuracy prototype (fifty-fourth session), not yet shipped.

    python3 bench/ab/gelu_logit.py VARIANT [--dtype float16] [--reps 30]
    python3 bench/ab/gelu_logit.py VARIANT --ptx     # SASS count on the CPU (sm_90)

Why. The gelu forward's time follows its instruction count (``ab/gelu_cost.py``,
fortieth session: 0.21 us an instruction per 8 elements down to ~75 us at 174); the
shipped gelu (``dropout._make_gelu_scaled``: t = 1 / (2 + |z| / sqrt 2), a degree-5
polynomial in t, an exponential, a sign select) takes ~16 of the kernel's 213 SASS
instructions an element. gelu(z) = z Phi(z) = z sigmoid(h(z)) with h = logit(Phi), an
odd function: h(z) = z f(z^2), f fitted as a polynomial of degree ``d`` in u = z^2
(minimax by linear programming over z in [-7, 0] for the tests' measure, below). Then
scale gelu(z) = z / (c + c 2^g), g = z f'(u) (f' = -log2(e) f: the exponential's scale
folded into the coefficients), c = 1 / scale: one multiply (u), d FMAs, one multiply
(g), ex2, one FMA, rcp, one multiply: d + 6 instructions, no select. For z -> +inf,
2^g -> 0 and the result is z scale exactly; for z -> -inf, 2^g overflows to inf and
the result is -0 (z = -inf: NaN, as the shipped form and torch's float32 formula).

The measure the fit minimises is the dropout tests' (``tests/test_dropout.py``
``test_gelu_across_its_range``): |ours - gelu| / max(|gelu|, 1e-3) before rounding to
the output dtype. Its minimax (coefficients below, from ``fit_coeffs``): degree 3 6.5e-4,
degree 4 2.7e-4 (degree 2 1.1e-3 in [-7, 0], but its f turns negative past |z| ~ 11:
not used). fp16 rounding adds up to 4.9e-4; the tests' bound is 2e-3 (bf16 1e-2). The
shipped form's error is 1.1e-5.

Variants: ``shipped`` (the checkout's form: v17's when measured in calls 6-7, logit3
since v22); ``logit3``, ``logit4`` (the degree); each on the shipped plan
(one row a batch, four waves; tune_dropout's ``gpu`` column). Checked first: on the
GPU, the forward at z over every 16-bit value in [-14, 14] against float64 (the
measure above) and at 1024 x 4096 normals, normwise against float64 beside torch's own
gelu in the same dtype (the tests' "within 2x of torch").
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

VARIANTS = ("shipped", "logit3", "logit4")
# f(u) = logit(Phi(-sqrt u)) / (-sqrt u) (constant term first), minimax of the tests'
# measure over z in [-7, 0] (``fit_coeffs``, scipy's HiGHS LP on 8000 points).
LOGIT_COEFFS = {
    3: (1.5935247563558923, 0.07512564461102904, -0.0008717919136741322,
        4.0497826070070675e-06),
    4: (1.594718302592444, 0.07403760747594257, -0.0005996474105143387,
        -2.1047704420263758e-05, 7.65066809690757e-07),
}


def fit_coeffs(deg, zmax=7.0, n=8000):
    """(coefficients, max measure) of the minimax fit (needs scipy; run offline)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.special import log_ndtr, ndtr

    z = -np.linspace(1e-3, zmax, n)
    f = (log_ndtr(z) - log_ndtr(-z)) / z
    s = ndtr(z)
    # The measure is w |h_fit - h| with h = z f: d sigmoid = s (1 - s) dh.
    w = np.abs(z) * s * (1 - s) / np.maximum(np.abs(z) * s, 1e-3) * np.abs(z)
    a = np.vander(z * z, deg + 1, increasing=True)
    m = deg + 1
    a_ub = np.vstack([np.hstack([w[:, None] * a, -np.ones((n, 1))]),
                      np.hstack([-w[:, None] * a, -np.ones((n, 1))])])
    b_ub = np.concatenate([w * f, -w * f])
    res = linprog(np.r_[np.zeros(m), 1.0], A_ub=a_ub, b_ub=b_ub,
                  bounds=[(None, None)] * m + [(0, None)], method="highs")
    return tuple(float(c) for c in res.x[:m]), float(res.x[m])


def install(deg):
    """Make the 16-bit vector forward's gelu (``dropout._scaled_act`` with fold) the
    logit form (``dropout._make_gelu_logit``, shipped at degree 3 since v22) of degree
    ``deg``; call before any kernel is built."""
    import numpy as np

    from numba_fused import dropout as D
    from numba_fused.jit import inline_device

    l2e = 1.0 / math.log(2.0)
    gelu_s = D._make_gelu_logit(tuple(np.float32(-c * l2e) for c in LOGIT_COEFFS[deg]))
    orig = D._scaled_act

    @inline_device
    def prep(scale):
        return D._F1 / max(scale, D._SCALE_FLOOR)

    def scaled_act(activation, dtype, fold):
        if activation == "gelu" and fold and dtype != "float32":
            return prep, gelu_s
        return orig(activation, dtype, fold)

    D._scaled_act = scaled_act


def _sass_count(dtype):
    import re

    from numba import cuda

    from numba_fused import dropout as D
    from numba_fused import registry

    with registry.offline_compile():
        k = D.make_forward_kernel(dtype, "gelu", True, 256, 1, False, 1, 0)
        ptx = cuda.compile_ptx(k.pyfunc, k.argtypes, cc=(9, 0), **k.jit_options)[0]
        report = registry.ptxas_report(ptx)
    lines = registry.sass(ptx).splitlines()
    # The loop: from the label its closing branch names to that branch (the first
    # branch after the 16-byte store).
    store = next(i for i, s in enumerate(lines) if "STG.E.128" in s)
    end = next(i for i, s in enumerate(lines) if i > store and " BRA " in s)
    label = re.search(r"\(\.L_x_\d+\)", lines[end]).group(0)[1:-1]
    start = next(i for i, s in enumerate(lines) if s.strip().startswith(label + ":"))
    body = [s for s in lines[start:end + 1] if re.search(r"/\*[0-9a-f]{4}\*/", s)]
    return len(body), report


def _check(D, T, dtype):
    import numpy as np
    import torch

    tdt = getattr(torch, dtype)
    allv = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(tdt).float()
    allv = allv[torch.isfinite(allv) & (allv.abs() <= 14)]
    x = allv.to(tdt).reshape(1, -1).cuda()
    n = x.shape[1] - x.shape[1] % 8
    x = x[:, :n].contiguous()
    y = D.dropout_bias_act_forward(x, None, 0.0, 1, 0, "gelu")
    z = x.double().cpu().numpy().ravel()
    ref = np.array([v * math.erfc(-v / math.sqrt(2.0)) / 2.0 for v in z])
    ours = y.double().cpu().numpy().ravel()
    measure = float((np.abs(ours - ref) / np.maximum(np.abs(ref), 1e-3)).max())
    gen = torch.Generator(device="cuda").manual_seed(5)
    xn = torch.randn((1024, 4096), device="cuda", generator=gen).to(tdt)
    bn = torch.randn((4096,), device="cuda", generator=gen).to(tdt)
    yn = D.dropout_bias_act_forward(xn, bn, 0.0, 1, 0, "gelu")
    zz = xn.double() + bn.double()
    ref_n = zz * torch.special.ndtr(zz)
    yt = torch.nn.functional.gelu(xn + bn)
    e_ours = float((yn.double() - ref_n).norm() / ref_n.norm())
    e_torch = float((yt.double() - ref_n).norm() / ref_n.norm())
    return measure, e_ours, e_torch


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ptx", action="store_true")
    args = ap.parse_args(argv)
    if args.variant != "shipped":
        install(int(args.variant[5:]))
    if args.ptx:
        n, report = _sass_count(args.dtype)
        print(f"{args.variant} {args.dtype} loop SASS {n} (8 elements) {report}", flush=True)
        return

    from bench import tune_dropout as T
    from bench.ab.gelu_cost import input_sets
    from numba_fused import dropout as D

    measure, e_ours, e_torch = _check(D, T, args.dtype)
    sets = input_sets(args.dtype)

    def fn(x, b, g):
        return D.dropout_bias_act_forward(x, b, T.P, T.SEED, T.OFFSET, "gelu")

    _, gpu = T._time(fn, sets, args.reps, 5)
    k = D.make_forward_kernel(args.dtype, "gelu", True, D._default_threads(args.dtype, True), 1,
                              False, 1)
    print(f"{args.variant} {args.dtype} regs {k.regs_per_thread} measure {measure:.2e} "
          f"normwise {e_ours:.2e} torch {e_torch:.2e} gpu_us {gpu:.1f}", flush=True)


if __name__ == "__main__":
    main()
