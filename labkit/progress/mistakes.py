"""What each mistake id means: the words the instructor's board shows next to its count.

Why ids and not the hint's text: a hint is reworded as the labs improve, and it can quote the
learner's values; the id (``1.2/groups``) stays, so a count means the same thing from one workshop
to the next. Each checker names its mistakes with ``expect(..., mistake="groups")``; every id it can
give is described in its lab's ``mistakes_NN.py``. Ids every checker can give without naming them:
"""
from __future__ import annotations

import re

from labkit.i18n.messages import N_, _
from labkit.progress.mistakes_01 import MISTAKES as LAB_01
from labkit.progress.mistakes_02 import MISTAKES as LAB_02
from labkit.progress.mistakes_03 import MISTAKES as LAB_03
from labkit.progress.mistakes_04 import MISTAKES as LAB_04

#: Every lab's mistakes: ``{"1.2/groups": "counted a grouped convolution as a dense one", ...}``.
MISTAKES: dict[str, str] = {**LAB_01, **LAB_02, **LAB_03, **LAB_04}
GENERIC: dict[str, str] = {
    "other": N_("a wrong answer the checker does not name"),
    "checker-error": N_("the checker itself failed (a labkit bug: please report it)"),
    "replaced-torch": N_("replaced one of torch's or labkit's functions"),
    "tensor-subclass": N_("returned a subclass of torch.Tensor, whose comparisons can lie, where a plain tensor belongs"),
    "raised-no-super": N_("wrote an __init__ that never calls super().__init__"),
    "raised-none": N_("a None where a tensor belongs (a missing return, or a bias=False layer's .bias)"),
}
RAISED = re.compile(r"^raised-([a-z0-9-]+)$")


def describe(mistake: str) -> str:
    """What ``mistake`` (``"1.2/groups"``) means, in a few words and the reader's language; the id itself when labkit
    does not know it."""
    if mistake in MISTAKES:
        return _(MISTAKES[mistake])
    slug = mistake.partition("/")[2]
    if slug in GENERIC:
        return _(GENERIC[slug])
    raised = RAISED.match(slug)
    return _("their code raised {error}").format(error=raised.group(1)) if raised else mistake


def is_named(mistake: str) -> bool:
    """Whether this mistake has a name (in :data:`MISTAKES`, a generic one, or the code raised), not "other"."""
    slug = mistake.partition("/")[2]
    return mistake in MISTAKES or (slug in GENERIC and slug != "other") or RAISED.match(slug) is not None
