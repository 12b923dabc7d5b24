"""Every lab's mistake catalogue, in exercise order (one module per lab: catalogue_01.py, ...)."""
from __future__ import annotations

import importlib

from tests.mistakes import Mistake

LAB_MODULES = ("catalogue_01", "catalogue_02", "catalogue_03", "catalogue_04")
EXERCISES = ("1.1", "1.2", "1.3", "2.1", "2.2", "2.3", "3.1", "3.2", "3.3", "3.4", "4.1")


def all_mistakes() -> list[Mistake]:
    mistakes: list[Mistake] = []
    for name in LAB_MODULES:
        mistakes.extend(importlib.import_module(f"tests.mistakes.{name}").MISTAKES)
    return mistakes
