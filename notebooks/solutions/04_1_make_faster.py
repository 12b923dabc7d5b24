import torch


def make_faster(model):
    """Exercise 4.1: return a callable `faster(x)`, faster than `model(x)` by the factor the checker asks for, same outputs.

    `faster` takes the same plain (NCHW) input batch as `model`: any conversion
    of the input is part of the work that is timed. Do not change `model` in
    place: the checker compares against it.
    """
    from torch.fx.experimental.optimization import fuse

    faster_model = fuse(model, inplace=False).to(memory_format=torch.channels_last)

    def faster(x):
        return faster_model(x.contiguous(memory_format=torch.channels_last))

    return faster
