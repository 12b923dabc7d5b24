"""profile_model's path through labkit's modules stays short, and reads one way (issue 41, item 8).

The figures are facts of labkit's structure (which module each labkit call enters, counted by
labkit.authoring.call_path under sys.setprofile), not timings. On main before the change (6b6817b)
profile_model(resnet_like(), x) at its defaults made 211 transitions between modules and came back
to core/copies 12 times, once more per run (interpreter mode: 215 and 12, hooks: 197 and 10).
"""
import pytest
import torch

from labkit.authoring.call_path import CallPath, call_path, profile_path, resnet_like
from labkit.fx import profile as fx_profile
from labkit.fx.profile import profile_model


def test_call_path_counts_transitions_returns_and_modules() -> None:
    path = CallPath(("fx/profile", "core/copies", "fx/profile", "fx/runs", "core/copies", "fx/profile"))
    assert path.transitions == 5 and path.distinct == 3
    assert path.returns_to("core/copies") == 1 and path.returns_to("fx/profile") == 2 and path.total_returns == 3


def test_call_path_follows_labkit_calls_only() -> None:
    from labkit.core.errors import require_count

    result, path = call_path(lambda: [require_count("runs", 3, 1, "")] * 2)
    assert result == [3, 3] and path.modules == ("core/errors",)  # the lambda (this test) is no module of labkit


@pytest.fixture(scope="module")
def default_path() -> CallPath:
    return profile_path()  # warmup=2, runs=5


def test_profile_model_comes_back_to_core_copies_at_most_six_times(default_path: CallPath) -> None:
    # was 12: every run cloned its inputs on its own, and capture bound the inputs again
    assert default_path.returns_to("core/copies") <= 6, default_path.summary()


def test_profile_model_path_is_less_than_half_what_it_was(default_path: CallPath) -> None:
    assert default_path.transitions <= 90, default_path.summary()  # was 211 (79 when this test was written)
    assert default_path.returns_to("fx/tracing") <= 2, default_path.summary()  # was 21: a node's type asked per row


@pytest.mark.parametrize("mode", ["interpreter", "modules"])
def test_the_other_timing_modes_take_as_short_a_path(mode: str) -> None:
    path = profile_path(mode=mode)
    # were 215 and 197 transitions, 12 and 10 returns to core/copies (79 and 82, 6 and 4 when this test was written)
    assert path.transitions <= 90 and path.returns_to("core/copies") <= 6, path.summary()


def test_more_runs_add_no_return_to_core_copies(default_path: CallPath) -> None:
    """The inputs of a series are cloned once, before its first run, not once per run."""
    assert profile_path(warmup=0, runs=1).returns_to("core/copies") == default_path.returns_to("core/copies")


def test_the_report_only_assembles_what_the_run_stage_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory per node is measured once, in the run stage: making the report (or another one) measures nothing."""
    measured: list[str] = []
    real = fx_profile.graph_memory
    monkeypatch.setattr(fx_profile, "graph_memory", lambda *args: measured.append("memory") or real(*args))
    captured = fx_profile.capture_model(resnet_like(), torch.zeros(1, 3, 16, 16))
    profiler = fx_profile.time_capture(captured, warmup=0, runs=2)
    assert measured == ["memory"]
    monkeypatch.setattr(fx_profile.NodeProfiler, "_timed_call", lambda self: pytest.fail("a report ran the model"))
    first, second = profiler.report(), profiler.report()
    assert measured == ["memory"] and first.memory is not None and first.memory == second.memory
    assert len(first.timeline) == 2 and first.timeline == second.timeline


def test_a_profile_is_the_same_report_as_before() -> None:
    """What the shorter path gives back: every node described, two timed runs kept, memory per node."""
    report = profile_model(resnet_like(), torch.zeros(1, 3, 16, 16), warmup=1, runs=2)
    assert report.runs == 2 and len(report.timeline) == 2 and report.memory is not None
    assert [span.key for span in report.timeline[0].spans] == [row.name for row in report.rows]
    by_name = {row.name: row for row in report.rows}
    assert by_name["layer1_0_conv1"].op_type == "Conv2d" and by_name["layer1_0_conv1"].module == "layer1.0.conv1"
    assert by_name["add"].op_type == "add" and all(row.source for row in report.rows)
