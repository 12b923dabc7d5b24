"""Lab 02's tiered hints (see :mod:`labkit.progress.hints`)."""
from __future__ import annotations

from labkit.i18n.messages import N_

HINTS: dict[str, tuple[str, str, str]] = {
    "2.1": (
        N_("In each format, which dimension is innermost in memory, and how far apart are two neighbours along it? "
        "Is `memory_format` a string or a torch object?"),
        N_("The sections {shape_and_strides}, {channels_last_strides} and {channels_last_3d}. To check a prediction, "
        "compare it in a scratch cell with `torch.empty(shape, memory_format=...).stride()`; the exercise asks you to"
        " compute the strides, not to read them off a tensor."),
        N_("List the dimensions from innermost to outermost: in the contiguous format the last dimension first and the batch "
        "last; in channels_last and channels_last_3d the channels first, then the spatial dimensions from the last one, "
        "then the batch. Walk that list with a running product: each dimension's stride is the product of the sizes "
        "inside it, starting at 1. Return the strides as a tuple in the dimensions' own order (N, C, ...), not in memory "
        "order."),
    ),
    "2.2": (
        N_("Does your `__torch_function__` call `func` with all its arguments and return its result? "
        "Did you convert both the model and the input to channels_last, and run the model inside your mode?"),
        N_("The section {torch_function_mode}, under {format_gets_lost}, is the starting point; "
        "`is_contiguous(memory_format=...)` tells a tensor's format, and `func.__name__` the call's name."),
        N_("In `__torch_function__`, call `func` first with the args and the kwargs (which can be None), then record "
        "`func`'s name when one of its 4-D tensor arguments was channels_last (and not plain contiguous) and its 4-D result "
        "is not channels_last; return the result. In `find_format_dropper`, convert the model and the input to "
        "channels_last, run the model inside a `with` block of your mode, and return the first recorded name, or None."),
    ),
    "2.3": (
        N_("What does `model.to(memory_format=torch.channels_last)` do to the Conv3d's 5-D weight? "
        "Which memory format does a 5-D tensor take?"),
        N_("The sections {convert_weight_versus_to} and {channels_last_3d}; `torch.nn.utils` has a weight converter for "
        "Conv2d layers and one for Conv3d layers."),
        N_("Treat the two kinds of layer apart: each converter touches only its own kind, and each kind's weight has its "
        "own number of dimensions, so it needs the memory format of that many. One conversion per kind, in place, and "
        "nothing else of the model changes: what does your function then give back?"),
    ),
}
