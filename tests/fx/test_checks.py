"""Checkers of notebook 01: the solutions solve them, stubs are 'not yet', wrong answers get a hint."""
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.fx
from torch import nn

import labkit
from labkit.core.checks import Status
from labkit.fx.checks import check_fold_linear_bn, check_profile_own_model, check_shape_flop_recorder

SOLUTIONS = Path(__file__).resolve().parents[2] / "notebooks" / "solutions"


def solution(file_name: str, name: str):
    spec = importlib.util.spec_from_file_location(file_name.removesuffix(".py"), SOLUTIONS / file_name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def stub_for(exercise: str):
    def stub(*args, **kwargs):
        raise NotImplementedError(
            f"Exercise {exercise}: write stub(). See solutions/x.py, or run %load solutions/x.py in this cell."
        )

    return stub


def test_exercise_1_1():
    assert check_profile_own_model(solution("01_1_profile_own_model.py", "profile_my_model")).solved
    assert check_profile_own_model(stub_for("1.1")).status is Status.NOT_YET
    too_few_runs = check_profile_own_model(
        lambda: labkit.profile_model(torch.nn.Conv2d(3, 3, 1).eval(), torch.randn(1, 3, 4, 4), runs=1)
    )
    assert too_few_runs.status is Status.WRONG and "runs=3" in too_few_runs.message
    no_conv = check_profile_own_model(
        lambda: labkit.profile_model(torch.nn.Sequential(*[torch.nn.ReLU()] * 3).eval(), torch.randn(2), runs=3)
    )
    assert no_conv.status is Status.WRONG and "Conv2d" in no_conv.message
    wrong_type = check_profile_own_model(lambda: "fast")
    assert wrong_type.status is Status.WRONG and "labkit.profile_model" in wrong_type.message


RECORDER = solution("01_2_shape_flop_recorder.py", "ShapeFlopRecorder")


def test_exercise_1_2():
    assert check_shape_flop_recorder(RECORDER).solved

    class Stub(torch.fx.Interpreter):
        def __init__(self, module):
            raise NotImplementedError("Exercise 1.2: write Stub.__init__")

    assert check_shape_flop_recorder(Stub).status is Status.NOT_YET

    class ForgetsTheInput(RECORDER):
        def run_node(self, n):
            result = super().run_node(n)
            if n.op == "placeholder":
                del self.shapes[n.name]
            return result

    missing = check_shape_flop_recorder(ForgetsTheInput)
    assert missing.status is Status.WRONG and "input_1" in missing.message
    assert "Your run_node starts at line" in missing.message and "of test_checks.py." in missing.message

    class RecordsNothing(torch.fx.Interpreter):
        pass

    nothing = check_shape_flop_recorder(RecordsNothing)
    assert "self.shapes" in nothing.message and "Your run_node" not in nothing.message  # torch's run_node: no pointer


def _recorder_changing_flops(change):
    """The solution with ``change(layer, output, flops)`` applied to each recorded FLOP count."""

    class Changed(RECORDER):
        def run_node(self, n):
            result = super().run_node(n)
            if n.name in self.flops:
                self.flops[n.name] = change(self.fetch_attr(n.target), result, self.flops[n.name])
            return result

    return Changed


@pytest.mark.parametrize(
    ("change", "hint"),
    [
        (lambda layer, out, flops: flops // 2, "2 FLOPs per multiply-add"),
        (lambda layer, out, flops: flops * getattr(layer, "groups", 1), "groups=4"),
        (lambda layer, out, flops: flops + out.numel(), "Leave the bias out"),
        (lambda layer, out, flops: float(flops), "as an int"),
        (lambda layer, out, flops: flops + 2, "kernel height * kernel width"),
    ],
)
def test_exercise_1_2_wrong_flops_get_their_hint(change, hint):
    result = check_shape_flop_recorder(_recorder_changing_flops(change))
    assert result.status is Status.WRONG and hint in result.message, result


def test_exercise_1_2_counts_only_conv_and_linear():
    class CountsEverything(RECORDER):
        def run_node(self, n):
            result = super().run_node(n)
            if isinstance(result, torch.Tensor):
                self.flops.setdefault(n.name, result.numel())
            return result

    result = check_shape_flop_recorder(CountsEverything)
    assert result.status is Status.WRONG and "count only nn.Conv2d and nn.Linear" in result.message

    class SkipsLinear(RECORDER):
        def run_node(self, n):
            result = super().run_node(n)
            if isinstance(self.fetch_attr(n.target) if n.op == "call_module" else None, nn.Linear):
                del self.flops[n.name]
            return result

    result = check_shape_flop_recorder(SkipsLinear)
    assert result.status is Status.WRONG and "a Linear" in result.message, result


class _Shapes(torch.fx.Interpreter):
    """Records whatever ``record`` makes of each output: for learner answers of the wrong kind."""

    record = staticmethod(lambda value: value.shape)

    def run(self, *args):
        self.shapes = {}
        return super().run(*args)

    def run_node(self, n):
        result = super().run_node(n)
        self.shapes[n.name] = self.record(result)
        return result


@pytest.mark.parametrize(
    "record",
    [
        lambda value: torch.tensor(value.shape),  # a tensor, not a tuple
        lambda value: tuple(torch.tensor(s) for s in value.shape),  # tensors inside
        lambda value: str(tuple(value.shape)),
        lambda value: None,
        lambda value: tuple(float(s) for s in value.shape),
    ],
)
def test_exercise_1_2_odd_shapes_are_wrong_not_a_crash(record):
    recorder = type("Odd", (_Shapes,), {"record": staticmethod(record)})
    result = check_shape_flop_recorder(recorder)
    assert result.status is Status.WRONG and "you recorded" in result.message, result
    for not_an_interpreter in (object, 42, lambda graph_module: object()):
        assert check_shape_flop_recorder(not_an_interpreter).status is Status.WRONG


FOLD = solution("01_3_fold_linear_bn.py", "fold_linear_bn")


def _folded(linear: nn.Linear, scale: torch.Tensor, bias: torch.Tensor) -> nn.Linear:
    layer = nn.Linear(linear.in_features, linear.out_features, dtype=linear.weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(linear.weight * scale)
        layer.bias.copy_(bias)
    return layer


def _linear_bias(linear: nn.Linear) -> torch.Tensor | float:
    return linear.bias if linear.bias is not None else 0.0


def test_exercise_1_3():
    assert check_fold_linear_bn(FOLD).solved
    assert check_fold_linear_bn(stub_for("1.3")).status is Status.NOT_YET
    square = nn.Linear(4, 4).double().eval()
    bn = nn.BatchNorm1d(4).double().eval()
    with torch.no_grad():
        bn.running_var.uniform_(0.1, 0.2)
        bn.weight.uniform_(0.5, 2)
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(FOLD(square, bn)(x), bn(square(x)))  # the solution is right beyond the checker's cases


@pytest.mark.parametrize(
    ("fold", "hint"),
    [
        (lambda linear, bn: _folded(linear, (bn.weight / torch.sqrt(bn.running_var)).unsqueeze(1),
                                    (_linear_bias(linear) - bn.running_mean) * bn.weight / torch.sqrt(bn.running_var)
                                    + bn.bias), "miss bn.eps"),
        (lambda linear, bn: _folded(linear, (bn.weight / (bn.running_var + bn.eps)).unsqueeze(1), bn.bias),
         "divide by the standard deviation"),
        (lambda linear, bn: _folded(linear, (bn.weight / torch.sqrt(bn.running_var + bn.eps)).unsqueeze(1),
                                    _linear_bias(linear) * bn.weight / torch.sqrt(bn.running_var + bn.eps) + bn.bias),
         "misses the running mean"),
        (lambda linear, bn: _folded(linear, (bn.weight / torch.sqrt(bn.running_var + bn.eps)).unsqueeze(1),
                                    -bn.running_mean * bn.weight / torch.sqrt(bn.running_var + bn.eps) + bn.bias),
         "own bias passes through BatchNorm"),
        (lambda linear, bn: nn.Sequential(linear, bn), "returned Sequential"),
        (lambda linear, bn: linear, "not the Linear you were given"),
        (lambda linear, bn: FOLD(linear.float(), bn.float()), "changed the Linear or the BatchNorm"),
        (lambda linear, bn: (linear.weight.data.mul_(2), FOLD(linear, bn))[1], "changed the Linear or the BatchNorm"),
        (lambda linear, bn: _folded(linear, (bn.weight / torch.sqrt(bn.running_var + bn.eps)).unsqueeze(1),
                                    (linear.bias - bn.running_mean) * bn.weight / torch.sqrt(bn.running_var + bn.eps)
                                    + bn.bias), "On a Linear without bias (linear.bias is None), your code raised TypeError"),
    ],
)
def test_exercise_1_3_wrong_folds_get_their_hint(fold, hint):
    result = check_fold_linear_bn(fold)
    assert result.status is Status.WRONG and hint in result.message, result
