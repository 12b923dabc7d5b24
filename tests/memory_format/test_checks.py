"""Tests for labkit.memory_format.checks: each checker accepts the solution, rejects wrong answers."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from labkit.core.checks import Status
from labkit.memory_format import checks as checks

SOLUTIONS = Path(__file__).resolve().parents[2] / "notebooks" / "solutions"


def _solution(stem: str, name: str):
    spec = importlib.util.spec_from_file_location(stem, SOLUTIONS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _stub_for(exercise: str):
    def stub(*_args):
        raise NotImplementedError(
            f"Exercise {exercise}: write stub(). See solutions/x.py, "
            "or run %load solutions/x.py in this cell."
        )

    return stub


def test_predict_strides():
    assert checks.check_predict_strides(_solution("02_1_predict_strides", "predict_strides")).solved
    assert checks.check_predict_strides(_stub_for("2.1")).status is Status.NOT_YET
    wrong = checks.check_predict_strides(lambda shape, fmt: torch.empty(shape).stride())  # ignores the format
    assert wrong.status is Status.WRONG and "channels_last" in wrong.message and "innermost" in wrong.message


def test_find_format_dropper():
    assert checks.check_find_format_dropper(_solution("02_2_find_format_dropper", "find_format_dropper")).solved
    assert checks.check_find_format_dropper(_stub_for("2.2")).status is Status.NOT_YET
    wrong = checks.check_find_format_dropper(lambda model, x: "relu")
    assert wrong.status is Status.WRONG and "'layer_norm'" in wrong.message
    solution = _solution("02_2_find_format_dropper", "find_format_dropper")

    def full_name(model, x):
        short = solution(model, x)
        return f"torch.nn.functional.{short}" if short else None

    assert checks.check_find_format_dropper(full_name).solved


def test_find_format_dropper_without_converting_the_input_fails():
    from labkit.memory_format import FormatTracker

    def forgets_to_convert(model, x):
        with FormatTracker() as tracker:
            model(x)
        lost = tracker.lost()
        return lost[0].operator if lost else None

    result = checks.check_find_format_dropper(forgets_to_convert)
    assert result.status is Status.WRONG and "convert the model and the input to channels_last" in result.message


def test_convert_conv3d():
    assert checks.check_convert_conv3d(_solution("02_3_convert_conv3d", "convert_with_conv3d")).solved
    assert checks.check_convert_conv3d(_stub_for("2.3")).status is Status.NOT_YET
    crashed = checks.check_convert_conv3d(lambda model: model.to(memory_format=torch.channels_last))
    assert crashed.status is Status.WRONG and "RuntimeError" in crashed.message
    only_2d = checks.check_convert_conv3d(
        lambda model: torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)
    )
    assert only_2d.status is Status.WRONG and "channels_last_3d" in only_2d.message


@pytest.mark.parametrize(
    "answer",
    [
        lambda shape, fmt: None,
        lambda shape, fmt: 5,
        lambda shape, fmt: "(3072, 1024, 32, 1)",
        lambda shape, fmt: torch.tensor(torch.empty(shape).stride()),
        lambda shape, fmt: tuple(torch.tensor(s) for s in torch.empty(shape).stride()),
        lambda shape, fmt: tuple(float(s) for s in torch.empty(shape, memory_format=getattr(torch, fmt)).stride()),
    ],
)
def test_predict_strides_odd_answers_are_wrong_not_a_crash(answer):
    result = checks.check_predict_strides(answer)
    assert result.status is Status.WRONG and "you predicted" in result.message, result
    assert "tuple of ints" in result.message or "torch gives" in result.message


@pytest.mark.parametrize("answer", [lambda model, x: 3, lambda model, x: ["layer_norm"], lambda model, x: torch.ones(2)])
def test_find_format_dropper_odd_answers_are_wrong_not_a_crash(answer):
    result = checks.check_find_format_dropper(answer)
    assert result.status is Status.WRONG and "as a string, or None" in result.message, result


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda model: None, "must return the model"),
        (lambda model: torch.nn.Linear(2, 2), "ModuleDict"),
        (lambda model: torch.nn.ModuleDict({"a": torch.nn.ReLU()}), "ModuleDict"),
        (lambda model: _replaced(model, "stem3d", torch.nn.ReLU()), "still be convolutions"),
        (lambda model: _replaced(model, "head", torch.nn.Linear(7, 3)), "Running your converted model raised"),
    ],
)
def test_convert_conv3d_odd_answers_are_wrong_not_a_crash(answer, hint):
    result = checks.check_convert_conv3d(answer)
    assert result.status is Status.WRONG and hint in result.message, result


def _replaced(model, name, module):
    solution = _solution("02_3_convert_conv3d", "convert_with_conv3d")
    model = solution(model)
    model[name] = module
    return model
