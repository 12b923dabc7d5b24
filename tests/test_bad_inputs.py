"""A sweep of bad inputs, the kind a learner or an instructor types by mistake (issue 10).

Why: a learner who passes ``runs=2.5`` or a 1-D tensor should read one labkit
sentence that names the argument, not a deep torch traceback, and nothing may
be left changed after the error (the global RNG, torch's mode stack, an open
forward-AD level, the model). Each library case expects a
:class:`labkit.core.errors.LabkitError` whose message names the bad argument or
value; a few expect a torch (or Python) error instead, where that error is
genuinely the clearest answer (each says why). CLI cases run ``python -m ...``
and expect exit status 2, a short message on stderr and no traceback.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import math
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.overrides import _get_current_function_mode_stack

import labkit
import labkit.memory_format as memory_format
from labkit.capstone import variants as capstone
from labkit.core import timing
from labkit.core.errors import LabkitError
from labkit.forward_ad import jacobian_cost
from labkit.forward_ad.derivatives import hvp, jvp, module_jvp, verify_jvp
from labkit.fx import crosscheck as fx_crosscheck
from labkit.fx import fusion as fx_fusion
from labkit.fx import memory_agreement as fx_memory_agreement
from labkit.fx.profile import ProfilingInterpreter, TrainModeWarning, profile_model
from labkit.memory_format.tracker import FormatTracker

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- small models and inputs
# Built under a forked RNG with a fixed seed, so building them draws nothing from the global RNG
# (the autouse fixture below checks that every case leaves the RNG as it found it).


def _built(factory: Callable[[], object]) -> Callable[[], object]:
    @functools.cache
    def build() -> object:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            return factory()

    return build


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


class Branchy(nn.Module):
    """Python control flow on a tensor value: torch.fx cannot trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return self.linear(x)
        return -self.linear(x)


