"""Checkers for the exercises of notebook 01 (FX profiling).

Each checker takes the learner's function or class, runs it on a small model
of its own, and compares with an independent reference from torch:
``torch.fx``'s ``ShapeProp`` for shapes, ``torch.utils.flop_counter`` for
FLOPs, ``torch.nn.utils.fusion.fuse_linear_bn_eval`` for the folded layer.
They never raise, time nothing, and their messages hold no timings, so a
notebook's stored checker output is reproducible.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp
from torch.nn.utils.fusion import fuse_linear_bn_eval
from torch.utils.flop_counter import FlopCounterMode

from labkit.core.checks import (
    CheckFailed,
    CheckResult,
    call_learner,
    expect,
    int_tuple,
    learner_case,
    run_check,
)
from labkit.core.notebook import seeded
from labkit.fx.profile import ProfileReport


def _reference_input() -> torch.Tensor:
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))


def check_profile_own_model(profile_my_model: Callable[[], Any]) -> CheckResult:
    """Exercise 1.1: ``profile_my_model()`` returns a ProfileReport of a small CNN, 3+ runs."""

    def check() -> str:
        report = call_learner(profile_my_model)
        expect(
            isinstance(report, ProfileReport),
            f"profile_my_model() returned {type(report).__name__}; return what labkit.profile_model(...) gives you.",
        )
        expect(report.runs >= 3, f"The report has {report.runs} timed run(s); pass runs=3 or more.")
        modules = [r for r in report.rows if r.op == "call_module"]
        expect(len(modules) >= 3, f"Your model has {len(modules)} layer(s) in the graph; build one with at least 3.")
        types = report.by_op_type().pct
        expect("Conv2d" in types, f"No Conv2d in your model (found {sorted(types)}); add an nn.Conv2d.")
        return f"{len(report.rows)} nodes of {len(types)} op types profiled over {report.runs} runs."

    return run_check("1.1", check, profile_my_model)


def _recorder_model() -> nn.Module:
    """Exercise 1.2's model: a grouped, strided convolution and a Linear, so a FLOP formula must use
    ``groups`` and the *output* size, and a BatchNorm that must not be counted."""
    with seeded(0):
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=4),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 5),
        ).eval()


def _counted_flops(layer: nn.Module, inputs: torch.Tensor) -> int:
    """What ``torch.utils.flop_counter`` counts for one call of ``layer``: the independent reference."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        layer(inputs)
    return int(counter.get_total_flops())


def _flop_hint(layer: nn.Module, got: int, expected: int, outputs: int) -> str:
    """Why a FLOP count is off, for the usual slips; empty when none of them explains it."""
    if got * 2 == expected:
        return " Count 2 FLOPs per multiply-add (a multiplication and an addition), as torch.utils.flop_counter does."
    if isinstance(layer, nn.Conv2d) and layer.groups > 1 and got == expected * layer.groups:
        return (f" This convolution has groups={layer.groups}: each output value sums over in_channels / groups "
                "input channels, not all of them.")
    if got == expected + outputs:
        return " Leave the bias out: torch.utils.flop_counter counts the multiply-adds only."
    return " Per output value, a Conv2d does (in_channels / groups) * kernel height * kernel width multiply-adds."


def _recorded_nodes(graph_module: torch.fx.GraphModule, x: torch.Tensor) -> dict[str, tuple[torch.fx.Node, nn.Module | None]]:
    """Every node ShapeProp gives a tensor shape, with the module it calls (None when it calls none)."""
    ShapeProp(graph_module).propagate(x)
    return {
        n.name: (n, graph_module.get_submodule(str(n.target)) if n.op == "call_module" else None)
        for n in graph_module.graph.nodes
        if "tensor_meta" in n.meta
    }


def _check_shapes(shapes: object, nodes: dict[str, tuple[torch.fx.Node, nn.Module | None]]) -> None:
    if not isinstance(shapes, dict):
        raise CheckFailed("After run(), self.shapes must be a dict {node name: shape tuple}.")
    missing = sorted(set(nodes) - set(shapes))
    expect(not missing, f"No shape recorded for node(s) {missing}; record every node whose output is a tensor.")
    for name, (node, _) in nodes.items():
        got, shape = shapes[name], tuple(node.meta["tensor_meta"].shape)
        expect(
            int_tuple(got) == shape,
            f"Node {name!r}: you recorded {got!r}, the output shape is {shape}"
            + ("." if int_tuple(got) is not None else "; record a tuple of ints, e.g. tuple(result.shape)."),
        )


