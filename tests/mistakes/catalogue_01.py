"""Lab 01's mistake catalogue: wrong answers to exercises 1.1, 1.2 and 1.3, written as learners write them.

The cheats the issue names are here too: a 1-run report relabelled as 3 runs (1.1), a recorder that
changes the graph it was given so that its wrong count matches (1.2), a fold that sets ``bn.eps = 0``
on the BatchNorm it was given (1.3). Each must be refused, with and without ``python -O``.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import torch
import torch.fx
from torch import nn

import labkit
from labkit.core.checks import Status, case_draws, fixed_draws
from labkit.core.timing import RunStats
from labkit.fx import checks as fx_checks
from labkit.fx.checks import check_fold_linear_bn, check_profile_own_model, check_shape_flop_recorder
from labkit.fx.report import NodeTiming, ProfileReport
from labkit.fx.runs import TrainModeWarning
from tests.mistakes import Mistake, solution

# ------------------------------------------------------------------ 1.1: profile your own model


def small_cnn() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)
    )


def returns_the_model():
    model = small_cnn().eval()
    labkit.profile_model(model, torch.randn(2, 3, 16, 16), runs=3)
    return model


def one_run():
    return labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=1)


def an_mlp():
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU(), nn.Linear(32, 10)).eval()
    return labkit.profile_model(model, torch.randn(2, 3, 16, 16), runs=3)


def wrong_channels():
    return labkit.profile_model(small_cnn().eval(), torch.randn(2, 1, 16, 16), runs=3)


def train_mode():
    with warnings.catch_warnings():  # the TrainModeWarning the learner sees; the checker's verdict is what is tested
        warnings.simplefilter("ignore", TrainModeWarning)
        return labkit.profile_model(small_cnn(), torch.randn(2, 3, 16, 16), runs=3)


def returns_the_text():
    return str(labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=3))


def prints_the_report():
    print(labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=3))


def two_layers():
    return labkit.profile_model(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()).eval(), torch.randn(2, 3, 16, 16), runs=3)


def by_type():
    return labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=3).by_op_type()


def top_three():
    return labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=3).top(3)


def relabelled():
    report = labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=1)
    seconds = report.total.mean
    return dataclasses.replace(report, total=RunStats.from_samples([seconds, seconds, seconds]))


def runs_assigned():
    report = labkit.profile_model(small_cnn().eval(), torch.randn(2, 3, 16, 16), runs=1)
    report.runs = 3  # type: ignore[misc]
    return report


def built_by_hand():
    stats = RunStats.from_samples([1e-4, 1e-4, 1e-4])
    rows = [NodeTiming("call_module", name, name, kind, stats, 100 / 3) for name, kind in
            (("conv", "Conv2d"), ("relu", "ReLU"), ("fc", "Linear"))]
    return ProfileReport(rows, RunStats.from_samples([3e-4, 3e-4, 3e-4]), "fast", 0, 3)


# ------------------------------------------------------------------ 1.2: shapes and FLOPs


class Recorder(torch.fx.Interpreter):
    """A learner's recorder with the right shapes; each mistake below overrides the formula it gets wrong."""

    def __init__(self, module):
        super().__init__(module)
        self.shapes = {}
        self.flops = {}

    def run_node(self, n):
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.shapes[n.name] = tuple(result.shape)
        if n.op == "call_module":
            layer = self.fetch_attr(n.target)
            x = self.fetch_args_kwargs_from_env(n)[0][0]
            if isinstance(layer, nn.Conv2d):
                self.flops[n.name] = self.conv_flops(layer, x, result)
            elif isinstance(layer, nn.Linear):
                self.flops[n.name] = self.linear_flops(layer, x, result)
        return result

    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return 2 * out.numel() * (layer.in_channels // layer.groups) * kh * kw

    def linear_flops(self, layer, x, out):
        return 2 * out.numel() * layer.in_features


class NoSuper(torch.fx.Interpreter):
    def __init__(self, module):
        self.shapes = {}
        self.flops = {}

    def run_node(self, n):
        result = super().run_node(n)
        self.shapes[n.name] = tuple(result.shape)
        return result


class NoReturn(Recorder):
    def run_node(self, n):
        super().run_node(n)


class KeyedByNode(torch.fx.Interpreter):
    def __init__(self, module):
        super().__init__(module)
        self.shapes = {}
        self.flops = {}

    def run_node(self, n):
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.shapes[n] = tuple(result.shape)
        return result


class ShapeAsTensor(Recorder):
    def run_node(self, n):
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.shapes[n.name] = torch.tensor(result.shape)
        return result


class OneFlopPerMac(Recorder):
    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return out.numel() * (layer.in_channels // layer.groups) * kh * kw

    def linear_flops(self, layer, x, out):
        return out.numel() * layer.in_features


class IgnoresGroups(Recorder):
    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return 2 * out.numel() * layer.in_channels * kh * kw


class ForgetsStride(Recorder):
    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        batch, _, height, width = x.shape
        return 2 * batch * layer.out_channels * height * width * (layer.in_channels // layer.groups) * kh * kw


class PerInputValue(Recorder):
    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return 2 * x.numel() * (layer.in_channels // layer.groups) * kh * kw


class CountsBias(Recorder):
    def conv_flops(self, layer, x, out):
        return super().conv_flops(layer, x, out) + out.numel()

    def linear_flops(self, layer, x, out):
        return super().linear_flops(layer, x, out) + out.numel()


class SquareKernel(Recorder):
    def conv_flops(self, layer, x, out):
        k = layer.kernel_size[0]
        return 2 * out.numel() * (layer.in_channels // layer.groups) * k * k


class ForgetsKernel(Recorder):
    def conv_flops(self, layer, x, out):
        return 2 * out.numel() * (layer.in_channels // layer.groups)


class OutChannels(Recorder):
    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return 2 * out.numel() * (layer.out_channels // layer.groups) * kh * kw


class LinearOutFeatures(Recorder):
    def linear_flops(self, layer, x, out):
        return 2 * out.numel() * layer.out_features


class LinearPerBatchEntry(Recorder):
    """Right for a 2-D input only: a Linear fed (batch, channels, positions) applies to every row, not every sample."""

    def linear_flops(self, layer, x, out):
        return 2 * x.shape[0] * layer.in_features * layer.out_features


class ForgetsTheBatch(Recorder):
    """One sample's count: right at a batch of 1 (once accepted whenever the checker drew one), wrong above it."""

    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return 2 * out[0].numel() * (layer.in_channels // layer.groups) * kh * kw

    def linear_flops(self, layer, x, out):
        return 2 * out[0].numel() * layer.in_features


class UsesTorchsCounter(Recorder):
    """torch's FlopCounterMode around each layer: the checker's reference, not the learner's count."""

    def count(self, layer, x):
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            layer(x)
        return counter.get_total_flops()

    def conv_flops(self, layer, x, out):
        return self.count(layer, x)

    def linear_flops(self, layer, x, out):
        return self.count(layer, x)


class Memorised(torch.fx.Interpreter):
    """Cheat: run() does nothing, and the tables are what the checker's case gave on an earlier attempt."""

    def __init__(self, module):
        super().__init__(module)
        with fixed_draws(1):  # some other attempt's case: what a learner copies from one run of the checker
            model, (x, *_others) = fx_checks._recorder_case(case_draws())
        graph_module = torch.fx.symbolic_trace(model)
        recorder = solution("01_2_shape_flop_recorder.py").ShapeFlopRecorder(graph_module)
        with torch.no_grad():
            recorder.run(x)
        self.shapes, self.flops = dict(recorder.shapes), dict(recorder.flops)

    def run(self, *args, **kwargs):
        return None


class ConvOnly(torch.fx.Interpreter):
    def __init__(self, module):
        super().__init__(module)
        self.shapes = {}
        self.flops = {}

    def run_node(self, n):
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.shapes[n.name] = tuple(result.shape)
        if n.op == "call_module" and isinstance(self.fetch_attr(n.target), nn.Conv2d):
            layer = self.fetch_attr(n.target)
            kh, kw = layer.kernel_size
            self.flops[n.name] = 2 * result.numel() * (layer.in_channels // layer.groups) * kh * kw
        return result


class CountsBatchNorm(Recorder):
    def run_node(self, n):
        result = super().run_node(n)
        if n.op == "call_module" and isinstance(self.fetch_attr(n.target), nn.BatchNorm2d):
            self.flops[n.name] = 2 * result.numel()  # a scale and a shift per value
        return result


class FloatFlops(Recorder):
    def conv_flops(self, layer, x, out):
        kh, kw = layer.kernel_size
        return 2 * out.numel() * layer.in_channels / layer.groups * kh * kw


def an_instance():
    return Recorder(torch.fx.symbolic_trace(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())))


class ReplacesGroupedConv(IgnoresGroups):
    """Cheat: swaps the grouped convolution for a plain one, so that ignoring groups matches the counter."""

    def __init__(self, module):
        for name, layer in list(module.named_children()):
            if isinstance(layer, nn.Conv2d) and layer.groups > 1:
                plain = nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding)
                setattr(module, name, plain.eval())
        super().__init__(module)


class ErasesLinear(ConvOnly):
    """Cheat: counts Conv2d only, and erases the Linear from the graph so that none is expected."""

    def __init__(self, module):
        graph = module.graph
        for node in list(graph.nodes):
            if node.op == "call_module" and isinstance(module.get_submodule(node.target), nn.Linear):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
        module.recompile()
        super().__init__(module)


# ------------------------------------------------------------------ 1.3: fold a BatchNorm into a Linear


def new_linear(linear: nn.Linear, weight: torch.Tensor, bias: torch.Tensor, dtype: Any = None) -> nn.Linear:
    """How learners build the folded layer: a new Linear, then copy the numbers in."""
    folded = nn.Linear(linear.in_features, linear.out_features, dtype=dtype or linear.weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(weight)
        folded.bias.copy_(bias)
    return folded


def own_bias(linear):
    return linear.bias if linear.bias is not None else 0.0


def scales_columns(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s, (own_bias(linear) - bn.running_mean) * s + bn.bias)


def forgets_eps(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var)
    return new_linear(linear, linear.weight * s[:, None], (own_bias(linear) - bn.running_mean) * s + bn.bias)


def hard_coded_eps(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + 1e-5)
    return new_linear(linear, linear.weight * s[:, None], (own_bias(linear) - bn.running_mean) * s + bn.bias)


def divides_by_variance(linear, bn):
    s = bn.weight / (bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], (own_bias(linear) - bn.running_mean) * s + bn.bias)


def forgets_gamma(linear, bn):
    s = 1 / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], (own_bias(linear) - bn.running_mean) * s + bn.bias)


def forgets_mean(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], own_bias(linear) * s + bn.bias)


def forgets_own_bias(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], -bn.running_mean * s + bn.bias)


def forgets_beta(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], (own_bias(linear) - bn.running_mean) * s)


def shift_not_scaled(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], own_bias(linear) - bn.running_mean + bn.bias)


def bias_not_checked(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], (linear.bias - bn.running_mean) * s + bn.bias)