class ConvTwice(nn.Module):
    """One Conv2d called twice; only the first call is followed by BatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x)) + self.conv(x)


class TupleOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.conv(x), x


def _with_stats(model: nn.Module) -> nn.Module:
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d) and module.running_mean is not None:
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return model.eval()


linear = _built(lambda: nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval())
branchy = _built(lambda: Branchy().eval())
dropout_train = _built(lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)))
bn_train = _built(lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)))
conv_bn = _built(lambda: _with_stats(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())))
conv_bn_train = _built(lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()))
conv_twice = _built(lambda: _with_stats(ConvTwice()))
tuple_out = _built(lambda: TupleOut().eval())
conv = _built(lambda: nn.Conv2d(3, 4, 3))
tied = _built(lambda: _tied_model())


def _tied_model() -> nn.Module:
    first, second = nn.Linear(3, 3), nn.Linear(3, 3)
    second.weight = first.weight
    return nn.Sequential(first, second)


X = _randn(2, 4)
W33 = _randn(3, 3)  # float32, captured by a closure
IMG = _randn(1, 3, 8, 8)
V3 = _randn(3)


@functools.cache
def report() -> labkit.ProfileReport:
    return profile_model(linear(), X, warmup=0, runs=2)


@functools.cache
def variants() -> list[capstone.Variant]:
    return capstone.build_variants(conv_bn(), IMG)


def square(x: torch.Tensor) -> torch.Tensor:
    return x * x


def total_square(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sum()


def noop() -> None:
    return None


# --------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """``call()`` must raise ``expect`` with every string of ``names`` in its message (case-insensitive)."""

    id: str
    call: Callable[[], object]
    names: Sequence[str]
    expect: type[BaseException] = LabkitError
    timeout: float = 60.0  # seconds before the case counts as hung
    torch_ok: bool = False  # set by torch_error()


class CaseHung(Exception):
    """A case ran past its timeout (raised from SIGALRM, so a hang fails instead of stalling the suite)."""


def torch_error(id: str, call: Callable[[], object], names: Sequence[str], expect: type[BaseException]) -> Case:
    """expected-torch: torch's (or Python's) own error, naming ``names``, is the clearest answer here.

    A labkit error is accepted too (it is never worse); then only its type is checked.
    """
    return Case(id, call, names, expect, torch_ok=True)


def _open_level_then_jvp() -> None:
    with fwAD.dual_level():
        jvp(square, V3, V3)


def _tracker_exit_out_of_order() -> None:
    outer, inner = FormatTracker(), FormatTracker()
    outer.__enter__()
    inner.__enter__()
    try:
        outer.__exit__(None, None, None)
    finally:  # leave torch's mode stack as it was, whatever happened above
        while _get_current_function_mode_stack():
            if inner.active:
                inner.__exit__(None, None, None)
            elif outer.active:
                outer.__exit__(None, None, None)
            else:
                break


def _tracker_entered_twice() -> None:
    tracker = FormatTracker()
    with tracker:
        tracker.__enter__()


def _interpreter_summary_before_run() -> None:
    ProfilingInterpreter(linear()).summary()


def _widget(name: str, *args: object, **kwargs: object) -> Callable[[], object]:
    def build() -> object:
        pytest.importorskip("ipywidgets")
        import labkit.widgets

        return getattr(labkit.widgets, name)(*args, **kwargs)

    return build


def _variant_bars(comparison: object) -> Callable[[], object]:
    def draw() -> object:
        pytest.importorskip("matplotlib")
        from labkit.capstone.widgets import variant_bars

        return variant_bars(comparison)

    return draw


def _plot(name: str, *args: object) -> Callable[[], object]:
    def draw() -> object:
        pytest.importorskip("matplotlib")
        from labkit.memory_format import widgets

        return getattr(widgets, name)(*args)

    return draw


NAN, INF = math.nan, math.inf

PROFILE = [
    Case("profile_model runs=2.5", lambda: profile_model(linear(), X, runs=2.5), ["runs", "2.5"]),
    Case("profile_model runs='5'", lambda: profile_model(linear(), X, runs="5"), ["runs", "'5'"]),
    Case("profile_model runs=0", lambda: profile_model(linear(), X, runs=0), ["runs"]),
    Case("profile_model runs=-3", lambda: profile_model(linear(), X, runs=-3), ["runs", "-3"]),
    Case("profile_model runs=True", lambda: profile_model(linear(), X, runs=True), ["runs", "True"]),
    Case("profile_model runs=nan", lambda: profile_model(linear(), X, runs=NAN), ["runs", "nan"]),
    Case("profile_model runs=None", lambda: profile_model(linear(), X, runs=None), ["runs", "None"]),
    Case("profile_model warmup=-1", lambda: profile_model(linear(), X, warmup=-1), ["warmup", "-1"]),
    Case("profile_model warmup=1.5", lambda: profile_model(linear(), X, warmup=1.5), ["warmup", "1.5"]),
    Case("profile_model mode='slow'", lambda: profile_model(linear(), X, mode="slow"), ["mode", "slow"]),
    Case("profile_model mode=None", lambda: profile_model(linear(), X, mode=None), ["mode", "None"]),
    Case("profile_model model=None", lambda: profile_model(None, X), ["NoneType"]),
    Case("profile_model model='resnet18'", lambda: profile_model("resnet18", X), ["str"]),
    Case("profile_model untraceable model, fallback=False", lambda: profile_model(branchy(), X, fallback=False),
         ["Branchy.forward", "x.sum() > 0"]),
    Case("profile_model input the model cannot take", lambda: profile_model(linear(), torch.zeros(2, 5)),
         ["itself fails on a 2x5 float32 tensor", "fix the input"]),
    Case("profile_model leaf_modules typo", lambda: profile_model(linear(), X, leaf_modules=["nope"]), ["nope"]),
    Case("profile_model input on meta device",
         lambda: profile_model(linear(), torch.empty(2, 4, device="meta")), ["meta", "cpu"]),
    # expected-torch: torch's shape message names both shapes; labkit cannot say more.
    torch_error("profile_model wrong input width", lambda: profile_model(linear(), _randn(2, 5)), ["2x5", "4x3"], RuntimeError),
    # expected-torch: torch says the dtypes differ (Long vs Float), which is the fix.
    torch_error("profile_model int64 input", lambda: profile_model(linear(), X.long()), ["dtype"], RuntimeError),
    # expected-torch: Python names the missing argument of forward().
    torch_error("profile_model no input", lambda: profile_model(linear()), ["missing", "input"], TypeError),
    # expected-torch: torch says the layer wants a Tensor, not a list.
    torch_error("profile_model input is a list", lambda: profile_model(linear(), [X]), ["Tensor", "list"], TypeError),
    Case("ProfileReport.top(2.5)", lambda: report().top(2.5), ["k", "2.5"]),
    Case("ProfileReport.top(0)", lambda: report().top(0), ["k", "0"]),
    Case("ProfileReport.top('3')", lambda: report().top("3"), ["k", "'3'"]),
    Case("ProfileReport.top(None)", lambda: report().top(None), ["k", "None"]),
    Case("ProfileReport.top(key='fastest')", lambda: report().top(3, key="fastest"), ["fastest"]),
    Case("ProfileReport.sorted(key='speed')", lambda: report().sorted("speed"), ["speed"]),
    Case("ProfilingInterpreter(None)", lambda: ProfilingInterpreter(None), ["NoneType"]),
    Case("ProfilingInterpreter(untraceable)", lambda: ProfilingInterpreter(branchy()), ["x.sum() > 0"]),
    Case("ProfilingInterpreter.summary() before run", _interpreter_summary_before_run, ["run"]),
    # expected-torch: torch lists the device types it knows.
    torch_error("ProfilingInterpreter device='quantum'",
                lambda: ProfilingInterpreter(linear(), device="quantum"), ["quantum"], RuntimeError),
]

FORWARD_AD = [
    Case("jvp(f, 1.0, 1.0)", lambda: jvp(square, 1.0, 1.0), ["primals", "float"]),
    Case("jvp tangents=1.0", lambda: jvp(square, V3, 1.0), ["tangents", "float"]),
    Case("jvp primals=None", lambda: jvp(square, None, None), ["primals", "NoneType"]),
    Case("jvp tuple with a number", lambda: jvp(square, (V3, 2.0), (V3, V3)), ["Primal 1", "float"]),
    Case("jvp fewer tangents", lambda: jvp(square, (V3,), ()), ["1 primal", "0 tangent"]),
    Case("jvp tangent shape", lambda: jvp(square, V3, _randn(4)), ["shape", "(4,)", "(3,)"]),
    Case("jvp tangent dtype", lambda: jvp(square, V3, V3.double()), ["dtype", "float64"]),
    Case("jvp int primal", lambda: jvp(square, torch.arange(3), torch.arange(3)), ["int64", "float"]),
    Case("jvp fn returns a float", lambda: jvp(lambda x: 1.0, V3, V3), ["float"]),
    Case("jvp fn returns None", lambda: jvp(lambda x: None, V3, V3), ["NoneType"]),
    # expected-torch: Python's "'str' object is not callable" says it (a LabkitTypeError would pass too).
    torch_error("jvp fn is a string", lambda: jvp("square", V3, V3), ["str", "callable"], TypeError),
    Case("jvp inside an open dual_level", _open_level_then_jvp, ["already open"]),
    Case("module_jvp tangents list", lambda: module_jvp(linear(), X, [torch.zeros(3, 4)]), ["tangents", "dict"]),
    Case("module_jvp tangents empty", lambda: module_jvp(linear(), X, {}), ["tangents", "empty"]),
    Case("module_jvp unknown name", lambda: module_jvp(linear(), X, {"weight": torch.zeros(3, 4)}), ["weight", "0.weight"]),
    Case("module_jvp tangent shape",
         lambda: module_jvp(linear(), X, {"0.weight": torch.zeros(4, 3)}), ["shape", "(4, 3)", "(3, 4)"]),
    Case("module_jvp tangent dtype",
         lambda: module_jvp(linear(), X, {"0.bias": torch.zeros(3, dtype=torch.float64)}), ["dtype", "float64"]),
    Case("module_jvp tangent not a tensor", lambda: module_jvp(linear(), X, {"0.bias": 1.0}), ["float"]),
    Case("module_jvp inputs=1.0", lambda: module_jvp(linear(), 1.0, {"0.bias": torch.zeros(3)}), ["inputs", "float"]),
    Case("module_jvp model is a function", lambda: module_jvp(square, X, {"w": V3}), ["nn.Module", "function"]),
    Case("module_jvp method='magic'",
         lambda: module_jvp(linear(), X, {"0.bias": torch.zeros(3)}, method="magic"), ["method", "magic"]),
    Case(
        "module_jvp both names of a tied weight",
        lambda: module_jvp(tied(), _randn(2, 3), {"0.weight": torch.zeros(3, 3), "1.weight": torch.zeros(3, 3)}),
        ["0.weight", "1.weight", "tied"],
    ),
    # expected-torch: the forward pass itself fails; torch names both shapes. The case also
    # checks (see test_module_jvp_restores_parameters_after_error) that the swap is undone.
    torch_error("module_jvp wrong input width",
                lambda: module_jvp(linear(), _randn(2, 5), {"0.bias": torch.zeros(3)}), ["2x5"], RuntimeError),
    Case("verify_jvp eps=0", lambda: verify_jvp(square, V3, V3, eps=0), ["eps", "0"]),
    Case("verify_jvp eps=-1e-6", lambda: verify_jvp(square, V3, V3, eps=-1e-6), ["eps"]),
    Case("verify_jvp eps=nan", lambda: verify_jvp(square, V3, V3, eps=NAN), ["eps", "nan"]),
    Case("verify_jvp eps='1e-6'", lambda: verify_jvp(square, V3, V3, eps="1e-6"), ["eps", "str"]),
    Case("verify_jvp exact_tolerance=-1", lambda: verify_jvp(square, V3, V3, exact_tolerance=-1), ["exact_tolerance"]),
    Case("verify_jvp fd_tolerance=inf", lambda: verify_jvp(square, V3, V3, fd_tolerance=INF), ["fd_tolerance", "inf"]),
    Case("verify_jvp float32 closure", lambda: verify_jvp(lambda x: W33 @ x, V3, V3), ["float64", "closure"]),
    Case("verify_jvp fn casts to float32", lambda: verify_jvp(lambda x: (x * 2).float(), V3, V3), ["float32"]),
    Case("verify_jvp train-mode Dropout", lambda: verify_jvp(dropout_train(), X, X), ["train", "eval()"]),
    Case("verify_jvp primals=1.0", lambda: verify_jvp(square, 1.0, 1.0), ["primals", "float"]),
    Case("hvp f returns a vector", lambda: hvp(square, V3, V3), ["scalar"]),
    Case("hvp x=1.0", lambda: hvp(total_square, 1.0, 1.0), ["x", "float"]),
    Case("hvp v shape", lambda: hvp(total_square, V3, _randn(4)), ["shape", "(4,)"]),
    Case("hvp two tensors", lambda: hvp(total_square, (V3, V3), (V3, V3)), ["one tensor"]),
    Case("hvp int x", lambda: hvp(total_square, torch.arange(3), torch.arange(3)), ["int64"]),
    Case("jacobian_problem(True, 4)", lambda: jacobian_cost.jacobian_problem(True, 4), ["in_features", "True"]),
    Case("jacobian_problem(4, 0)", lambda: jacobian_cost.jacobian_problem(4, 0), ["out_features", "0"]),
    Case("jacobian_problem(4, 2.0)", lambda: jacobian_cost.jacobian_problem(4, 2.0), ["out_features", "2.0"]),
    Case("jacobian_problem hidden=-1", lambda: jacobian_cost.jacobian_problem(4, 4, hidden=-1), ["hidden", "-1"]),
    Case("jacobian_problem batch=0", lambda: jacobian_cost.jacobian_problem(4, 4, batch=0), ["batch", "0"]),
    Case("jacobian_cost rounds=0", lambda: jacobian_cost.jacobian_cost(4, 4, rounds=0), ["rounds", "0"]),
    Case("jacobian_cost budget=0", lambda: jacobian_cost.jacobian_cost(4, 4, budget=0), ["budget", "0"]),
    Case("jacobian_cost budget=nan", lambda: jacobian_cost.jacobian_cost(4, 4, budget=NAN), ["budget", "nan"], timeout=5),
    Case("default_out_dims span=3", lambda: jacobian_cost.default_out_dims(8, span=3), ["span", "3"]),
    Case("jacobian_sweep out_dims=[]", lambda: jacobian_cost.jacobian_sweep(8, []), ["out_dims", "empty"]),
    Case("jacobian_sweep out_dims=[0]", lambda: jacobian_cost.jacobian_sweep(8, [0]), ["out_features", "0"]),
    Case("jvp_overhead fn not a module", lambda: jacobian_cost.jvp_overhead(square, X), ["nn.Module", "function"]),
    Case("jvp_overhead int x", lambda: jacobian_cost.jvp_overhead(linear(), X.long()), ["x", "floating"]),
    Case("jvp_overhead num_threads=0", lambda: jacobian_cost.jvp_overhead(linear(), X, num_threads=0), ["num_threads", "0"]),
    Case("jvp_overhead rounds=0", lambda: jacobian_cost.jvp_overhead(linear(), X, rounds=0), ["rounds", "0"]),
    Case("relu_mlp sizes=[4]", lambda: jacobian_cost.relu_mlp([4]), ["sizes"]),
    # expected-torch: torch names the negative size and the weight shape it could not create.
    torch_error("relu_mlp sizes=[4, -1]", lambda: jacobian_cost.relu_mlp([4, -1]), ["negative dimension -1"], RuntimeError),
]

MEMORY_FORMAT = [
    Case("describe(None)", lambda: memory_format.describe(None), ["NoneType"]),
    Case("describe(list)", lambda: memory_format.describe([[1, 2]]), ["list"]),
    Case("convert 3-D to channels_last", lambda: memory_format.convert(_randn(3, 4, 4), "channels_last"), ["rank", "(3, 4, 4)"]),
    Case("convert 5-D to channels_last",
         lambda: memory_format.convert(_randn(1, 2, 2, 2, 2), "channels_last"), ["channels_last_3d"]),
    Case("convert 4-D to channels_last_3d", lambda: memory_format.convert(IMG, "channels_last_3d"), ["rank", "channels_last"]),
    Case("convert format 'channels_first'", lambda: memory_format.convert(IMG, "channels_first"), ["channels_first"]),
    Case("convert format 'NHWC'", lambda: memory_format.convert(IMG, "NHWC"), ["NHWC", "channels_last"]),
    Case("convert format 5", lambda: memory_format.convert(IMG, 5), ["int"]),
    Case("convert format None", lambda: memory_format.convert(IMG, None), ["NoneType"]),
    Case("convert torch.preserve_format", lambda: memory_format.convert(IMG, torch.preserve_format), ["preserve_format"]),
    Case("convert method='reshape'", lambda: memory_format.convert(IMG, "channels_last", method="reshape"), ["reshape", "to"]),
    Case("convert a list", lambda: memory_format.convert([1, 2], "channels_last"), ["list"]),
    Case("explain_conversion 2-D", lambda: memory_format.explain_conversion(_randn(3, 4), "channels_last"), ["rank", "(3, 4)"]),
    Case("explain_conversion unknown format", lambda: memory_format.explain_conversion(IMG, "last"), ["last"]),
    Case("memory_offsets('x')", lambda: memory_format.memory_offsets("x"), ["str"]),
    Case("permute_to_format 3-D", lambda: memory_format.permute_to_format(_randn(3, 4, 4), "channels_last"), ["rank"]),
    Case("FormatTracker.lost() before use", lambda: FormatTracker().lost(), ["with FormatTracker()"]),
    Case("FormatTracker exited out of order", _tracker_exit_out_of_order, ["inner"]),
    Case("FormatTracker entered twice", _tracker_entered_twice, ["already active"]),
    Case("benchmark_formats model is a function", lambda: labkit.benchmark_formats(square, IMG), ["Module", "function"]),
    Case("benchmark_formats 3-D input", lambda: labkit.benchmark_formats(conv(), _randn(3, 8, 8)), ["example_input", "4-D"]),
    Case("benchmark_formats wrong channels",
         lambda: labkit.benchmark_formats(conv(), _randn(1, 5, 8, 8)), ["3 input channels", "5"]),
    Case("benchmark_formats rounds=0", lambda: labkit.benchmark_formats(conv(), IMG, rounds=0), ["rounds"]),
    Case("benchmark_formats warmup=0", lambda: labkit.benchmark_formats(conv(), IMG, warmup=0), ["warmup"]),
    Case("benchmark_formats min_run_time=0", lambda: labkit.benchmark_formats(conv(), IMG, min_run_time=0), ["min_run_time"]),
    Case("benchmark_formats rounds=2.5",
         lambda: labkit.benchmark_formats(conv(), IMG, rounds=2.5, min_run_time=0.01), ["rounds", "2.5"]),
    Case("benchmark_formats precisions=['fp8']",
         lambda: labkit.benchmark_formats(conv(), IMG, precisions=["fp8"]), ["fp8", "fp32"]),
    Case("benchmark_formats precisions='fp32'",
         lambda: labkit.benchmark_formats(conv(), IMG, precisions="fp32"), ["precisions", "'fp32'"]),
    # expected-torch: torch.utils.benchmark says set_num_threads needs a positive integer.
    torch_error(
        "benchmark_formats num_threads=-1",
        lambda: labkit.benchmark_formats(conv(), IMG, num_threads=-1, min_run_time=0.01),
        ["num_threads", "positive"],
        RuntimeError,
    ),
    Case("convert_model_per_layer('model')", lambda: labkit.convert_model_per_layer("model"), ["str"]),
    Case("conversion_report(None)", lambda: memory_format.conversion_report(None), ["NoneType"]),
    Case("layout_figure 1-D", _plot("layout_figure", memory_format.describe(_randn(6))), ["layout_figure", "(6,)"]),
    Case("layout_figure empty", _plot("layout_figure", memory_format.describe(torch.empty(1, 0, 2, 2))),
         ["no elements", "(1, 0, 2, 2)"]),
    Case("layout_figure huge", _plot("layout_figure", memory_format.describe(torch.zeros(1, 64, 32, 32))), ["512", "65536"]),
    Case("memory_figure a list", _plot("memory_figure", [1, 2, 3]), ["list"]),
    Case("layout_figure a raw tensor", _plot("layout_figure", IMG), ["describe"]),
    Case("variant_bars a list", _variant_bars([]), ["comparison", "list"]),
    # expected-torch: matplotlib's own message says the figure size must be positive.
    torch_error("new_figure width=-1", _plot("new_figure", -1, 3), ["figure size", "positive"], ValueError),
]

FUSION_CAPSTONE = [
    Case("fuse_conv_bn_teaching train mode", lambda: fx_fusion.fuse_conv_bn_teaching(conv_bn_train()), ["eval()"]),
    Case("fuse_conv_bn_teaching a string", lambda: fx_fusion.fuse_conv_bn_teaching("resnet"), ["str"]),
    Case("fuse_conv_bn_teaching untraceable", lambda: fx_fusion.fuse_conv_bn_teaching(branchy()), ["x.sum() > 0"]),
    Case("fuse_conv_bn_library train mode", lambda: fx_fusion.fuse_conv_bn_library(conv_bn_train()), ["eval()"]),
    Case("fuse_conv_bn_library conv called twice", lambda: fx_fusion.fuse_conv_bn_library(conv_twice()), ["'conv'", "twice"]),
    Case("fold_bn_into_conv features mismatch",
         lambda: fx_fusion.fold_bn_into_conv(conv(), nn.BatchNorm2d(5).eval()), ["5", "4"]),
    Case(
        "fold_bn_into_conv no running stats",
        lambda: fx_fusion.fold_bn_into_conv(conv(), nn.BatchNorm2d(4, track_running_stats=False).eval()),
        ["track_running_stats=False"],
    ),
    Case("fold_bn_into_conv a Linear",
         lambda: fx_fusion.fold_bn_into_conv(linear()[0], nn.BatchNorm2d(3).eval()), ["Conv2d", "Linear"]),
    Case("verify_fusion no inputs", lambda: fx_fusion.verify_fusion(conv_bn(), conv_bn()), ["inputs"]),
    Case("verify_fusion rtol=-1", lambda: fx_fusion.verify_fusion(conv_bn(), conv_bn(), IMG, rtol=-1), ["rtol", "-1"]),
    Case("verify_fusion atol=nan", lambda: fx_fusion.verify_fusion(conv_bn(), conv_bn(), IMG, atol=NAN), ["atol", "nan"]),
    Case("verify_fusion rtol='1e-4'", lambda: fx_fusion.verify_fusion(conv_bn(), conv_bn(), IMG, rtol="1e-4"), ["rtol", "str"]),
    Case("verify_fusion empty batch", lambda: fx_fusion.verify_fusion(conv_bn(), conv_bn(), _randn(0, 3, 8, 8)), ["no elements"]),
    Case("verify_fusion tuple vs tensor output", lambda: fx_fusion.verify_fusion(tuple_out(), conv_bn(), IMG),
         ["tuple", "Tensor"]),
    # expected-torch: the conv itself says it expected 3 channels and got 5.
    torch_error("verify_fusion wrong channels",
                lambda: fx_fusion.verify_fusion(conv_bn(), conv_bn(), _randn(1, 5, 8, 8)), ["3", "5"], RuntimeError),
    Case("count_nodes(None)", lambda: fx_fusion.count_nodes(None), ["NoneType"]),
    Case("fusion_timings train mode", lambda: fx_fusion.fusion_timings(conv_bn_train(), IMG), ["eval()"]),
    Case("fusion_timings rounds=0", lambda: fx_fusion.fusion_timings(conv_bn(), IMG, rounds=0), ["rounds", "0"]),
    Case("crosscheck runs=0", lambda: fx_crosscheck.compare_with_torch_profiler(linear(), X, runs=0), ["runs", "0"]),
    Case("crosscheck runs=1.5", lambda: fx_crosscheck.compare_with_torch_profiler(linear(), X, runs=1.5), ["runs", "1.5"]),
    Case("crosscheck warmup=-1", lambda: fx_crosscheck.compare_with_torch_profiler(linear(), X, warmup=-1), ["warmup", "-1"]),
    Case("crosscheck mode='fastest'",
         lambda: fx_crosscheck.compare_with_torch_profiler(linear(), X, mode="fastest"), ["mode", "fastest"]),
    Case("crosscheck untraceable",
         lambda: fx_crosscheck.compare_with_torch_profiler(branchy(), X, fallback=False), ["x.sum() > 0"]),
    Case("memory agreement untraceable",
         lambda: fx_memory_agreement.compare_memory_with_allocator(branchy(), X), ["x.sum() > 0"]),
    Case("memory_table k=0", lambda: profile_model(linear(), X, warmup=0, runs=1).memory_table(0), ["k", "0"]),
    Case("memory_table hooked",
         lambda: profile_model(linear(), X, warmup=0, runs=1, mode="modules").memory_table(), ["modules"]),
    Case("CrossCheck([]).max_difference", lambda: fx_crosscheck.CrossCheck([]).max_difference, ["no op types"]),
    Case("CrossCheck.difference unknown",
         lambda: fx_crosscheck.CrossCheck([("Linear", 50.0, 60.0)]).difference("Conv2d"), ["Conv2d", "Linear"]),
    Case("build_variants train mode", lambda: capstone.build_variants(conv_bn_train(), IMG), ["eval()"]),
    Case("build_variants no input", lambda: capstone.build_variants(conv_bn()), ["input"]),
    Case("build_variants input is a list", lambda: capstone.build_variants(conv_bn(), [IMG]), ["inputs[0]", "list"]),
    Case("build_variants empty batch", lambda: capstone.build_variants(conv_bn(), _randn(0, 3, 8, 8)), ["empty", "(0, 3, 8, 8)"]),
    Case("build_variants untraceable", lambda: capstone.build_variants(branchy(), X), ["x.sum() > 0"]),
    Case("build_variants a string", lambda: capstone.build_variants("resnet18", IMG), ["str"]),
    Case("compare_variants []", lambda: capstone.compare_variants([]), ["variant"]),
    Case("compare_variants rounds=0", lambda: capstone.compare_variants(variants(), rounds=0), ["rounds", "0"]),
    Case("compare_variants warmup=-1", lambda: capstone.compare_variants(variants(), warmup=-1), ["warmup", "-1"]),
    Case("compare_variants rtol=-1", lambda: capstone.compare_variants(variants(), rounds=1, warmup=0, rtol=-1), ["rtol", "-1"]),
    Case("challenge_input batch=2.5", lambda: capstone.challenge_input(2.5), ["batch", "2.5"]),
    # expected-torch: torch names the negative dimension and the whole shape.
    torch_error("challenge_input batch=-1", lambda: capstone.challenge_input(-1), ["negative dimension -1"], RuntimeError),
    Case("profile_variants runs=0", lambda: capstone.profile_variants(variants(), runs=0), ["runs", "0"]),
    Case("op_type_table({})", lambda: capstone.op_type_table({}), ["reports"]),
]

TIMING = [
    Case("measure runs=0", lambda: timing.measure(noop, runs=0), ["runs", "0"]),
    Case("measure runs=2.5", lambda: timing.measure(noop, runs=2.5), ["runs", "2.5"]),
    Case("measure runs='5'", lambda: timing.measure(noop, runs="5"), ["runs", "'5'"]),
    Case("measure warmup=-1", lambda: timing.measure(noop, warmup=-1), ["warmup", "-1"]),
    # expected-torch: Python's "'str' object is not callable" says it.
    torch_error("measure fn is a string", lambda: timing.measure("noop()"), ["str", "callable"], TypeError),
    # expected-torch: torch lists the device types it knows.
    torch_error("measure device='quantum'", lambda: timing.measure(noop, device="quantum"), ["quantum"], RuntimeError),
    Case("compare {}", lambda: timing.compare({}), ["candidate"]),
    Case("compare a list", lambda: timing.compare([noop]), ["candidates", "dict"]),
    Case("compare rounds=0", lambda: timing.compare({"a": noop}, rounds=0), ["rounds", "0"]),
    Case("compare number=0", lambda: timing.compare({"a": noop}, number=0), ["number", "0"]),
    Case("compare number=2.5", lambda: timing.compare({"a": noop}, number=2.5), ["number", "2.5"]),
    # expected-torch: Python's "'str' object is not callable" says it.
    torch_error("compare a string candidate", lambda: timing.compare({"a": "noop"}), ["str", "callable"], TypeError),
    Case("compare_autorange rounds=0", lambda: timing.compare_autorange({"a": noop}, rounds=0), ["rounds", "0"]),
    Case(
        "compare_autorange min_run_time=nan",
        lambda: timing.compare_autorange({"a": noop}, min_run_time=NAN),
        ["min_run_time", "nan"],
        timeout=5,
    ),
    Case("RunStats.from_samples([])", lambda: timing.RunStats.from_samples([]), ["sample"]),
    Case("RunStats.from_samples nan", lambda: timing.RunStats.from_samples([1.0, NAN, 2.0]), ["nan", "index 1"]),
    Case("RunStats.from_samples inf", lambda: timing.RunStats.from_samples([INF]), ["inf"]),
    Case("RunStats.from_samples None", lambda: timing.RunStats.from_samples(None), ["samples", "None"]),
    # expected-torch: Python's float() names the value it could not read.
    torch_error("RunStats.from_samples strings", lambda: timing.RunStats.from_samples(["1.0", "fast"]), ["fast"], ValueError),
    Case("RunStats.from_samples negative", lambda: timing.RunStats.from_samples([0.1, -0.2]), ["samples", "-0.2"]),
]

WIDGETS = [
    Case("StrideExplorer(shape=5)", _widget("StrideExplorer", shape=5), ["shape", "int"]),
    Case("StrideExplorer 3-D shape", _widget("StrideExplorer", shape=(2, 3, 2)), ["shape", "(2, 3, 2)"]),
    Case("StrideExplorer size 9", _widget("StrideExplorer", shape=(2, 3, 2, 9)), ["shape", "9"]),
    Case("StrideExplorer size 0", _widget("StrideExplorer", shape=(2, 0, 2, 2)), ["shape", "0"]),
    Case("StrideExplorer bool size", _widget("StrideExplorer", shape=(True, 3, 2, 2)), ["shape", "True"]),
    Case("StrideExplorer format 'nchw'", _widget("StrideExplorer", memory_format="nchw"), ["nchw"]),
    Case("StrideExplorer method=5", _widget("StrideExplorer", method=5), ["method", "5"]),
    Case("LiveProfile runs=-5", _widget("LiveProfile", linear(), X, runs=-5), ["runs", "-5"]),
    Case("LiveProfile runs=10**9", _widget("LiveProfile", linear(), X, runs=10**9), ["runs", "1000000000"]),
    Case("LiveProfile runs=2.5", _widget("LiveProfile", linear(), X, runs=2.5), ["runs", "2.5"]),
    Case("LiveProfile top_k=0", _widget("LiveProfile", linear(), X, top_k=0), ["top_k", "0"]),
    Case("LiveProfile warmup=-1", _widget("LiveProfile", linear(), X, warmup=-1), ["warmup", "-1"]),
    Case("LiveProfile mode='slow'", _widget("LiveProfile", linear(), X, mode="slow"), ["mode", "slow"]),
    Case("LiveProfile(None)", _widget("LiveProfile", None, X), ["NoneType"]),
    Case("JacobianScaling span=4096", _widget("JacobianScaling", span=4096, run=False), ["span", "4096"]),
    Case("JacobianScaling span=0", _widget("JacobianScaling", span=0, run=False), ["span", "0"]),
    Case("JacobianScaling in_features=33", _widget("JacobianScaling", in_features=33, run=False), ["in_features", "33"]),
    Case("JacobianScaling batch=7", _widget("JacobianScaling", batch=7, run=False), ["batch", "7"]),
    Case("JacobianScaling run='yes'", _widget("JacobianScaling", run="yes"), ["run", "yes"]),
    Case("SliderPlot frequency=1000", _widget("SliderPlot", frequency=1000), ["frequency", "1000"]),
    Case("SliderPlot frequency=nan", _widget("SliderPlot", frequency=NAN), ["frequency", "nan"]),
    Case("SliderPlot frequency=0.75", _widget("SliderPlot", frequency=0.75), ["frequency", "0.75"]),
    Case("SliderPlot frequency='1'", _widget("SliderPlot", frequency="1"), ["frequency", "str"]),
]

LIBRARY_CASES = PROFILE + FORWARD_AD + MEMORY_FORMAT + FUSION_CAPSTONE + TIMING + WIDGETS

#: Cases still failing after the issue-10 fixes: open defects, reported to the lead (ids -> what happens).
OPEN_DEFECTS: dict[str, str] = {}


def _params(cases: Sequence[Case]) -> list[object]:
    return [
        pytest.param(
            case, id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=OPEN_DEFECTS[case.id])] if case.id in OPEN_DEFECTS else [],
        )
        for case in cases
    ]


def _global_state() -> dict[str, object]:
    return {
        "rng": torch.get_rng_state(),
        "function modes": list(_get_current_function_mode_stack()),
        "forward-AD level": fwAD._current_level,
        "grad enabled": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "threads": torch.get_num_threads(),
        "default dtype": torch.get_default_dtype(),
    }


def _assert_same_state(before: dict[str, object], after: dict[str, object]) -> None:
    for key, value in before.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, after[key]), f"{key} changed"
        else:
            assert value == after[key], f"{key} changed: {value} -> {after[key]}"


def check_case(case: Case) -> None:
    """Run one case; the error type, the names in its message, and that torch's state is unchanged."""
    before = _global_state()

    def hung(*_: object) -> None:
        raise CaseHung(f"{case.id} still ran after {case.timeout} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, case.timeout)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # train-mode and skipped-fusion warnings are not what is checked here
            with pytest.raises((case.expect, LabkitError) if case.torch_ok else case.expect) as caught:
                case.call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        torch.set_num_threads(before["threads"])  # a hung benchmark is stopped with its thread count still set
    message = str(caught.value).lower()
    labkit_instead = case.torch_ok and isinstance(caught.value, LabkitError)
    missing = [] if labkit_instead else [name for name in case.names if name.lower() not in message]
    assert not missing, f"{type(caught.value).__name__} does not name {missing}: {caught.value}"
    _assert_same_state(before, _global_state())


@pytest.mark.parametrize("case", _params(LIBRARY_CASES))
def test_bad_input_gets_a_clear_error(case: Case) -> None:
    check_case(case)


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in LIBRARY_CASES + CLI_CASES]
    assert len(ids) == len(set(ids))
    assert set(OPEN_DEFECTS) <= set(ids)


