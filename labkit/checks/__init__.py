"""Exercise checkers: one module per lab (``labkit.checks.fx``, ...).

Why a shared result type: a checker must never crash the learner's notebook.
It says "solved", "not yet solved" (the stub still raises
``NotImplementedError``, as in a student copy) or "not solved" with the reason,
and shows itself as one readable line in text and HTML.
"""
from __future__ import annotations

import html
import sysconfig
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Status(str, Enum):
    SOLVED = "solved"
    NOT_YET = "not yet solved"
    WRONG = "not solved"


_ICONS = {Status.SOLVED: "✅", Status.NOT_YET: "⏳", Status.WRONG: "❌"}


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one exercise checker."""

    exercise: str
    status: Status
    message: str

    @property
    def solved(self) -> bool:
        return self.status is Status.SOLVED

    def __str__(self) -> str:
        return f"{_ICONS[self.status]} Exercise {self.exercise}: {self.status.value}. {self.message}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(str(self))}</p>"


def _learner_frame(exc: BaseException) -> traceback.FrameSummary:
    """The innermost frame outside torch, labkit and the standard library: the learner's line."""
    import torch

    import labkit

    library = tuple(
        str(Path(folder).resolve())
        for folder in (Path(torch.__file__).parent, Path(labkit.__file__).parent, sysconfig.get_paths()["stdlib"])
    )
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if not str(Path(frame.filename).resolve()).startswith(library):
            return frame
    return frames[-1]


def run_check(exercise: str, check: Callable[[], str]) -> CheckResult:
    """Run ``check``; turn its outcome into a :class:`CheckResult`.

    ``check`` returns a success message, or raises ``AssertionError`` with a
    hint when the answer is wrong. ``NotImplementedError`` (the student stub)
    means "not yet solved"; any other exception is reported, not propagated.
    """
    try:
        message = check()
    except NotImplementedError:
        return CheckResult(exercise, Status.NOT_YET, "Replace the stub that raises NotImplementedError with your code, then run this cell again.")
    except AssertionError as exc:
        return CheckResult(exercise, Status.WRONG, str(exc) or "The answer does not match yet.")
    except Exception as exc:  # noqa: BLE001 - a checker reports, it never crashes the notebook
        where = _learner_frame(exc)
        return CheckResult(
            exercise,
            Status.WRONG,
            f"Your code raised {type(exc).__name__}: {exc} (line {where.lineno} of {where.name}).",
        )
    return CheckResult(exercise, Status.SOLVED, message)
