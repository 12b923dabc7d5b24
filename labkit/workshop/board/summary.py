"""After the workshop: ``python -m labkit workshop summary``, what the day was, per exercise, from the board's files.

Why a command and not a page: the instructor reads it once the room is over (the hub may be gone), from the board's
two databases in the hub's state (``board.sqlite``, the verdicts; ``help.sqlite``, the help queue), through the
board's own classes (a running board is not disturbed: both are SQLite in WAL mode). Per exercise: how many of the
room's learners solved it, how many help requests it drew, and the requests' median wait from asking to an
instructor's claim and from the claim to the close; then the room's median wait. The same folds as the board's
(:mod:`labkit.workshop.board.grid`, :mod:`labkit.workshop.board.queue`), so it says what the grid said.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitValueError
from labkit.core.tables import render_text
from labkit.i18n.messages import _
from labkit.workshop.board.grid import build_grid, exercises_seen, in_order
from labkit.workshop.board.queue import HelpQueue, HelpRequest, median_wait
from labkit.workshop.board.store import EventStore, Received


@dataclass(frozen=True)
class ExerciseDay:
    """One exercise's day: solved by how many of the room, its help requests and their two medians (seconds)."""

    exercise: str
    solved: int
    learners: int
    requests: int
    wait_to_claim_s: float | None
    claim_to_close_s: float | None


@dataclass(frozen=True)
class DaySummary:
    """The day's exercises, and the room's median wait from asking to a claim (None: nothing was claimed)."""

    exercises: tuple[ExerciseDay, ...]
    learners: int
    requests: int
    room_wait_s: float | None

    def to_text(self) -> str:
        headers = [_("exercise"), _("solved"), _("help requests"), _("median wait to claim"),
                   _("median claim to close")]
        rows = [[day.exercise, _("{solved} of {learners}").format(solved=day.solved, learners=day.learners),
                 day.requests, _duration(day.wait_to_claim_s), _duration(day.claim_to_close_s)]
                for day in self.exercises]
        room = _("the room: {learners} learners, {requests} help requests, median wait to claim {wait}").format(
            learners=self.learners, requests=self.requests, wait=_duration(self.room_wait_s))
        return render_text(rows, headers) + "\n" + room


def summarize(events: Iterable[Received], requests: Sequence[HelpRequest], exercises: Sequence[str] = (),
              instructors: Iterable[str] = ()) -> DaySummary:
    """The day of everyone with an event less ``instructors``; ``exercises`` empty: those seen, in numeric order."""
    events = list(events)
    columns = in_order({*exercises_seen(events), *(request.exercise for request in requests)}) if not exercises \
        else tuple(exercises)
    grid = build_grid(events, columns, now=time.time(), instructors=set(instructors))
    days = []
    for summary in grid.summaries:
        asked = [request for request in requests if request.exercise == summary.exercise]
        works = [work for work in (request.claim_to_close() for request in asked) if work is not None]
        days.append(ExerciseDay(summary.exercise, summary.solved, summary.learners, len(asked), median_wait(asked),
                                statistics.median(works) if works else None))
    return DaySummary(tuple(days), len(grid.rows), len(requests), median_wait(list(requests)))


def read_day(folder: Path) -> tuple[list[Received], list[HelpRequest]]:
    """The events and help requests in the board's ``folder`` (``board.sqlite``, ``help.sqlite``)."""
    events_file, help_file = folder / "board.sqlite", folder / "help.sqlite"
    if not events_file.is_file():
        raise LabkitValueError(_("no board here: {path} is missing (give the board's folder in the hub's state, "
                                 "LABKIT_WORKSHOP_STATE/board)").format(path=events_file))
    events = EventStore(events_file)
    try:
        received = events.events()
    finally:
        events.close()
    if not help_file.is_file():
        return received, []
    requests = HelpQueue(help_file)
    try:
        return received, requests.every()
    finally:
        requests.close()


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = round(seconds)
    if total < 60:
        return _("{seconds} s").format(seconds=total)
    return _("{minutes} min {seconds} s").format(minutes=total // 60, seconds=total % 60)
