"""On a hub: send the journal's new events to the room's board, with the learner's own hub token.

Why a thread and a cursor: a checker's verdict must never wait for the network. Each event is first
appended to the journal (:mod:`labkit.progress.journal`); this thread then posts every line not yet
sent (the cursor, ``.labkit/progress.sent``, holds the byte offset up to which the board said "stored")
and sleeps until the next event or a retry. A board that is down or slow costs the learner nothing:
each post waits :data:`TIMEOUT_S` at most, and what it could not send goes with the next one. The board
keeps each event once (by its id), so sending twice is harmless.

A kernel that shuts down right after a check (a notebook closed at once) sends what is left on its
way out, waiting :data:`TIMEOUT_S` at most; a kernel that is killed leaves it for the next check.

Only events of the hub's learner (``JUPYTERHUB_USER``) are sent, to ``LABKIT_BOARD_URL`` (set by the
hub for every learner's server), with ``JUPYTERHUB_API_TOKEN`` (the server's own token); the board takes
the learner's name from the token, never from the event.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

from labkit.progress.journal import read_events

BOARD_URL = "LABKIT_BOARD_URL"
TOKEN = "JUPYTERHUB_API_TOKEN"
TIMEOUT_S = 3.0
RETRY_S = 20.0
BATCH = 200  # events per post
CURSOR_SUFFIX = ".sent"

_lock = threading.Lock()
_sending = threading.Lock()  # one post at a time: the thread's and the one on the way out
_threads: dict[Path, _Sender] = {}


def board_url() -> str | None:
    """The board's events URL when this process runs on a hub with a board, else None."""
    url, token, user = os.environ.get(BOARD_URL, ""), os.environ.get(TOKEN, ""), os.environ.get("JUPYTERHUB_USER", "")
    return url.rstrip("/") + "/api/events" if url and token and user else None


def wake(journal: Path) -> None:
    """Have the sender of ``journal`` post what is new (started on first use); nothing when not on a hub."""
    url = board_url()
    if url is None:
        return
    with _lock:
        thread = _threads.get(journal)
        if thread is None or not thread.is_alive():
            if not _threads:
                atexit.register(_send_on_the_way_out)
            thread = _threads[journal] = _Sender(journal, url)
            thread.start()
    thread.pending.set()


def _send_on_the_way_out() -> None:
    for journal, thread in list(_threads.items()):
        if thread.pending.is_set() or thread.problem or thread.sending:
            try:
                send_now(journal, thread.url)
            except OSError:
                pass


def send_now(journal: Path, url: str | None = None) -> tuple[int, str]:
    """Post every unsent event of ``journal`` now; the number the board stored and the problem, if any ("")."""
    url = url or board_url()
    if url is None:
        return 0, "not on a hub with a board"
    with _sending:
        return _send(journal, url)


def _send(journal: Path, url: str) -> tuple[int, str]:
    cursor = journal.with_name(journal.name + CURSOR_SUFFIX)
    start = _read_cursor(cursor)
    events, end = read_events(journal, start)
    learner = os.environ.get("JUPYTERHUB_USER", "")
    mine = [event for event in events if event.learner == learner]
    stored = 0
    for first in range(0, len(mine), BATCH):
        body = json.dumps({"events": [json.loads(event.to_json()) for event in mine[first:first + BATCH]]}).encode()
        request = urllib.request.Request(url, body, {"Authorization": f"token {os.environ[TOKEN]}",
                                                     "Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
                stored += int(json.loads(reply.read() or b"{}").get("stored", 0))
        except (OSError, ValueError) as exc:  # URLError, HTTPError, a timeout, a reply that is not JSON
            return stored, _problem(exc)
    if end != start:
        _write_cursor(cursor, end)
    return stored, ""


REFUSED = "the board refused"  # a 4xx answer other than 429: sending the same again cannot help


def _problem(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        refused = 400 <= exc.code < 500 and exc.code != 429
        return f"{REFUSED if refused else 'the board answered'} {exc.code} {exc.reason}"
    return f"the board could not be reached ({exc})"


def _read_cursor(cursor: Path) -> int:
    try:
        return max(0, int(cursor.read_text().strip() or 0))
    except (OSError, ValueError):
        return 0


def _write_cursor(cursor: Path, offset: int) -> None:
    partial = cursor.with_name(cursor.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(str(offset))
    os.replace(partial, cursor)


class _Sender(threading.Thread):
    """Posts the journal's new events whenever woken, and retries every :data:`RETRY_S` while the board is away."""

    def __init__(self, journal: Path, url: str) -> None:
        super().__init__(name="labkit-progress-sender", daemon=True)
        self.journal, self.url = journal, url
        self.pending = threading.Event()
        self.problem = ""
        self.sending = False

    def run(self) -> None:
        while True:
            retry = bool(self.problem) and not self.problem.startswith(REFUSED)  # a refusal waits for the next event
            woken = self.pending.wait(timeout=RETRY_S if retry else None)
            self.pending.clear()
            if woken or retry:
                self.sending = True
                try:
                    self.problem = send_now(self.journal, self.url)[1]
                except OSError as exc:  # the journal's folder went away: try again later
                    self.problem = str(exc)
                finally:
                    self.sending = False
