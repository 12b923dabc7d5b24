"""The grid and the stuck rules: plain events in, the instructor's words out; ``now`` given, nothing sleeps."""
from __future__ import annotations

import json

import pytest

from labkit.progress import mistakes
from labkit.progress.summary import (
    ATTEMPTED,
    CHECKER_ERROR,
    NOT_READY,
    NOT_RUN,
    NOT_STARTED,
    NOT_YET,
    READY,
    SOLVED,
    exercise_cell,
)
from labkit.workshop.board.grid import Rules, build_grid, exercises_seen, mistake_counts
from labkit.workshop.board.store import Received
from tests.workshop.board.support import T0, event, hint, preflight, received

MINUTE = 60.0
RULES = Rules(attempts=3, minutes=10, repeats=1000, slower=0)  # the fixed floor alone; evidence: test_stuck.py


def cell_of(*events):
    return exercise_cell("1.1", received(*events))


def row_of(grid, learner):
    return next(row for row in grid.rows if row.learner == learner)


def test_a_cell_that_was_solved_stays_solved_whatever_came_after():
    cell = cell_of(event(status="not solved", at=T0), event(status="solved", at=T0 + 10),
                   event(status="not solved", at=T0 + 20), event(status="not yet solved", at=T0 + 30))
    assert cell.state == SOLVED
    assert cell.solved_at == T0 + 10  # the first time it was solved
    assert cell.mistake == ""
    assert cell.text().startswith("✓ solved")
    assert cell.text(lambda seconds: "10:42") == "✓ solved 10:42"


def test_an_attempted_cell_counts_attempts_and_names_the_latest_mistake_in_words():
    cell = cell_of(event(status="not solved", mistake="1.1/other", at=T0),
                   event(status="not solved", mistake="1.1/raised-typeerror", at=T0 + 5))
    assert (cell.state, cell.attempts, cell.mistake) == (ATTEMPTED, 2, "1.1/raised-typeerror")
    assert cell.words == mistakes.describe("1.1/raised-typeerror") == "their code raised typeerror"
    assert cell.text() == "2 attempts, latest: their code raised typeerror"


@pytest.mark.parametrize(("status", "state", "text"), [
    ("checker error", CHECKER_ERROR, "checker error"),
    ("not yet solved", NOT_YET, "not yet: ran the checker on the stub"),
])
def test_the_latest_verdict_decides_an_unsolved_cell(status, state, text):
    cell = cell_of(event(status="not solved", at=T0), event(status=status, at=T0 + 1))
    assert (cell.state, cell.text()) == (state, text)
    assert cell.attempts == 1  # a checker error or a run on the stub is not the learner's attempt


def test_a_cell_with_no_verdict_is_not_started_and_counts_hint_levels_once():
    cell = cell_of(hint("ada", "1.1", 1), hint("ada", "1.1", 1, at=T0 + 1), hint("ada", "1.1", 2, at=T0 + 2))
    assert (cell.state, cell.hints) == (NOT_STARTED, 2)
    assert cell.text() == "not started; 2 hints"
    assert exercise_cell("1.1", []).text() == "not started"


def test_the_preflight_cell_is_the_latest_preflight():
    grid = build_grid(received(preflight("ada", ("torch",), at=T0), preflight("ada", at=T0 + 5),
                               preflight("bob", ("torch", "widgets extension"))), ["1.1"], T0 + 60, RULES,
                      learners=["ada", "bob", "cy"])
    assert row_of(grid, "ada").preflight.state == READY
    assert row_of(grid, "bob").preflight.state == NOT_READY
    assert row_of(grid, "bob").preflight.text() == "not ready: torch, widgets extension"
    assert row_of(grid, "cy").preflight.text() == NOT_RUN


def test_the_times_are_never_later_than_the_board_received_them():
    future = event(status="solved", at=T0 + 3600)
    cell = exercise_cell("1.1", [Received(future, T0)])
    assert cell.solved_at == T0


def test_rows_are_the_hub_users_less_the_instructors_and_their_events_count_nowhere():
    events = received(event("ada", status="not solved", mistake="1.1/other"),
                      event("teacher", status="not solved", mistake="1.1/raised-oops"),
                      event("gone", status="solved"))
    grid = build_grid(events, ["1.1"], T0 + 60, RULES, learners=["ada", "bob", "teacher"], instructors={"teacher"})
    assert [row.learner for row in grid.rows] == ["ada", "bob"]
    assert [count.mistake for count in grid.summaries[0].mistakes] == ["1.1/other"]
    assert (grid.summaries[0].solved, grid.summaries[0].learners) == (0, 2)


def test_without_the_hub_s_list_the_rows_are_the_learners_seen_in_events():
    grid = build_grid(received(event("bob"), event("ada"), event("teacher")), ["1.1"], T0, RULES, instructors={"teacher"})
    assert [row.learner for row in grid.rows] == ["ada", "bob"]


def test_without_a_list_of_exercises_the_columns_are_those_seen_in_numeric_order():
    events = received(event(exercise="1.10"), event(exercise="1.2"), event(exercise="2.1"), preflight("ada"))
    assert exercises_seen(events) == ("1.2", "1.10", "2.1")
    assert build_grid(events, [], T0, RULES).exercises == ("1.2", "1.10", "2.1")


