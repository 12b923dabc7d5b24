"""Checkers for the exercises of notebook 01 (FX profiling).

Each checker takes the learner's function or class, runs it on a small model
of its own, and compares with an independent reference: ``torch.fx``'s
``ShapeProp`` for shapes; for the fusion question, the graph that
``torch.fx.experimental.optimization.fuse`` gives and the checker's own
profile of it (a model built so that Conv2d dominates by a wide margin, so
timing noise cannot fail a correct answer). They never raise, and their
messages hold no timings, so a notebook's stored checker output is reproducible.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx.experimental.optimization import fuse
from torch.fx.passes.shape_prop import ShapeProp

from labkit.core.checks import CheckFailed, CheckResult, call_learner, expect, int_tuple, run_check
from labkit.core.notebook import seeded
from labkit.fx.profile import ProfileReport, profile_model


def _reference_model(width: int = 8) -> nn.Module:
    """A small Conv-BN CNN. Exercise 1.3 uses ``width=128``: wide 3x3 convolutions, so Conv2d
    costs far more than everything else together."""
    with seeded(0):
        return nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(width, 5),
        ).eval()


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

    return run_check("1.1", check)


def check_shape_recorder(recorder_class: type) -> CheckResult:
    """Exercise 1.2: ``recorder_class(graph_module).run(x)`` fills ``.shapes`` like ShapeProp."""

    def check() -> str:
        x = _reference_input()
        expect(
            isinstance(recorder_class, type),
            "Pass the class itself (a subclass of torch.fx.Interpreter), e.g. check_shape_recorder(ShapeRecorder).",
        )
        graph_module = torch.fx.symbolic_trace(_reference_model())
        recorder = call_learner(recorder_class, graph_module)
        expect(
            callable(getattr(recorder, "run", None)),
            f"{getattr(recorder_class, '__name__', recorder_class)!s} has no run() method: subclass torch.fx.Interpreter.",
        )
        with torch.no_grad():
            call_learner(recorder.run, x)
        shapes = getattr(recorder, "shapes", None)
        if not isinstance(shapes, dict):
            raise CheckFailed("After run(), self.shapes must be a dict {node name: shape tuple}.")
        ShapeProp(graph_module).propagate(x)
        expected = {
            n.name: tuple(n.meta["tensor_meta"].shape) for n in graph_module.graph.nodes if "tensor_meta" in n.meta
        }
        missing = sorted(set(expected) - set(shapes))
        expect(not missing, f"No shape recorded for node(s) {missing}; record every node whose output is a tensor.")
        for name, shape in expected.items():
            got = shapes[name]
            expect(
                int_tuple(got) == shape,
                f"Node {name!r}: you recorded {got!r}, the output shape is {shape}"
                + ("." if int_tuple(got) is not None else "; record a tuple of ints, e.g. tuple(result.shape)."),
            )
        first_name, first_shape = next(iter(expected.items()))
        return f"all {len(expected)} tensor shapes match torch.fx's ShapeProp (e.g. {first_name}: {first_shape})."

    return run_check("1.2", check)


def _fusion_model() -> nn.Module:
    return _reference_model(width=128)


def _fusion_input() -> torch.Tensor:
    return torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def _graph_signature(report: ProfileReport) -> list[tuple[str, str]]:
    """(op, op type) per node in graph order: what a report says about the graph it profiled."""
    return [(row.op, row.op_type) for row in report.rows]


def _profile_fused_reference() -> tuple[ProfileReport, str]:
    """The checker's own profile of the fused model, and the op type with the largest time in it.

    Each node counts with its fastest run, on one thread: on a loaded machine a
    run is only ever slowed down, and a parallel op can wait a whole time slice
    for its second thread, which would inflate the tiny ops.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            report = profile_model(fuse(_fusion_model()), _fusion_input(), warmup=1, runs=5)
    finally:
        torch.set_num_threads(threads)
    totals: dict[str, float] = {}
    for row in report.rows:
        totals[row.op_type] = totals.get(row.op_type, 0.0) + row.stats.min
    return report, max(totals, key=totals.__getitem__)


def check_slowest_after_fusion(slowest_type_after_fusion: Callable[..., Any]) -> CheckResult:
    """Exercise 1.3: returns (slowest op type, report of the fused model) on a Conv-BN model.

    The learner's numbers are not trusted: the report must profile exactly the
    graph ``fuse`` gives for the model, and the answer must be the op type that
    dominates in the checker's own profile of that graph.
    """

    def check() -> str:
        model = _fusion_model()
        answer = call_learner(slowest_type_after_fusion, model, _fusion_input())
        expect(isinstance(answer, tuple) and len(answer) == 2, "Return a pair: (op type name, report).")
        name, report = answer
        expect(isinstance(report, ProfileReport), "The second item must be the ProfileReport of the fused model.")
        expect(
            isinstance(name, str),
            f"The first item must be the op type's name as a string, e.g. 'ReLU', not a {type(name).__name__}.",
        )
        expect(any(isinstance(m, nn.BatchNorm2d) for m in model.modules()), "Fuse a copy; the original model was changed.")
        expect(
            all(row.op_type != "BatchNorm2d" for row in report.rows),
            "The report still has BatchNorm2d nodes: profile the *fused* model.",
        )
        reference, slowest = _profile_fused_reference()
        expected_nodes = _graph_signature(reference)
        got_nodes = _graph_signature(report)
        expect(
            got_nodes == expected_nodes,
            f"Your report is not a profile of the fused model you were given: it has the op types "
            f"{[t for _, t in got_nodes]}, fusing the model gives {[t for _, t in expected_nodes]}. "
            "Profile fuse(model) on x with labkit.profile_model, and keep every node (not report.top(k)).",
        )
        expect(
            name == slowest,
            f"You answered {name!r}, but {slowest!r} takes by far the most time when the checker profiles the same fused "
            "model. Sum the time per op type: report.by_op_type(). If your own report disagrees, the machine was busy: "
            "profile with more runs.",
        )
        return (
            f"your report profiles the fused model (no BatchNorm2d left), and {slowest} is the slowest op type "
            "in the checker's own profile too."
        )

    return run_check("1.3", check)
