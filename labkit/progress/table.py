"""The learner's own table: each exercise of the labs, solved or not, the last attempt, and what to do next.

Why from the journal: it works offline, on a laptop as on a hub (where the same events went to the
board). It shows what labkit recorded and nothing else: verdicts, never code or outputs.
"""
from __future__ import annotations

import datetime
import json
import os
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitError
from labkit.core.tables import Table
from labkit.labs import EXERCISES, lab_of_exercise
from labkit.progress import journal, sender
from labkit.progress.events import Event, parse_event
from labkit.progress.mistakes import describe
from labkit.progress.record import learner_name
from labkit.progress.summary import ExerciseProgress, LearnerProgress, summarize

HEADERS = ("exercise", "notebook", "state", "attempts", "hints", "last attempt", "next")


@dataclass(frozen=True, repr=False)
class ProgressTable:
    """A learner's progress as a table (text and HTML), and the one next step in a sentence."""

    progress: LearnerProgress
    source: str  # where the events came from, e.g. the journal's path
    note: str = ""  # a line about where the events came from: the board, or why not

    @property
    def table(self) -> Table:
        rows = [self._row(self.progress.exercises.get(exercise) or ExerciseProgress(exercise)) for exercise in EXERCISES]
        return Table(HEADERS, rows, title=f"Progress of {self.progress.learner} ({self.source})")

    @property
    def solved(self) -> int:
        return sum(1 for item in self.progress.exercises.values() if item.state == "solved")

    def next_step(self) -> str:
        for exercise in EXERCISES:
            item = self.progress.exercises.get(exercise)
            if item is None or item.state != "solved":
                return f"Next: exercise {exercise}: {_advice(item or ExerciseProgress(exercise))}"
        return "Every exercise is solved. The extra sections of each notebook (make lab TRACK=all) go further."

    def preflight_line(self) -> str:
        preflight = self.progress.preflight
        if preflight.state == "not ready":
            return f"Preflight: not ready ({', '.join(preflight.failed_probes)} failed); run notebook 00's preflight again."
        return f"Preflight: {preflight.state}."

    def lines(self) -> list[str]:
        return [line for line in (self.preflight_line(), f"{self.solved} of {len(EXERCISES)} solved.",
                                  self.next_step(), self.note) if line]

    def to_text(self) -> str:
        return "\n".join([self.table.to_text(), *self.lines()])

    def _repr_html_(self) -> str:
        import html

        return self.table.to_html() + "".join(f"<p>{html.escape(line)}</p>" for line in self.lines())

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def _row(self, item: ExerciseProgress) -> tuple[str, ...]:
        lab = lab_of_exercise(item.exercise)
        when = _clock(item.last_time) if item.last_time is not None else ""
        return (item.exercise, lab.notebook if lab else "", item.state, str(item.attempts),
                f"{item.hint_level} of 3" if item.hint_level else "", when,
                "" if item.state == "solved" else _advice(item))


def progress_table(learner: str, events: Iterable[Event], source: str, note: str = "") -> ProgressTable:
    """The table of ``learner``'s ``events``."""
    return ProgressTable(summarize(learner, events), source, note)


def my_progress(file: Path | None = None, local: bool = False) -> ProgressTable:
    """Your progress: from your journal (or ``file``); on a hub, as the room's board holds it (unless ``local``).

    On a hub the journal's unsent events are sent first; when the board cannot be reached, your own
    journal is shown and the table says so.
    """
    path = file or journal.journal_path()
    learner = learner_name()
    if path is None:
        return progress_table(learner, [], "nothing recorded",
                              f"Recording is off ({journal.ENVIRONMENT}=off), so nothing of this session is shown.")
    events, _ = journal.read_events(path)
    if local or file is not None or sender.board_url() is None:
        return progress_table(learner, events, str(path))
    problem = sender.send_now(path)[1]
    if problem:
        return progress_table(learner, events, str(path), f"The room's board: {problem}; this is your own journal.")
    try:
        held = board_events(os.environ[sender.BOARD_URL])
    except (OSError, ValueError, KeyError, LabkitError) as exc:
        return progress_table(learner, events, str(path), f"The room's board could not be read ({exc}); "
                              "this is your own journal.")
    return progress_table(learner, held, "as the room's board holds it")


def board_events(url: str) -> list[Event]:
    """Your events as the room's board holds them (``api/me``, with your hub token)."""
    request = urllib.request.Request(url.rstrip("/") + "/api/me",
                                     headers={"Authorization": f"token {os.environ[sender.TOKEN]}"})
    with urllib.request.urlopen(request, timeout=sender.TIMEOUT_S) as reply:
        return [parse_event(record) for record in json.loads(reply.read())["events"]]


def _advice(item: ExerciseProgress) -> str:
    lab = lab_of_exercise(item.exercise)
    where = f"in {lab.notebook}" if lab else ""
    if item.state == "not started":
        return f"open it {where} and run its checker cell".replace("  ", " ")
    if item.state == "not yet":
        return "replace the stub with your code, then run the checker cell again"
    if item.state == "checker error":
        return "the checker itself failed: tell the instructor (or open an issue)"
    last = describe(item.latest_mistake) if item.latest_mistake else "a wrong answer"
    return f"last try: {last}; read the checker's message, or ask for a hint: hint(\"{item.exercise}\")"


def _clock(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")
