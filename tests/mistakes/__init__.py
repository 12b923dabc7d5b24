"""The mistake catalogues: the wrong answers learners give, one catalogue per lab, and what each checker says.

Why a catalogue and not scattered asserts: a hint is only useful when it names the learner's actual
mistake, and different mistakes must get different hints. Each :class:`Mistake` is a wrong answer
written the way learners write it, and the words its hint must contain. ``test_catalogues.py`` runs
every entry (also under ``python -O``), and ``instructors.py`` writes INSTRUCTORS.md's "the checker
says" tables from the same entries, so the guide quotes what the checkers print today.

The catalogues live under tests/, not in the labkit package: wrong answers one line away from the
solution must not ship to a learner's machine before the solutions are handed out.
"""
from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch

from labkit.core.checks import CheckResult, Status, fixed_draws

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "notebooks" / "solutions"


@dataclass(frozen=True)
class Mistake:
    """One wrong answer to one exercise, and what the checker must say to it.

    ``answer`` runs the checker on the wrong answer and returns its verdict. ``names`` are phrases the
    message must contain (case-insensitive): the words that name this mistake, so that a different
    mistake's hint does not pass. ``measured`` are regular expressions for parts of the message that
    come from a measurement or a random draw; INSTRUCTORS.md shows them as ``…``. ``mistake`` is the id
    (:mod:`labkit.progress.mistakes`) the verdict must carry, for entries that pin it.
    """

    exercise: str
    what: str
    answer: Callable[[], CheckResult]
    names: tuple[str, ...]
    status: Status = Status.WRONG
    measured: tuple[str, ...] = field(default=())
    mistake: str = ""  # the mistake id the board counts, without the exercise ("groups"), when the entry pins it

    def __post_init__(self) -> None:
        """The checker draws the same cases for every run of the entry (:func:`labkit.core.checks.fixed_draws`), so the
        guide quotes one message; ``test_drawn_cases.py`` runs the answers on other draws (:meth:`on_draw`)."""
        answer = self.answer
        object.__setattr__(self, "_unpinned", answer)

        def pinned() -> CheckResult:
            with fixed_draws(0):
                return answer()

        object.__setattr__(self, "answer", pinned)

    def on_draw(self, seed: int) -> CheckResult:
        """The checker's verdict on this answer when it draws its cases with ``seed``, and torch's global generator (the
        learner's random state, which a checker must not lean on) is seeded with ``seed`` too."""
        with fixed_draws(seed), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self._unpinned()  # type: ignore[attr-defined,no-any-return]


def solution(file_name: str) -> ModuleType:
    """The solution file ``notebooks/solutions/<file_name>`` as a module (a fresh one on every call)."""
    spec = importlib.util.spec_from_file_location(file_name.removesuffix(".py"), SOLUTIONS / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solution_lines(exercise: str) -> list[str]:
    """The code lines of the exercise's solution file that a hint must never contain (comments, docstrings,
    imports, ``def``/``class``/``return`` headers and lines shorter than 16 characters left out)."""
    major, minor = exercise.split(".")
    (path,) = SOLUTIONS.glob(f"{int(major):02d}_{minor}_*.py")
    lines = []
    in_docstring = False
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        quotes = line.count('"""') + line.count("'''")
        if in_docstring or quotes:
            in_docstring = in_docstring != (quotes % 2 == 1)
            continue
        if line.startswith(("#", "import ", "from ", "def ", "class ", "@")):
            continue
        code = re.sub(r"\s+#.*$", "", line).removeprefix("return ")
        if len(code) >= 16:
            lines.append(code)
    return lines