# --------------------------------------------------------------------------- nothing changed, no silent wrong answer


def _parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.state_dict(keep_vars=True).items()}


def test_module_jvp_restores_parameters_after_error() -> None:
    model = linear()
    before, identities = _parameters(model), [id(p) for p in model.parameters()]
    with pytest.raises(RuntimeError):
        module_jvp(model, _randn(2, 5), {"0.weight": torch.ones(3, 4)})
    assert [id(p) for p in model.parameters()] == identities
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())
    after = _parameters(model)
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_leaves_train_mode_model_and_rng_unchanged(method: str) -> None:
    model = bn_train()
    before, rng = _parameters(model), torch.get_rng_state()
    module_jvp(model, X, {"0.bias": torch.ones(4)}, method=method)
    after = _parameters(model)
    assert all(torch.equal(before[k], after[k]) for k in before), "buffers (running stats) changed"
    assert torch.equal(rng, torch.get_rng_state())


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_tied_weights_agree_with_torch_func(method: str) -> None:
    model, x, tangent = tied(), _randn(2, 3), torch.ones(3, 3)
    _, ours = module_jvp(model, x, {"0.weight": tangent}, method=method)
    params = dict(model.named_parameters())
    tangents = {name: tangent if name == "0.weight" else torch.zeros_like(p) for name, p in params.items()}
    _, expected = torch.func.jvp(lambda p: torch.func.functional_call(model, p, (x,)), (params,), (tangents,))
    torch.testing.assert_close(ours, expected)


