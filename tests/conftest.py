"""Fixtures more than one test folder needs."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch


@pytest.fixture(scope="session")
def transformers() -> ModuleType:
    """The real transformers, or a skip: not installed, or turned off by it (transformers 5 on torch < 2.6)."""
    module = pytest.importorskip("transformers")
    if not module.utils.is_torch_available():
        pytest.skip(f"transformers {module.__version__} does not run on torch {torch.__version__}")
    return module
