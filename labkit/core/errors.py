"""labkit's exception types.

Why: a learner who passes bad input should read one sentence that says what was
wrong and what to do, not a 40-frame torch traceback. Every labkit error derives
from :class:`LabkitError`, so a notebook (or a test) can catch them all at once.
"""
from __future__ import annotations


class LabkitError(Exception):
    """Base class of every error labkit raises on purpose."""


class LabkitValueError(LabkitError, ValueError):
    """An argument has the wrong value (a shape, a count, a name)."""


class LabkitTypeError(LabkitError, TypeError):
    """An argument has the wrong type (e.g. a function where a module is needed)."""
