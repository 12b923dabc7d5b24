"""Stuck by evidence: the same mistake in a row, and time against the room's median; plain events, ``now`` given."""
from __future__ import annotations

from labkit.workshop.board.grid import Rules, build_grid
from tests.workshop.board.support import T0, event, received

MINUTE = 60.0
EVIDENCE = Rules(attempts=1000, minutes=1000, repeats=2, slower=2)  # the evidence alone, the floor out of reach


def reasons(events, now, learner="ada", exercises=("1.1", "1.2")):
    grid = build_grid(received(*events, delay=0), list(exercises), now, EVIDENCE)
    return next(row for row in grid.rows if row.learner == learner).stuck


def test_the_same_mistake_twice_in_a_row_flags_her_and_names_it():
    same = [event(status="not solved", mistake="1.1/shape", at=T0 + i) for i in range(2)]
    assert reasons(same, T0 + 10) == ("the same mistake (1.1/shape) 2 times in a row at 1.1",)


def test_different_mistakes_or_a_solve_in_between_break_the_run():
    varied = [event(status="not solved", mistake=m, at=T0 + i) for i, m in enumerate(["1.1/a", "1.1/b", "1.1/a"])]
    assert reasons(varied, T0 + 10) == ()
    solved_after = [*[event(status="not solved", mistake="1.1/a", at=T0 + i) for i in range(3)],
                    event(status="solved", at=T0 + 5)]
    assert reasons(solved_after, T0 + 10) == ()


def test_far_longer_than_the_rooms_median_on_her_exercise_flags_her_with_both_times():
    room = [event(name, status="solved", at=T0 + 4 * MINUTE) for name in ("bob", "cy", "dee")]
    room += [event(name, status="not solved", mistake=f"1.1/{name}", at=T0) for name in ("bob", "cy", "dee")]
    ada = event("ada", status="not solved", mistake="1.1/x", at=T0)
    assert reasons([*room, ada], T0 + 7 * MINUTE) == ()  # 7 minutes: under twice the median of 4
    assert reasons([*room, ada], T0 + 9 * MINUTE) == ("9 minutes on 1.1, over 2× the room's median (4 minutes)",)


def test_no_median_before_three_others_and_never_under_the_minimum_time():
    two = [event(name, status="solved", at=T0 + 10) for name in ("bob", "cy")]
    ada = event("ada", status="not solved", mistake="1.1/x", at=T0)
    assert reasons([*two, ada], T0 + 60 * MINUTE) == ()
    quick = [event(name, status="solved", at=T0 + 10) for name in ("bob", "cy", "dee")]
    assert reasons([*quick, ada], T0 + 2 * MINUTE) == ()  # 12 times the median, but under three minutes


def test_only_the_exercise_she_works_on_counts_and_the_floor_still_flags():
    room = [event(name, status="solved", at=T0 + MINUTE) for name in ("bob", "cy", "dee")]
    room += [event(name, exercise="1.2", status="not solved", mistake="1.2/a", at=T0) for name in ("bob", "cy", "dee")]
    moved_on = [event("ada", status="not solved", mistake="1.1/x", at=T0),
                event("ada", "1.2", "not solved", "1.2/y", at=T0 + 30 * MINUTE)]
    assert reasons([*room, *moved_on], T0 + 31 * MINUTE) == ()
    floor = build_grid(received(*[event(status="not solved", at=T0 + i) for i in range(3)], delay=0), ["1.1"], T0 + 10,
                       Rules(attempts=3, minutes=10, repeats=2, slower=2))
    assert floor.rows[0].stuck == ("3 attempts at 1.1 without solving it",
                                   "the same mistake (1.1/other) 3 times in a row at 1.1")
