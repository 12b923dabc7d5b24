import torch
from torch.fx.experimental.optimization import fuse


def make_faster(model, x):
    """Exercise 4.1: return (faster_model, input_for_it), at least 1.3x faster than model(x), same outputs.

    Do not change `model` in place: the checker compares against it.
    """
    faster = fuse(model, inplace=False).to(memory_format=torch.channels_last)
    return faster, x.contiguous(memory_format=torch.channels_last)