def test_stuck_after_n_attempts_at_one_exercise_without_solving_it():
    three = [event("ada", status="not solved", at=T0 + i) for i in range(3)]
    grid = build_grid(received(*three, *[event("bob", status="not solved", at=T0 + i) for i in range(2)]),
                      ["1.1"], T0 + 60, RULES)
    assert row_of(grid, "ada").stuck == ("3 attempts at 1.1 without solving it",)
    assert row_of(grid, "bob").stuck == ()


def test_attempts_count_again_from_the_last_time_it_was_solved():
    before = [event(status="not solved", at=T0 + i) for i in range(5)]
    solved = event(status="solved", at=T0 + 10)
    after = [event(status="not solved", at=T0 + 20 + i) for i in range(3)]
    grid = build_grid(received(*before, solved, *after[:2]), ["1.1"], T0 + 60, RULES)
    assert row_of(grid, "ada").stuck == ()
    grid = build_grid(received(*before, solved, *after), ["1.1"], T0 + 60, RULES)
    assert row_of(grid, "ada").stuck == ("3 attempts at 1.1 since solving it",)
    assert row_of(grid, "ada").cells[0].state == SOLVED


def test_stuck_after_m_minutes_without_an_event_while_two_others_had_one():
    now = T0 + 60 * MINUTE
    quiet = event("ada", status="not solved", at=now - 11 * MINUTE)
    others = [event(name, status="not solved", at=now - 2 * MINUTE) for name in ("bob", "cy")]
    grid = build_grid(received(quiet, *others, delay=0), ["1.1", "1.2"], now, RULES)
    assert row_of(grid, "ada").stuck == ("no event for 10 minutes, while 2 others had one",)
    assert row_of(grid, "bob").stuck == ()
    one_other = build_grid(received(quiet, others[0], delay=0), ["1.1", "1.2"], now, RULES)
    assert row_of(one_other, "ada").stuck == ()
    recent = build_grid(received(event("ada", at=now - 9 * MINUTE), *others, delay=0), ["1.1", "1.2"], now, RULES)
    assert row_of(recent, "ada").stuck == ()


def test_a_learner_with_no_event_yet_is_stuck_while_others_work_and_one_who_finished_is_not():
    now = T0 + 60 * MINUTE
    others = [event(name, status="not solved", at=now - MINUTE) for name in ("bob", "cy")]
    done = [event("dee", exercise, at=now - 30 * MINUTE) for exercise in ("1.1", "1.2")]
    grid = build_grid(received(*others, *done, delay=0), ["1.1", "1.2"], now, RULES, learners=["ada", "bob", "cy", "dee"])
    assert row_of(grid, "ada").stuck == ("no event yet, while 2 others had one in the last 10 minutes",)
    assert row_of(grid, "dee").stuck == ()


def test_per_exercise_solved_counts_hints_and_the_three_most_frequent_mistakes_by_learners():
    events = received(
        event("ada", status="solved"), event("bob", status="solved"),
        *[event("cy", status="not solved", mistake="1.1/raised-a", at=T0 + i) for i in range(5)],  # one learner, often
        event("ada", status="not solved", mistake="1.1/raised-b"), event("bob", status="not solved", mistake="1.1/raised-b"),
        event("dee", status="not solved", mistake="1.1/raised-c"), event("dee", status="not solved", mistake="1.1/raised-d"),
        hint("ada", "1.1", 1), hint("ada", "1.1", 2), hint("bob", "1.1", 1),
    )
    summary = build_grid(events, ["1.1"], T0 + 60, RULES).summaries[0]
    assert (summary.solved, summary.learners, summary.hints) == (2, 4, 3)
    assert [(m.mistake, m.learners, m.times) for m in summary.mistakes] == [
        ("1.1/raised-b", 2, 2), ("1.1/raised-a", 1, 5), ("1.1/raised-c", 1, 1)]
    assert summary.mistakes[0].words == "their code raised b"
    assert len(mistake_counts(events, "1.1")) == 4


def test_the_grid_is_plain_json():
    grid = build_grid(received(event("ada", status="not solved"), preflight("ada", ("torch",)), hint("ada", "1.1", 1)),
                      ["1.1", "1.2"], T0 + 60, RULES, learners=["ada", "bob"])
    data = json.loads(json.dumps(grid.to_json()))
    assert data["exercises"] == ["1.1", "1.2"]
    ada = data["rows"][0]
    assert ada["learner"] == "ada"
    assert ada["cells"][0] == {"exercise": "1.1", "state": "attempted", "text": "1 attempt, latest: " + mistakes.describe(
        "1.1/other") + "; 1 hint", "attempts": 1, "mistake": "1.1/other", "mistake_words": mistakes.describe("1.1/other"),
        "solved_at": None, "last": T0, "hints": 1}
    assert ada["preflight"]["failed_probes"] == ["torch"]
    assert data["summaries"][1]["mistakes"] == []
