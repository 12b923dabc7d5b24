"""pytest configuration for the whole repository.

Why: a student copy written inside the tree (``python -m labkit student-copy
notebooks/handout``) holds stub notebooks whose exercises are unsolved; nbval
would run them as tests. Any folder that holds a student copy (its marker or
manifest) is never collected, wherever it is.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from labkit.tools.student_copy import is_student_copy


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip student copies; leave every other decision to pytest (``None``)."""
    if collection_path.is_dir() and is_student_copy(collection_path):
        return True
    return None
