"""Checkers of notebook 01: the solutions solve them, stubs are 'not yet', wrong answers get a hint, cheats are refused.

The catalogue of learners' mistakes, with the words each hint must contain, is tests/mistakes/catalogue_01.py;
this file tests the checkers' design: the observed runs (1.1), distinct counts for distinct slips and the private
graph (1.2), the private Linear and BatchNorm and the dtype tolerance (1.3).
"""
import dataclasses
import importlib.util
import math
import random
from pathlib import Path

import pytest
import torch
import torch.fx
from torch import nn

import labkit
from labkit.core.checks import Status, case_draws
from labkit.fx import checks as fx_checks
from labkit.fx.checks import check_fold_linear_bn, check_profile_own_model, check_shape_flop_recorder
from labkit.fx.profile import make_profiler
from labkit.fx.runs import watch_runs
from tests.cheats import LyingTensor

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


# ------------------------------------------------------------------ 1.1

def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2)).eval()


X = torch.randn(1, 3, 6, 6)


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


def test_watch_runs_counts_the_timed_runs_and_copies_each_report():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten()).eval()
    with watch_runs() as watch:
        report = labkit.profile_model(model, X, warmup=2, runs=2, on_run=lambda _: None)
    assert watch.timed_runs == 2  # warm-up runs are not timed runs
    assert [watched.timed_runs for watched in watch.reports] == [1, 2, 2]  # two from on_run, then the result
    assert watch.reports[-1].report == report and watch.reports[-1].report is not report
    assert not watch.reports[-1].training
    labkit.profile_model(model, X, runs=1)
    assert watch.timed_runs == 2  # nothing is recorded once the block is closed


def test_exercise_1_1_takes_a_report_from_any_profiler_whose_runs_it_saw():
    def by_hand():
        profiler = make_profiler(_cnn(), X)
        for _ in range(3):
            profiler.run_once()
        return profiler.report()

    assert check_profile_own_model(by_hand).solved


def test_exercise_1_1_refuses_a_profiler_whose_runs_were_padded():
    def padded():
        profiler = make_profiler(_cnn(), X)
        profiler.run_once()
        profiler.totals *= 3
        for samples in profiler.samples.values():
            samples *= 3
        return profiler.report()

    result = check_profile_own_model(padded)
    assert result.status is Status.WRONG and "its profiler really timed 1" in result.message, result


def test_exercise_1_1_refuses_a_report_changed_after_profiling():
    def extra_row():
        report = labkit.profile_model(_cnn(), X, runs=3)
        report.rows.append(dataclasses.replace(report.rows[0], name="conv_extra"))
        return report

    result = check_profile_own_model(extra_row)
    assert result.status is Status.WRONG and "changed after labkit.profile_model made it" in result.message, result


def test_exercise_1_1_relabelled_runs_fail_under_every_mode():
    for mode in ("fast", "interpreter", "modules"):
        def relabelled(mode=mode):
            report = labkit.profile_model(_cnn(), X, runs=1, mode=mode)
            return dataclasses.replace(report, total=dataclasses.replace(report.total, count=3))

        result = check_profile_own_model(relabelled)
        assert result.status is Status.WRONG and "really timed only 1" in result.message, (mode, result)


# ------------------------------------------------------------------ 1.2

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


def _model_layers(seed: int = 0) -> list[tuple[nn.Module, torch.Size, torch.Size]]:
    """(layer, input shape, output shape) of every Conv2d and Linear in exercise 1.2's model, drawn with ``seed``."""
    model, inputs = fx_checks._recorder_case(random.Random(seed))
    return [layer for x in inputs for layer in fx_checks.recorder_layers(model, x)]


