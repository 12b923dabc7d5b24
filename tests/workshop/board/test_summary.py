"""``python -m labkit workshop summary``: the day per exercise from the board's two databases, as the grid folds it."""
from __future__ import annotations

from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.workshop.board import summary as summary_module
from labkit.workshop.board.queue import HelpQueue
from labkit.workshop.board.store import EventStore
from labkit.workshop.board.summary import read_day, summarize
from tests.workshop.board.support import T0, event


def a_day(folder: Path) -> None:
    """ada solves 1.1 and asks on 1.2 (claimed after 40 s, closed 100 s later); bob fails 1.1 and asks on it (claimed
    after 200 s, closed 20 s later), then asks on 1.2 and cancels; the instructor's own test event is left out."""
    store = EventStore(folder / "board.sqlite")
    store.add([event("ada", "1.1"), event("ada", "1.2", "not solved", at=T0 + 5), event("bob", "1.1", "not solved"),
               event("instructor", "1.1"), event("instructor", "1.2")], received=T0 + 10)
    store.close()
    queue = HelpQueue(folder / "help.sqlite")
    first, _ = queue.ask("ada", "1.2", "", 0, True, T0)
    second, _ = queue.ask("bob", "1.1", "", 1, False, T0 + 10)
    queue.claim(first.id, "instructor", T0 + 40)
    queue.end(first.id, "closed", T0 + 140)
    queue.claim(second.id, "instructor", T0 + 210)
    queue.end(second.id, "closed", T0 + 230)
    third, _ = queue.ask("bob", "1.2", "", 0, False, T0 + 300)
    queue.end(third.id, "cancelled", T0 + 310, learner="bob")
    queue.close()


def test_per_exercise_the_solved_count_and_the_help_queue_s_two_medians(tmp_path: Path):
    a_day(tmp_path)
    day = summarize(*read_day(tmp_path), instructors=["instructor"])
    assert [(d.exercise, d.solved, d.learners, d.requests, d.wait_to_claim_s, d.claim_to_close_s)
            for d in day.exercises] == [("1.1", 1, 2, 1, 200, 20), ("1.2", 0, 2, 2, 40, 100)]
    assert (day.learners, day.requests, day.room_wait_s) == (2, 3, 120)


def test_the_command_prints_the_day_from_the_board_s_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch):
    a_day(tmp_path)
    monkeypatch.setenv("LABKIT_WORKSHOP_SPAWNER", "shared-account")
    assert main(["workshop", "summary", "--board", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.split() and line.split()[0] in ("1.1", "1.2")}
    assert lines["1.1"] == ["1.1", "1", "of", "2", "1", "3", "min", "20", "s", "20", "s"]
    assert lines["1.2"] == ["1.2", "0", "of", "2", "2", "40", "s", "1", "min", "40", "s"]
    assert "the room: 2 learners, 3 help requests, median wait to claim 2 min 0 s" in out


def test_every_word_goes_through_the_translation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    a_day(tmp_path)
    monkeypatch.setattr(summary_module, "_", lambda message: "«" + message + "»")
    text = summarize(*read_day(tmp_path), instructors=["instructor"]).to_text()
    for words in ("«exercise»", "«solved»", "«help requests»", "«median wait to claim»", "«median claim to close»",
                  "«1 of 2»", "«the room: 2 learners"):
        assert words in text, words


def test_no_board_is_one_line_and_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LABKIT_WORKSHOP_SPAWNER", "shared-account")
    assert main(["workshop", "summary", "--board", str(tmp_path)]) == 2
    assert "board.sqlite is missing" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
