"""Lab 01's mistake ids and what each means, for the instructor's board (see :mod:`labkit.progress.mistakes`)."""
from __future__ import annotations

MISTAKES: dict[str, str] = {}
