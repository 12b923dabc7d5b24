"""Lab 04's tiered hints (see :mod:`labkit.progress.hints`)."""
from __future__ import annotations

HINTS: dict[str, tuple[str, str, str]] = {
    "4.1": (
        "Where does the baseline spend its time, by op type, and which of the notebook's variants remove exactly that "
        "work? Does your callable take the plain NCHW input, and is the model you were given left as it was?",
        "Sections 3 (Read the profile), 4 (channels_last: the same model, another memory order) and 5 (Fuse Conv2d + "
        "BatchNorm2d). `torch.fx.experimental.optimization.fuse` with `inplace=False` folds each BatchNorm into its "
        "convolution on a copy; `labkit.profile_model` compares the time per op type.",
        "Fuse a copy of the model, never the original, and convert that copy to channels_last. Return a small function "
        "that converts each incoming batch to channels_last and runs the copy on it, so the conversion is part of what "
        "is timed. Stay in eval mode and float32, compute from every input, and leave torch's thread count alone.",
    ),
}