@pytest.mark.parametrize("seed", range(5))
def test_exercise_1_2_model_tells_the_slips_apart(seed: int):
    layers = _model_layers(seed)
    grouped = [layer for layer, _, _ in layers if isinstance(layer, nn.Conv2d) and layer.groups > 1]
    assert grouped and all(layer.groups != layer.stride[0] ** 2 for layer in grouped)
    assert any(isinstance(layer, nn.Conv2d) and layer.kernel_size[0] != layer.kernel_size[1] for layer, _, _ in layers)
    assert any(isinstance(layer, nn.Linear) and layer.in_features != layer.out_features for layer, _, _ in layers)
    assert any(isinstance(layer, nn.Linear) and len(inputs) == 3 for layer, inputs, _ in layers)  # a 3-D input
    for layer, inputs, outputs in layers:
        expected = fx_checks._counted_flops(layer, torch.zeros(inputs))
        slips = (fx_checks._conv_slips(layer, inputs, outputs) if isinstance(layer, nn.Conv2d)
                 else fx_checks._linear_slips(layer, outputs))
        hints_by_count: dict[int, set[str]] = {}
        for count, hint in slips:
            if count != expected:
                hints_by_count.setdefault(count, set()).add(hint.mistake)
        assert all(len(hints) == 1 for hints in hints_by_count.values()), (layer, hints_by_count)


def test_exercise_1_2_draws_a_new_model_for_each_attempt_and_the_solution_solves_each():
    shapes = set()
    for _ in range(3):
        model, inputs = fx_checks._recorder_case(case_draws())
        assert [x.shape[0] for x in inputs][0] == 1 and inputs[1].shape[0] >= 3  # a batch of 1 and one above 2
        shapes.add(tuple(tuple(shape) for _, shape, _ in fx_checks.recorder_layers(model, inputs[1])))
        assert check_shape_flop_recorder(RECORDER).solved
    assert len(shapes) > 1


def test_exercise_1_2_formula_of_the_solution_is_torchs():
    for layer, inputs, outputs in _model_layers():
        expected = fx_checks._counted_flops(layer, torch.zeros(inputs))
        if isinstance(layer, nn.Conv2d):
            kh, kw = layer.kernel_size
            assert expected == 2 * math.prod(outputs) * layer.in_channels // layer.groups * kh * kw
        else:
            assert expected == 2 * math.prod(outputs) * layer.in_features


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
        (lambda layer, out, flops: flops * getattr(layer, "groups", 1), "groups=2"),
        (lambda layer, out, flops: flops * (layer.stride[0] ** 2 if isinstance(layer, nn.Conv2d) else 1), "stride=2"),
        (lambda layer, out, flops: flops + out.numel(), "Leave the bias out"),
        (lambda layer, out, flops: flops + 2 * out.numel(), "Leave the bias out"),
        (lambda layer, out, flops: float(flops + 1), "as an int"),
        (lambda layer, out, flops: flops + 2, "kernel height * kernel width"),
        (lambda layer, out, flops: flops + 2 if isinstance(layer, nn.Linear) else flops, "a Linear does in_features"),
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


def test_exercise_1_2_refuses_a_graph_changed_while_running():
    class PrunesAsItRuns(RECORDER):
        def run(self, *args):
            result = super().run(*args)
            relu = next(n for n in self.module.graph.nodes if n.name == "relu2")
            relu.replace_all_uses_with(relu.args[0])
            self.module.graph.erase_node(relu)
            return result

    result = check_shape_flop_recorder(PrunesAsItRuns)
    assert result.status is Status.WRONG and "node(s) removed: ['relu2']" in result.message, result

    class TouchesASetting(RECORDER):
        def __init__(self, module):
            super().__init__(module)
            module.conv2.stride = (1, 1)

    result = check_shape_flop_recorder(TouchesASetting)
    assert result.status is Status.WRONG and "module 'conv2' replaced" in result.message, result


def test_exercise_1_2_gives_the_learner_a_copy_without_shapes():
    seen = []

    class Looks(RECORDER):
        def __init__(self, module):
            super().__init__(module)
            seen.append([dict(n.meta) for n in module.graph.nodes])

    assert check_shape_flop_recorder(Looks).solved
    assert not any("tensor_meta" in meta for meta in seen[0])


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


# ------------------------------------------------------------------ 1.3

