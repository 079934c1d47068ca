"""Dropout seeds on the torch.compile route (the custom ops).

Eager calls reserve a range of the CUDA generator's Philox offset
(:func:`interop.torch._rng.next_seed_offset`): host-side generator calls that Dynamo
cannot trace. Under ``torch.compile`` the ``(seed, offset)`` pair is drawn instead by
``torch.randint`` on the CPU, a traced random op:

- torch.manual_seed seeds it, so compiled runs are reproducible; they draw other masks
  than eager runs (as torch's own dropout under inductor does);
- graph passes know it as random: CSE never merges two draws, so two dropouts of one
  tensor get two masks;
- it lives on the CPU, so the op reads the pair on the host with no device sync.

The forward op returns a copy of the pair it used as one of its outputs and the
backward reads that copy: the partitioner may recompute cheap ops in the backward,
but never our forward op, so forward and backward always see the same mask.
"""

import torch

__all__ = ["compiled_seed", "seed_pair", "SEED_RANGE"]

# Seeds and offsets in [0, 2**62): well inside the kernels' 64-bit key and counter.
SEED_RANGE = 2**62


def compiled_seed(draw, generator=None):
    """[seed, offset] as a CPU int64 tensor: random if ``draw``, else zeros (no dropout)."""
    if generator is not None:
        raise ValueError("generator= is not supported under torch.compile: the dropout seed "
                         "comes from torch's default CPU generator there (torch.manual_seed)")
    if not draw:
        return torch.zeros(2, dtype=torch.int64)
    return torch.randint(0, SEED_RANGE, (2,), dtype=torch.int64)


def seed_pair(seed_offset):
    """(seed, offset) as Python ints from the [seed, offset] tensor (CPU: no sync)."""
    if (not isinstance(seed_offset, torch.Tensor) or seed_offset.device.type != "cpu"
            or seed_offset.dtype != torch.int64 or tuple(seed_offset.shape) != (2,)):
        got = (f"{seed_offset.dtype} {tuple(seed_offset.shape)} on {seed_offset.device}"
               if isinstance(seed_offset, torch.Tensor) else type(seed_offset).__name__)
        raise ValueError(f"seed_offset must be a CPU int64 tensor [seed, offset], got {got}")
    seed, offset = seed_offset.tolist()
    if seed < 0 or offset < 0:
        raise ValueError(f"seed_offset must hold non-negative values, got {[seed, offset]}")
    return seed, offset
