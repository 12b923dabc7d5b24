import torch
from torch.overrides import TorchFunctionMode


class DropLogger(TorchFunctionMode):
    """Records every call that took a channels_last 4-D tensor and returned a 4-D tensor that is not.

    Inside ``with DropLogger() as logger:`` torch hands every function call to
    ``__torch_function__``; ``logger.dropped`` lists the names of the calls that
    lost the format (e.g. ``"layer_norm"``), in order.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        took_channels_last = any(
            isinstance(a, torch.Tensor) and a.dim() == 4
            and a.is_contiguous(memory_format=torch.channels_last) and not a.is_contiguous()
            for a in args
        )
        lost_it = (
            isinstance(result, torch.Tensor) and result.dim() == 4
            and not result.is_contiguous(memory_format=torch.channels_last)
        )
        if took_channels_last and lost_it:
            self.dropped.append(func.__name__)
        return result


def find_format_dropper(model: torch.nn.Module, example_input: torch.Tensor) -> str | None:
    """Exercise 2.2: the name of the first operator that turns channels_last into another layout.

    Run ``model`` on ``example_input``, both converted to channels_last, inside
    your DropLogger, and return the name (e.g. ``"gelu"``) of the first call
    that lost the format, or ``None`` if the format survives.
    """
    model = model.to(memory_format=torch.channels_last)
    x = example_input.to(memory_format=torch.channels_last)
    with DropLogger() as logger, torch.inference_mode():
        model(x)
    return logger.dropped[0] if logger.dropped else None