FOLD = solution("01_3_fold_linear_bn.py", "fold_linear_bn")


def test_exercise_1_3():
    assert check_fold_linear_bn(FOLD).solved
    assert "to 1e-9" in check_fold_linear_bn(FOLD).message
    assert check_fold_linear_bn(stub_for("1.3")).status is Status.NOT_YET
    square = nn.Linear(4, 4).double().eval()
    bn = nn.BatchNorm1d(4).double().eval()
    with torch.no_grad():
        bn.running_var.uniform_(0.1, 0.2)
        bn.weight.uniform_(0.5, 2)
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(FOLD(square, bn)(x), bn(square(x)))  # the solution is right beyond the checker's cases


def test_exercise_1_3_cases_tell_the_slips_apart():
    shapes = [(linear.in_features, linear.out_features) for _, linear, _ in fx_checks._fold_cases()]
    assert shapes[0][0] == shapes[0][1]  # first: rows and columns mixed up still compute
    assert any(inputs != outputs for inputs, outputs in shapes)  # a non-square weight
    assert {bn.eps for _, _, bn in fx_checks._fold_cases()} - {1e-5}  # an eps that is not the default


def test_exercise_1_3_tolerance_follows_the_returned_dtype():
    assert check_fold_linear_bn(lambda linear, bn: FOLD(linear, bn).float()).solved
    half = check_fold_linear_bn(lambda linear, bn: FOLD(linear, bn).half())
    assert half.status is Status.WRONG and "torch.float16" in half.message, half

    def forgets_eps_in_float32(linear, bn):
        linear, bn = linear.float(), bn.float()  # converts the given modules in place, and is named
        return FOLD(linear, bn)

    result = check_fold_linear_bn(forgets_eps_in_float32)
    assert result.status is Status.WRONG and "changed the Linear and the BatchNorm it was given" in result.message


