"""The CSV exports: what the grid says, and never a formula a spreadsheet would run."""
from __future__ import annotations

import csv
import io

import pytest

from labkit.workshop.board.export import grid_csv, mistakes_csv, safe_cell, utc
from labkit.workshop.board.grid import Rules, build_grid
from tests.workshop.board.support import T0, event, preflight, received


@pytest.mark.parametrize("text", ["=HYPERLINK(\"http://x\")", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"])
def test_a_cell_a_spreadsheet_would_run_is_prefixed(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["ada", "1.1", 3, "✓ solved", "", None])
def test_other_cells_are_left_alone(value):
    assert safe_cell(value) == ("" if value is None else str(value))


def test_the_grid_csv_has_a_line_per_learner_and_prefixes_formula_names():
    events = received(event("ada", status="solved", at=T0), preflight("ada"),
                      *[event("bob", status="not solved", at=T0 + i) for i in range(3)])
    grid = build_grid(events, ["1.1", "1.2"], T0 + 60, Rules(3, 10), learners=["ada", "bob", "=cmd|'/c calc'!A1", "-2+3"])
    lines = list(csv.reader(io.StringIO(grid_csv(grid, {"ada": "2", "-2+3": "@SUM(A1)"}))))
    assert lines[0] == ["learner", "labs version", "preflight", "1.1", "1.2", "last activity", "stuck"]
    by_name = {line[0]: line for line in lines[1:]}
    assert set(by_name) == {"ada", "bob", "'=cmd|'/c calc'!A1", "'-2+3"}
    assert by_name["ada"][1:6] == ["2", "ready", f"✓ solved {utc(T0)}", "not started", utc(T0)]
    assert (by_name["bob"][1], by_name["'-2+3"][1]) == ("", "'@SUM(A1)")
    assert by_name["bob"][6] == "3 attempts at 1.1 without solving it; the same mistake (1.1/other) 3 times in a row at 1.1"


def test_the_mistakes_csv_lists_every_mistake_of_the_learners():
    events = received(event("ada", status="not solved", mistake="1.1/raised-x"),
                      event("bob", status="not solved", mistake="1.1/raised-x"),
                      event("bob", "1.2", status="checker error"),
                      event("teacher", status="not solved", mistake="1.1/raised-y"))
    grid = build_grid(events, ["1.1", "1.2"], T0 + 60, Rules(), instructors={"teacher"})
    lines = list(csv.reader(io.StringIO(mistakes_csv(grid, events))))
    assert lines == [["exercise", "mistake", "words", "learners", "times"],
                     ["1.1", "1.1/raised-x", "their code raised x", "2", "2"],
                     ["1.2", "1.2/checker-error", "the checker itself failed (a labkit bug: please report it)", "1", "1"]]
