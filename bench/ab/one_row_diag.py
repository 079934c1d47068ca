"""Where v12's one-row backward kernels (tuning bwd_one_row, the default) and the
general kernel (bwd_one_row=False) differ in bits on the GPU: each kernel twice (run to
run), then against each other, per dtype and shape; mismatch counts, the largest
difference in units of the larger value's ulp, and the first mismatching (row, column)
pairs with the column's thread and group. Also prints the kernels' names.
    python3 bench/ab/one_row_diag.py
"""
import sys

import torch

from numba_fused import layer_norm as ln

CASES = [("float32", (4099, 4096)), ("float32", (1000, 8192)), ("float32", (333, 2304)),
         ("float16", (4099, 4096)), ("float16", (1000, 8192))]


def run(dtype, shape, one_row, det, variant):
    torch.manual_seed(shape[-1])
    dt = getattr(torch, dtype)
    x = torch.randn(shape, device="cuda", dtype=dt)
    dy = torch.randn(shape, device="cuda", dtype=dt)
    n = shape[-1]
    w = torch.randn(n, device="cuda", dtype=dt) * 0.5 + 1 if variant else None
    b = torch.randn(n, device="cuda", dtype=dt) if variant else None
    y, mean, rstd = ln.layer_norm_forward(x, w, b)
    names = []
    make = ln.make_backward_kernel

    def spy(*a, **k):
        kern = make(*a, **k)
        names.append(kern.name)
        return kern

    ln.make_backward_kernel = spy
    try:
        with ln.tuning(bwd_one_row=one_row, bwd_scheme="partials" if det else "lock"):
            out = ln.layer_norm_backward(dy, x, w, b, mean, rstd, deterministic=det)
    finally:
        ln.make_backward_kernel = make
    torch.cuda.synchronize()
    return out, names


def compare(a, b, label):
    if a is None:
        return
    ne = a != b
    k = int(ne.sum())
    if not k:
        print(f"    {label}: identical")
        return
    af, bf = a.float(), b.float()
    ulp = torch.finfo(a.dtype).eps * torch.maximum(af.abs(), bf.abs()).clamp_min(1e-30)
    worst = float(((af - bf).abs() / ulp).max())
    idx = ne.nonzero()[:6].tolist()
    print(f"    {label}: {k} of {a.numel()} differ, worst {worst:.2f} ulp, first {idx}")


def main():
    print(torch.cuda.get_device_name())
    for dtype, shape in CASES:
        for variant in (False, True):
            for det in (False, True):
                print(f"{dtype} {shape} affine={variant} det={det}")
                g1, n1 = run(dtype, shape, False, det, variant)
                g2, _ = run(dtype, shape, False, det, variant)
                r1, n3 = run(dtype, shape, True, det, variant)
                r2, _ = run(dtype, shape, True, det, variant)
                print(f"    kernels: {n1} / {n3}")
                for i, nm in enumerate(("dx", "dw", "db")):
                    compare(g1[i], g2[i], f"{nm} general run to run")
                    compare(r1[i], r2[i], f"{nm} one_row run to run")
                    compare(g1[i], r1[i], f"{nm} general vs one_row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
