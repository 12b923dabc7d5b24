"""labkit.fx.profile: tracing, the tutorial interpreter, the fast mode, reports, errors."""
import csv
import json
import os
import re
import warnings
from collections import Counter

import pytest
import torch
import torch.fx
from torch import nn

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.fx.profile import (
    NODE_FIELDS,
    SUMMARY_HEADERS,
    InstrumentedModule,
    NodeProfiler,
    NodeTiming,
    NotRunYetError,
    ProfileReport,
    ProfilingInterpreter,
    TraceFailedError,
    TrainModeWarning,
    _drop_stamp_variables,
    profile_model,
    require_count,
    require_profilable,
    trace,
)


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)
    ).eval()


X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
TIMED = ["_0", "_1", "_2", "_3", "_4", "_5"]


class Branchy(nn.Module):
    def forward(self, x, flag=True):
        if x.sum() > 0:
            return x + 1
        return x - 1


def test_resnet18_graph_has_the_tutorial_node_counts():
    torchvision = pytest.importorskip("torchvision")
    graph = trace(torchvision.models.resnet18(weights=None)).graph
    counts = Counter(node.op for node in graph.nodes)
    assert len(graph.nodes) == 71
    assert counts == {"call_module": 60, "call_function": 9, "placeholder": 1, "output": 1}


def test_profiling_interpreter_keeps_the_tutorial_api():
    model = small_cnn()
    interp = ProfilingInterpreter(model)
    with torch.no_grad():
        out = interp.run(X)
        interp.run(X)
        torch.testing.assert_close(out, model(X))
    assert len(interp.total_runtime_sec) == 2
    assert all(isinstance(node, torch.fx.Node) and len(times) == 2 for node, times in interp.runtimes_sec.items())
    assert len(interp.runtimes_sec) == 8  # placeholder + 6 modules + output, as in the tutorial
    lines = interp.summary().splitlines()
    assert all(header in lines[0] for header in SUMMARY_HEADERS)
    assert [line.split()[1] for line in lines[2:]] == ["input_1", *TIMED, "output"]


def test_sorted_summary_is_slowest_first():
    interp = ProfilingInterpreter(small_cnn())
    with torch.no_grad():
        interp.run(X)
    seconds = [float(line.split()[2]) for line in interp.summary(should_sort=True).splitlines()[2:]]
    assert seconds == sorted(seconds, reverse=True)


def test_summary_before_any_run_says_to_run_first():
    with pytest.raises(NotRunYetError, match=r"call \.run"):
        ProfilingInterpreter(small_cnn()).summary()


def test_instrumented_module_returns_the_same_and_stamps_every_node():
    graph_module = trace(small_cnn())
    instrumented = InstrumentedModule(graph_module)
    with torch.no_grad():
        torch.testing.assert_close(instrumented(X), graph_module(X))
    assert len(instrumented.stamps) == len(TIMED) + 1
    durations = instrumented.last_durations()
    assert len(durations) == len(TIMED) and all(d >= 0 for d in durations)
    assert "perf_counter" in instrumented.module.code and "perf_counter" not in graph_module.code


def test_instrumented_module_resets_stamps_between_calls():
    instrumented = InstrumentedModule(trace(small_cnn()))
    with torch.no_grad():
        instrumented(X)
        instrumented(X)
    assert len(instrumented.stamps) == len(TIMED) + 1


@pytest.mark.parametrize("mode", ["fast", "interpreter"])
def test_profile_model_reports_every_node_with_statistics(mode):
    report = profile_model(small_cnn(), X, warmup=1, runs=3, mode=mode)
    assert isinstance(report, ProfileReport) and report.mode == mode and report.warmup == 1
    assert [r.name for r in report.rows] == TIMED
    assert [r.op_type for r in report.rows] == ["Conv2d", "BatchNorm2d", "ReLU", "AdaptiveAvgPool2d", "Flatten", "Linear"]
    assert report.runs == 3 and all(r.stats.count == 3 for r in report.rows)
    assert all(r.stats.min <= r.stats.median <= r.stats.max and r.stats.iqr >= 0 for r in report.rows)
    assert 0 < sum(r.pct for r in report.rows) <= 100.0 + 1e-6


