"""The learner's own table: each exercise of the labs, solved or not, the last attempt, and what to do next.

Why from the journal: it works offline, on a laptop as on a hub (where the same events went to the
board). It shows what labkit recorded and nothing else: verdicts, never code or outputs.
"""
from __future__ import annotations

import datetime
import json
import os
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitError
from labkit.core.tables import Table
from labkit.i18n.messages import N_, _
from labkit.labs import EXERCISES, lab_of_exercise
from labkit.progress import journal, sender
from labkit.progress.events import Event, parse_event
from labkit.progress.mistakes import describe
from labkit.progress.record import learner_name
from labkit.progress.summary import SOLVED, Cell, Preflight, dated, exercise_cell, preflight_cell

HEADERS = (N_("exercise"), N_("notebook"), N_("state"), N_("attempts"), N_("hints"), N_("last attempt"), N_("next"))
_STATES = (N_("solved"), N_("attempted"), N_("not started"), N_("checker error"), N_("not yet"), N_("not judged"),
           N_("ready"), N_("not ready"), N_("not run"))  # labkit.progress.summary's states, shown translated


@dataclass(frozen=True, repr=False)
class ProgressTable:
    """A learner's progress as a table (text and HTML), and the one next step in a sentence."""

    learner: str
    cells: tuple[Cell, ...]  # one per exercise of the labs, in order
    preflight: Preflight
    source: str  # where the events came from, e.g. the journal's path
    note: str = ""  # a line about where the events came from: the board, or why not

    @property
    def table(self) -> Table:
        if self.learner:
            title = _("Progress of {learner} ({source})").format(learner=self.learner, source=self.source)
        else:
            title = _("Progress ({source})").format(source=self.source)
        return Table(tuple(_(header) for header in HEADERS), [_row(cell) for cell in self.cells], title=title)

    @property
    def solved(self) -> int:
        return sum(1 for cell in self.cells if cell.state == SOLVED)

    def next_step(self) -> str:
        for cell in self.cells:
            if cell.state != SOLVED:
                return _("Next: exercise {exercise}: {advice}").format(exercise=cell.exercise, advice=_advice(cell))
        if {cell.exercise for cell in self.cells} >= set(EXERCISES):
            return _("Every exercise is solved.")
        return _("Every exercise of your track is solved. The extra sections of each notebook go further: "
                 "`python -m labkit lab --track all` gets them.")

    def preflight_line(self) -> str:
        if self.preflight.state == "not ready":
            return _("Preflight: not ready ({probes} failed); run notebook 00's preflight again.").format(
                probes=", ".join(self.preflight.failed_probes))
        return _("Preflight: {state}.").format(state=_(self.preflight.state))

    def lines(self) -> list[str]:
        solved = _("{solved} of {total} solved.").format(solved=self.solved, total=len(self.cells))
        return [line for line in (self.preflight_line(), solved, self.next_step(), self.note) if line]

    def to_text(self) -> str:
        return "\n".join([self.table.to_text(), *self.lines()])

    def _repr_html_(self) -> str:
        import html

        return self.table.to_html() + "".join(f"<p>{html.escape(line)}</p>" for line in self.lines())

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()


def progress_table(learner: str, events: Iterable[Event], source: str, note: str = "",
                   exercises: Sequence[str] = EXERCISES) -> ProgressTable:
    """The table of ``learner``'s ``events`` (other learners' are left out) over ``exercises`` (their track's)."""
    mine = dated(events, learner)
    cells = tuple(exercise_cell(exercise, [item for item in mine if item.event.exercise == exercise])
                  for exercise in exercises)
    return ProgressTable(learner, cells, preflight_cell([item for item in mine if item.event.kind == "preflight"]),
                         source, note)


