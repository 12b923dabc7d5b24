"""Tests for labkit.memory_format.checks: each checker accepts the solution, rejects wrong answers."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from labkit.core.checks import Status, case_draws
from labkit.memory_format import checks as checks

CL = torch.channels_last
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


# The seven cases the 2.1 checker asked on every attempt before it drew them: a table of their answers was "solved".
OLD_STRIDE_CASES = {
    ((10, 3, 32, 32), "contiguous_format"): (3072, 1024, 32, 1),
    ((10, 3, 32, 32), "channels_last"): (3072, 1, 96, 3),
    ((2, 5, 7, 3), "channels_last"): (105, 1, 15, 5),
    ((4, 1, 4, 4), "channels_last"): (16, 1, 4, 1),
    ((2, 3, 1, 1), "channels_last"): (3, 1, 3, 3),
    ((2, 3, 4, 5, 6), "channels_last_3d"): (360, 1, 90, 18, 3),
    ((2, 3, 4, 5, 6), "contiguous_format"): (360, 120, 30, 6, 1),
}


def test_predict_strides_draws_its_cases_so_a_table_of_answers_is_no_answer():
    def lookup(shape, memory_format):
        return OLD_STRIDE_CASES.get((tuple(shape), memory_format), (1,) * len(shape))

    solution = _solution("02_1_predict_strides", "predict_strides")
    drawn = set()
    for _ in range(3):
        cases = checks.stride_cases(case_draws())
        assert [(len(shape), name) for shape, name in cases] == [(dims, name) for dims, name, _ in checks.STRIDE_CASE_KINDS]
        drawn.add(tuple(cases))
        assert checks.check_predict_strides(lookup).status is Status.WRONG
        assert checks.check_predict_strides(solution).solved
    assert len(drawn) > 1


def test_predict_strides():
    assert checks.check_predict_strides(_solution("02_1_predict_strides", "predict_strides")).solved
    assert checks.check_predict_strides(_stub_for("2.1")).status is Status.NOT_YET
    wrong = checks.check_predict_strides(lambda shape, fmt: torch.empty(shape).stride())  # ignores the format
    assert wrong.status is Status.WRONG and "channels_last" in wrong.message and "innermost" in wrong.message


def test_predict_strides_accepts_a_torch_size_and_notes_a_list():
    solution = _solution("02_1_predict_strides", "predict_strides")
    assert checks.check_predict_strides(lambda shape, fmt: torch.Size(solution(shape, fmt))).message.endswith("5-D shapes.")
    as_list = checks.check_predict_strides(lambda shape, fmt: list(solution(shape, fmt)))
    assert as_list.solved and "You returned lists, which this checker accepts" in as_list.message
    assert "return a tuple" not in as_list.message  # no "solved ... so return a tuple"


def test_memory_order_reads_a_dense_layout_and_nothing_else():
    assert checks._memory_order((10, 3, 32, 32), (3072, 1, 96, 3)) == "N, H, W, C"
    assert checks._memory_order((2, 3, 4, 5, 6), (360, 1, 90, 18, 3)) == "N, D, H, W, C"
    assert checks._memory_order((10, 3, 32, 32), (3072, 96, 3, 1)) is None  # not dense
    assert checks._memory_order((4, 1, 4, 4), (16, 1, 4, 1)) is None  # equal strides: no single order


def _logger_class():
    """A right DropLogger, written here as a learner would."""

    class DropLogger(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.dropped = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            took = any(isinstance(a, torch.Tensor) and a.dim() == 4 and a.is_contiguous(memory_format=CL)
                       and not a.is_contiguous() for a in args)
            if took and isinstance(result, torch.Tensor) and not result.is_contiguous(memory_format=CL):
                self.dropped.append(func.__name__)
            return result

    return DropLogger


def _answers(value):
    """A find_format_dropper that runs the model in its own mode, then returns ``value`` whatever it saw."""

    def answer(model, x):
        with _logger_class()():
            model(x.to(memory_format=CL))
        return value

    return answer


def test_find_format_dropper():
    assert checks.check_find_format_dropper(_solution("02_2_find_format_dropper", "find_format_dropper")).solved
    assert checks.check_find_format_dropper(_stub_for("2.2")).status is Status.NOT_YET
    wrong = checks.check_find_format_dropper(_answers("relu"))
    assert wrong.status is Status.WRONG and "relu took channels_last and returned channels_last" in wrong.message
    solution = _solution("02_2_find_format_dropper", "find_format_dropper")

    def full_name(model, x):
        short = solution(model, x)
        return f"torch.nn.functional.{short}" if short else None

    assert checks.check_find_format_dropper(full_name).solved


def test_the_dropper_models_drop_where_they_were_designed_to():
    """Each model's purpose rests on torch's formats: if a torch release changes them, the cases need a new design."""
    traces = [checks._reference_trace(index) for index in range(len(checks._DROPPER_MODELS))]
    droppers = [[call.name for call in calls if call.dropped] for calls in traces]
    assert droppers == [["layer_norm"], ["softmax", "layer_norm"], ["add"], [], []]
    (add,) = [call for call in traces[2] if call.dropped]
    assert not add.first_took  # its channels_last input is the second
    assert [call.name for call in traces[3] if call.ambiguous] == ["adaptive_avg_pool2d"]
    assert {call.name for call in traces[4] if not call.took_channels_last} == {"full", "sigmoid"}


def test_find_format_dropper_a_deep_copy_of_the_model_still_reports():
    solution = _solution("02_2_find_format_dropper", "find_format_dropper")
    assert checks.check_find_format_dropper(lambda model, x: solution(copy.deepcopy(model), x)).solved


def test_find_format_dropper_leaves_no_mode_on():
    def leaves_it_on(model, x):
        logger = _logger_class()()
        logger.__enter__()
        model.to(memory_format=CL)(x.to(memory_format=CL))
        return logger.dropped[0]

    result = checks.check_find_format_dropper(leaves_it_on)
    assert result.status is Status.WRONG and "took it off" in result.message
    assert _get_current_function_mode_stack() == []


@pytest.mark.parametrize("answer", [_answers(3), _answers(["layer_norm"]), _answers(torch.ones(2))])
def test_find_format_dropper_odd_answers_are_wrong_not_a_crash(answer):
    result = checks.check_find_format_dropper(answer)
    assert result.status is Status.WRONG and "as a string, or None" in result.message, result


def test_convert_conv3d():
    assert checks.check_convert_conv3d(_solution("02_3_convert_conv3d", "convert_with_conv3d")).solved
    assert checks.check_convert_conv3d(_stub_for("2.3")).status is Status.NOT_YET
    crashed = checks.check_convert_conv3d(lambda model: model.to(memory_format=torch.channels_last))
    assert crashed.status is Status.WRONG and "RuntimeError" in crashed.message
    only_2d = checks.check_convert_conv3d(
        lambda model: torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)
    )
    assert only_2d.status is Status.WRONG and "channels_last_3d" in only_2d.message


def test_convert_conv3d_accepts_a_conversion_by_hand():
    def by_hand(model):
        for layer in model.modules():
            if isinstance(layer, (torch.nn.Conv2d, torch.nn.Conv3d)):
                fmt = CL if layer.weight.dim() == 4 else torch.channels_last_3d
                layer.weight.data = layer.weight.data.contiguous(memory_format=fmt)
        return model

    assert checks.check_convert_conv3d(by_hand).solved


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


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda model: None, "returned None"),
        (lambda model: torch.nn.Linear(2, 2), "a different model"),
        (lambda model: 3, "an object of type int"),
        (lambda model: _replaced(model, "temporal", torch.nn.ReLU()), "temporal must still be the Conv3d"),
        (lambda model: _replaced(model, "head", torch.nn.Linear(7, 3)), "head.weight changed its values or shape"),
        (lambda model: _replaced(model, "spatial", torch.nn.Conv2d(4, 4, 3)), "spatial.weight changed"),
    ],
)
def test_convert_conv3d_odd_answers_are_wrong_not_a_crash(answer, hint):
    result = checks.check_convert_conv3d(answer)
    assert result.status is Status.WRONG and hint in result.message, result


def test_convert_conv3d_runs_the_checkers_own_forward():
    solution = _solution("02_3_convert_conv3d", "convert_with_conv3d")

    def replaces_forward(model):
        model = solution(model)
        model.forward = lambda clip: torch.zeros(clip.shape[0], 3)
        return model

    assert checks.check_convert_conv3d(replaces_forward).solved  # the checker's forward ran, not the replacement


def _replaced(model, name, module):
    solution = _solution("02_3_convert_conv3d", "convert_with_conv3d")
    model = solution(model)
    setattr(model, name, module)
    return model


# ---------------------------------------------------------------------------------------------- cheats (issue 24 audit)


class _RecordsNothing(TorchFunctionMode):
    """A mode of the learner's that passes every call through: it satisfies "a mode of your own", and records nothing."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_predict_strides_read_off_a_tensor_made_out_of_the_modes_sight_is_refused():
    def predict(shape, name):
        with torch._C.DisableTorchFunction():  # hides torch.empty from every TorchFunctionMode
            return torch.empty(shape, memory_format=getattr(torch, name)).stride()

    result = checks.check_predict_strides(predict)
    assert result.status is Status.WRONG and result.mistake == "2.1/reads-strides-off-a-tensor", result.message


