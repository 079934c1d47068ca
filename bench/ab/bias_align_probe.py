"""Before 78th session's fix, interop.torch.linear_act keyed its forward plan without
the bias's alignment and built it as if the bias started 16-byte aligned. This probe
runs that old plan (``forward_plan(..., bias_aligned=True)``) on a bias one element
into its buffer and compares with the array-level path; run in its own process (a
misaligned access poisons the CUDA context). Prints one line."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main():
    import torch

    from interop.torch._fast import raw_stream
    from numba_fused import linear_act as la

    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 64, device="cuda", dtype=torch.float16) / 8
    b = torch.randn(65, device="cuda", dtype=torch.float16)[1:]
    want = la.linear_act_forward(x, w, b, "gelu")
    for aligned in (False, True):
        launch = la.forward_plan(8, 64, 64, "float16", True, False, "gelu", True, True,
                                 x.device.index, aligned)
        y = torch.full_like(want, float("nan"))
        try:
            launch(raw_stream(x.device), x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), 0)
            torch.cuda.synchronize()
            print(f"bias_aligned={aligned}: equal to the array path: {torch.equal(y, want)}, "
                  f"max |diff| {(y.float() - want.float()).abs().max().item()}", flush=True)
        except Exception as exc:  # the old plan's misaligned access, reported as such
            print(f"bias_aligned={aligned}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            return


if __name__ == "__main__":
    main()
