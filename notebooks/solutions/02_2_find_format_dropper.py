import torch

from labkit.memory_format import FormatTracker


def find_format_dropper(model: torch.nn.Module, example_input: torch.Tensor) -> str | None:
    """Exercise 2.2: the name of the first operator that turns channels_last into another layout.

    Run ``model`` on ``example_input`` converted to channels_last, inside a
    FormatTracker, and return the short name (e.g. ``"gelu"``) of the first
    call whose output lost the format, or ``None`` if the format survives.
    """
    model = model.to(memory_format=torch.channels_last)
    x = example_input.to(memory_format=torch.channels_last)
    with FormatTracker() as tracker, torch.inference_mode():
        model(x)
    lost = tracker.lost()
    return lost[0].short_name if lost else None