def test_profile_model_accepts_a_plain_function():
    report = profile_model(lambda x: torch.relu(x) + 1, X, runs=2)
    assert [r.op_type for r in report.rows] == ["relu", "add"]


def test_by_op_type_groups_and_sorts():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU()).eval()
    report = profile_model(model, torch.randn(3, 4), runs=2)
    breakdown = report.by_op_type()
    assert {t: n for t, n, _, _ in breakdown.rows} == {"Linear": 2, "ReLU": 2}
    seconds = [s for _, _, s, _ in breakdown.rows]
    assert seconds == sorted(seconds, reverse=True)
    linears = [r for r in report.rows if r.op_type == "Linear"]
    assert breakdown.seconds["Linear"] == pytest.approx(sum(r.stats.median for r in linears))
    assert breakdown.pct["Linear"] == pytest.approx(breakdown.seconds["Linear"] / report.total.median * 100)
    assert breakdown.spread["Linear"] == pytest.approx(sum(r.stats.iqr for r in linears))
    assert "Time by op type" in str(breakdown) and "<table>" in breakdown._repr_html_()
    assert breakdown.table().headers == ["type", "nodes", "median per run", "spread (IQR)", "% total"]


def _rows(*nodes: tuple[str, list[float]]) -> list[NodeTiming]:
    from labkit.core.timing import RunStats

    return [NodeTiming("call_module", name, name, name.rstrip("0123456789"), RunStats.from_samples(samples), 0.0)
            for name, samples in nodes]


def test_one_disturbed_run_does_not_change_the_top_op_type():
    from labkit.core.timing import RunStats

    # Conv is steadily the slower; one Linear run hit a busy machine. Its mean would rank it first.
    rows = _rows(("Conv1", [2e-3, 2e-3, 2e-3, 2e-3, 2e-3]), ("Linear1", [1e-3, 1e-3, 1e-3, 1e-3, 9e-3]))
    report = ProfileReport(rows, RunStats.from_samples([3e-3, 3e-3, 3e-3, 3e-3, 11e-3]), "fast", 0, 2)
    assert report.by_op_type().rows[0][0] == "Conv"
    assert sum(r.stats.mean for r in rows if r.op_type == "Linear") > 2e-3  # what a mean would have said
    assert report.by_op_type().spread == {"Conv": 0.0, "Linear": 0.0}


def test_one_disturbed_run_does_not_change_the_top_node_or_its_share(monkeypatch):
    """Nodes rank by median and their share is of the median run, as op types are (issue 25)."""
    from labkit.core.timing import RunStats

    rows = _rows(("Conv1", [2e-3] * 5), ("Linear1", [1e-3, 1e-3, 1e-3, 1e-3, 9e-3]))
    report = ProfileReport(rows, RunStats.from_samples([3e-3, 3e-3, 3e-3, 3e-3, 11e-3]), "fast", 0, 2)
    assert [r.name for r in report.top(1).rows] == ["Conv1"] == [r.name for r in report.sorted()[:1]]
    assert [r.name for r in report.top(1, "mean").rows] == ["Linear1"]  # what a mean would have said
    profiled = profile_model(small_cnn(), X, runs=3)
    assert profiled.share_basis == pytest.approx(sum(r.stats.median for r in profiled.rows) + profiled.outside.median)
    for row in profiled.rows:  # shares of the summed medians (issue 34): the total keeps disturbances medians drop
        assert row.pct == pytest.approx(row.stats.median / profiled.share_basis * 100)


def test_by_op_type_by_name_is_a_to_z_and_top_keeps_that_order():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh()).eval()
    report = profile_model(model, torch.randn(3, 4), runs=2)
    assert [t for t, *_ in report.by_op_type("name").rows] == ["Linear", "ReLU", "Tanh"]
    assert report.by_op_type("pct").rows == report.by_op_type("mean").rows == report.by_op_type().rows
    assert report.by_op_type("median").rows == report.by_op_type().rows
    assert report.by_op_type("name").top(2).rows == report.by_op_type("name").rows[:2]
    assert report.by_op_type().top(1).rows == report.by_op_type().rows[:1]
    assert set(report.by_op_type().top(1).spread) == {report.by_op_type().rows[0][0]}


