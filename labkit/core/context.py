"""``bound(var, value)``: a context variable set for the length of a ``with`` block.

Why one helper: checkers and profilers pass what they observe (the case being tried, the
notes to add, the runs a profiler really did, the modes of AD that ran) through context
variables, out of the learner's reach; each needs the same set-then-reset, even when the
block raises.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def bound(var: ContextVar[T | None], value: T) -> Iterator[T]:
    """Set ``var`` to ``value`` inside the block, give ``value`` to ``as``, and put the old value back after."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)
