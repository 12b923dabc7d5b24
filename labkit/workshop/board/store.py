"""The board's events, in one SQLite table: each event kept once, with when the board received it.

Why SQLite and one table: a room's day is a few thousand small rows, the board must survive a
restart (the hub restarts a service that stops), and a kernel resends what it is not sure was
stored, so the event's id is the primary key and ``INSERT OR IGNORE`` keeps the first copy.
WAL mode lets a read of the grid run while an insert commits. The file is 0600 in a 0700 folder
(:func:`labkit.workshop.board.settings.check_private_folder`).

One connection, used from tornado's thread only; a lock guards it anyway, so a future caller in
another thread cannot interleave two transactions.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.progress.events import Event

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    learner TEXT NOT NULL,
    kind TEXT NOT NULL,
    exercise TEXT NOT NULL,
    status TEXT NOT NULL,
    mistake TEXT NOT NULL,
    failed_probes TEXT NOT NULL,
    hint_level INTEGER NOT NULL,
    time REAL NOT NULL,
    received REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_learner ON events (learner);
"""
COLUMNS = "id, learner, kind, exercise, status, mistake, failed_probes, hint_level, time, received"


@dataclass(frozen=True)
class Received:
    """An event as the board keeps it: the event, and when the board received it (seconds since the epoch)."""

    event: Event
    received: float

    @property
    def when(self) -> float:
        """When it happened: the learner's clock, but never later than the board received it."""
        return min(self.event.time, self.received)


class EventStore:
    """The events at ``path`` (made 0600 if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # a link here is refused
        os.fchmod(descriptor, 0o600)
        os.close(descriptor)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._counts = dict(self._db.execute("SELECT learner, COUNT(*) FROM events GROUP BY learner").fetchall())
        self._versions: dict[str, int] = {}  # bumped when a learner's events change, so a grid recomputes theirs alone

    def add(self, events: Iterable[Event], received: float) -> int:
        """Store each event not stored yet (by id), all or none; how many were new."""
        rows = [(e.id, e.learner, e.kind, e.exercise, e.status, e.mistake, json.dumps(list(e.failed_probes)),
                 e.hint_level, e.time, received) for e in events]
        with self._lock:
            before = self._db.total_changes
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(f"INSERT OR IGNORE INTO events ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            added = self._db.total_changes - before
            if added:
                learners = {row[1] for row in rows}
                for learner in learners:
                    self._versions[learner] = self._versions.get(learner, 0) + 1
                    self._counts[learner] = self._count(learner) if len(learners) > 1 else self._counts.get(learner, 0) + added
            return added

    def count(self, learner: str) -> int:
        """How many events of ``learner`` are stored."""
        with self._lock:
            return self._counts.get(learner, 0)

    def learners(self) -> set[str]:
        """Everyone with a stored event."""
        with self._lock:
            return set(self._counts)

    def version(self, learner: str) -> int:
        """A number that changes whenever ``learner``'s events do (in this process)."""
        with self._lock:
            return self._versions.get(learner, 0)

    def _count(self, learner: str) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM events WHERE learner = ?", (learner,)).fetchone()[0])

    def events(self, learner: str | None = None) -> list[Received]:
        """Every stored event (of ``learner`` only, when given), oldest first."""
        query = f"SELECT {COLUMNS} FROM events"
        parameters: tuple[str, ...] = ()
        if learner is not None:
            query, parameters = query + " WHERE learner = ?", (learner,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY time, received, id", parameters).fetchall()
        return [_received(row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _received(row: tuple[Any, ...]) -> Received:
    """A row back as an event (validated again by :class:`Event`, so a damaged file is refused, not shown)."""
    ident, learner, kind, exercise, status, mistake, probes, hint_level, when, received = row
    event = Event(learner=learner, kind=kind, exercise=exercise, status=status, mistake=mistake,
                  failed_probes=tuple(json.loads(probes)), hint_level=hint_level, time=when, id=ident)
    return Received(event, received)
