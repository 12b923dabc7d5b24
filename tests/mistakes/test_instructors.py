"""INSTRUCTORS.md quotes what the checkers print today (its tables are written by tests/mistakes/instructors.py)."""
from __future__ import annotations

import pytest
import torch

from tests.mistakes.catalogues import all_mistakes
from tests.mistakes.instructors import GUIDE, render, torch_release, written_with


@pytest.mark.slow
def test_the_guide_quotes_what_the_checkers_print():
    current = GUIDE.read_text(encoding="utf-8")
    release = written_with(current)
    if torch.torch_version.TorchVersion(torch_release()) < release:
        pytest.skip(f"the tables quote torch {release}'s messages; an older torch words some of them differently")
    assert render(current, all_mistakes()) == current, "run: python -m tests.mistakes.instructors"
