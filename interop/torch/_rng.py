"""Dropout seeds from torch's generators, so ``torch.manual_seed`` reproduces runs.

For a CUDA generator we take its seed and reserve a range of its Philox offset,
as torch's own fused dropout does (``philox_cuda_state``): the next call gets a
fresh offset, and resetting the seed resets the sequence. For a CPU generator
(the simulator's tests) two words are drawn from it.

Not under CUDA-graph capture: the pair is fixed when the call is captured, so every
replay would drop the same elements; such a capture raises instead of training with
one mask (capture dropout layers in eval mode or with p = 0).
"""

import torch

__all__ = ["next_seed_offset"]


def next_seed_offset(device, increment, generator=None):
    """(seed, offset) for one dropout call on ``device`` that draws ``increment``
    Philox counters; advances the generator so the next call differs."""
    increment = max(1, int(increment))
    if generator is None:
        if device.type == "cuda":
            idx = device.index if device.index is not None else torch.cuda.current_device()
            generator = torch.cuda.default_generators[idx]
        else:
            generator = torch.default_generator
    if generator.device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "dropout with p > 0 cannot be captured in a CUDA graph: its seed would be "
                "fixed at capture and every replay would drop the same elements (capture "
                "with p = 0 or the module in eval mode)")
        seed = generator.initial_seed()
        offset = generator.get_offset()
        # Torch keeps its offsets multiples of 4; keep to that.
        generator.set_offset(offset + (increment + 3) // 4 * 4)
        return seed & (2**64 - 1), offset
    words = torch.randint(0, 2**62, (2,), generator=generator, dtype=torch.int64)
    return int(words[0]), int(words[1])
