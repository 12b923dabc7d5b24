"""Checkers for the exercises of notebook 01 (FX profiling).

Each checker takes the learner's function or class, runs it on a small model
of its own, and compares with an independent reference (``torch.fx``'s
``ShapeProp`` for shapes, the learner's own report for the fusion question, so
that timing noise cannot fail a correct answer). They never raise, and their
messages hold no timings, so a notebook's stored checker output is reproducible.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from labkit.checks import CheckResult, run_check
from labkit.fx_profile import ProfileReport
from labkit.notebook import seeded


def _reference_model() -> nn.Module:
    with seeded(0):
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 5),
        ).eval()


def _reference_input() -> torch.Tensor:
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))


def check_profile_own_model(profile_my_model: Callable[[], Any]) -> CheckResult:
    """Exercise 1.1: ``profile_my_model()`` returns a ProfileReport of a small CNN, 3+ runs."""

    def check() -> str:
        report = profile_my_model()
        assert isinstance(report, ProfileReport), (
            f"profile_my_model() returned {type(report).__name__}; return what labkit.profile_model(...) gives you."
        )
        assert report.runs >= 3, f"The report has {report.runs} timed run(s); pass runs=3 or more."
        modules = [r for r in report.rows if r.op == "call_module"]
        assert len(modules) >= 3, f"Your model has {len(modules)} layer(s) in the graph; build one with at least 3."
        types = report.by_op_type().pct
        assert "Conv2d" in types, f"No Conv2d in your model (found {sorted(types)}); add an nn.Conv2d."
        return f"{len(report.rows)} nodes of {len(types)} op types profiled over {report.runs} runs."

    return run_check("1.1", check)


def check_shape_recorder(recorder_class: type) -> CheckResult:
    """Exercise 1.2: ``recorder_class(graph_module).run(x)`` fills ``.shapes`` like ShapeProp."""

    def check() -> str:
        x = _reference_input()
        graph_module = torch.fx.symbolic_trace(_reference_model())
        recorder = recorder_class(graph_module)
        with torch.no_grad():
            recorder.run(x)
        shapes = getattr(recorder, "shapes", None)
        assert isinstance(shapes, dict), "After run(), self.shapes must be a dict {node name: shape tuple}."
        ShapeProp(graph_module).propagate(x)
        expected = {
            n.name: tuple(n.meta["tensor_meta"].shape) for n in graph_module.graph.nodes if "tensor_meta" in n.meta
        }
        missing = sorted(set(expected) - set(shapes))
        assert not missing, f"No shape recorded for node(s) {missing}; record every node whose output is a tensor."
        for name, shape in expected.items():
            got = shapes[name]
            got = tuple(got) if isinstance(got, (tuple, list, torch.Size)) else got
            assert got == shape, f"Node {name!r}: you recorded {got}, the output shape is {shape}."
        return f"all {len(expected)} tensor shapes match torch.fx's ShapeProp (e.g. {next(iter(expected))}: {next(iter(expected.values()))})."

    return run_check("1.2", check)


def check_slowest_after_fusion(slowest_type_after_fusion: Callable[..., Any]) -> CheckResult:
    """Exercise 1.3: returns (slowest op type, report of the fused model) on a Conv-BN model."""

    def check() -> str:
        model = _reference_model()
        answer = slowest_type_after_fusion(model, _reference_input())
        assert isinstance(answer, tuple) and len(answer) == 2, "Return a pair: (op type name, report)."
        name, report = answer
        assert isinstance(report, ProfileReport), "The second item must be the ProfileReport of the fused model."
        types = report.by_op_type()
        assert "BatchNorm2d" not in types.pct, "The report still has BatchNorm2d nodes: profile the *fused* model."
        assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules()), "Fuse a copy; the original model was changed."
        slowest = types.rows[0][0]
        assert name == slowest, f"You answered {name!r}, but the largest time in your report is {slowest!r}."
        return "no BatchNorm2d left after fusion, and your answer is the largest op type in your report."

    return run_check("1.3", check)
