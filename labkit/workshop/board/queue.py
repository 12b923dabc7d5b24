"""The room's help queue: a learner's raised hand, tied to an exercise, kept in order until an instructor closes it.

Why its own table and module: a request is a state that changes (open, claimed, ended), unlike the events,
which are kept once and never change. A request holds what the board already knows of the learner (the
exercise, her latest mistake id, her hint level) and never her code. A second request for an exercise she
already asked about while the first is open is the same request (a double click, a re-run cell). Every field
is checked against the events' own patterns, so no markup or spreadsheet formula can enter the page or the
exports through it.

A request may carry a *look*: the learner shared her server with each of the room's instructors (she did,
from her kernel, with her own token, by name: JupyterHub 5 lets a token use a share with a user, not one with a
group). Whenever a request with a look ends (closed, cancelled, or past the
time limit) the board revokes that share (:class:`ShareRevoker`).
"""
from __future__ import annotations

import sqlite3
import statistics
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from labkit.progress.events import EXERCISE_PATTERN, LEARNER_PATTERN, MAX_OPEN_HELP_REQUESTS, MISTAKE_PATTERN

Ending = Literal["", "closed", "cancelled", "expired"]
MAX_HINT_LEVEL = 3
# an honest learner asks on the exercise she is at; a flood of asks must not bury the others
MAX_OPEN_PER_LEARNER = MAX_OPEN_HELP_REQUESTS
INSTRUCTORS_SHARE_GROUP = "instructors"  # the hub group whose members a learner shares her server with
SCHEMA = """
CREATE TABLE IF NOT EXISTS help_requests (
    id TEXT PRIMARY KEY,
    learner TEXT NOT NULL,
    exercise TEXT NOT NULL,
    mistake TEXT NOT NULL,
    hint_level INTEGER NOT NULL,
    look INTEGER NOT NULL,
    opened REAL NOT NULL,
    claimed REAL,
    claimed_by TEXT NOT NULL DEFAULT '',
    ended REAL,
    ending TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS help_requests_open ON help_requests (ended, opened);
"""
COLUMNS = "id, learner, exercise, mistake, hint_level, look, opened, claimed, claimed_by, ended, ending"


@dataclass(frozen=True)
class HelpRequest:
    """One raised hand: who, on which exercise, her latest mistake id and hint level, and its life."""

    id: str
    learner: str
    exercise: str
    mistake: str
    hint_level: int
    look: bool  # she shared her server with the instructors for the life of this request
    opened: float
    claimed: float | None = None
    claimed_by: str = ""
    ended: float | None = None
    ending: Ending = ""

    @property
    def is_open(self) -> bool:
        return self.ended is None

    def wait_to_claim(self) -> float | None:
        """Seconds from asking to an instructor claiming it (None while unclaimed)."""
        return None if self.claimed is None else self.claimed - self.opened

    def claim_to_close(self) -> float | None:
        """Seconds from the claim to the end (None while open or never claimed)."""
        return None if self.claimed is None or self.ended is None else self.ended - self.claimed

    def to_json(self, now: float) -> dict[str, Any]:
        return {"id": self.id, "learner": self.learner, "exercise": self.exercise, "mistake": self.mistake,
                "hint_level": self.hint_level, "look": self.look, "opened": self.opened,
                "waiting_s": round(now - self.opened), "claimed": self.claimed, "claimed_by": self.claimed_by,
                "ended": self.ended, "ending": self.ending}


class TooManyOpen(Exception):
    """A learner asked on one more exercise while :data:`MAX_OPEN_PER_LEARNER` of her requests are open."""


def check_fields(exercise: object, mistake: object, hint_level: object, look: object) -> None:
    """Refuse (ValueError) any field that is not what a checker writes: no markup, no formula, no code."""
    if not isinstance(exercise, str) or not EXERCISE_PATTERN.match(exercise):
        raise ValueError("exercise is an exercise id such as 2.3")
    if not isinstance(mistake, str) or (mistake and not (MISTAKE_PATTERN.match(mistake)
                                                         and mistake.startswith(exercise + "/"))):
        raise ValueError("mistake is empty or this exercise's mistake id, such as 2.3/wrong-stride")
    if isinstance(hint_level, bool) or not isinstance(hint_level, int) or not 0 <= hint_level <= MAX_HINT_LEVEL:
        raise ValueError(f"hint_level is a whole number from 0 to {MAX_HINT_LEVEL}")
    if not isinstance(look, bool):
        raise ValueError("look is true or false")