@pytest.mark.parametrize("key", ["iqr", "type", "min", None])
def test_op_types_are_sorted_only_by_their_summed_median_or_name(key):
    report = profile_model(small_cnn(), X, runs=1)
    with pytest.raises(LabkitValueError, match="sum of its nodes' medians; use median, pct or name"):
        report.by_op_type(key)


def test_on_run_gets_the_report_after_every_timed_run():
    seen = []
    final = profile_model(small_cnn(), X, warmup=2, runs=4, on_run=seen.append)
    assert [r.runs for r in seen] == [1, 2, 3, 4]
    assert all(isinstance(r, ProfileReport) and r.warmup == 2 and [n.name for n in r.rows] == TIMED for r in seen)
    assert [n.stats.count for n in seen[1].rows] == [2] * len(TIMED)
    assert seen[-1].to_dicts() == final.to_dicts()


def test_an_error_in_on_run_stops_the_profile_and_reaches_the_caller():
    calls = []

    def failing(report):
        calls.append(report.runs)
        raise KeyError("redraw failed")

    with pytest.raises(KeyError, match="redraw failed"):
        profile_model(small_cnn(), X, runs=3, on_run=failing)
    assert calls == [1]


def test_require_profilable_raises_what_profile_model_would_without_running(monkeypatch):
    monkeypatch.setattr(NodeProfiler, "_timed_call", lambda self: pytest.fail("nothing may run"))
    require_profilable(small_cnn(), X)
    with pytest.raises(LabkitTypeError, match="Expected a torch.nn.Module"):
        require_profilable(42, X)
    require_profilable(Branchy(), X)  # it falls back to mode="modules"
    with pytest.raises(TraceFailedError):
        require_profilable(Branchy(), X, fallback=False)
    with pytest.raises(LabkitValueError, match="mode must be one of"):
        require_profilable(small_cnn(), X, mode="slow")
    with pytest.raises(LabkitValueError, match="Input 0 is on cpu but the model is on meta"):
        require_profilable(small_cnn().to("meta"), X)


def test_require_count_returns_an_int_or_names_the_argument():
    import numpy as np

    assert require_count("runs", np.int64(3), 1, "hint") == 3 and type(require_count("runs", np.int64(3), 1, "")) is int
    with pytest.raises(LabkitValueError, match=r"runs must be at least 2 \(got 1\); use more\."):
        require_count("runs", 1, 2, "use more")
    with pytest.raises(LabkitValueError, match=r"warmup cannot be negative"):
        require_count("warmup", -1, 0, "hint")
    with pytest.raises(LabkitTypeError, match=r"k must be a whole number \(an int\), got True \(bool\)"):
        require_count("k", True, 1, "hint")


def test_top_keeps_the_k_slowest_and_says_so():
    report = profile_model(small_cnn(), X, runs=2)
    top = report.top(2)
    assert len(top.rows) == 2 and top.total == report.total
    assert [r.name for r in top.rows] == [r.name for r in report.sorted("mean")[:2]]
    assert "top 2 of 6 nodes" in top.to_text()
    assert report.sorted("name", descending=False)[0].name == "_0"
    with pytest.raises(LabkitValueError, match="at least 1"):
        report.top(0)
    with pytest.raises(LabkitValueError, match=r"k must be at least 1 \(got -1\)"):
        report.top(-1)
    for bad in (2.5, "3", True):
        with pytest.raises(LabkitTypeError, match=r"k must be a whole number"):
            report.top(bad)
    with pytest.raises(LabkitValueError, match="Cannot sort by"):
        report.sorted("speed")


