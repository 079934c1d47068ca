"""Framework glue for numba_fused.

- ``interop.dlpack``: turning any GPU array (torch, CuPy, numba, CUDA Array
  Interface or DLPack producers) into zero-copy kernel views, allocating outputs in
  the caller's library, and finding the caller's current stream.
- ``interop.torch``: ``torch.autograd.Function`` wrappers, functional API and
  ``nn.Module`` classes (imports torch).
- ``interop.cupy``: the ops on CuPy arrays (imports CuPy).

Importing ``interop`` itself imports neither torch nor CuPy.
"""
