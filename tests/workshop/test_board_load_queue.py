"""The help queue's part of the board's load test, without a hub: how an order is judged, and how a disorder fails."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from labkit.workshop.board_load import BoardLoadReport, main
from labkit.workshop.board_load_queue import QueueFigures, QueueLog, out_of_order


def row(ident: str, opened: float, learner: str = "ada") -> dict[str, object]:
    return {"id": ident, "opened": opened, "learner": learner, "claimed": None, "waiting_s": 0}


ASKED = {"a": (1.0, 1.2), "b": (1.1, 1.3), "c": (2.0, 2.1)}  # a and b overlap; c was sent after both were answered


def test_asks_that_overlapped_may_stand_either_way_and_the_first_answered_stands_first():
    assert out_of_order([row("a", 10.0), row("b", 10.1), row("c", 11.0)], ASKED) == []
    assert out_of_order([row("b", 10.0), row("a", 10.0), row("c", 11.0)], ASKED) == []


def test_a_request_above_one_answered_before_it_was_asked_is_out_of_order():
    found = out_of_order([row("c", 11.0), row("a", 11.0), row("b", 11.0)], ASKED)
    assert len(found) == 2 and found[0].startswith("c listed above a")


def test_opened_times_going_down_the_list_are_out_of_order_even_for_unknown_requests():
    assert out_of_order([row("x", 5.0), row("y", 4.0)], {}) == ["y (opened 4.000) listed below x (opened 5.000)"]


def test_the_log_counts_the_flooders_open_requests_and_keeps_every_disorder():
    log = QueueLog(hostile={"mallory"})
    log.asked.update(ASKED)
    log.listed([row("a", 1.0, "mallory"), row("c", 2.0, "mallory"), row("b", 1.5)], 30.0)
    figures = QueueFigures.of(log)
    assert (figures.longest, figures.hostile_most, figures.polls, len(figures.disorder)) == (3, 2, 1, 2)
    assert "OUT OF ORDER in 2 places" in figures.to_text()


def test_a_run_whose_queue_was_out_of_order_fails_loudly(tmp_path: Path, capsys: object):
    log = QueueLog()
    log.listed([row("x", 5.0), row("y", 4.0)], 30.0)
    report = BoardLoadReport(30, 0, 3.0, 180.0, 1800, 0, 12.0, 30.0, 0.4, 0.8, 1.2, 2.0, 9.5, 5.3, 60.0, 8.0, 15.0, 40.0,
                             0, 0, "a CPU", QueueFigures.of(log))
    assert main(["--json", str(tmp_path / "board.json")], run=lambda *args, **options: report) == 1
    captured = capsys.readouterr()  # type: ignore[attr-defined]
    assert "THE HELP QUEUE WAS OUT OF ORDER in 1 places" in captured.err
    assert "queue order: OUT OF ORDER" in captured.out
    log.disorder.clear()
    report = dataclasses.replace(report, queue=QueueFigures.of(log))
    assert main(["--json", str(tmp_path / "board.json")], run=lambda *args, **options: report) == 0
    assert "queue order: in order" in capsys.readouterr().out  # type: ignore[attr-defined]