def _folded(linear: nn.Linear, scale: torch.Tensor, bias: torch.Tensor) -> nn.Linear:
    layer = nn.Linear(linear.in_features, linear.out_features, dtype=linear.weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(linear.weight * scale)
        layer.bias.copy_(bias)
    return layer


def _no_eps_in_float32(linear, bn):
    scale = (bn.weight / torch.sqrt(bn.running_var)).unsqueeze(1)
    folded = _folded(linear, scale, (linear.bias - bn.running_mean) * scale.squeeze(1) + bn.bias)
    return folded.float()


@pytest.mark.parametrize(
    ("fold", "hint"),
    [
        (_no_eps_in_float32, "miss bn.eps"),  # float32's tolerance is still far tighter than a missing eps
        (lambda linear, bn: (bn.train(), FOLD(linear, bn))[1], "bn.training: False is now True"),
        (lambda linear, bn: (bn.weight.requires_grad_(False), FOLD(linear, bn))[1], "bn.weight.requires_grad"),
        (lambda linear, bn: (setattr(bn, "momentum", None), FOLD(linear, bn))[1], "bn.momentum: 0.1 is now None"),
        (lambda linear, bn: (linear.weight.data.mul_(2), FOLD(linear, bn))[1], "changed the Linear it was given"),
        (lambda linear, bn: linear, "not the Linear you were given"),
    ],
)
def test_exercise_1_3_wrong_folds_get_their_hint(fold, hint):
    result = check_fold_linear_bn(fold)
    assert result.status is Status.WRONG and hint in result.message, result


def test_exercise_1_3_a_changed_given_batchnorm_leaves_the_reference_alone():
    zero_eps = check_fold_linear_bn(lambda linear, bn: (setattr(bn, "eps", 0.0), FOLD(linear, bn))[1])
    assert zero_eps.status is Status.WRONG and "bn.eps" in zero_eps.message
    assert check_fold_linear_bn(FOLD).solved  # the cases are built afresh: nothing carried over


# ------------------------------------------------------------------ cheats found in the issue-24 audit


def test_exercise_1_1_refuses_runs_timed_by_a_profiler_class_of_the_learners():
    from labkit.fx.runs import Profiler

    class Fake(Profiler):  # "times" three layers that never ran
        mode, device, training, inputs = "fast", torch.device("cpu"), False, ()

        def _timed_call(self):
            return 3e-4, [("conv", 1e-4), ("relu", 1e-4), ("fc", 1e-4)]

        def _describe(self, key):
            kind = {"conv": "Conv2d", "relu": "ReLU", "fc": "Linear"}[key]
            return "call_module", key, key, kind, kind

    def profile_my_model():
        profiler = Fake()
        for _ in range(3):
            profiler.run_once()
        return profiler.report()

    result = check_profile_own_model(profile_my_model)
    assert result.status is Status.WRONG and result.mistake == "1.1/report-not-profiled", result.message
    assert "profiler class of its own (Fake)" in result.message


def test_exercise_1_1_refuses_a_report_written_into_the_watch_by_hand():
    from labkit.core.timing import RunStats
    from labkit.fx import runs
    from labkit.fx.report import NodeTiming, ProfileReport

    def profile_my_model():
        stats = RunStats.from_samples([1e-4] * 3)
        rows = [NodeTiming("call_module", n, n, k, stats, 100 / 3) for n, k in (("c", "Conv2d"), ("r", "ReLU"), ("f", "Linear"))]
        fake = ProfileReport(rows, RunStats.from_samples([3e-4] * 3), "fast", 0, 3)
        runs._watch.get().reports.append(runs.WatchedReport(fake, 3, False))
        return fake

    result = check_profile_own_model(profile_my_model)
    assert result.status is Status.WRONG and "labkit really timed only 0 run(s)" in result.message


def test_exercise_1_2_a_patched_flop_counter_is_refused():
    from torch.utils.flop_counter import FlopCounterMode

    counted = FlopCounterMode.get_total_flops
    solved = solution("01_2_shape_flop_recorder.py", "ShapeFlopRecorder")

    class Recorder(solved):
        def __init__(self, module):
            FlopCounterMode.get_total_flops = lambda self: counted(self)  # the learner's own code in torch's class
            super().__init__(module)

    result = check_shape_flop_recorder(Recorder)
    assert result.status is Status.WRONG and "FlopCounterMode.get_total_flops (restored)" in result.message
    assert FlopCounterMode.get_total_flops is counted


def test_exercise_1_3_refuses_a_tensor_subclass_whose_comparisons_lie():
    def fold(linear, bn):
        folded = nn.Linear(linear.in_features, linear.out_features).double()
        folded.weight = nn.Parameter(torch.zeros_like(linear.weight).as_subclass(LyingTensor))
        folded.bias = nn.Parameter(torch.zeros(linear.out_features, dtype=torch.float64).as_subclass(LyingTensor))
        return folded

    result = check_fold_linear_bn(fold)
    assert result.status is Status.WRONG and result.mistake == "1.3/tensor-subclass", result.message


def _fold_by_torchs_weights(linear, bn):
    from torch.nn.utils.fusion import fuse_linear_bn_weights as fold_weights  # under a name of the learner's

    bias = linear.bias if linear.bias is not None else torch.zeros_like(bn.running_mean)
    weight, folded_bias = fold_weights(linear.weight, bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    folded = nn.Linear(linear.in_features, linear.out_features).double()
    folded.weight, folded.bias = weight, folded_bias
    return folded


@pytest.mark.parametrize("fold", [lambda linear, bn: torch.nn.utils.fusion.fuse_linear_bn_eval(linear, bn),
                                  _fold_by_torchs_weights], ids=["fuse_linear_bn_eval", "fuse_linear_bn_weights"])
def test_exercise_1_3_refuses_torchs_own_fold_the_checkers_reference(fold):
    result = check_fold_linear_bn(fold)
    assert result.status is Status.WRONG and result.mistake == "1.3/calls-torchs-fold", result.message
    assert "torch.nn.utils.fusion.fuse_linear_bn_" in result.message
