import importlib.util
from pathlib import Path

import torch

from labkit.checks import Status
from labkit.checks.capstone import check_make_faster

SOLUTION = Path(__file__).resolve().parents[1] / "notebooks" / "solutions" / "04_1_make_faster.py"


def _solution():
    spec = importlib.util.spec_from_file_location("solution_04_1", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_faster


def test_the_solution_solves_it():
    assert check_make_faster(_solution(), rounds=5).status is Status.SOLVED


def test_a_stub_is_not_yet_solved():
    def make_faster(model, x):
        raise NotImplementedError("Exercise 4.1")

    assert check_make_faster(make_faster).status is Status.NOT_YET


def test_returning_the_same_model_is_too_slow():
    result = check_make_faster(lambda model, x: (model, x), rounds=3)
    assert result.status is Status.WRONG and "1.3x is needed" in result.message


def test_changing_the_original_in_place_is_caught():
    def in_place(model, x):
        model.to(memory_format=torch.channels_last)
        model[0].weight.data.mul_(2)
        return model, x

    result = check_make_faster(in_place)
    assert result.status is Status.WRONG and "original model changed" in result.message


def test_wrong_return_value_is_explained():
    result = check_make_faster(lambda model, x: model)
    assert result.status is Status.WRONG and "must return a pair" in result.message


def test_checkers_leave_the_learners_random_stream_alone():
    from labkit.checks.fx import check_shape_recorder
    from labkit.checks.memory_format import check_find_format_dropper

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_make_faster(lambda model, x: model)  # builds the challenge model, then fails fast
    check_shape_recorder(object)
    check_find_format_dropper(lambda model, x: None)
    assert torch.equal(torch.rand(3), expected)