def _check_flops(flops: object, nodes: dict[str, tuple[torch.fx.Node, nn.Module | None]]) -> int:
    """Compare each Conv2d/Linear node's FLOPs with torch's counter; return how many were compared."""
    if not isinstance(flops, dict):
        raise CheckFailed("After run(), self.flops must be a dict {node name: FLOPs} for the Conv2d and Linear nodes.")
    compared = 0
    for name, (node, layer) in nodes.items():
        got = flops.get(name, 0)
        if not isinstance(layer, (nn.Conv2d, nn.Linear)):
            expect(not got, f"Node {name!r} ({type(layer).__name__ if layer else node.target}) has {got!r} FLOPs in "
                            f"self.flops; count only nn.Conv2d and nn.Linear nodes, as torch.utils.flop_counter does.")
            continue
        expect(name in flops, f"No FLOPs recorded for node {name!r}, a {type(layer).__name__}; record every nn.Conv2d "
                              f"and nn.Linear node: self.fetch_attr(n.target) is the module a call_module node calls.")
        expect(isinstance(got, numbers.Integral) and not isinstance(got, bool),
               f"Node {name!r}: record the FLOPs as an int, got {type(got).__name__} {got!r}.")
        source = node.args[0]
        inputs = torch.zeros(source.meta["tensor_meta"].shape)  # type: ignore[union-attr]
        expected = _counted_flops(layer, inputs)
        outputs = math.prod(node.meta["tensor_meta"].shape)
        expect(int(got) == expected, f"Node {name!r} ({layer}): you counted {got} FLOPs, torch.utils.flop_counter counts "
                                     f"{expected}.{_flop_hint(layer, int(got), expected, outputs)}")
        compared += 1
    return compared


def check_shape_flop_recorder(recorder_class: type) -> CheckResult:
    """Exercise 1.2: ``recorder_class(graph_module).run(x)`` fills ``.shapes`` like ShapeProp and ``.flops``
    like ``torch.utils.flop_counter``."""

    def check() -> str:
        x = _reference_input()
        expect(
            isinstance(recorder_class, type),
            "Pass the class itself (a subclass of torch.fx.Interpreter), e.g. check_shape_flop_recorder(ShapeFlopRecorder).",
        )
        graph_module = torch.fx.symbolic_trace(_recorder_model())
        recorder = call_learner(recorder_class, graph_module)
        expect(
            callable(getattr(recorder, "run", None)),
            f"{getattr(recorder_class, '__name__', recorder_class)!s} has no run() method: subclass torch.fx.Interpreter.",
        )
        with torch.no_grad():
            call_learner(recorder.run, x)
        nodes = _recorded_nodes(graph_module, x)
        _check_shapes(getattr(recorder, "shapes", None), nodes)
        compared = _check_flops(getattr(recorder, "flops", None), nodes)
        return (f"all {len(nodes)} tensor shapes match torch.fx's ShapeProp, and the FLOPs of all {compared} "
                "Conv2d and Linear nodes match torch.utils.flop_counter.")

    return run_check("1.2", check, recorder_class, "run_node")


FOLD_CASES = (("a Linear with bias", True, 1e-5), ("a Linear without bias (linear.bias is None)", False, 1e-2))


def _fold_cases() -> list[tuple[str, nn.Linear, nn.BatchNorm1d]]:
    """(what it is, Linear, eval BatchNorm1d) in float64, with running statistics and affine parameters
    far from their defaults, so a fold that skips any of them gives a visibly different layer."""
    cases = []
    with seeded(0), torch.no_grad():
        for label, bias, eps in FOLD_CASES:
            linear = nn.Linear(6, 4, bias=bias).double().eval()
            bn = nn.BatchNorm1d(4, eps=eps).double().eval()
            mean, variance, gamma, beta = _bn_terms(bn)
            mean.uniform_(-1, 1)
            variance.uniform_(0.05, 0.2)  # small variances: a forgotten eps shows
            gamma.uniform_(0.5, 2)
            beta.uniform_(-1, 1)
            cases.append((label, linear, bn))
    return cases


def _bn_terms(bn: nn.BatchNorm1d) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(running mean, running variance, gamma, beta) of the checker's BatchNorms, which have all four."""
    return cast(torch.Tensor, bn.running_mean), cast(torch.Tensor, bn.running_var), bn.weight, bn.bias


