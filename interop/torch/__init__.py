"""PyTorch front end: ``torch.nn.functional``-style functions with autograd, and
``nn.Module`` classes, built on the array-level kernels of ``numba_fused``."""
