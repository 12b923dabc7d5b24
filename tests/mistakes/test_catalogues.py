"""Each catalogued mistake gets a hint that names it and never hands over the solution.

tests/core/test_checks_optimized.py runs these again under ``python -O``."""
from __future__ import annotations

from collections import Counter

import pytest

from labkit.core.checks import CheckResult, Status
from labkit.progress.mistakes import describe, is_named
from tests.mistakes import Mistake, solution_lines
from tests.mistakes.catalogues import EXERCISES, all_mistakes

MISTAKES = all_mistakes()
MAX_MESSAGE = 800  # characters: a few lines in a notebook (3.2's swapped pair once printed a 2,039-character Jacobian)


def _id(mistake: Mistake) -> str:
    return f"{mistake.exercise}-{mistake.what}"


@pytest.fixture(scope="module")
def verdicts() -> dict[str, CheckResult]:
    """Each mistake's verdict, filled as the tests ask: both tests below read one checker run per mistake (half the time)."""
    return {}


def _verdict(verdicts: dict[str, CheckResult], mistake: Mistake) -> CheckResult:
    if _id(mistake) not in verdicts:
        verdicts[_id(mistake)] = mistake.answer()
    return verdicts[_id(mistake)]


def test_every_exercise_has_at_least_five_mistakes():
    counts = Counter(mistake.exercise for mistake in MISTAKES)
    assert {exercise: counts[exercise] for exercise in EXERCISES if counts[exercise] < 5} == {}


def test_no_two_mistakes_of_an_exercise_share_a_name():
    counts = Counter((mistake.exercise, mistake.what) for mistake in MISTAKES)
    assert [key for key, count in counts.items() if count > 1] == []


@pytest.mark.parametrize("mistake", MISTAKES, ids=_id)
def test_the_hint_names_the_mistake_and_not_the_solution(mistake: Mistake, verdicts: dict[str, CheckResult]):
    result = _verdict(verdicts, mistake)
    assert result.status is mistake.status, result.message
    message = result.message.lower()
    assert [name for name in mistake.names if name.lower() not in message] == [], result.message
    assert [line for line in solution_lines(mistake.exercise) if line.lower() in message] == [], result.message
    assert len(result.message) <= MAX_MESSAGE and "\n" not in result.message.strip(), result.message  # a few lines, no tensor


@pytest.mark.parametrize("mistake", MISTAKES, ids=_id)
def test_the_verdict_names_its_mistake_for_the_board(mistake: Mistake, verdicts: dict[str, CheckResult]):
    result = _verdict(verdicts, mistake)
    if result.status is Status.WRONG:
        assert is_named(result.mistake), f"{result.mistake!r} is not in labkit/progress/mistakes_0N.py: {result.message}"
        assert describe(result.mistake) != result.mistake
    if mistake.mistake:
        assert result.mistake == f"{mistake.exercise}/{mistake.mistake}", result.message
