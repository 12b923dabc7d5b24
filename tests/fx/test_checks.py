"""Checkers of notebook 01: the solutions solve them, stubs are 'not yet', wrong answers get a hint."""
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.fx
from torch.fx.experimental.optimization import fuse

import labkit
from labkit.core.checks import Status
from labkit.fx.checks import (
    _fusion_input,
    _fusion_model,
    check_profile_own_model,
    check_shape_recorder,
    check_slowest_after_fusion,
)
from labkit.fx.profile import ProfileReport

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


def test_exercise_1_2():
    recorder = solution("01_2_shape_recorder.py", "ShapeRecorder")
    assert check_shape_recorder(recorder).solved

    class Stub(torch.fx.Interpreter):
        def __init__(self, module):
            raise NotImplementedError("Exercise 1.2: write Stub.__init__")

    assert check_shape_recorder(Stub).status is Status.NOT_YET

    class ForgetsTheInput(recorder):
        def run_node(self, n):
            result = super().run_node(n)
            if n.op == "placeholder":
                del self.shapes[n.name]
            return result

    missing = check_shape_recorder(ForgetsTheInput)
    assert missing.status is Status.WRONG and "input_1" in missing.message

    class RecordsNothing(torch.fx.Interpreter):
        pass

    assert "self.shapes" in check_shape_recorder(RecordsNothing).message


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
    result = check_shape_recorder(recorder)
    assert result.status is Status.WRONG and "you recorded" in result.message, result
    for not_an_interpreter in (object, 42, lambda graph_module: object()):
        assert check_shape_recorder(not_an_interpreter).status is Status.WRONG


def test_exercise_1_3():
    answer = solution("01_3_slowest_after_fusion.py", "slowest_type_after_fusion")
    result = check_slowest_after_fusion(answer)
    assert result.solved, result
    assert "Conv2d" in result.message
    assert check_slowest_after_fusion(stub_for("1.3")).status is Status.NOT_YET
    unfused = check_slowest_after_fusion(lambda model, x: ("Conv2d", labkit.profile_model(model, x, runs=1)))
    assert unfused.status is Status.WRONG and "fused" in unfused.message
    assert "pair" in check_slowest_after_fusion(lambda model, x: "Conv2d").message
    assert "string" in check_slowest_after_fusion(lambda model, x: (torch.nn.Conv2d, answer(model, x)[1])).message


def _fake_report(report: ProfileReport, top: str) -> ProfileReport:
    """``report`` with the op type ``top`` made to look slowest: numbers a learner could type in."""
    from dataclasses import replace

    rows = [
        replace(row, stats=replace(row.stats, mean=1.0, median=1.0, min=1.0)) if row.op_type == top else row
        for row in report.rows
    ]
    return replace(report, rows=rows)


def test_exercise_1_3_does_not_trust_the_learners_own_report():
    # The answer must be what dominates in the checker's own profile, whatever the learner's report says.
    def own_numbers(model, x):
        report = _fake_report(labkit.profile_model(fuse(model), x, warmup=1, runs=3), "ReLU")
        return report.by_op_type().rows[0][0], report

    result = check_slowest_after_fusion(own_numbers)
    assert result.status is Status.WRONG and "'ReLU'" in result.message and "'Conv2d'" in result.message
    # A report of another model (here a one-layer model) does not count, even with the right answer.
    one_layer = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    other = labkit.profile_model(one_layer, torch.randn(1, 3, 8, 8), runs=3)
    result = check_slowest_after_fusion(lambda model, x: ("Conv2d", other))
    assert result.status is Status.WRONG and "not a profile of the fused model" in result.message
    # Nor does a cut-down report.
    result = check_slowest_after_fusion(lambda model, x: ("Conv2d", labkit.profile_model(fuse(model), x, runs=3).top(2)))
    assert result.status is Status.WRONG and "every node" in result.message


def test_exercise_1_3_reference_graph():
    # The checker's reference is torch's fuse of its own model: no BatchNorm left, Conv2d nodes present.
    types = [type(m).__name__ for m in fuse(_fusion_model()).modules()]
    assert "BatchNorm2d" not in types and types.count("Conv2d") == 2
    assert _fusion_input().shape == (2, 3, 32, 32)