class HelpQueue:
    """The requests at ``path`` (SQLite, one table), oldest first."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def ask(self, learner: str, exercise: Any, mistake: Any, hint_level: Any, look: Any,
            now: float) -> tuple[HelpRequest, bool]:
        """Her open request on ``exercise`` (its mistake, hint level and look brought up to date), or a new one;
        and whether it is new. Each field is checked first (ValueError: what it must be); a new request while
        :data:`MAX_OPEN_PER_LEARNER` of hers are open is refused (:class:`TooManyOpen`)."""
        if not LEARNER_PATTERN.match(learner):
            raise ValueError("not a learner's name")
        check_fields(exercise, mistake, hint_level, look)
        with self._lock:
            row = self._db.execute(f"SELECT {COLUMNS} FROM help_requests WHERE learner = ? AND exercise = ? "
                                   "AND ended IS NULL", (learner, exercise)).fetchone()
            if row:
                self._db.execute("UPDATE help_requests SET mistake = ?, hint_level = ?, look = MAX(look, ?) "
                                 "WHERE id = ?", (mistake, hint_level, int(look), row[0]))
                return _request(self._db.execute(f"SELECT {COLUMNS} FROM help_requests WHERE id = ?",
                                                 (row[0],)).fetchone()), False
            mine = self._db.execute("SELECT COUNT(*) FROM help_requests WHERE learner = ? AND ended IS NULL",
                                    (learner,)).fetchone()[0]
            if mine >= MAX_OPEN_PER_LEARNER:
                raise TooManyOpen(learner)
            ident = uuid.uuid4().hex
            self._db.execute(f"INSERT INTO help_requests ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, '', NULL, '')",
                             (ident, learner, exercise, mistake, hint_level, int(look), now))
            return _request(self._db.execute(f"SELECT {COLUMNS} FROM help_requests WHERE id = ?",
                                             (ident,)).fetchone()), True

    def get(self, ident: str) -> HelpRequest | None:
        with self._lock:
            return self._get(ident)

    def waiting(self) -> list[HelpRequest]:
        """The open requests, in the order they were asked."""
        return self._select("WHERE ended IS NULL ORDER BY opened, id")

    def of(self, learner: str) -> list[HelpRequest]:
        """``learner``'s open requests."""
        return self._select("WHERE ended IS NULL AND learner = ? ORDER BY opened, id", (learner,))

    def every(self) -> list[HelpRequest]:
        """Every request of the day, open or ended, in the order asked (the export's)."""
        return self._select("ORDER BY opened, id")

    def claim(self, ident: str, instructor: str, now: float) -> HelpRequest | None:
        """``instructor`` takes the open request ``ident`` (None when there is no such open request)."""
        with self._lock:
            self._db.execute("UPDATE help_requests SET claimed = COALESCE(claimed, ?), claimed_by = ? "
                             "WHERE id = ? AND ended IS NULL", (now, instructor, ident))
            found = self._get(ident)
        return found if found and found.is_open else None

    def end(self, ident: str, ending: Ending, now: float, learner: str | None = None) -> HelpRequest | None:
        """End the open request ``ident`` (only ``learner``'s, when given); the ended request, or None."""
        query, parameters = "UPDATE help_requests SET ended = ?, ending = ? WHERE id = ? AND ended IS NULL", [now, ending, ident]
        if learner is not None:
            query, parameters = query + " AND learner = ?", [*parameters, learner]
        with self._lock:
            changed = self._db.execute(query, parameters).rowcount
            return self._get(ident) if changed else None

    def expire(self, limit_s: float, now: float) -> list[HelpRequest]:
        """End every open request with a look asked more than ``limit_s`` seconds ago; those ended."""
        ended = []
        for request in self._select("WHERE ended IS NULL AND look = 1 AND opened <= ?", (now - limit_s,)):
            done = self.end(request.id, "expired", now)
            if done:
                ended.append(done)
        return ended

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _get(self, ident: str) -> HelpRequest | None:
        row = self._db.execute(f"SELECT {COLUMNS} FROM help_requests WHERE id = ?", (ident,)).fetchone()
        return _request(row) if row else None

    def _select(self, where: str, parameters: tuple[Any, ...] = ()) -> list[HelpRequest]:
        with self._lock:
            return [_request(row) for row in self._db.execute(f"SELECT {COLUMNS} FROM help_requests {where}", parameters)]


def median_wait(requests: list[HelpRequest]) -> float | None:
    """The median seconds from asking to a claim, over the claimed requests (None when none was claimed)."""
    waits = [wait for wait in (request.wait_to_claim() for request in requests) if wait is not None]
    return statistics.median(waits) if waits else None


class ShareRevoker(Protocol):
    """Ends the instructors' look at a learner's server (the tests give a fake)."""

    async def revoke(self, learner: str, instructors: set[str]) -> bool:
        """Revoke the shares of ``learner``'s server with each of ``instructors``; whether the hub confirmed each."""

    async def revoke_share(self, instructor: str, owner: str, server: str) -> bool:
        """Revoke ``instructor``'s share of ``owner``'s server named ``server``; whether it is gone."""

    async def shared_with(self, instructor: str) -> list[tuple[str, str]] | None:
        """Whose servers are shared with ``instructor`` by name: (owner, server name); None when the hub cannot say."""


def _request(row: tuple[Any, ...]) -> HelpRequest:
    ident, learner, exercise, mistake, hint_level, look, opened, claimed, claimed_by, ended, ending = row
    return HelpRequest(ident, learner, exercise, mistake, int(hint_level), bool(look), opened, claimed, claimed_by,
                       ended, ending)
