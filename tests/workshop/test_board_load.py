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
    report = BoardLoadReport(30, 3.0, 180.0, 1800, 0, 12.0, 30.0, 0.4, 0.8, 1.2, 2.0, 9.5, 5.3, 60.0, "a CPU")
    target = tmp_path / "board.json"
    assert main(["--json", str(target)], run=lambda *args: report) == 0
    assert json.loads(target.read_text())["latency_s_p95"] == 0.8
    assert "30 learners" in capsys.readouterr().out  # type: ignore[attr-defined]