def my_progress(file: Path | None = None, local: bool = False) -> ProgressTable:
    """Your progress: from your journal (or ``file``); on a hub, as the room's board holds it (unless ``local``).

    On a hub the journal's unsent events are sent first; when the board cannot be reached, your own
    journal is shown and the table says so.
    """
    path = file or journal.journal_path()
    learner = learner_name()
    if path is None:  # no learner's name either: a docs build or a test run would store its own account's
        off = _("Recording is off ({variable}=off), so nothing of this session is shown.")
        return progress_table("", [], _("nothing recorded"), off.format(variable=journal.ENVIRONMENT))
    events, _end = journal.read_events(path)
    exercises = track_exercises(path)
    if local or file is not None or sender.board_url() is None:
        return progress_table(learner, events, str(path), exercises=exercises)
    problem = sender.send_now(path)[1]
    if problem:
        note = _("The room's board: {problem}; this is your own journal.").format(problem=problem)
        return progress_table(learner, events, str(path), note, exercises)
    try:
        held = board_events(os.environ[sender.BOARD_URL])
    except (OSError, ValueError, KeyError, LabkitError) as exc:
        note = _("The room's board could not be read ({error}); this is your own journal.").format(error=exc)
        return progress_table(learner, events, str(path), note, exercises)
    return progress_table(learner, held, _("as the room's board holds it"), exercises=exercises)


def track_exercises(journal_file: Path, cwd: Path | None = None) -> tuple[str, ...]:
    """The exercises of the learner's track: those the workspace holding ``journal_file`` lists in its manifest
    (the core track leaves some out), else the workspace's where the command runs (a journal set by
    ``LABKIT_PROGRESS`` lies outside it), else every exercise of the labs."""
    beside = journal_file.parent.parent / journal.WORKSPACE_MARKER
    here = journal.workspace_folder(cwd) or journal.lab_folder_in(cwd)
    for manifest in (beside, *([here / journal.WORKSPACE_MARKER] if here else [])):
        if not manifest.is_file():
            continue
        try:
            listed = json.loads(manifest.read_text(encoding="utf-8")).get("exercises")
        except (OSError, ValueError, AttributeError):
            return EXERCISES
        if not isinstance(listed, list) or not listed or not all(isinstance(item, str) and item in EXERCISES
                                                                 for item in listed):
            return EXERCISES  # a workspace from before manifests listed them, or a damaged list: every exercise
        return tuple(listed)
    return EXERCISES


def board_events(url: str) -> list[Event]:
    """Your events as the room's board holds them (``api/me``, with your hub token)."""
    request = urllib.request.Request(url.rstrip("/") + "/api/me",
                                     headers={"Authorization": f"token {os.environ[sender.TOKEN]}"})
    with urllib.request.urlopen(request, timeout=sender.TIMEOUT_S) as reply:
        return [parse_event(record) for record in json.loads(reply.read())["events"]]


def _row(cell: Cell) -> tuple[str, ...]:
    lab = lab_of_exercise(cell.exercise)
    hints = _("{hints} of 3").format(hints=cell.hints) if cell.hints else ""
    return (cell.exercise, lab.notebook if lab else "", _(cell.state), str(cell.attempts),
            ", ".join(filter(None, [hints, _("solution seen") if cell.solution_seen else ""])),
            _clock(cell.last) if cell.last is not None else "",
            "" if cell.state == SOLVED else _advice(cell))


def _advice(cell: Cell) -> str:
    lab = lab_of_exercise(cell.exercise)
    if cell.state == "not started":
        return _("open it in {notebook} and run its checker cell").format(notebook=lab.notebook) if lab else _(
            "run its checker cell")
    if cell.state == "not yet":
        return _("replace the stub with your code, then run the checker cell again")
    if cell.state == "not judged":
        return _("the machine was too busy to time your answer: run the checker cell again when it is quieter")
    if cell.state == "checker error":
        return _("the checker itself failed: tell the instructor (or open an issue)")
    last = describe(cell.mistake) if cell.mistake else _("a wrong answer")
    return _("last try: {last}; read the checker's message, or ask for a hint: hint(\"{exercise}\")").format(
        last=last, exercise=cell.exercise)


def _clock(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")
