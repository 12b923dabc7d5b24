"""The grid: one row per learner, one cell per exercise, and who is stuck; pure functions over the events.

Why pure (no tornado, no SQLite, no clock): what the instructor sees is decided here, so every rule
is tested with plain events and an explicit ``now``. Each cell and the preflight are folded as the
learner's own table folds them (:mod:`labkit.progress.summary`); here:

- a learner is *stuck* after :attr:`Rules.attempts` attempts at one exercise without solving it
  (counted since they last solved it, or all when they never did), or after :attr:`Rules.minutes`
  without an event while at least two others had one (unless they solved every exercise);
- and, by evidence (:mod:`labkit.workshop.board.stuck`), after the same mistake :attr:`Rules.repeats` times in a
  row, or after :attr:`Rules.slower` times the room's median on the exercise she is on;
- per exercise: how many solved it, the three most frequent mistakes (by how many learners made
  them, so one learner's many retries do not outrank the room), and how many hints were used.

An event's time is the learner's clock, but never later than the board received it
(:attr:`labkit.workshop.board.store.Received.when`).
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from labkit.i18n.messages import _, ngettext
from labkit.progress.events import EXERCISE_PATTERN, PREFLIGHT
from labkit.progress.mistakes import describe
from labkit.progress.summary import (
    SOLVED,
    Cell,
    Preflight,
    exercise_cell,
    preflight_cell,
)
from labkit.workshop.board.store import Received
from labkit.workshop.board.stuck import Evidence, evidence_of, evidence_reasons, room_times

TOP_MISTAKES = 3


@dataclass(frozen=True)
class Rules:
    """When a learner counts as stuck."""

    attempts: int = 3  # attempts at one exercise without solving it
    minutes: int = 10  # without an event, while at least two others had one
    repeats: int = 2  # the same mistake id this many verdicts in a row (labkit.workshop.board.stuck)
    slower: float = 2.0  # this many times the room's median time on the exercise she is on; 0: off


@dataclass(frozen=True)
class Row:
    """One learner's row."""

    learner: str
    preflight: Preflight
    cells: tuple[Cell, ...]
    last_activity: float | None
    stuck: tuple[str, ...] = ()  # why they count as stuck, in words (the board's language); empty when they do not

    def to_json(self) -> dict[str, Any]:
        return {"learner": self.learner, "preflight": _preflight_json(self.preflight),
                "cells": [_cell_json(cell) for cell in self.cells], "last_activity": self.last_activity,
                "stuck": list(self.stuck)}


@dataclass(frozen=True)
class MistakeCount:
    """How often one mistake was made on one exercise."""

    mistake: str
    learners: int  # how many learners made it
    times: int  # how many verdicts named it

    @property
    def words(self) -> str:
        return describe(self.mistake)

    def to_json(self) -> dict[str, Any]:
        return {"mistake": self.mistake, "words": self.words, "learners": self.learners, "times": self.times}


@dataclass(frozen=True)
class ExerciseSummary:
    """One exercise across the room."""

    exercise: str
    solved: int
    learners: int
    hints: int
    mistakes: tuple[MistakeCount, ...]  # the most frequent first, at most TOP_MISTAKES

    def to_json(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "solved": self.solved, "learners": self.learners, "hints": self.hints,
                "mistakes": [mistake.to_json() for mistake in self.mistakes]}


@dataclass(frozen=True)
class Grid:
    """The whole board at ``now``."""

    exercises: tuple[str, ...]
    rows: tuple[Row, ...]
    summaries: tuple[ExerciseSummary, ...]
    now: float
    rules: Rules

    def to_json(self) -> dict[str, Any]:
        return {"now": self.now, "exercises": list(self.exercises), "stuck_attempts": self.rules.attempts,
                "stuck_minutes": self.rules.minutes, "rows": [row.to_json() for row in self.rows],
                "summaries": [summary.to_json() for summary in self.summaries]}


def build_grid(events: Iterable[Received], exercises: Sequence[str], now: float, rules: Rules = Rules(),
               learners: Iterable[str] | None = None, instructors: Collection[str] = ()) -> Grid:
    """The grid of ``learners`` (default: everyone with an event) less ``instructors``, one column per exercise.

    ``exercises`` empty: the exercises seen in the events, in numeric order.
    """
    events = list(events)
    columns = tuple(exercises) or exercises_seen(events)
    by_learner: dict[str, list[Received]] = {}
    for item in events:
        by_learner.setdefault(item.event.learner, []).append(item)
    names = set(by_learner) if learners is None else set(learners)
    parts = {name: learner_part(name, by_learner.get(name, []), columns) for name in names - set(instructors)}
    return grid_of(parts, columns, now, rules)


@dataclass(frozen=True)
class LearnerPart:
    """What one learner adds to the grid, from their own events alone: so a board recomputes only who posted.

    ``row`` is not yet judged stuck (that needs the clock and the others); ``mistakes`` counts, per
    exercise, how many of their verdicts named each mistake.
    """

    row: Row
    mistakes: dict[str, dict[str, int]]
    evidence: dict[str, Evidence] = field(default_factory=dict)  # per exercise, for the stuck signals of stuck.py


def learner_part(learner: str, events: Iterable[Received], exercises: Sequence[str]) -> LearnerPart:
    """``learner``'s part of the grid with one column per exercise in ``exercises``."""
    events = list(events)
    ordered = sorted(events, key=lambda item: (item.when, item.received, item.event.id))
    return LearnerPart(learner_row(learner, events, exercises), mistake_tally(events), evidence_of(ordered))


