"""``labkit.help`` outside a room: no queue, and it says how to ask instead, in the learner's language."""
from __future__ import annotations

import pytest

import labkit
from labkit.core.errors import LabkitValueError
from labkit.progress.help import help_pointer

ROOM = {"LABKIT_BOARD_URL": "http://127.0.0.1:9/services/labkit-board/", "JUPYTERHUB_API_TOKEN": "t",
        "JUPYTERHUB_USER": "ada"}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ROOM:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_outside_a_room_it_says_there_is_no_room_and_how_to_ask(offline: pytest.MonkeyPatch):
    offline.setenv("LABKIT_LANG", "en")
    answer = labkit.help("2.3")
    assert "no room" in str(answer) and "raise your hand" in str(answer) and "2.3" in str(answer)
    assert answer.request_id == "" and "<" not in str(answer)
    offline.setenv("LABKIT_LANG", "ru")
    assert "поднимите руку" in str(labkit.help("2.3"))
    assert help_pointer("2.3") == ""  # no line under a verdict where there is no queue


def test_in_a_room_a_refused_verdict_says_how_to_ask(offline: pytest.MonkeyPatch):
    offline.setenv("LABKIT_LANG", "en")
    for name, value in ROOM.items():
        offline.setenv(name, value)
    assert 'labkit.help("2.3")' in help_pointer("2.3")


def test_an_unreachable_board_is_one_sentence(offline: pytest.MonkeyPatch):
    offline.setenv("LABKIT_LANG", "en")
    for name, value in ROOM.items():
        offline.setenv(name, value)
    assert "raise your hand" in str(labkit.help("2.3"))


def test_the_exercise_is_an_id():
    with pytest.raises(LabkitValueError, match="2.3"):
        labkit.help(2.3)  # type: ignore[arg-type]


def test_a_fourth_open_request_is_told_in_her_language_how_to_free_one(offline: pytest.MonkeyPatch):
    """The board answers 429 beyond MAX_OPEN_HELP_REQUESTS open requests: she reads why and what to do, not '429'."""
    import http.server
    import threading

    class Full(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.send_error(429, "Too Many Requests")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Full)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for name, value in ROOM.items():
            offline.setenv(name, value)
        offline.setenv("LABKIT_BOARD_URL", f"http://127.0.0.1:{server.server_address[1]}/services/labkit-board")
        offline.setenv("LABKIT_LANG", "en")
        answer = str(labkit.help("2.3"))
        assert "429" not in answer and "cancel=True" in answer and "3 open requests" in answer
        offline.setenv("LABKIT_LANG", "zh")
        assert "取消" in str(labkit.help("2.3"))
    finally:
        server.shutdown()
        server.server_close()
