"""labkit's exception types, and the argument check every lab shares.

Why: a learner who passes bad input should read one sentence that says what was
wrong and what to do, not a 40-frame torch traceback. Every labkit error derives
from :class:`LabkitError`, so a notebook (or a test) can catch them all at once.
"""
from __future__ import annotations

import numbers
from typing import Any


class LabkitError(Exception):
    """Base class of every error labkit raises on purpose."""


class LabkitValueError(LabkitError, ValueError):
    """An argument has the wrong value (a shape, a count, a name)."""


class LabkitTypeError(LabkitError, TypeError):
    """An argument has the wrong type (e.g. a function where a module is needed)."""


def require_count(name: str, value: Any, minimum: int, hint: str) -> int:
    """``value`` as an int if it is a whole number >= ``minimum``; else a labkit error naming ``name``.

    Why: ``range(2.5)`` fails deep inside a run, ``range("5")`` too, and a bool
    (a subclass of int) is almost surely a mistake, so all are refused up front.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LabkitTypeError(f"{name} must be a whole number (an int), got {value!r} ({type(value).__name__}); {hint}.")
    if value < minimum:
        requirement = "cannot be negative" if minimum == 0 else f"must be at least {minimum}"
        raise LabkitValueError(f"{name} {requirement} (got {value}); {hint}.")
    return int(value)
