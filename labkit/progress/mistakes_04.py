"""Lab 04's mistake ids and what each means, for the instructor's board (see :mod:`labkit.progress.mistakes`)."""
from __future__ import annotations

from labkit.i18n.messages import N_

MISTAKES: dict[str, str] = {
    # 4.1: make it faster, same outputs
    "4.1/returned-a-pair": N_("returned (model, input conversion), not one callable that takes the plain input"),
    "4.1/not-callable": N_("returned something that cannot be called on the input"),
    "4.1/changed-the-given-model": N_("changed the model they were given (converted or fused it in place), not a copy"),
    "4.1/returned-it-unchanged": N_("returned the model itself, or an unchanged copy of it"),
    "4.1/changed-threads": N_("changed torch's thread count (torch.set_num_threads)"),
    "4.1/not-a-tensor": N_("returned something other than an ordinary floating-point tensor"),
    "4.1/wrong-shape": N_("returned an output of another shape than the original's"),
    "4.1/lower-precision": N_("ran in a lower precision (bfloat16 or float16)"),
    "4.1/stored-output": N_("returned a stored output instead of computing from each input"),
    "4.1/training-mode": N_("left their version in training mode (BatchNorm used the batch's statistics)"),
    "4.1/wrong-output": N_("computed another function than the model (e.g. a Conv-BN fold without BatchNorm's shift)"),
    "4.1/not-fast-enough": N_("made a version that is not fast enough (e.g. fusion alone, still NCHW)"),
    "4.1/still-nchw": N_("made a version not fast enough in which no convolution ran channels_last (fusion alone, say)"),
    "4.1/not-steadily-faster": N_("made a version that was fast enough in most rounds, but not steadily (a busy machine?)"),
    "4.1/started-a-thread": N_("left a thread of their own running beside the timed calls (it slows the original's)"),
    "4.1/changed-the-checkers-model": N_("changed the checker's own copy of the model, which they were not given"),
    "4.1/replaced-torch": N_("patched a torch function (e.g. max pooling) to speed theirs up or slow the original down"),
}