def test_profile_model_train_mode_warns_and_keeps_rng_and_buffers() -> None:
    model = bn_train()
    before, rng = _parameters(model), torch.get_rng_state()
    with pytest.warns(TrainModeWarning):
        profile_model(dropout_train(), X, warmup=0, runs=1)
    with pytest.warns(TrainModeWarning):
        profile_model(model, X, warmup=0, runs=1)
    after = _parameters(model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(rng, torch.get_rng_state())


def test_format_tracker_leaves_mode_stack_when_block_raises() -> None:
    modes = list(_get_current_function_mode_stack())
    with pytest.raises(ZeroDivisionError), FormatTracker():
        _ = 1 / 0
    assert list(_get_current_function_mode_stack()) == modes


def test_fusion_of_conv_called_twice_keeps_the_output() -> None:
    model = conv_twice()
    with pytest.warns(fx_fusion.FusionSkippedWarning):
        fused = fx_fusion.fuse_conv_bn_teaching(model)
    with torch.no_grad():
        torch.testing.assert_close(fused(IMG), model(IMG))


def test_fusion_without_running_stats_keeps_the_output() -> None:
    model = _built(lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False)).eval())()
    with pytest.warns(fx_fusion.FusionSkippedWarning, match="track_running_stats"):
        fused = fx_fusion.fuse_conv_bn_teaching(model)
    with torch.no_grad():
        torch.testing.assert_close(fused(IMG), model(IMG))