def test_text_html_csv_and_json(tmp_path):
    report = profile_model(small_cnn(), X, runs=2)
    assert "layer" not in report.to_text() and "BatchNorm2d" in str(report) and "6 nodes" in str(report)
    assert report._repr_html_().count("<tr>") == 1 + len(report.rows)
    with open(report.to_csv(tmp_path / "p.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["name"] for r in rows] == TIMED and float(rows[0]["mean_s"]) == report.rows[0].stats.mean
    payload = json.loads(report.to_json(tmp_path / "p.json").read_text())
    assert payload["mode"] == "fast" and payload["total"]["count"] == 2
    assert [n["op_type"] for n in payload["nodes"]][:2] == ["Conv2d", "BatchNorm2d"]


def test_node_profiler_reports_only_after_a_run():
    profiler = NodeProfiler(small_cnn(), X)
    profiler.warmup(1)
    with pytest.raises(NotRunYetError):
        profiler.report()
    profiler.run_once()
    assert profiler.report().runs == 1 and profiler.report().warmup == 1


def test_untraceable_model_names_the_module_and_line_and_suggests_fixes():
    with pytest.raises(TraceFailedError) as info:
        profile_model(Branchy(), X, fallback=False)
    message = str(info.value)
    assert "Branchy.forward" in message and "if x.sum() > 0:" in message and "line" in message
    assert "concrete_args" in message and "leaf" in message and "torch.profiler" in message


def test_non_callables_are_refused():
    with pytest.raises(LabkitTypeError, match="nn.Module"):
        profile_model(42, X)
    with pytest.raises(LabkitTypeError):
        ProfilingInterpreter("resnet18")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"runs": 0}, "runs must be at least 1"),
        ({"runs": -1}, "runs must be at least 1"),
        ({"warmup": -1}, "warmup cannot be negative"),
        ({"mode": "turbo"}, "mode must be"),
    ],
)
def test_bad_counts_and_modes(kwargs, match):
    with pytest.raises(LabkitValueError, match=match):
        profile_model(small_cnn(), X, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"runs": 2.5}, "runs"), ({"runs": "5"}, "runs"), ({"runs": True}, "runs"), ({"runs": None}, "runs"),
     ({"warmup": 1.5}, "warmup"), ({"warmup": "1"}, "warmup"), ({"warmup": False}, "warmup")],
)
def test_counts_that_are_not_whole_numbers_are_refused_before_any_run(kwargs, name, monkeypatch):
    monkeypatch.setattr(NodeProfiler, "_timed_call", lambda self: pytest.fail("ran the model"))
    with pytest.raises(LabkitTypeError, match=rf"^{name} must be a whole number \(an int\), got "):
        profile_model(small_cnn(), X, **kwargs)


def test_numpy_integers_count_as_whole_numbers():
    np = pytest.importorskip("numpy")
    assert profile_model(small_cnn(), X, warmup=np.int64(0), runs=np.int64(2)).runs == 2


def test_inputs_on_another_device_than_the_model():
    model = small_cnn().to("meta")
    with pytest.raises(LabkitValueError, match=r"Input 0 is on cpu but the model is on meta"):
        profile_model(model, X)


def test_results_show_as_their_text_in_ipython():
    from IPython.lib.pretty import pretty

    report = profile_model(small_cnn(), X, runs=1)
    assert pretty(report) == report.to_text() and pretty(report.by_op_type()) == report.by_op_type().to_text()


@pytest.mark.parametrize("mode", ["fast", "interpreter"])
def test_profiling_leaves_a_training_mode_model_unchanged(mode):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    before = {k: b.clone() for k, b in model.named_buffers()}
    with pytest.warns(TrainModeWarning):
        profile_model(model, X, warmup=1, runs=2, mode=mode)
    for name, buffer in model.named_buffers():
        assert torch.equal(buffer, before[name]), name
    assert model.training


def test_node_profiler_shares_the_parameters_and_owns_the_buffers():
    model = small_cnn()
    profiler = NodeProfiler(model, X)
    assert {id(p) for p in profiler.graph_module.parameters()} == {id(p) for p in model.parameters()}
    assert not {id(b) for b in profiler.graph_module.buffers()} & {id(b) for b in model.buffers()}


