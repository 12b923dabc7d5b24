"""Stuck by evidence: the same mistake again and again, and far longer on an exercise than the room takes.

Why beside the fixed thresholds (:func:`labkit.workshop.board.grid.stuck_reasons`, kept as a floor): studies of
help-seeking find a learner who repeats the identical mistake has not changed what the verdict named, and that time
means little alone (a hard exercise is slow for everyone) but much against the room's own time on it. So a learner
is also flagged, with the signal named in the reason, when

- her latest :attr:`Rules.repeats` verdicts on an exercise she has not solved since all named the same mistake id;
- she has spent at least :attr:`Rules.slower` times the room's median on the exercise she is working on (her latest
  event's), once :data:`MIN_OTHERS` others have a time there and for at least :data:`MIN_MINUTES`: a learner's
  time on an exercise runs from her first event on it to her first "solved", or to now while unsolved.

Pure functions over one learner's events (computed only when she posts) and the room's medians (per poll).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

from labkit.i18n.messages import _, ngettext
from labkit.workshop.board.store import Received

if TYPE_CHECKING:
    from labkit.workshop.board.grid import Rules

MIN_OTHERS = 3  # others timed on an exercise before a median means anything
MIN_MINUTES = 3  # never flag a learner as slow before this long on an exercise, whatever the median


@dataclass(frozen=True)
class Evidence:
    """One learner's evidence on one exercise, from her own events."""

    exercise: str
    started: float  # her first event on it
    last: float  # her latest event on it
    solved_at: float | None = None  # her first "solved"
    repeated: str = ""  # the mistake id her latest verdicts named, when they all named one
    repeats: int = 0  # how many verdicts in a row named it, with no "solved" after them

    def seconds(self, now: float) -> float:
        """Her time on the exercise at ``now``."""
        return (self.solved_at if self.solved_at is not None else now) - self.started


def evidence_of(events: Sequence[Received]) -> dict[str, Evidence]:
    """Per exercise, the evidence in one learner's ``events`` (oldest first)."""
    by_exercise: dict[str, list[Received]] = {}
    for item in events:
        if item.event.kind in ("check", "hint") and item.event.exercise:
            by_exercise.setdefault(item.event.exercise, []).append(item)
    return {exercise: _evidence(exercise, mine) for exercise, mine in by_exercise.items()}


def _evidence(exercise: str, events: Sequence[Received]) -> Evidence:
    checks = [item.event for item in events if item.event.kind == "check" and item.event.status != "not judged"]
    solved = [item.when for item in events if item.event.kind == "check" and item.event.status == "solved"]
    repeated, repeats = "", 0
    for event in reversed(checks):
        if event.status == "solved" or not event.mistake or (repeated and event.mistake != repeated):
            break
        repeated, repeats = event.mistake, repeats + 1
    return Evidence(exercise, started=min(item.when for item in events), last=max(item.when for item in events),
                    solved_at=min(solved) if solved else None, repeated=repeated, repeats=repeats)


def room_times(evidence: Iterable[Mapping[str, Evidence]], now: float) -> dict[str, list[float]]:
    """Per exercise, every learner's time on it at ``now`` (one mapping of ``evidence`` per learner)."""
    times: dict[str, list[float]] = {}
    for mine in evidence:
        for exercise, item in mine.items():
            times.setdefault(exercise, []).append(item.seconds(now))
    return times


def evidence_reasons(mine: Mapping[str, Evidence], times: Mapping[str, list[float]], now: float,
                     rules: Rules) -> tuple[str, ...]:
    """Why one learner (her evidence ``mine``) counts as stuck by evidence at ``now``, in words (none: she does not).

    ``times``: :func:`room_times` of the whole room, hers included (left out of her median here).
    """
    reasons = []
    for item in sorted(mine.values(), key=lambda item: item.started):
        if item.repeats >= max(rules.repeats, 2):
            reasons.append(ngettext("the same mistake ({mistake}) {count} time in a row at {exercise}",
                                    "the same mistake ({mistake}) {count} times in a row at {exercise}",
                                    item.repeats).format(mistake=item.repeated, count=item.repeats,
                                                         exercise=item.exercise))
    current = max(mine.values(), key=lambda item: item.last, default=None)
    if current is not None and current.solved_at is None and rules.slower > 0:
        spent = current.seconds(now)
        others = list(times.get(current.exercise, ()))
        if spent in others:
            others.remove(spent)
        typical = median(others) if len(others) >= MIN_OTHERS else None
        if typical is not None and spent >= max(rules.slower * typical, MIN_MINUTES * 60):
            reasons.append(_("{spent} on {exercise}, over {factor}× the room's median ({typical})").format(
                spent=_minutes(spent), exercise=current.exercise, factor=f"{rules.slower:g}", typical=_minutes(typical)))
    return tuple(reasons)


def _minutes(seconds: float) -> str:
    count = max(int(seconds // 60), 1) if seconds >= 60 else 0
    if count == 0:
        return _("under a minute")
    return ngettext("{count} minute", "{count} minutes", count).format(count=count)