def test_report_writers_refuse_bad_paths_and_leave_no_temp_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    for path in (tmp_path / "missing" / "out.csv", tmp_path, fifo):
        for write in (report().to_csv, report().to_json):
            with pytest.raises(LabkitError, match=str(path.name)):
                write(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.csv"]


# --------------------------------------------------------------------------- CLIs


@dataclass(frozen=True)
class CliCase:
    """``python -m <module> <args>`` must exit 2 with a short message naming ``names`` in its first line, no traceback.

    Most cases call the module's ``main(argv)`` in this process (a fresh interpreter
    per case costs seconds of torch import); ``subprocess=True`` ones run the real
    ``python -m`` command, so exit status and stderr are checked end to end.
    """

    id: str
    module: str
    args: Sequence[str]  # "{tmp}" is replaced by a scratch folder holding the files of _scratch()
    names: Sequence[str]
    subprocess: bool = False


CLI_CASES = [
    CliCase("profile --top 0", "labkit", ["profile", "resnet18", "--top", "0"], ["top", "0"], subprocess=True),
    CliCase("profile unknown model", "labkit", ["profile", "resnet19"], ["resnet19"]),
    CliCase("profile --runs 2.5", "labkit", ["profile", "resnet18", "--runs", "2.5"], ["--runs", "2.5"]),
    CliCase("profile --runs 0", "labkit", ["profile", "resnet18", "--runs", "0"], ["runs", "0"]),
    CliCase("profile --batch -1", "labkit", ["profile", "resnet18", "--batch", "-1"], ["batch", "-1"]),
    CliCase("profile --device quantum", "labkit", ["profile", "resnet18", "--device", "quantum"], ["quantum"]),
    CliCase("profile input too small",
            "labkit", ["profile", "squeezenet1_1", "--size", "8", "--runs", "1", "--warmup", "0"], ["size", "8"]),
    CliCase("profile --csv into a missing folder",
            "labkit", ["profile", "resnet18", "--csv", "{tmp}/missing/out.csv"], ["missing"]),
    CliCase("profile --json is a folder", "labkit", ["profile", "resnet18", "--json", "{tmp}/empty"], ["empty", "folder"]),
    CliCase("student-copy OUTDIR is a file", "labkit", ["student-copy", "{tmp}/afile"], ["afile", "file"]),
    CliCase("student-copy --notebooks missing", "labkit", ["student-copy", "{tmp}/out1", "--notebooks", "{tmp}/nope"], ["nope"]),
    CliCase("student-copy --notebooks bad json",
            "labkit", ["student-copy", "{tmp}/out2", "--notebooks", "{tmp}/badnb"], ["00_bad.ipynb"]),
    CliCase("docs OUTDIR is a file", "labkit", ["docs", "{tmp}/afile"], ["afile", "file"], subprocess=True),
    CliCase("docs --notebooks missing", "labkit", ["docs", "{tmp}/out3", "--notebooks", "{tmp}/nope"], ["nope"]),
    CliCase("docs --notebooks empty folder", "labkit", ["docs", "{tmp}/out4", "--notebooks", "{tmp}/empty"], ["empty"]),
    CliCase("nbrun missing notebook", "labkit", ["notebooks", "{tmp}/missing.ipynb"], ["missing.ipynb"], subprocess=True),
    CliCase("nbrun a folder", "labkit", ["notebooks", "{tmp}/empty"], ["empty"]),
    CliCase("nbrun not JSON", "labkit", ["notebooks", "{tmp}/badnb/00_bad.ipynb"], ["00_bad.ipynb"]),
    CliCase("docs --notebooks bad json", "labkit", ["docs", "{tmp}/out5", "--notebooks", "{tmp}/badnb"], ["00_bad.ipynb"]),
    CliCase("nbrun a FIFO", "labkit", ["notebooks", "{tmp}/pipe.ipynb"], ["pipe.ipynb"]),
    CliCase("nbrun --timeout abc", "labkit", ["notebooks", "--timeout", "abc", "{tmp}/missing.ipynb"], ["timeout", "abc"]),
]

CLI_TIMEOUT_S = 60


@dataclass(frozen=True)
class CliResult:
    returncode: int | None  # None: it did not finish within CLI_TIMEOUT_S
    stderr: str


def _scratch(folder: Path) -> Path:
    (folder / "afile").write_text("mine")
    (folder / "empty").mkdir()
    (folder / "badnb").mkdir()
    (folder / "badnb" / "00_bad.ipynb").write_text("this is not JSON")
    os.mkfifo(folder / "pipe.ipynb")
    return folder


def _argv(case: CliCase, folder: Path) -> list[str]:
    return [arg.replace("{tmp}", str(folder)) for arg in case.args]


def _run_subprocess(case: CliCase, folder: Path) -> CliResult:
    env = {**os.environ, "LABKIT_DEVICE": "cpu"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", case.module, *_argv(case, folder)],
            capture_output=True, text=True, timeout=CLI_TIMEOUT_S, cwd=REPO, env=env,
        )
    except subprocess.TimeoutExpired as exc:
        return CliResult(None, str(exc.stderr or ""))
    return CliResult(done.returncode, done.stderr)


def _run_in_process(case: CliCase, folder: Path, monkeypatch: pytest.MonkeyPatch) -> CliResult:
    """What ``python -m`` would do: ``sys.exit(main(argv))``, and a traceback for an escaping exception."""
    monkeypatch.setenv("LABKIT_DEVICE", "cpu")
    monkeypatch.chdir(REPO)
    main = importlib.import_module("labkit.__main__").main
    stderr = io.StringIO()

    def hung(*_: object) -> None:
        raise CaseHung(f"{case.id} still ran after {CLI_TIMEOUT_S} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, CLI_TIMEOUT_S)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            returncode = main(_argv(case, folder))
    except SystemExit as exc:
        returncode = exc.code if isinstance(exc.code, int) else 1
    except CaseHung:
        returncode = None
    except Exception:  # noqa: BLE001 - the interpreter would print it and exit 1
        stderr.write(traceback.format_exc())
        returncode = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return CliResult(returncode, stderr.getvalue())


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _scratch(tmp_path_factory.mktemp("cli"))


@pytest.fixture(scope="module")
def subprocess_results(cli_folder: Path) -> dict[str, CliResult]:
    """The end-to-end cases, all at once: each pays for a fresh interpreter importing torch."""
    cases = [case for case in CLI_CASES if case.subprocess]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = {case.id: pool.submit(_run_subprocess, case, cli_folder) for case in cases}
        return {name: future.result() for name, future in futures.items()}


def check_cli(case: CliCase, result: CliResult) -> None:
    assert result.returncode is not None, f"hung for {CLI_TIMEOUT_S} s"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, f"exit {result.returncode}; stderr: {result.stderr}"
    # argparse prints its usage lines first. nbrun adds "Nothing was executed or written." after the problem.
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
    assert 1 <= len(lines) <= 2, f"expected a one-line message, got: {result.stderr}"
    missing = [name for name in case.names if name.lower() not in lines[0].lower()]
    assert not missing, f"message does not name {missing}: {lines[0]}"


@pytest.mark.parametrize("case", _params(CLI_CASES))
def test_cli_bad_input_exits_2_with_one_line(
    case: CliCase, cli_folder: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if case.subprocess:
        result = request.getfixturevalue("subprocess_results")[case.id]
    else:
        result = _run_in_process(case, cli_folder, monkeypatch)
    check_cli(case, result)
    assert (cli_folder / "afile").read_text() == "mine"
    assert not (cli_folder / "missing").exists()
