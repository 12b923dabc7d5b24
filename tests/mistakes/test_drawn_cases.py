"""No checker accepts a wrong answer by the luck of a draw, nor names another mistake on some draws.

1.2 once drew one batch size per attempt: a FLOP count that forgets the batch was accepted whenever it drew a batch
of 1, and at a batch of 2 was told "one FLOP per multiply-add". Here each checker runs a known wrong answer on
:data:`SEEDS` draws (the catalogue's entry, :meth:`~tests.mistakes.Mistake.on_draw`): refused every time, with the
same mistake named every time. Checkers that draw nothing are run the same way: their verdict must not depend on
the draw either. The two checkers that draw their cases (1.2, 2.1) also solve the reference solution on every draw.
"""
from __future__ import annotations

import pytest

from labkit.core.checks import Status, fixed_draws
from labkit.fx.checks import check_shape_flop_recorder
from labkit.memory_format.checks import check_predict_strides
from tests.mistakes import Mistake, solution
from tests.mistakes.catalogues import EXERCISES, all_mistakes

SEEDS = range(30)

#: Per exercise, the catalogued wrong answers run on every draw: where a checker draws, the ones a draw could let
#: through (a count right at a batch of 1, strides right when H == W); elsewhere one of its quick refusals.
ON_EVERY_DRAW = {
    "1.1": ["cheat: a `ProfileReport` built by hand"],
    "1.2": ["forgets the batch (`out[0].numel()`)", "one FLOP per multiply-add", "counts with torch's `FlopCounterMode`"],
    "1.3": ["forgets `eps`"],
    "2.1": ["C innermost, but W before H", "calls torch's own stride helpers (`torch._prims_common`)"],
    "2.2": ["checks only the first argument (`args[0]`)"],
    "2.3": ["converts only the Conv2d weights"],
    "3.1": ["a tangent of ones instead of `v`"],
    "3.2": ["the rule inverted"],
    "3.3": ["a wrong derivative (`-cos(x) * x_tangent`)"],
    "3.4": ["a random direction (`torch.randn_like(p)`)"],
    "4.1": ["returns an output computed once"],
}
_BY_NAME = {(mistake.exercise, mistake.what): mistake for mistake in all_mistakes()}
CHOSEN = [_BY_NAME[exercise, what] for exercise, whats in ON_EVERY_DRAW.items() for what in whats]


def test_every_exercise_has_a_wrong_answer_run_on_every_draw():
    assert sorted(ON_EVERY_DRAW) == sorted(EXERCISES)


@pytest.mark.parametrize("mistake", CHOSEN, ids=lambda mistake: f"{mistake.exercise}-{mistake.what}")
def test_a_wrong_answer_is_refused_on_every_draw_with_the_same_mistake_named(mistake: Mistake):
    first = mistake.answer()
    assert first.status is Status.WRONG, first
    verdicts = {seed: mistake.on_draw(seed) for seed in SEEDS}
    accepted = [seed for seed, result in verdicts.items() if result.status is not Status.WRONG]
    assert accepted == [], [str(verdicts[seed]) for seed in accepted]
    misnamed = {seed: result.mistake for seed, result in verdicts.items() if result.mistake != first.mistake}
    assert misnamed == {}, (first.mistake, misnamed, [str(verdicts[seed]) for seed in misnamed][:2])
    unnamed = [seed for seed, result in verdicts.items()
               if [name for name in mistake.names if name.lower() not in result.message.lower()]]
    assert unnamed == [], [str(verdicts[seed]) for seed in unnamed][:2]


@pytest.mark.parametrize(("check", "answer"), [
    (check_shape_flop_recorder, lambda: solution("01_2_shape_flop_recorder.py").ShapeFlopRecorder),
    (check_predict_strides, lambda: solution("02_1_predict_strides.py").predict_strides),
], ids=["1.2", "2.1"])
def test_the_solution_solves_every_draw(check, answer):
    unsolved = []
    for seed in SEEDS:
        with fixed_draws(seed):
            result = check(answer())
        if not result.solved:
            unsolved.append(str(result))
    assert unsolved == []
