"""profile_model as one pipeline: capture -> time -> report, and how many private copies of the model each call makes.

A copy is counted as a ``copy.deepcopy`` of a module that no other deepcopy is making (labkit's
``private_copy``), whoever calls it: the count is of what happens, not of what the code says.
"""

import copy
import warnings
from collections.abc import Iterator

import pytest
import torch
import torch.fx
from torch import nn

from labkit.fx.profile import ModelCapture, TraceFallbackWarning, capture_model, profile_model, time_capture
from tests.fx.support import needs_export

X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.a(x))


class OptionalMask(Plain):
    """symbolic_trace cannot take the ``if mask is not None`` branch with a Proxy; torch.export can."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            x = x * mask
        return self.a(x)


class ReadsAValue(Plain):
    """Branches on a tensor's value: neither graph capture works, so it is timed by hooks."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) if x.sum() > 0 else -self.a(x)


class Clamps(Plain):
    """Writes its weight in place (a WGAN clamp): the copy gets its own parameters."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.a.weight.clamp_(-0.1, 0.1)
        return self.a(x)


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The class name of each module deep-copied at the outermost level while the test runs."""
    made: list[str] = []
    depth = [0]
    real = copy.deepcopy

    def counting(value, memo=None, _nil=[]):  # noqa: B006 - copy.deepcopy's own signature
        if depth[0] == 0 and isinstance(value, nn.Module):
            made.append(type(value).__name__)
        depth[0] += 1
        try:
            return real(value, memo)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(copy, "deepcopy", counting)
    yield made


def profiled(model: nn.Module, **options: object) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceFallbackWarning)
        return profile_model(model.eval(), X, warmup=1, runs=2, **options).capture


def test_modules_mode_times_the_copy_its_eager_run_used(copies: list[str]) -> None:
    assert profiled(Plain(), mode="modules") == "hooks"
    assert copies == ["Plain"]  # was 2: the eager run's copy, then the profiler's own


def test_a_hook_fallback_times_the_eager_runs_copy(copies: list[str]) -> None:
    assert profiled(ReadsAValue()) == "hooks"
    # the eager run's (tried by both captures, then timed: none of them changed it), and the look at which children
    # trace; was 5, then 4
    assert len(copies) == 2


def test_a_traced_graph_uses_the_eager_runs_copy_when_that_run_changed_nothing(copies: list[str]) -> None:
    assert profiled(Plain()) == "symbolic_trace"
    assert copies == ["Plain"]  # was 2: the eager run's, then the graph's own


class CountsCalls(Plain):
    """A Python counter that forward reads: a graph traced from the eager run's copy would start a call later."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.a(x) * self.calls


class AppendsToACache(Plain):
    def __init__(self) -> None:
        super().__init__()
        self.cache: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache.append(x)
        return self.a(x) * len(self.cache)


@pytest.mark.parametrize("model_class", [CountsCalls, AppendsToACache])
def test_a_graph_gets_a_copy_of_its_own_where_the_eager_run_changed_its_copy(copies: list[str], model_class) -> None:
    model = model_class()
    assert profiled(model) == "symbolic_trace"  # traced from a fresh copy, so the graph computes what model(x) does
    assert len(copies) == 2


@needs_export
def test_an_exported_graph_after_a_failed_trace(copies: list[str]) -> None:
    assert profiled(OptionalMask()) == "export"
    assert copies == ["OptionalMask"]  # was 3: the failed trace left the eager run's copy as it was, so export uses it


class LeavesAProxy(OptionalMask):
    """Keeps what tracing gave it (an fx Proxy) before the trace fails: that copy is not fresh any more."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if isinstance(x, torch.fx.Proxy):
            self.traced = x
        return super().forward(x, mask)


@needs_export
def test_export_gets_a_fresh_copy_where_a_failed_trace_changed_the_eager_runs_copy(copies: list[str]) -> None:
    assert profiled(LeavesAProxy()) == "export"
    assert len(copies) == 2


def test_a_forward_that_writes_a_parameter_costs_one_copy_more(copies: list[str]) -> None:
    model = Clamps()
    weight = model.a.weight.detach().clone()
    assert profiled(model) == "symbolic_trace"
    assert len(copies) == 3 and torch.equal(model.a.weight, weight)


def test_the_pipeline_steps_hand_plain_objects_on() -> None:
    captured = capture_model(Plain().eval(), X)
    assert isinstance(captured, ModelCapture) and captured.tier == "symbolic_trace" and captured.graph is not None
    assert torch.allclose(captured.eager.output, Plain().eval()(X))  # the reference the graph was checked against
    report = time_capture(captured, warmup=0, runs=2).report()
    assert report.runs == 2 and report.capture == "symbolic_trace" and {row.name for row in report.rows} >= {"a", "relu"}