def test_find_format_dropper_with_a_mode_of_ones_own_beside_labkits_tracker_is_refused():
    from labkit.memory_format.tracker import FormatTracker

    def find(model, x):
        model, x = model.to(memory_format=CL), x.contiguous(memory_format=CL)
        with _RecordsNothing():
            model(x)
        with FormatTracker() as tracker:
            model(x)
        dropped = tracker.dropped()
        return dropped[0].short_name if dropped else None

    result = checks.check_find_format_dropper(find)
    assert result.status is Status.WRONG and result.mistake == "2.2/uses-format-tracker", result.message


def test_find_format_dropper_finds_no_reference_trace_while_the_answer_runs():
    import gc

    def find(model, x):
        with _RecordsNothing():
            model(x.contiguous(memory_format=CL))
        traces = [o for o in gc.get_objects() if type(o) is list and o and all(type(c) is checks._Call for c in o)]
        dropped = [call.name for call in traces[-1] if call.dropped] if traces else []
        return dropped[0] if dropped else None

    assert checks.check_find_format_dropper(find).status is Status.WRONG


def test_convert_conv3d_with_is_contiguous_shadowed_on_torch_tensor_is_refused():
    def convert(model):
        torch.Tensor.is_contiguous = lambda self, memory_format=torch.contiguous_format: True
        return model

    result = checks.check_convert_conv3d(convert)
    assert "is_contiguous" not in vars(torch.Tensor)
    assert result.status is Status.WRONG and "torch.Tensor.is_contiguous (removed)" in result.message
