"""Lab 04's tiered hints (see :mod:`labkit.progress.hints`)."""
from __future__ import annotations

from labkit.i18n.messages import N_

HINTS: dict[str, tuple[str, str, str]] = {
    "4.1": (
        N_("Where does the baseline spend its time, by op type, and which of the notebook's variants remove exactly that "
        "work? Does your callable take the plain NCHW input, and is the model you were given left as it was?"),
        N_("The sections {read_the_profile}, {channels_last} and {fuse_conv_bn}. "
        "`torch.fx.experimental.optimization.fuse` with `inplace=False` folds each BatchNorm into its convolution on "
        "a copy; `labkit.profile_model` compares the time per op type."),
        N_("Two of the notebook's changes attack what the profile shows: folding each BatchNorm into its convolution, and a "
        "memory order the convolutions prefer. Apply them to a copy, never to the model you were given, and let the "
        "callable do per batch whatever the input needs, so that it is part of what is timed. Same precision, same "
        "mode, every input used, torch's settings left alone."),
    ),
}
