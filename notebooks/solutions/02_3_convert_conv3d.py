import torch


def convert_with_conv3d(model: torch.nn.Module) -> torch.nn.Module:
    """Exercise 2.3: convert a model that holds a Conv3d, where ``model.to(channels_last)`` fails.

    Give the Conv3d weights the channels_last_3d format and the Conv2d weights
    channels_last, with torch's own tools; leave the other parameters alone.
    Convert in place and return the model.
    """
    torch.nn.utils.convert_conv3d_weight_memory_format(model, torch.channels_last_3d)
    torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)
    return model
