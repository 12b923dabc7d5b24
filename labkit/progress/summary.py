"""One learner's events folded into where they stand: each exercise's cell and the preflight.

Why one fold for the learner's own table (:mod:`labkit.progress.table`) and the instructor's board
(:mod:`labkit.workshop.board.grid`): "solved" must mean the same on both screens. The rules:

- a cell is *solved* once any verdict said so, whatever came after; else it is what the latest
  verdict said: *attempted* (not solved: how many attempts, and the latest mistake in words),
  *checker error* (labkit's bug, not the learner's), *not yet* (the checker ran on the stub), or
  *not started* (no verdict); a timing check that found the machine too busy to judge is no
  verdict (*not judged* only while there is no other) and no attempt;
- a look at the reference solution (``labkit.solution("1.2")``) is no verdict either: the cell says it was seen;
- the preflight cell is the latest preflight: ready, not ready (which probes failed), or not run.

Each event comes with the time it counts at (``when``): on the learner's machine its own clock
(:class:`Dated`), on the board the learner's clock but never later than it was received.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from labkit.i18n.messages import _, ngettext
from labkit.progress.events import Event
from labkit.progress.mistakes import describe

SOLVED, ATTEMPTED, NOT_STARTED, CHECKER_ERROR, NOT_YET = "solved", "attempted", "not started", "checker error", "not yet"
NOT_JUDGED = "not judged"
STATES = (SOLVED, ATTEMPTED, NOT_STARTED, CHECKER_ERROR, NOT_YET, NOT_JUDGED)
READY, NOT_READY, NOT_RUN = "ready", "not ready", "not run"
Clock = Callable[[float], str]  # a time (seconds since the epoch) as the reader should see it


class Timed(Protocol):
    """An event and the time it counts at."""

    @property
    def event(self) -> Event: ...

    @property
    def when(self) -> float: ...


@dataclass(frozen=True)
class Dated:
    """An event of the learner's own journal, at the time their machine gave it."""

    event: Event

    @property
    def when(self) -> float:
        return self.event.time


def dated(events: Iterable[Event], learner: str | None = None) -> list[Dated]:
    """``events`` (only ``learner``'s, when given) as :class:`Dated`, oldest first."""
    chosen = [Dated(event) for event in events if learner is None or event.learner == learner]
    return sorted(chosen, key=lambda item: (item.when, item.event.id))


@dataclass(frozen=True)
class Cell:
    """One learner's standing on one exercise."""

    exercise: str
    state: str = NOT_STARTED
    attempts: int = 0  # "not solved" verdicts, in all
    since_solved: int = 0  # "not solved" verdicts after the latest "solved" (all of them when never solved)
    mistake: str = ""  # the latest "not solved" (or checker error) verdict's mistake id
    solved_at: float | None = None  # the first "solved"
    last: float | None = None  # the latest verdict or hint of this exercise
    hints: int = 0  # hint levels seen
    solution_seen: bool = False  # the learner looked at the reference solution (labkit.solution)

    @property
    def words(self) -> str:
        """The latest mistake, in words (:func:`labkit.progress.mistakes.describe`); "" when there is none."""
        return describe(self.mistake) if self.mistake else ""

    def text(self, clock: Clock | None = None) -> str:
        """The cell in words; a solved cell says when if given a ``clock``."""
        if self.state == SOLVED:
            text = "✓ " + _("solved") + (f" {clock(self.solved_at)}" if clock and self.solved_at is not None else "")
        elif self.state == ATTEMPTED:
            attempts = ngettext("{count} attempt", "{count} attempts", self.attempts).format(count=self.attempts)
            text = _("{attempts}, latest: {mistake}").format(attempts=attempts, mistake=self.words)
        elif self.state == NOT_YET:
            text = _("not yet: ran the checker on the stub")
        elif self.state == NOT_JUDGED:
            text = _("not judged: the machine was too busy to time it")
        else:
            text = _(self.state)
        if self.hints:
            text += "; " + ngettext("{count} hint", "{count} hints", self.hints).format(count=self.hints)
        return text + ("; " + _("solution seen") if self.solution_seen else "")


@dataclass(frozen=True)
class Preflight:
    """The latest preflight of notebook 00."""

    state: str = NOT_RUN
    failed_probes: tuple[str, ...] = ()
    at: float | None = None

    def text(self) -> str:
        return f"{_(NOT_READY)}: {', '.join(self.failed_probes)}" if self.state == NOT_READY else _(self.state)


def exercise_cell(exercise: str, events: Sequence[Timed]) -> Cell:
    """One learner's cell from their verdicts and hints on ``exercise`` (oldest first)."""
    checks = [item for item in events if item.event.kind == "check"]
    solved = [item.when for item in checks if item.event.status == "solved"]
    failed = [item for item in checks if item.event.status == "not solved"]
    named = [item for item in checks if item.event.mistake]
    since_solved = sum(1 for item in failed if not solved or item.when > solved[-1])
    hints = len({item.event.hint_level for item in events if item.event.kind == "hint"})
    judged = [item for item in checks if item.event.status != "not judged"]  # too busy to judge: no verdict at all
    if solved:
        state = SOLVED
    elif judged:
        state = {"not solved": ATTEMPTED, "checker error": CHECKER_ERROR, "not yet solved": NOT_YET}[judged[-1].event.status]
    else:
        state = NOT_JUDGED if checks else NOT_STARTED
    return Cell(exercise, state, attempts=len(failed), since_solved=since_solved,
                mistake=named[-1].event.mistake if named and state != SOLVED else "",
                solved_at=solved[0] if solved else None, last=events[-1].when if events else None, hints=hints,
                solution_seen=any(item.event.kind == "solution" for item in events))


def preflight_cell(events: Sequence[Timed]) -> Preflight:
    """The latest of ``events`` (preflights, oldest first), or not run."""
    if not events:
        return Preflight()
    latest = events[-1]
    return Preflight(latest.event.status, latest.event.failed_probes, latest.when)


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


