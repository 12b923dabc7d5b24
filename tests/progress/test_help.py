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
