"""The event: one verdict of one learner, the only thing labkit records about a learner's work.

Why so little: a room's board must help the instructor without watching the learner. An event holds
who (from the hub, or this account outside one), what exercise, the verdict, a stable id of the
mistake (``1.2/groups``: never the hint's text, the learner's code or their outputs) and when. The
same record is written to the learner's local file and sent to the board; :func:`parse_event` is
the one gate both sides pass what they read through, so a forged or damaged line is refused, not shown.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from labkit.core.errors import LabkitValueError

Kind = Literal["check", "preflight", "hint", "solution"]
KINDS: tuple[str, ...] = ("check", "preflight", "hint", "solution")
#: A check's statuses are :class:`labkit.core.checks.Status` values; a preflight is ready or not; a hint is a hint.
CHECK_STATUSES = ("solved", "not yet solved", "not solved", "checker error", "not judged")
PREFLIGHT_STATUSES = ("ready", "not ready")
#: A solution event says the learner looked at the reference solution (``labkit.solution("1.2")``).
STATUSES = {"check": CHECK_STATUSES, "preflight": PREFLIGHT_STATUSES, "hint": ("hint",), "solution": ("seen",)}
PREFLIGHT = "preflight"  # the exercise id of notebook 00's preflight
MAX_OPEN_HELP_REQUESTS = 3  # a learner's open help requests the board holds: the kernel and the board agree on it
EXERCISE_PATTERN = re.compile(r"^\d{1,2}\.\d{1,2}$")
#: ``1.2/groups``: the exercise, then a lowercase slug naming the mistake (see :mod:`labkit.progress.mistakes`).
MISTAKE_PATTERN = re.compile(r"^\d{1,2}\.\d{1,2}/[a-z0-9][a-z0-9-]{0,47}$")
PROBE_PATTERN = re.compile(r"^[A-Za-z0-9@][A-Za-z0-9 ._@-]{0,47}$")  # a doctor probe's name: "torch", "widgets extension"
LEARNER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}$")
ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")
MAX_HINT_LEVEL = 3
MAX_LINE_BYTES = 2048


@dataclass(frozen=True)
class Event:
    """One verdict (``kind="check"``), one preflight, one hint shown, or one look at the reference solution."""

    learner: str
    kind: Kind
    exercise: str  # "1.2", or "preflight"
    status: str
    mistake: str = ""  # a check's mistake id, "" when solved or not yet started
    failed_probes: tuple[str, ...] = ()  # a preflight's failed probes
    hint_level: int = 0  # a hint's level, 1 to 3
    time: float = field(default_factory=time.time)  # seconds since the epoch, as the learner's machine saw it
    id: str = field(default_factory=lambda: uuid.uuid4().hex)  # the board keeps each event once, however often sent

    def __post_init__(self) -> None:
        _validate(self)

    def to_json(self) -> str:
        """One line of JSON (no newline), at most :data:`MAX_LINE_BYTES` bytes."""
        record = asdict(self)
        record["failed_probes"] = list(self.failed_probes)
        return json.dumps(record, separators=(",", ":"), sort_keys=True)


def parse_event(text: str | bytes | dict[str, Any]) -> Event:
    """The event in a line of JSON (or its dict); :class:`LabkitValueError` for anything that is not exactly one."""
    if isinstance(text, (str, bytes)):
        if len(text) > MAX_LINE_BYTES:
            raise LabkitValueError(f"an event is at most {MAX_LINE_BYTES} bytes of JSON")
        try:
            record = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            raise LabkitValueError("an event is one line of JSON") from None
    else:
        record = text
    if not isinstance(record, dict):
        raise LabkitValueError("an event is a JSON object")
    names = {"learner", "kind", "exercise", "status", "mistake", "failed_probes", "hint_level", "time", "id"}
    if set(record) != names:
        raise LabkitValueError(f"an event has exactly the fields {', '.join(sorted(names))}")
    probes = record["failed_probes"]
    if not isinstance(probes, list):
        raise LabkitValueError("failed_probes is a list of probe names")
    if isinstance(record["time"], bool) or not isinstance(record["time"], (int, float)):
        raise LabkitValueError("time is a number of seconds since the epoch")
    if isinstance(record["hint_level"], bool) or not isinstance(record["hint_level"], int):
        raise LabkitValueError("hint_level is a whole number")
    return Event(**{**record, "failed_probes": tuple(probes), "time": float(record["time"])})


def _validate(event: Event) -> None:
    def refuse(what: str) -> None:
        raise LabkitValueError(f"not an event: {what}")

    for name in ("learner", "kind", "exercise", "status", "mistake", "id"):
        if not isinstance(getattr(event, name), str):
            refuse(f"{name} is not text")
    if not LEARNER_PATTERN.fullmatch(event.learner):
        refuse("the learner's name")
    if event.kind not in KINDS:
        refuse(f"kind is one of {', '.join(KINDS)}")
    if event.status not in STATUSES[event.kind]:
        refuse(f"a {event.kind}'s status is one of {', '.join(STATUSES[event.kind])}")
    if event.kind == "preflight":
        if event.exercise != PREFLIGHT or event.mistake or event.hint_level:
            refuse("a preflight has exercise 'preflight' and no mistake or hint level")
        if not all(isinstance(p, str) and PROBE_PATTERN.fullmatch(p) for p in event.failed_probes):
            refuse("failed probe names")
        if len(event.failed_probes) > 32 or (event.status == "ready") != (not event.failed_probes):
            refuse("a preflight is ready exactly when no probe failed")
    else:
        if not EXERCISE_PATTERN.fullmatch(event.exercise) or event.failed_probes:
            refuse("an exercise id such as 1.2, and no failed probes")
        if event.mistake and not (MISTAKE_PATTERN.fullmatch(event.mistake) and event.mistake.startswith(event.exercise + "/")):
            refuse("a mistake id such as 1.2/groups, of the same exercise")
        if event.kind == "check" and event.hint_level:
            refuse("a check has no hint level")
        if event.kind == "check" and bool(event.mistake) != (event.status in ("not solved", "checker error")):
            refuse("a check names its mistake exactly when it is not solved or the checker failed")
        if event.kind == "hint" and (event.mistake or not 1 <= event.hint_level <= MAX_HINT_LEVEL):
            refuse(f"a hint has a level from 1 to {MAX_HINT_LEVEL} and no mistake")
        if event.kind == "solution" and (event.mistake or event.hint_level):
            refuse("a look at the solution has no mistake and no hint level")
    if not ID_PATTERN.fullmatch(event.id):
        refuse("its id")
    if not 0 <= event.time < 2**33:
        refuse("its time")
