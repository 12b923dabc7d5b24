"""labkit's slices and torch.profiler's operators in one trace, on one clock (labkit.fx.trace_beside)."""
import json
import tempfile

import pytest
import torch
import torchvision

from labkit.core.errors import LabkitValueError
from labkit.fx.crosscheck import NODE_LABEL, RUN_MARKER, CrossCheck, _LabelledGraph, compare_with_torch_profiler
from labkit.fx.profile import make_profiler
from labkit.fx.trace_beside import ALIGNMENT_TOLERANCE_US, top_level_operators
from labkit.fx.trace_events import LABKIT_PID, check_trace


def _model_and_input():
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10).eval(), torch.randn(1, 3, 32, 32)


def _operators_of_each_node(model, x):
    """(node, top-level operator) in the order one labelled run issues them: the truth the aligned trace must show."""
    graph = make_profiler(model, x).graph_module
    names = {n.name: n.name for n in graph.graph.nodes if n.op not in ("placeholder", "output")}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function(RUN_MARKER):
            _LabelledGraph(graph, names).run(x)
    marker = next(e for e in prof.events() if e.name == RUN_MARKER)
    return [(label.name.removeprefix(NODE_LABEL), op.name) for label in marker.cpu_children
            if label.name.startswith(NODE_LABEL) for op in label.cpu_children if "::" in op.name]


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    """One cross-check, its exports counted and its temporary folder watched, then its combined trace."""
    model, x = _model_and_input()
    exports = []
    original = torch.profiler.profile.export_chrome_trace

    def counted(self, path):
        exports.append(path)
        return original(self, path)

    scratch = tmp_path_factory.mktemp("scratch")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.profiler.profile, "export_chrome_trace", counted)
        patch.setattr(tempfile, "tempdir", str(scratch))
        check = compare_with_torch_profiler(model, x, warmup=1, runs=3)
        exported_by_the_check = len(exports)
        path = check.to_trace(tmp_path_factory.mktemp("beside") / "resnet18_beside.json")
        check.to_trace(path.with_name("again.json"))
        left = sorted(p.name for p in scratch.iterdir())
    lazy = {"exports during the check": exported_by_the_check, "exports after two traces": len(exports), "left": left}
    return check, json.loads(path.read_text()), path, _operators_of_each_node(model, x), lazy


def test_the_cross_check_exports_nothing_until_a_trace_is_asked_for_and_leaves_no_file(combined):
    *_, lazy = combined
    assert lazy == {"exports during the check": 0, "exports after two traces": 1, "left": []}


def test_the_cross_check_keeps_its_torch_profiler_run_and_one_valid_file_holds_both(combined):
    check, document, path, *_ = combined
    counts = check_trace(path, strict=True)  # torch.profiler's string lanes numbered: what speedscope opens
    assert all(isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in document["traceEvents"])
    assert check.report is not None and len(check.report.timeline) == 3
    pids = {e["pid"] for e in document["traceEvents"] if e["ph"] == "X"}
    assert LABKIT_PID in pids and len(pids) >= 2  # labkit's process and torch.profiler's
    assert counts["X"] > 3 * len(check.report.rows)
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::conv2d" for e in document["traceEvents"])


def test_each_aten_operator_of_a_node_falls_inside_that_nodes_slice(combined):
    check, document, _, expected, _ = combined
    events = document["traceEvents"]
    runs = sorted((e for e in events if e["ph"] == "X" and e.get("cat") == "run"), key=lambda e: e["ts"])
    markers = sorted((e for e in events if e["ph"] == "X" and e["name"] == RUN_MARKER), key=lambda e: e["ts"])
    assert len(runs) == len(markers) == 3
    tol = ALIGNMENT_TOLERANCE_US
    operators = top_level_operators(events, RUN_MARKER)
    worst = float("-inf")
    for run, marker in zip(runs, markers):  # the markers are torch.profiler's, never used to align: a check
        assert marker["ts"] - tol <= run["ts"] and run["ts"] + run["dur"] <= marker["ts"] + marker["dur"] + tol
        nodes = {e["name"]: e for e in events if e.get("cat") == "node" and e["pid"] == LABKIT_PID
                 and run["ts"] <= e["ts"] <= run["ts"] + run["dur"]}
        inside = [e for e in operators if marker["ts"] <= e["ts"] <= marker["ts"] + marker["dur"]]
        assert [op for _, op in expected] == [e["name"] for e in inside]
        for (node, _), event in zip(expected, inside):
            slice_ = nodes[node]
            early = slice_["ts"] - event["ts"]
            late = event["ts"] + event["dur"] - (slice_["ts"] + slice_["dur"])
            worst = max(worst, early, late)
            assert early <= tol and late <= tol, (node, event["name"], early, late)
            assert event["args"]["labkit node"] == node
    print(f"{len(expected)} operators per run; the worst one sits {worst:.3f} µs outside its node's slice "
          f"(negative: inside; tolerance {tol} µs)")


def test_a_hand_built_cross_check_says_it_kept_no_runs(tmp_path):
    with pytest.raises(LabkitValueError, match="kept no runs"):
        CrossCheck([]).to_trace(tmp_path / "x.json")
