"""No checker accepts a wrong answer by the luck of a draw, nor names another mistake on some draws.

1.2 once drew one batch size per attempt: a FLOP count that forgets the batch was accepted whenever it drew a batch
of 1, and at a batch of 2 was told "one FLOP per multiply-add". Here each checker runs a known wrong answer on many
draws (the catalogue's entry, :meth:`~tests.mistakes.Mistake.on_draw`, which also seeds torch's global generator, the
learner's random state): refused every time, with the same mistake named every time.

The checkers that draw their cases (:data:`DRAWING`: 1.2's sizes and batches, 2.1's shapes, 4.1's fresh input batches)
draw them from :func:`labkit.core.checks.case_draws` (a test below makes sure none draws otherwise, and that exactly
these call it): their wrong answers run on :data:`SEEDS` draws, and their reference solutions (1.2, 2.1) solve every
draw. The checkers that draw nothing run their wrong answer on :data:`FEW_SEEDS`: their verdict must not move with the
draw or the learner's random state either, and more draws of the same cases would only take time.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path

import pytest

from labkit.core.checks import Status, fixed_draws
from labkit.fx.checks import check_shape_flop_recorder
from labkit.labs import LABS
from labkit.memory_format.checks import check_predict_strides
from tests.mistakes import ROOT, Mistake, solution
from tests.mistakes.catalogues import EXERCISES, all_mistakes

SEEDS = range(30)
FEW_SEEDS = range(3)
#: The exercises whose checker draws its cases (through case_draws).
DRAWING = {"1.2", "2.1", "4.1"}
CHECKER_MODULES = [import_module(f"{lab.package}.checks") for lab in LABS if lab.exercises]

#: Per exercise, the catalogued wrong answers run on every draw: where a checker draws, the ones a draw could let
#: through (a count right at a batch of 1, strides right when H == W, an output stored from an earlier batch);
#: elsewhere one of its quick refusals.
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


@pytest.fixture
def draws_taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each checker module's ``case_draws``, counted: the list gets one entry per call."""
    taken: list[str] = []
    for module in CHECKER_MODULES:
        real = getattr(module, "case_draws", None)
        if real is not None:
            monkeypatch.setattr(module, "case_draws", lambda real=real, name=module.__name__: taken.append(name) or real())
    yield taken


def test_every_exercise_has_a_wrong_answer_run_on_every_draw():
    assert sorted(ON_EVERY_DRAW) == sorted(EXERCISES)


@pytest.mark.parametrize("mistake", CHOSEN, ids=lambda mistake: f"{mistake.exercise}-{mistake.what}")
def test_a_wrong_answer_is_refused_on_every_draw_with_the_same_mistake_named(mistake: Mistake, draws_taken: list[str]):
    first = mistake.answer()
    assert first.status is Status.WRONG, first
    assert bool(draws_taken) == (mistake.exercise in DRAWING), (
        f"{mistake.exercise}'s checker {'draws' if draws_taken else 'draws nothing'}: DRAWING must say so, so that its "
        "wrong answers get every draw")
    verdicts = {seed: mistake.on_draw(seed) for seed in (SEEDS if mistake.exercise in DRAWING else FEW_SEEDS)}
    accepted = [seed for seed, result in verdicts.items() if result.status is not Status.WRONG]
    assert accepted == [], [str(verdicts[seed]) for seed in accepted]
    misnamed = {seed: result.mistake for seed, result in verdicts.items() if result.mistake != first.mistake}
    assert misnamed == {}, (first.mistake, misnamed, [str(verdicts[seed]) for seed in misnamed][:2])
    unnamed = [seed for seed, result in verdicts.items()
               if [name for name in mistake.names if name.lower() not in result.message.lower()]]
    assert unnamed == [], [str(verdicts[seed]) for seed in unnamed][:2]


#: What would draw a checker's cases past case_draws: the operating system's entropy, a generator seeded from it,
#: the global random state of Python or NumPy (torch's global one is the learner's: a checker seeds its own).
OTHER_DRAWS = re.compile(r"\.seed\(\)|\bsecrets\.|\bos\.urandom\b|\brandom\.(?!Random\b)\w+\(|\bnp\.random\b|"
                         r"torch\.Generator\(\)(?!\.manual_seed\()")


def test_checkers_draw_their_cases_only_through_case_draws():
    """fixed_draws pins what case_draws gives, so the draws above are the draws a learner meets; a checker that drew
    from elsewhere (4.1 once seeded its input batches from the operating system) would meet other draws here."""
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted(Path(ROOT, "labkit").glob("*/checks.py")) if path.parent.name != "core"  # case_draws's own
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if OTHER_DRAWS.search(line)]
    assert found == []


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