def mistake_tally(events: Iterable[Received]) -> dict[str, dict[str, int]]:
    """Per exercise, how many of ``events``' verdicts named each mistake."""
    tally: dict[str, dict[str, int]] = {}
    for item in events:
        event = item.event
        if event.kind == "check" and event.mistake:
            named = tally.setdefault(event.exercise, {})
            named[event.mistake] = named.get(event.mistake, 0) + 1
    return tally


def grid_of(parts: dict[str, LearnerPart], columns: tuple[str, ...], now: float, rules: Rules) -> Grid:
    """The grid at ``now`` of the learners in ``parts`` (each made with ``columns``)."""
    rows = [parts[name].row for name in sorted(parts)]
    since = now - rules.minutes * 60
    active = {row.learner for row in rows if row.last_activity is not None and row.last_activity >= since}
    times = room_times((part.evidence for part in parts.values()), now)
    rows = [replace(row, stuck=stuck_reasons(row, len(active - {row.learner}), now, rules)
                    + evidence_reasons(parts[row.learner].evidence, times, now, rules)) for row in rows]
    summaries = tuple(exercise_summary(exercise, rows, list(parts.values())) for exercise in columns)
    return Grid(columns, tuple(rows), summaries, now, rules)


def learner_row(learner: str, events: Iterable[Received], exercises: Sequence[str]) -> Row:
    """``learner``'s row from their own ``events``, not yet judged stuck."""
    events = sorted(events, key=lambda item: (item.when, item.received, item.event.id))
    cells = tuple(exercise_cell(exercise, [item for item in events if item.event.exercise == exercise])
                  for exercise in exercises)
    preflights = [item for item in events if item.event.kind == "preflight"]
    return Row(learner, preflight_cell(preflights), cells, max((item.when for item in events), default=None))


def stuck_reasons(row: Row, others_active: int, now: float, rules: Rules) -> tuple[str, ...]:
    """Why the learner of ``row`` counts as stuck at ``now``, in words (none: not stuck).

    ``others_active``: how many other learners had an event in the last ``rules.minutes``.
    """
    reasons = []
    for cell in row.cells:
        if cell.since_solved >= rules.attempts:
            n = cell.since_solved
            reason = (ngettext("{count} attempt at {exercise} since solving it",
                               "{count} attempts at {exercise} since solving it", n) if cell.solved_at is not None else
                      ngettext("{count} attempt at {exercise} without solving it",
                               "{count} attempts at {exercise} without solving it", n))
            reasons.append(reason.format(count=n, exercise=cell.exercise))
    finished = bool(row.cells) and all(cell.state == SOLVED for cell in row.cells)
    idle = row.last_activity is None or row.last_activity < now - rules.minutes * 60
    if idle and others_active >= 2 and not finished:
        window = ngettext("{count} minute", "{count} minutes", rules.minutes).format(count=rules.minutes)
        reason = (_("no event yet, while {others} others had one in the last {window}") if row.last_activity is None
                  else _("no event for {window}, while {others} others had one"))
        reasons.append(reason.format(others=others_active, window=window))
    return tuple(reasons)


def exercise_summary(exercise: str, rows: Sequence[Row], parts: Iterable[LearnerPart]) -> ExerciseSummary:
    """``exercise`` across ``rows`` (``parts``: theirs): solved by how many, its most frequent mistakes, hints used."""
    cells = [cell for row in rows for cell in row.cells if cell.exercise == exercise]
    return ExerciseSummary(exercise, solved=sum(cell.state == SOLVED for cell in cells), learners=len(rows),
                           hints=sum(cell.hints for cell in cells),
                           mistakes=tuple(ranked_mistakes([part.mistakes for part in parts], exercise)[:TOP_MISTAKES]))


def mistake_counts(events: Iterable[Received], exercise: str) -> list[MistakeCount]:
    """Every mistake verdicts named on ``exercise``: by how many learners made it, then how often, then id."""
    by_learner: dict[str, list[Received]] = {}
    for item in events:
        by_learner.setdefault(item.event.learner, []).append(item)
    return ranked_mistakes([mistake_tally(mine) for mine in by_learner.values()], exercise)


def ranked_mistakes(tallies: Iterable[dict[str, dict[str, int]]], exercise: str) -> list[MistakeCount]:
    """The mistakes on ``exercise`` in learners' ``tallies`` (one per learner), ranked as :func:`mistake_counts` says."""
    learners: dict[str, int] = {}
    times: dict[str, int] = {}
    for tally in tallies:
        for mistake, named in tally.get(exercise, {}).items():
            learners[mistake] = learners.get(mistake, 0) + 1
            times[mistake] = times.get(mistake, 0) + named
    counts = [MistakeCount(mistake, learners[mistake], times[mistake]) for mistake in learners]
    return sorted(counts, key=lambda count: (-count.learners, -count.times, count.mistake))


def exercises_seen(events: Iterable[Received]) -> tuple[str, ...]:
    """The exercise ids in ``events``, in numeric order (1.2 before 1.10)."""
    return in_order({item.event.exercise for item in events})


def in_order(exercises: Iterable[str]) -> tuple[str, ...]:
    """The exercise ids among ``exercises`` (not the preflight), once each, in numeric order (1.2 before 1.10)."""
    ids = {e for e in exercises if e != PREFLIGHT and EXERCISE_PATTERN.fullmatch(e)}
    return tuple(sorted(ids, key=lambda e: tuple(map(int, e.split(".")))))


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {"exercise": cell.exercise, "state": cell.state, "text": cell.text(), "attempts": cell.attempts,
            "mistake": cell.mistake, "mistake_words": cell.words, "solved_at": cell.solved_at, "last": cell.last,
            "hints": cell.hints}


def _preflight_json(preflight: Preflight) -> dict[str, Any]:
    return {"state": preflight.state, "text": preflight.text(), "failed_probes": list(preflight.failed_probes),
            "at": preflight.at}