def test_interpreter_synchronizes_the_device_it_is_given():
    def parameter_free(x):  # no parameters to take a device from
        return torch.relu(x) + 1

    assert ProfilingInterpreter(parameter_free).device == torch.device("cpu")
    assert ProfilingInterpreter(parameter_free, device="meta").device == torch.device("meta")
    profiler = NodeProfiler(parameter_free, X.to("meta"), mode="interpreter")
    assert profiler._interpreter.device == torch.device("meta")


def test_csv_columns_are_the_node_fields():
    report = profile_model(small_cnn(), X, runs=1)
    assert tuple(report.rows[0].as_dict()) == NODE_FIELDS


def test_an_empty_report_writes_a_header_only_csv_and_json(tmp_path):
    report = profile_model(small_cnn(), X, runs=1)
    empty = ProfileReport([], report.total, report.mode, report.warmup)
    with open(empty.to_csv(tmp_path / "empty.csv"), newline="") as handle:
        assert next(csv.reader(handle)) == list(NODE_FIELDS)
    assert json.loads(empty.to_json(tmp_path / "empty.json").read_text())["nodes"] == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    report = profile_model(small_cnn(), X, runs=1)
    target = tmp_path / "p.csv"
    target.write_text("old")
    monkeypatch.setattr(csv.DictWriter, "writerows", lambda self, rows: 1 / 0)  # fails mid-write
    with pytest.raises(ZeroDivisionError):
        report.to_csv(target)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["p.csv"]


def dropout_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 8), nn.Dropout(0.5))


@pytest.mark.parametrize("mode", ["fast", "interpreter"])
def test_a_train_mode_model_leaves_the_global_rng_as_it_was_and_warns_once(mode):
    model = dropout_model().train()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    with pytest.warns(TrainModeWarning, match=r"model\.eval\(\)") as record:
        profile_model(model, X, warmup=1, runs=3, mode=mode)
    assert torch.equal(torch.get_rng_state(), state)
    assert len([w for w in record if issubclass(w.category, TrainModeWarning)]) == 1
    assert issubclass(TrainModeWarning, UserWarning)


def test_an_eval_mode_model_or_a_function_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile_model(dropout_model().eval(), X, runs=1)
        profile_model(lambda x: torch.relu(x) + 1, X, runs=1)


def test_a_submodule_left_in_train_mode_is_warned_about():
    model = dropout_model().eval()
    model[2].train()
    with pytest.warns(TrainModeWarning):
        profile_model(model, X, runs=1)


def test_csv_and_json_write_through_a_symlink_and_keep_it(tmp_path):
    report = profile_model(small_cnn(), X, runs=1)
    for name, write in (("p.csv", report.to_csv), ("p.json", report.to_json)):
        real = tmp_path / f"real-{name}"
        real.write_text("old")
        link = tmp_path / name
        link.symlink_to(real)
        assert write(link) == link
        assert link.is_symlink() and os.readlink(link) == str(real)
        assert "op_type" in real.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.json", "real-p.csv", "real-p.json"]