def _fold_hint(linear: nn.Linear, bn: nn.BatchNorm1d, weight: torch.Tensor, bias: torch.Tensor) -> str:
    """Why a folded layer is off, for the usual slips; a pointer to the formula when none of them explains it."""
    mean, variance, gamma, beta = _bn_terms(bn)
    scale = gamma / torch.sqrt(variance + bn.eps)
    linear_bias = linear.bias if linear.bias is not None else torch.zeros_like(mean)
    if linear.in_features == linear.out_features and torch.allclose(weight, linear.weight * scale):
        return " Each output feature c is a *row* of linear.weight: scale the rows, scale.unsqueeze(1), not the columns."
    if not torch.allclose(weight, linear.weight * scale.unsqueeze(1)):
        if torch.allclose(weight, linear.weight * (gamma / torch.sqrt(variance)).unsqueeze(1)):
            return " The weights miss bn.eps: the scale is gamma / sqrt(running_var + eps)."
        if any(torch.allclose(weight, linear.weight * (gamma / v).unsqueeze(1)) for v in (variance, variance + bn.eps)):
            return " The weights divide by the variance; divide by the standard deviation, sqrt(running_var + eps)."
        return " The folded weight is linear.weight with row c multiplied by s_c = gamma_c / sqrt(running_var_c + eps)."
    if linear.bias is not None and torch.allclose(bias, -mean * scale + beta):
        return " The Linear's own bias passes through BatchNorm too: the folded bias is (b - running_mean) * s + beta."
    if torch.allclose(bias, linear_bias * scale + beta):
        return " The folded bias misses the running mean: (b - running_mean) * s + beta."
    return " The folded bias is (b_c - running_mean_c) * s_c + beta_c."


def _fold_state(linear: nn.Linear, bn: nn.BatchNorm1d) -> dict[str, torch.Tensor]:
    return nn.ModuleDict({"linear": linear, "bn": bn}).state_dict()


def check_fold_linear_bn(fold_linear_bn: Callable[..., Any]) -> CheckResult:
    """Exercise 1.3: ``fold_linear_bn(linear, bn)`` returns one new ``nn.Linear`` computing ``bn(linear(x))`` in eval mode.

    Compared with torch's own fold, ``torch.nn.utils.fusion.fuse_linear_bn_eval``,
    and on outputs, in float64 so that only exact arithmetic passes.
    """

    def check() -> str:
        x = torch.randn(5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        for label, linear, bn in _fold_cases():
            before = {name: t.clone() for name, t in _fold_state(linear, bn).items()}
            with learner_case(label):
                folded = call_learner(fold_linear_bn, linear, bn)
            after = _fold_state(linear, bn)
            expect(all(torch.equal(before[name], after[name]) for name in before),
                   f"For {label}, your code changed the Linear or the BatchNorm it was given; build a new nn.Linear "
                   f"and leave both as they are.")
            expect(isinstance(folded, nn.Linear) and folded is not linear,
                   f"For {label} you returned {type(folded).__name__}; return one new nn.Linear (not a Sequential, "
                   f"not the Linear you were given).")
            expect(folded.weight.shape == linear.weight.shape and folded.bias is not None,
                   f"For {label} the folded Linear must have the same weight shape {tuple(linear.weight.shape)} and a bias "
                   f"(bias=True): BatchNorm's shift becomes its bias.")
            reference = fuse_linear_bn_eval(linear, bn)
            with torch.no_grad():
                same_layer = (torch.allclose(folded.weight.double(), reference.weight, rtol=1e-9, atol=1e-12)
                              and torch.allclose(folded.bias.double(), reference.bias, rtol=1e-9, atol=1e-12))
                expect(same_layer, f"For {label} your folded layer differs from torch.nn.utils.fusion.fuse_linear_bn_eval"
                                   f".{_fold_hint(linear, bn, folded.weight.double(), folded.bias.double())}")
                expect(torch.allclose(folded(x), bn(linear(x)), rtol=1e-9, atol=1e-12),
                       f"For {label} the folded layer's output differs from bn(linear(x)).")
        return ("for a Linear with and without bias, your layer equals torch.nn.utils.fusion.fuse_linear_bn_eval's "
                "and computes bn(linear(x)) to 1e-9.")

    return run_check("1.3", check, fold_linear_bn)
