"""Lab 04's tiered hints (see :mod:`labkit.progress.hints`)."""
from __future__ import annotations

HINTS: dict[str, tuple[str, str, str]] = {}