@pytest.mark.parametrize("method", ["to_csv", "to_json"])
def test_a_fifo_or_a_folder_is_refused_and_left_alone(tmp_path, method):
    report = profile_model(small_cnn(), X, runs=1)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(LabkitValueError, match="special file") as info:
        getattr(report, method)(fifo)
    assert str(fifo) in str(info.value)
    assert fifo.is_fifo()
    with pytest.raises(LabkitValueError, match="folder"):
        getattr(report, method)(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["fifo"]


@pytest.mark.parametrize("method", ["to_csv", "to_json"])
def test_writing_into_a_missing_folder_is_a_clear_error(tmp_path, method):
    report = profile_model(small_cnn(), X, runs=1)
    target = tmp_path / "missing" / "p.out"
    with pytest.raises(LabkitValueError, match="does not exist") as info:
        getattr(report, method)(target)
    assert str(target) in str(info.value) and ".tmp" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------ fast mode: the stamps add no locals


def test_instrumented_forward_has_about_the_plain_modules_locals():
    """Stamps are bare calls: a clock-read and an append local per node tripled the frame (issue 12)."""
    from labkit.fx.overhead import TinyOpsChain

    plain = trace(TinyOpsChain(200))
    instrumented = InstrumentedModule(plain)
    plain_locals = plain.forward.__code__.co_nlocals
    assert plain_locals >= 200  # the chain really has many nodes
    assert instrumented.module.forward.__code__.co_nlocals <= plain_locals + 3
    x = torch.randn(4)
    assert torch.equal(instrumented(x), plain(x))
    assert len(instrumented.last_durations()) == len(instrumented.timed_nodes) == 200


def test_every_stamp_line_is_a_bare_call():
    graph_module = trace(small_cnn())
    instrumented = InstrumentedModule(graph_module)
    stamp_lines = [line.strip() for line in instrumented.module.code.splitlines() if "_stamp(" in line]
    assert len(stamp_lines) == len(TIMED) + 1
    assert all(line.startswith("labkit_fx_profile__perf_counter_stamp(_labkit_stamps)") for line in stamp_lines)
    assert instrumented.module.forward.__code__.co_nlocals <= graph_module.forward.__code__.co_nlocals + 3
    with torch.no_grad():
        assert torch.equal(instrumented(X), graph_module(X))


def test_a_code_transformer_the_graph_already_had_still_runs():
    graph_module = trace(small_cnn())
    graph_module.graph.on_generate_code(lambda previous: lambda body: ["# kept by labkit\n", *body])
    instrumented = InstrumentedModule(graph_module)
    assert "# kept by labkit" in instrumented.module.code
    assert "= labkit_fx_profile__perf_counter_stamp" not in instrumented.module.code


# ------------------------------------------------------------- trace-failure families


class IteratesItsInput(nn.Module):
    def forward(self, images):
        return [image * 2 for image in images]


class AssertsAShape(nn.Module):
    def forward(self, x):
        assert x.shape[1] == 3, "expected RGB"
        return x + 1


class TorchAssertsALength(nn.Module):
    def forward(self, x):
        torch._assert(len(x.shape) == 4, "expected NCHW")
        return x + 1


def trace_failure(model) -> str:
    with pytest.raises(TraceFailedError) as info:
        trace(model)
    return str(info.value)


def test_control_flow_on_a_tensor_value_gets_the_control_flow_advice():
    message = trace_failure(Branchy())
    assert "control flow that depends on tensor values" in message and "concrete_args" in message
    assert "cannot be iterated" not in message and "torch._assert(tensor_condition" not in message


def test_iterating_over_an_input_says_a_list_input_cannot_be_traced():
    message = trace_failure(IteratesItsInput())
    assert "Proxy object cannot be iterated" in message
    assert "IteratesItsInput.forward" in message and "for image in images" in message
    assert "list of tensors" in message and "detection models" in message and "model.backbone" in message
    assert "control flow that depends on tensor values" not in message


@pytest.mark.parametrize(
    ("model", "line"),
    [(AssertsAShape(), 'assert x.shape[1] == 3, "expected RGB"'),
     (TorchAssertsALength(), 'torch._assert(len(x.shape) == 4, "expected NCHW")')],
)
def test_a_check_on_a_shape_says_how_to_write_it(model, line):
    message = trace_failure(model)
    assert f"{type(model).__name__}.forward" in message and f"`{line}`" in message
    assert "checks a shape or value" in message and "torch._assert(tensor_condition, message)" in message
    assert "control flow that depends on tensor values" not in message


def test_a_frame_in_a_folder_that_merely_starts_like_torchs_is_the_user_frame():
    """torchvision's folder starts with torch's folder name: its frames must not be skipped as torch's."""
    from pathlib import Path

    fake = str(Path(torch.__file__).parent) + "vision_like/models/model.py"
    namespace: dict = {}
    exec(compile("def forward(x):\n    if x.sum() > 0:\n        return x\n    return -x\n", fake, "exec"), namespace)
    message = trace_failure(namespace["forward"])
    assert "forward, line 2 of model.py" in message and "unknown place" not in message


def test_a_torchvision_detection_model_fails_in_torchvision_not_in_an_unknown_place():
    detection = pytest.importorskip("torchvision.models.detection")
    model = detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None).eval()
    message = trace_failure(model)
    assert "unknown place" not in message
    assert re.search(r"FasterRCNN\.forward, line \d+ of generalized_rcnn\.py: `for img in images:`", message), message
    assert "Proxy object cannot be iterated" in message and "detection models take a list of images" in message


