"""The grid and the mistakes as CSV, for the instructor's spreadsheet after the workshop.

Why a module: a cell a spreadsheet reads as a formula (``=HYPERLINK(...)``, ``+1``, ``-1``, ``@SUM``)
runs when the file is opened, and a learner's name is a string the learner chose. Every cell that
starts with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return, which some spreadsheets skip
before reading a formula) gets a leading ``'``, which spreadsheets read as "this is text".
Times are UTC, ISO 8601. The grid's and the help requests' lines name the version of the labs each learner's
workspace holds (:mod:`labkit.workshop.board.versions`; empty when the push record names none).
"""
from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterable, Mapping, Sequence

from labkit.workshop.board.grid import Grid, mistake_counts
from labkit.workshop.board.queue import HelpRequest
from labkit.workshop.board.store import Received

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    """``value`` as CSV text a spreadsheet shows and never runs."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def utc(seconds: float | None) -> str:
    """A time as ISO 8601 UTC ("" for none)."""
    return "" if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def grid_csv(grid: Grid, versions: Mapping[str, str]) -> str:
    """One line per learner: her labs version, preflight, each exercise in words, last activity, why stuck."""
    lines: list[list[object]] = [["learner", "labs version", "preflight", *grid.exercises, "last activity", "stuck"]]
    for row in grid.rows:
        lines.append([row.learner, versions.get(row.learner, ""), row.preflight.text(),
                      *(cell.text(utc) for cell in row.cells), utc(row.last_activity), "; ".join(row.stuck)])
    return _csv(lines)


def mistakes_csv(grid: Grid, events: Iterable[Received]) -> str:
    """Every mistake named on each of the grid's exercises by its learners: id, words, learners, verdicts."""
    learners = {row.learner for row in grid.rows}
    mine = [item for item in events if item.event.learner in learners]
    lines: list[list[object]] = [["exercise", "mistake", "words", "learners", "times"]]
    for exercise in grid.exercises:
        for count in mistake_counts(mine, exercise):
            lines.append([exercise, count.mistake, count.words, count.learners, count.times])
    return _csv(lines)


def help_csv(requests: Iterable[HelpRequest], versions: Mapping[str, str]) -> str:
    """One line per help request: who (and her labs version now), which exercise, mistake, hint level, look, times,
    and the two waits (seconds)."""
    lines: list[list[object]] = [["learner", "labs version", "exercise", "mistake", "hint level", "look", "asked", "claimed by",
                                  "ending", "wait to claim (s)", "claim to close (s)"]]
    for request in requests:
        wait, work = request.wait_to_claim(), request.claim_to_close()
        lines.append([request.learner, versions.get(request.learner, ""), request.exercise, request.mistake, request.hint_level,
                      "yes" if request.look else "no", utc(request.opened), request.claimed_by, request.ending,
                      "" if wait is None else round(wait), "" if work is None else round(work)])
    return _csv(lines)


def _csv(lines: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for line in lines:
        writer.writerow([safe_cell(value) for value in line])
    return out.getvalue()
