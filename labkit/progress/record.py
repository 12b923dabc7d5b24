"""What the checkers and the preflight call: record one event, never raise, never make the learner wait.

Why here and not in :mod:`labkit.core.checks` (which imports this module; never the other way round):
a verdict must reach the learner even when the disk is full or the board is down, so every failure to
record is swallowed here (and said once, as a warning), and the sending happens on a thread of its own
(:mod:`labkit.progress.sender`).
"""
from __future__ import annotations

import getpass
import os
import re
import warnings
from collections.abc import Callable

from labkit.core.errors import LabkitError
from labkit.progress import journal, sender
from labkit.progress.events import LEARNER_PATTERN, PREFLIGHT, Event

_warned = False
_tried: set[str] = set()  # exercises this kernel's checkers judged, for when the journal is off
ATTEMPTS = ("solved", "not solved")  # a verdict on the learner's own code: a try (the stub's "not yet solved" is none)


def learner_name() -> str:
    """Who the learner is: the hub's name for them (``JUPYTERHUB_USER``), else this account's."""
    name = os.environ.get("JUPYTERHUB_USER") or _account()
    return name if LEARNER_PATTERN.fullmatch(name) else re.sub(r"[^A-Za-z0-9._@-]", "-", name)[:64].lstrip(".-") or "learner"


def _account() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container whose user id has no name
        return f"uid-{os.getuid()}"


def record_verdict(exercise: str, status: str, mistake: str = "") -> None:
    """One ``check`` event for a checker's verdict, handed over as plain values (so this module needs nothing of
    :mod:`labkit.core.checks`, which calls it: the recording depends on nothing it records)."""
    if status in ATTEMPTS:
        _tried.add(exercise)
    record(lambda learner: Event(learner, "check", exercise, status, mistake))


def tried_here(exercise: str) -> bool:
    """Whether a checker of this kernel judged an answer to ``exercise`` (solved or not)."""
    return exercise in _tried


def record_solution_seen(exercise: str) -> None:
    """One ``solution`` event: the learner looked at the reference solution of ``exercise``."""
    record(lambda learner: Event(learner, "solution", exercise, "seen"))


def record_preflight(failed_probes: list[str]) -> None:
    """One ``preflight`` event: ready when no probe failed."""
    status = "not ready" if failed_probes else "ready"
    record(lambda learner: Event(learner, "preflight", PREFLIGHT, status, failed_probes=tuple(failed_probes[:32])))


def record_hint(exercise: str, level: int) -> None:
    """One ``hint`` event: the learner asked for hint ``level`` of ``exercise``."""
    record(lambda learner: Event(learner, "hint", exercise, "hint", hint_level=level))


def record(make_event: Callable[[str], Event]) -> None:
    """Append the event ``make_event(learner)`` gives to the journal and wake the sender; any failure is a warning."""
    global _warned
    try:
        path = journal.journal_path()
        if path is None:
            return
        journal.append(make_event(learner_name()), path)
        sender.wake(path)
    except (OSError, LabkitError) as exc:
        if not _warned:
            _warned = True
            warnings.warn(f"labkit could not record your progress ({exc}); your verdicts are not affected.", stacklevel=3)