def no_bias_when_none(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    folded = nn.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None, dtype=torch.float64)
    with torch.no_grad():
        folded.weight.copy_(linear.weight * s[:, None])
        if linear.bias is not None:
            folded.bias.copy_((linear.bias - bn.running_mean) * s + bn.bias)
    return folded


def sequential(linear, bn):
    return nn.Sequential(linear, bn)


def in_place(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    with torch.no_grad():
        linear.weight.mul_(s[:, None])
        linear.bias.copy_((linear.bias - bn.running_mean) * s + bn.bias)
    return linear


def swapped_features(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    folded = nn.Linear(linear.out_features, linear.in_features, dtype=linear.weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(linear.weight * s[:, None])
        folded.bias.copy_((own_bias(linear) - bn.running_mean) * s + bn.bias)
    return folded


def zeroes_eps(linear, bn):
    bn.eps = 0
    return forgets_eps(linear, bn)


def eps_into_running_var(linear, bn):
    with torch.no_grad():
        bn.running_var += bn.eps
    return forgets_eps(linear, bn)


def float32_layer(linear, bn):
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return new_linear(linear, linear.weight * s[:, None], (own_bias(linear) - bn.running_mean) * s + bn.bias, torch.float32)


_RAISED_IN = r"raised in \S+, line \d+: `[^`]*`"

MISTAKES: list[Mistake] = [
    # 1.1
    Mistake("1.1", "returns the model, not the report", lambda: check_profile_own_model(returns_the_model),
            ("returned the model", "not its profile"), mistake="returns-model"),
    Mistake("1.1", "`runs=1`", lambda: check_profile_own_model(one_run), ("1 timed run(s)", "runs=3"), mistake="too-few-runs"),
    Mistake("1.1", "an MLP, no convolution", lambda: check_profile_own_model(an_mlp), ("No Conv2d", "add an nn.Conv2d"),
            mistake="no-conv2d"),
    Mistake("1.1", "an input with the wrong number of channels", lambda: check_profile_own_model(wrong_channels),
            ("ModelRunError", "to have 3 channels"), measured=(_RAISED_IN,), mistake="raised-modelrunerror"),
    Mistake("1.1", "forgets `model.eval()`", lambda: check_profile_own_model(train_mode), ("train mode", "model.eval()"),
            mistake="forgot-eval"),
    Mistake("1.1", "returns `str(report)`", lambda: check_profile_own_model(returns_the_text),
            ("returned a str", "not its text"), mistake="returns-text"),
    Mistake("1.1", "prints the report, returns nothing", lambda: check_profile_own_model(prints_the_report),
            ("returned None", "`return`"), mistake="returns-none"),
    Mistake("1.1", "two layers only", lambda: check_profile_own_model(two_layers), ("2 layer(s)", "at least 3"),
            mistake="too-few-layers"),
    Mistake("1.1", "returns `report.by_op_type()`", lambda: check_profile_own_model(by_type), ("by_op_type()", "whole report"),
            mistake="returns-summary"),
    Mistake("1.1", "returns `report.top(3)`", lambda: check_profile_own_model(top_three), ("report.top", "whole report"),
            mistake="returns-top-rows"),
    Mistake("1.1", "cheat: a 1-run report relabelled as 3 runs (`dataclasses.replace`)",
            lambda: check_profile_own_model(relabelled), ("says it has 3 timed runs", "really timed only 1"),
            mistake="relabelled-runs"),
    Mistake("1.1", "cheat: `report.runs = 3`", lambda: check_profile_own_model(runs_assigned),
            ("FrozenInstanceError", "cannot assign to field 'runs'", "cannot be changed"), mistake="assigns-to-report"),
    Mistake("1.1", "cheat: a `ProfileReport` built by hand", lambda: check_profile_own_model(built_by_hand),
            ("timed no runs", "built by hand"), mistake="report-not-profiled"),
    # 1.2
    Mistake("1.2", "`__init__` without `super().__init__(module)`", lambda: check_shape_flop_recorder(NoSuper),
            ("never calls super().__init__",), mistake="raised-no-super"),
    Mistake("1.2", "`run_node` records but does not return the result", lambda: check_shape_flop_recorder(NoReturn),
            ("NoneType", "does each method you wrote `return` its result")),
    Mistake("1.2", "keyed by the `Node`, not `n.name`", lambda: check_shape_flop_recorder(KeyedByNode),
            ("keyed by the Node objects", "n.name"), mistake="keyed-by-node"),
    Mistake("1.2", "records the shape as a tensor", lambda: check_shape_flop_recorder(ShapeAsTensor),
            ("you recorded tensor(", "a tuple of ints"), mistake="shape-not-a-tuple"),
    Mistake("1.2", "one FLOP per multiply-add", lambda: check_shape_flop_recorder(OneFlopPerMac),
            ("Node 'conv1'", "2 FLOPs per multiply-add"), mistake="one-flop-per-mac"),
    Mistake("1.2", "forgets the batch (`out[0].numel()`)", lambda: check_shape_flop_recorder(ForgetsTheBatch),
            ("Node 'conv1'", "a batch of", "the batch dimension included"), mistake="forgets-batch"),
    Mistake("1.2", "counts with torch's `FlopCounterMode`", lambda: check_shape_flop_recorder(UsesTorchsCounter),
            ("torch.utils.flop_counter", "torch's answer, not yours"), mistake="calls-torchs-counter"),
    Mistake("1.2", "ignores `groups`", lambda: check_shape_flop_recorder(IgnoresGroups),
            ("Node 'conv2'", "groups=2", "input channels, not all "), mistake="groups"),
    Mistake("1.2", "forgets the stride (the input's height and width)", lambda: check_shape_flop_recorder(ForgetsStride),
            ("Node 'conv2'", "stride=2", "smaller than its", "count the output values"), mistake="forgets-stride"),
    Mistake("1.2", "counts per input value (`x.numel()`)", lambda: check_shape_flop_recorder(PerInputValue),
            ("Node 'conv1'", "per value of the node's *input*"), mistake="per-input-value"),
    Mistake("1.2", "counts the bias too", lambda: check_shape_flop_recorder(CountsBias), ("Leave the bias out",),
            mistake="counts-bias"),
    Mistake("1.2", "assumes a square kernel (`kernel_size[0]` twice)", lambda: check_shape_flop_recorder(SquareKernel),
            ("Node 'conv1'", "3x5, not square"), mistake="square-kernel"),
    Mistake("1.2", "leaves out the kernel size", lambda: check_shape_flop_recorder(ForgetsKernel),
            ("Node 'conv1'", "3x5 kernel window"), mistake="forgets-kernel"),
    Mistake("1.2", "`out_channels` instead of `in_channels`", lambda: check_shape_flop_recorder(OutChannels),
            ("Node 'conv1'", "not out_channels"), mistake="out-channels"),
    Mistake("1.2", "a Linear counted with `out_features`", lambda: check_shape_flop_recorder(LinearOutFeatures),
            ("Node 'mix'", "sums over its in_features (", "not out_features ("), mistake="out-features"),
    Mistake("1.2", "a Linear counted per batch entry (right for a 2-D input only)",
            lambda: check_shape_flop_recorder(LinearPerBatchEntry),
            ("Node 'mix'", "gets a 3-D input", "count per output value"), mistake="linear-2d-only"),
    Mistake("1.2", "cheat: shapes and FLOPs remembered from an earlier run of the checker, `run()` does nothing",
            lambda: check_shape_flop_recorder(Memorised), ("Node 'input_1': you recorded",), mistake="wrong-shape"),
    Mistake("1.2", "counts Conv2d only", lambda: check_shape_flop_recorder(ConvOnly),
            ("No FLOPs recorded for node 'mix', a Linear",), mistake="missing-flops"),
    Mistake("1.2", "counts BatchNorm too", lambda: check_shape_flop_recorder(CountsBatchNorm),
            ("Node 'bn' (BatchNorm2d)", "counts none for BatchNorm2d"), mistake="counts-other-layers"),
    Mistake("1.2", "FLOPs as a float (`/ groups`)", lambda: check_shape_flop_recorder(FloatFlops),
            ("but a float", "`//` keeps an int"), mistake="float-flops"),
    Mistake("1.2", "passes an instance to the checker", lambda: check_shape_flop_recorder(an_instance()),
            ("Pass the class itself",), mistake="passes-an-instance"),
    Mistake("1.2", "cheat: replaces the grouped convolution in `__init__`",
            lambda: check_shape_flop_recorder(ReplacesGroupedConv),
            ("changed the graph module it was given", "module 'conv2' replaced"), mistake="changes-graph"),
    Mistake("1.2", "cheat: erases the Linear from the graph in `__init__`", lambda: check_shape_flop_recorder(ErasesLinear),
            ("changed the graph module it was given", "node(s) removed: ['mix', 'fc']"), mistake="changes-graph"),
    # 1.3
    Mistake("1.3", "scales the columns (`linear.weight * scale`)", lambda: check_fold_linear_bn(scales_columns),
            ("square Linear", "*row*", "not the columns"), mistake="rows-and-columns"),
    Mistake("1.3", "forgets `eps`", lambda: check_fold_linear_bn(forgets_eps), ("miss bn.eps",), mistake="forgets-eps"),
    Mistake("1.3", "`eps = 1e-5` written in, not `bn.eps`", lambda: check_fold_linear_bn(hard_coded_eps),
            ("eps = 1e-5", "eps=0.001", "read it from bn.eps"), mistake="hard-coded-eps"),
    Mistake("1.3", "divides by the variance", lambda: check_fold_linear_bn(divides_by_variance), ("standard deviation",),
            mistake="divides-by-variance"),
    Mistake("1.3", "leaves out gamma (`bn.weight`)", lambda: check_fold_linear_bn(forgets_gamma), ("miss bn.weight (gamma)",),
            mistake="forgets-gamma"),
    Mistake("1.3", "leaves out the running mean", lambda: check_fold_linear_bn(forgets_mean), ("misses the running mean",),
            mistake="forgets-mean"),
    Mistake("1.3", "leaves out the Linear's own bias", lambda: check_fold_linear_bn(forgets_own_bias),
            ("own bias passes through BatchNorm",), mistake="forgets-own-bias"),
    Mistake("1.3", "leaves out beta (`bn.bias`)", lambda: check_fold_linear_bn(forgets_beta), ("misses bn.bias (beta)",),
            mistake="forgets-beta"),
    Mistake("1.3", "does not scale the shift", lambda: check_fold_linear_bn(shift_not_scaled), ("scaled by s too",),
            mistake="unscaled-shift"),
    Mistake("1.3", "uses `linear.bias` without checking for None", lambda: check_fold_linear_bn(bias_not_checked),
            ("On a Linear without bias", "bias=False has `.bias` None"), mistake="raised-none"),
    Mistake("1.3", "no bias on the folded layer when the Linear has none", lambda: check_fold_linear_bn(no_bias_when_none),
            ("a Linear without bias", "BatchNorm's shift becomes its bias"), mistake="no-folded-bias"),
    Mistake("1.3", "returns `nn.Sequential(linear, bn)`", lambda: check_fold_linear_bn(sequential), ("returned Sequential",),
            mistake="not-a-new-linear"),
    Mistake("1.3", "scales `linear.weight` in place and returns `linear`", lambda: check_fold_linear_bn(in_place),
            ("changed the Linear it was given", "linear.weight"), mistake="changes-its-inputs"),
    Mistake("1.3", "builds `nn.Linear(out_features, in_features)`", lambda: check_fold_linear_bn(swapped_features),
            ("(out_features, in_features) = (4, 6)", "maps in_features to out_features"), mistake="rows-and-columns"),
    Mistake("1.3", "cheat: `bn.eps = 0`, then a fold without eps", lambda: check_fold_linear_bn(zeroes_eps),
            ("changed the BatchNorm it was given", "bn.eps: 0.001 is now 0"), mistake="changes-its-inputs"),
    Mistake("1.3", "cheat: adds eps into `bn.running_var`, then a fold without eps", lambda: check_fold_linear_bn(
        eps_into_running_var), ("changed the BatchNorm it was given", "bn.running_var"), mistake="changes-its-inputs"),
    Mistake("1.3", "a right fold built as a float32 layer (`nn.Linear`'s default)", lambda: check_fold_linear_bn(float32_layer),
            ("float32 precision", "your layer is float32"), status=Status.SOLVED),
]
