"""labkit.capstone.checks: the whole path from the plain input is timed, on fresh inputs, so shortcuts fail."""
import importlib.util
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.optimization import fuse

from labkit.capstone.checks import check_make_faster
from labkit.capstone.variants import challenge_input
from labkit.core.checks import Status
from labkit.core.errors import LabkitValueError

SOLUTION = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "04_1_make_faster.py"


def _solution():
    spec = importlib.util.spec_from_file_location("solution_04_1", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_faster


@pytest.mark.slow  # times the challenge model against the solution
def test_the_solution_solves_it():
    result = check_make_faster(_solution(), rounds=5)
    assert result.status is Status.SOLVED, result


def test_a_stub_is_not_yet_solved():
    def make_faster(model):
        raise NotImplementedError("Exercise 4.1: write make_faster(). See solutions/04_1_make_faster.py, or run %load ...")

    assert check_make_faster(make_faster).status is Status.NOT_YET


def test_returning_the_same_model_is_too_slow(monkeypatch):
    """The verdict logic, without the noise of real timing: equal medians are 1.0x, not enough."""
    from labkit.capstone import checks as capstone_checks
    from labkit.core.timing import RunStats

    def same_speed(candidates, *, rounds, warmup):
        for fn in candidates.values():
            for _ in range(warmup + rounds):
                fn()
        return {name: RunStats.from_samples([0.01] * rounds) for name in candidates}

    monkeypatch.setattr(capstone_checks, "compare", same_speed)
    result = check_make_faster(lambda model: model, rounds=3)
    assert result.status is Status.WRONG and "1.00x" in result.message and "1.3x is needed" in result.message


@pytest.mark.parametrize(("yours_s", "solved", "shown"), [(0.005, True, None), (0.02, False, "0.50x")])
def test_the_speedup_is_the_original_time_over_yours(monkeypatch, yours_s, solved, shown):
    """Twice as fast is 2x (solved); twice as slow is 0.50x, not 2x (the direction a swapped ratio would get wrong)."""
    from labkit.capstone import checks as capstone_checks
    from labkit.core.timing import RunStats

    def timed(candidates, *, rounds, warmup):
        for fn in candidates.values():
            for _ in range(warmup + rounds):
                fn()
        seconds = {"original": 0.01, "yours": yours_s}
        return {name: RunStats.from_samples([seconds[name]] * rounds) for name in candidates}

    monkeypatch.setattr(capstone_checks, "compare", timed)
    result = check_make_faster(lambda model: model, rounds=2)
    assert (result.status is Status.SOLVED) is solved, result
    if shown:
        assert shown in result.message


def test_changing_the_original_in_place_is_caught():
    def in_place(model):
        model.to(memory_format=torch.channels_last)
        model[0].weight.data.mul_(2)
        return model

    result = check_make_faster(in_place)
    assert result.status is Status.WRONG and "original model changed" in result.message


def test_wrong_return_value_is_explained():
    result = check_make_faster(lambda model: 42)
    assert result.status is Status.WRONG and "must return a callable" in result.message
    result = check_make_faster(lambda model: lambda x: model(x).tolist())
    assert result.status is Status.WRONG and "returned a list" in result.message
    result = check_make_faster(lambda model: lambda x: model(x)[:, :3])
    assert result.status is Status.WRONG and "output shape" in result.message
    result = check_make_faster(lambda model: lambda x: model(x).to(torch.int64))
    assert result.status is Status.WRONG and "floating-point" in result.message


def test_converting_the_input_outside_the_timed_path_is_refused():
    # The old loophole: hand back a pre-converted input with the model, so its conversion is never timed.
    x_cl = challenge_input().contiguous(memory_format=torch.channels_last)
    result = check_make_faster(lambda model: (fuse(model, inplace=False).to(memory_format=torch.channels_last), x_cl))
    assert result.status is Status.WRONG and "not a pair" in result.message


def test_a_cached_output_is_caught():
    def make_faster(model):
        cache = {}

        def faster(x):
            if "y" not in cache:
                cache["y"] = model(x)
            return cache["y"]

        return faster

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "fresh input" in result.message and "stored result" in result.message


def test_an_answer_precomputed_for_the_challenge_input_is_caught():
    def make_faster(model):
        with torch.inference_mode():
            answer = model(challenge_input())
        return lambda x: answer

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "fresh input" in result.message


def test_every_timed_output_is_checked():
    # Right for the calls before timing, then fast and wrong: the checker compares the timed calls' outputs too.
    def make_faster(model):
        calls = []

        def faster(x):
            calls.append(1)
            return model(x) if len(calls) <= 2 else torch.zeros(x.shape[0], 10)

        return faster

    result = check_make_faster(make_faster, rounds=2)
    assert result.status is Status.WRONG and "fresh input batch 1 of 4" in result.message


def test_an_error_in_the_learners_callable_points_at_their_line():
    def make_faster(model):
        def faster(x):
            return model(x.view(8, -1))  # the learner's mistake

        return faster

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "RuntimeError" in result.message and "of faster)" in result.message


@pytest.mark.parametrize("rounds", [0, -1, 2.5, "5", True])
def test_bad_rounds_is_a_clear_error(rounds):
    with pytest.raises(LabkitValueError, match="rounds must be a positive integer"):
        check_make_faster(lambda model: model, rounds=rounds)


def test_checkers_leave_the_learners_random_stream_alone():
    from labkit.fx.checks import check_shape_flop_recorder
    from labkit.memory_format.checks import check_find_format_dropper

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_make_faster(lambda model: (lambda x: model(x)[:, :3]))  # fresh inputs and a first check, then fails fast
    check_shape_flop_recorder(object)
    check_find_format_dropper(lambda model, x: None)
    assert torch.equal(torch.rand(3), expected)
