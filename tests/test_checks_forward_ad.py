"""labkit.checks.forward_ad: solutions pass, stubs are "not yet", wrong answers get a hint."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch

from labkit.checks import Status
from labkit.checks.forward_ad import check_custom_sin, check_directional_derivative, check_predict_mode

SOLUTIONS = Path(__file__).resolve().parents[1] / "notebooks" / "solutions"


def _solution(file, name):
    return runpy.run_path(str(SOLUTIONS / file))[name]


def _stub(*_args):
    raise NotImplementedError("Exercise 3.x: your code here")


def test_solutions_are_solved():
    assert check_directional_derivative(_solution("03_1_directional_derivative.py", "directional_derivative")).solved
    assert check_predict_mode(_solution("03_2_predict_mode.py", "predict_faster_mode")).solved
    assert check_custom_sin(_solution("03_3_custom_sin.py", "Sin")).solved


@pytest.mark.parametrize("checker", [check_directional_derivative, check_predict_mode])
def test_function_stubs_are_not_yet_solved(checker):
    assert checker(_stub).status is Status.NOT_YET


def test_class_stub_is_not_yet_solved():
    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(x):
            raise NotImplementedError("Exercise 3.3")

        @staticmethod
        def setup_context(ctx, inputs, output):
            raise NotImplementedError("Exercise 3.3")

        @staticmethod
        def jvp(ctx, x_tangent):
            raise NotImplementedError("Exercise 3.3")

    assert check_custom_sin(Sin).status is Status.NOT_YET


def test_finite_differences_are_not_a_jvp():
    def finite(f, x, v, eps=1e-6):
        return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)

    result = check_directional_derivative(finite)
    assert result.status is Status.WRONG and "finite differences" in result.message


def test_wrong_shape_is_explained():
    result = check_directional_derivative(lambda f, x, v: torch.zeros(7))
    assert result.status is Status.WRONG and "shaped like the output" in result.message
    result = check_directional_derivative(lambda f, x, v: torch.zeros_like(f(x)))
    assert result.status is Status.WRONG and "not the derivative along v" in result.message


def test_wrong_prediction_names_the_pass_counts():
    result = check_predict_mode(lambda i, o: "jacrev")
    assert result.status is Status.WRONG and "one per input dimension (8)" in result.message
    assert check_predict_mode(lambda i, o: "forward").status is Status.WRONG


def test_wrong_jvp_and_old_style_are_explained():
    Sin = _solution("03_3_custom_sin.py", "Sin")

    class WrongJvp(Sin):
        @staticmethod
        def jvp(ctx, x_tangent):
            return x_tangent

    assert "cos(x) * x_tangent" in check_custom_sin(WrongJvp).message

    class OldStyle(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return torch.sin(x)

        @staticmethod
        def jvp(ctx, x_tangent):
            return torch.cos(ctx.x) * x_tangent

    result = check_custom_sin(OldStyle)
    assert result.status is Status.WRONG and "setup_context" in result.message
    assert check_custom_sin(42).status is Status.WRONG
