"""The board's load benchmark without a hub: how a latency is counted, and what the command writes."""
from __future__ import annotations

import json
from pathlib import Path

from labkit.workshop.board_load import BoardLoadReport, _Pending, main


def test_an_event_counts_once_from_its_post_to_the_first_grid_that_shows_it():
    pending = _Pending()
    pending.add("ada", event_time=100.0, started=10.0)
    pending.add("ada", event_time=103.0, started=13.0)
    pending.seen("ada", last_activity=101.0, now=11.5)  # shows the first event only
    pending.seen("ada", last_activity=101.0, now=12.0)  # nothing new
    pending.seen("ada", last_activity=103.0, now=14.0)
    assert pending.latencies == [1.5, 1.0]


def test_the_command_prints_and_writes_the_figures(tmp_path: Path, capsys: object):
    report = BoardLoadReport(30, 2, 3.0, 180.0, 1800, 0, 12.0, 30.0, 0.4, 0.8, 1.2, 2.0, 9.5, 5.3, 60.0, 8.0, 15.0, 40.0, 900,
                             400, "a CPU")
    target = tmp_path / "board.json"
    asked: list[dict[str, int]] = []

    def run(*args: object, **options: int) -> BoardLoadReport:
        asked.append(options)
        return report
    assert main(["--json", str(target), "--hostile", "2"], run=run) == 0
    assert asked == [{"hostile": 2}]
    figures = json.loads(target.read_text())
    assert (figures["latency_s_p95"], figures["grid_ms_p95"], figures["hostile_stored"]) == (0.8, 15.0, 400)
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "30 learners" in out
    assert "2 hostile learners flooding: 900 posts of 200 events, 400 events kept" in out
    assert "instructor's grid: median 8 ms, p95 15 ms, max 40 ms" in out
