"""On a hub the journal's events reach the board; a board that is down or slow never holds the learner up."""
from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.core.checks import run_check
from labkit.progress import journal, record, sender
from labkit.progress.events import Event


class FakeBoard(http.server.ThreadingHTTPServer):
    """A board that stores what it is posted, or answers ``status``, once ``answer`` is set (it is, unless a test clears it)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.posts: list[tuple[str, list[dict[str, object]]]] = []
        self.status = 200
        self.answer = threading.Event()
        self.answer.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/services/labkit-board/"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FakeBoard

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.server.answer.wait(30)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.status == 200:
            self.server.posts.append((self.headers["Authorization"], body["events"]))
        reply = json.dumps({"stored": len(body["events"])}).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBoard]:
    server = FakeBoard()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(journal.ENVIRONMENT, str(tmp_path / ".labkit" / "progress.jsonl"))
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.setenv(sender.TOKEN, "ada-token")
    monkeypatch.setenv(sender.BOARD_URL, server.url)
    monkeypatch.setattr(record, "_warned", False)
    yield server
    server.shutdown()
    server.server_close()


def _wait_for(condition: object, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def test_a_verdict_reaches_the_board_with_the_learners_token(board: FakeBoard):
    run_check("1.1", lambda: "fine")
    _wait_for(lambda: board.posts)
    (authorization, events), = board.posts
    assert authorization == "token ada-token"
    assert [(e["learner"], e["exercise"], e["status"]) for e in events] == [("ada", "1.1", "solved")]


def test_a_slow_board_never_delays_the_verdict(board: FakeBoard):
    board.answer.clear()  # the board holds every post until told to answer
    run_check("1.1", lambda: "fine")  # returns although the board has not answered: the post waits on the sender's thread
    assert board.posts == []
    board.answer.set()
    _wait_for(lambda: board.posts)
    assert [e["status"] for _, events in board.posts for e in events] == ["solved"]


def test_what_a_down_board_missed_is_sent_with_the_next_post_and_only_once(board: FakeBoard, tmp_path: Path):
    path = journal.journal_path()
    assert path is not None
    journal.append(Event("ada", "check", "1.1", "not solved", "1.1/other"), path)
    journal.append(Event("someone-else", "check", "1.1", "solved"), path)  # not this hub's learner: never sent
    board.status = 503
    assert sender.send_now(path)[1] == "the board answered 503 Service Unavailable"
    board.status = 403
    assert sender.send_now(path)[1] == "the board refused 403 Forbidden"
    board.status = 200
    journal.append(Event("ada", "check", "1.1", "solved"), path)
    assert sender.send_now(path) == (2, "")
    assert sender.send_now(path) == (0, "")
    assert [[e["status"] for e in events] for _, events in board.posts] == [["not solved", "solved"]]


def test_no_hub_no_sending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(sender.BOARD_URL, raising=False)
    assert sender.board_url() is None
    assert sender.send_now(tmp_path / "progress.jsonl") == (0, "not on a hub with a board")


def test_a_process_that_ends_right_after_a_check_sends_on_its_way_out(board: FakeBoard):
    import os
    import subprocess
    import sys

    code = "from labkit.core.checks import run_check; run_check('2.1', lambda: 'fine')"
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ), check=True, timeout=60)
    assert [[e["exercise"] for e in events] for _, events in board.posts] == [["2.1"]]
