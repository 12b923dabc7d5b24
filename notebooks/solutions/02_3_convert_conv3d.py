import torch


def convert_with_conv3d(model: torch.nn.Module) -> torch.nn.Module:
    """Exercise 2.3: convert a model that holds a Conv3d, where ``model.to(channels_last)`` fails.

    Give every 4-D weight the channels_last format and every 5-D weight
    channels_last_3d; leave the other parameters alone. Convert in place,
    keep the parameters as ``nn.Parameter`` (assign to ``.data``), return the model.
    """
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    for param in model.parameters():
        if param.dim() in formats:
            param.data = param.data.contiguous(memory_format=formats[param.dim()])
    return model