# ----------------------------------------------------------------- types in a report


class MyConv(nn.Conv2d):
    """A torch.nn layer subclassed outside torch.nn, keeping its forward."""


class WeightStandardizedConv(nn.Conv2d):
    def forward(self, x):
        return self._conv_forward(x, self.weight - self.weight.mean(), self.bias)


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3, 1, 1))
        self.shift = nn.Parameter(torch.zeros(3, 1, 1))

    def forward(self, x):
        return x * self.scale + self.shift


def test_every_parameter_read_is_one_get_attr_type():
    report = profile_model(Scaled().eval(), X, runs=1)
    assert [(r.op, r.target, r.op_type) for r in report.rows if r.op == "get_attr"] == [
        ("get_attr", "scale", "get_attr"), ("get_attr", "shift", "get_attr")]
    counts = {t: n for t, n, _, _ in report.by_op_type().rows}
    assert counts == {"mul": 1, "add": 1} and report.by_op_type().parameter_reads[0] == 2  # bookkeeping (issue 34)


def test_a_torch_nn_subclass_counts_as_its_torch_nn_type_and_keeps_its_class():
    torch.manual_seed(0)
    model = nn.Sequential(MyConv(3, 4, 3), nn.Conv2d(4, 4, 3)).eval()
    report = profile_model(model, X, runs=1)
    assert [(r.op, r.op_type, r.module_class) for r in report.rows] == [
        ("call_module", "Conv2d", "MyConv"), ("call_module", "Conv2d", "Conv2d")]
    assert {t: n for t, n, _, _ in report.by_op_type().rows} == {"Conv2d": 2}
    assert "Conv2d (MyConv)" in report.to_text()
    assert [d["module_class"] for d in report.to_dicts()] == ["MyConv", "Conv2d"]


def test_a_subclass_that_overrides_forward_is_traced_into():
    graph = trace(nn.Sequential(WeightStandardizedConv(3, 4, 3))).graph
    assert "call_module" not in {n.op for n in graph.nodes}
    assert "conv2d" in {getattr(n.target, "__name__", "") for n in graph.nodes}


