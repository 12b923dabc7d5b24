"""The store keeps each event once, survives a restart, and is the board's file alone."""
from __future__ import annotations

import sqlite3
import stat

from labkit.workshop.board.store import EventStore
from tests.workshop.board.support import T0, event, preflight


def test_events_survive_a_restart(tmp_path):
    path = tmp_path / "board.sqlite"
    sent = [event("ada", status="not solved", at=T0), preflight("ada", ("torch", "widgets extension"), at=T0 + 1)]
    store = EventStore(path)
    assert store.add(sent, received=T0 + 5) == 2
    store.close()
    reopened = EventStore(path)
    back = reopened.events()
    reopened.close()
    assert [item.event for item in back] == sent  # every field, the probes' tuple included
    assert [item.received for item in back] == [T0 + 5, T0 + 5]


def test_an_event_sent_twice_is_stored_once(tmp_path):
    store = EventStore(tmp_path / "board.sqlite")
    first, second = event("ada"), event("ada", "1.2")
    assert store.add([first], received=T0) == 1
    assert store.add([first, second, second], received=T0 + 9) == 1
    assert [(item.event.id, item.received) for item in store.events()] == [(first.id, T0), (second.id, T0 + 9)]


def test_one_learner_s_events_and_counts(tmp_path):
    store = EventStore(tmp_path / "board.sqlite")
    store.add([event("ada"), event("bob"), event("ada", "1.2")], received=T0)
    assert store.count("ada") == 2 and store.count("cy") == 0
    assert {item.event.learner for item in store.events("ada")} == {"ada"}


def test_a_learner_s_version_changes_only_with_their_new_events_and_counts_survive_a_restart(tmp_path):
    store = EventStore(tmp_path / "board.sqlite")
    first = event("ada")
    store.add([first, event("bob")], received=T0)
    ada, bob = store.version("ada"), store.version("bob")
    store.add([first], received=T0 + 1)  # sent again: nothing new
    assert (store.version("ada"), store.version("bob")) == (ada, bob)
    store.add([event("ada", "1.2")], received=T0 + 2)
    assert store.version("ada") != ada and store.version("bob") == bob
    assert store.learners() == {"ada", "bob"} and store.count("ada") == 2
    store.close()
    reopened = EventStore(tmp_path / "board.sqlite")
    assert (reopened.learners(), reopened.count("ada"), reopened.count("bob")) == ({"ada", "bob"}, 2, 1)
    reopened.close()


def test_the_file_is_0600_and_in_wal_mode(tmp_path):
    path = tmp_path / "board.sqlite"
    path.write_bytes(b"")
    path.chmod(0o644)
    store = EventStore(path)
    store.add([event()], received=T0)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
