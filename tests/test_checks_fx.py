"""Checkers of notebook 01: the solutions solve them, stubs are 'not yet', wrong answers get a hint."""
import importlib.util
from pathlib import Path

import torch
import torch.fx

import labkit
from labkit.checks import Status
from labkit.checks.fx import check_profile_own_model, check_shape_recorder, check_slowest_after_fusion

SOLUTIONS = Path(__file__).resolve().parents[1] / "notebooks" / "solutions"


def solution(file_name: str, name: str):
    spec = importlib.util.spec_from_file_location(file_name.removesuffix(".py"), SOLUTIONS / file_name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise 1.x")


def test_exercise_1_1():
    assert check_profile_own_model(solution("01_1_profile_own_model.py", "profile_my_model")).solved
    assert check_profile_own_model(stub).status is Status.NOT_YET
    too_few_runs = check_profile_own_model(lambda: labkit.profile_model(torch.nn.Conv2d(3, 3, 1), torch.randn(1, 3, 4, 4), runs=1))
    assert too_few_runs.status is Status.WRONG and "runs=3" in too_few_runs.message
    no_conv = check_profile_own_model(
        lambda: labkit.profile_model(torch.nn.Sequential(*[torch.nn.ReLU()] * 3), torch.randn(2), runs=3)
    )
    assert no_conv.status is Status.WRONG and "Conv2d" in no_conv.message
    wrong_type = check_profile_own_model(lambda: "fast")
    assert wrong_type.status is Status.WRONG and "labkit.profile_model" in wrong_type.message


def test_exercise_1_2():
    recorder = solution("01_2_shape_recorder.py", "ShapeRecorder")
    assert check_shape_recorder(recorder).solved

    class Stub(torch.fx.Interpreter):
        def __init__(self, module):
            raise NotImplementedError("Exercise 1.2")

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


def test_exercise_1_3():
    answer = solution("01_3_slowest_after_fusion.py", "slowest_type_after_fusion")
    assert check_slowest_after_fusion(answer).solved
    assert check_slowest_after_fusion(stub).status is Status.NOT_YET
    unfused = check_slowest_after_fusion(lambda model, x: ("Conv2d", labkit.profile_model(model, x, runs=1)))
    assert unfused.status is Status.WRONG and "fused" in unfused.message

    def wrong_name(model, x):
        _, report = answer(model, x)
        return "Flatten-but-wrong", report

    assert "largest time in your report" in check_slowest_after_fusion(wrong_name).message
    assert "pair" in check_slowest_after_fusion(lambda model, x: "Conv2d").message