def test_new_columns_are_added_at_the_end(tmp_path):
    assert NODE_FIELDS[:10] == ("op", "name", "target", "op_type", "mean_s", "median_s", "min_s", "iqr_s", "runs", "pct_total")
    report = profile_model(nn.Sequential(nn.Linear(4, 2), nn.ReLU()).eval(), torch.randn(3, 4), runs=1)
    with open(report.to_csv(tmp_path / "p.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["module_class"] for r in rows] == ["Linear", "ReLU"]
    nodes = json.loads(report.to_json(tmp_path / "p.json").read_text())["nodes"]
    assert [n["module_class"] for n in nodes] == ["Linear", "ReLU"]


def test_a_function_node_has_no_module_class():
    report = profile_model(lambda x: torch.relu(x) + 1, X, runs=1)
    assert [r.module_class for r in report.rows] == ["", ""]


def test_resnet18_types_are_its_torch_nn_classes():
    torchvision = pytest.importorskip("torchvision")
    report = profile_model(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 32, 32), warmup=0, runs=1)
    counts = {t: n for t, n, _, _ in report.by_op_type("name").rows}
    assert counts == {"AdaptiveAvgPool2d": 1, "BatchNorm2d": 20, "Conv2d": 20, "Linear": 1, "MaxPool2d": 1, "ReLU": 17,
                      "add": 8, "flatten": 1}
    assert all(r.module_class == r.op_type for r in report.rows if r.op == "call_module")
    assert report.table().column("type") == [r.op_type for r in report.rows]


def test_a_torchvision_video_model_has_one_conv3d_type():
    video = pytest.importorskip("torchvision.models.video")
    model = video.r3d_18(weights=None).eval()
    report = profile_model(model, torch.randn(1, 3, 2, 16, 16), warmup=0, runs=1)
    types = {t for t, *_ in report.by_op_type().rows}
    assert "Conv3d" in types and "conv3d" not in types and "get_attr" not in types
    assert {r.module_class for r in report.rows if r.op_type == "Conv3d"} == {"Conv3DSimple", "Conv3d"}


STAMP = "labkit_fx_profile__perf_counter_stamp(_labkit_stamps)"


@pytest.mark.parametrize("written, bare", [
    (f"    s_1 = {STAMP};  s_1 = None", f"    {STAMP}"),  # torch 2.6 and later free the unused value at once
    (f"    s_1 = {STAMP}", f"    {STAMP}"),  # torch 2.4 frees nothing for a value nobody uses
    (f"    s_6 = {STAMP};  _labkit_stamps = None", f"    {STAMP};  _labkit_stamps = None"),  # 2.4, last stamp
    (f"    s_6 = {STAMP};  _labkit_stamps = s_6 = None", f"    {STAMP};  _labkit_stamps = None"),
    ("    conv1 = self.conv1(x);  x = None", "    conv1 = self.conv1(x);  x = None"),  # not a stamp: untouched
])
def test_each_torch_releases_stamp_line_becomes_a_bare_call(written: str, bare: str):
    assert _drop_stamp_variables([f"\n{written}\n"]) == [f"\n{bare}\n"]


def test_a_report_says_its_capture_and_one_built_without_it_takes_its_modes():
    report = profile_model(small_cnn(), X, runs=1)
    assert report.capture == "symbolic_trace"
    assert ProfileReport([], report.total, "modules", 0).capture == "hooks"
    assert ProfileReport([], report.total, "fast", 0).capture == "symbolic_trace"
    with pytest.raises(LabkitValueError, match="capture must be one of"):
        ProfileReport([], report.total, "fast", 0, capture="dynamo")


def test_the_outside_share_is_each_runs_time_outside_its_nodes():
    profiler = NodeProfiler(small_cnn(), X)
    for _ in range(3):
        profiler.run_once()
    report = profiler.report()
    per_run = [total - sum(samples[run] for samples in profiler.samples.values())
               for run, total in enumerate(profiler.totals)]
    assert report.outside.count == 3 and report.outside.median == pytest.approx(sorted(per_run)[1])
    assert report.outside_pct == pytest.approx(report.outside.median / report.share_basis * 100)
    assert report.top(2).outside_pct == report.outside_pct  # kept with the report, whatever rows it keeps


def test_a_report_without_per_run_outside_times_takes_the_means_and_needs_every_row():
    report = profile_model(small_cnn(), X, runs=2)
    by_hand = ProfileReport(report.rows, report.total, "fast", 0, len(report.rows))
    assert by_hand.outside_pct == pytest.approx(max(0.0, 100 - sum(r.pct for r in report.rows)))
    with pytest.raises(LabkitValueError, match="top"):
        _ = by_hand.top(2).outside_pct


def test_every_row_knows_its_module_and_the_csv_ends_with_it(tmp_path):
    report = profile_model(nn.Sequential(nn.Linear(4, 2), nn.ReLU()).eval(), torch.randn(3, 4), runs=1)
    assert [(r.module, r.module_stack) for r in report.rows] == [("0", (("0", "Linear"),)), ("1", (("1", "ReLU"),))]
    assert NODE_FIELDS[11:] == ("module", "output_bytes", "live_bytes", "source")  # new columns at the end
    with open(report.to_csv(tmp_path / "p.csv"), newline="") as handle:
        assert [r["module"] for r in csv.DictReader(handle)] == ["0", "1"]
