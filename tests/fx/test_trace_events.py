"""labkit.fx.timeline and labkit.fx.trace_events: every timed run kept, and written as trace-event JSON that nests."""
import collections
import copy
import json
import re
import statistics

import pytest
import torch
import torchvision

from labkit.fx import hf_zoo
from labkit.fx.profile import profile_model
from labkit.fx.trace_events import GRID, HOOKS_NOTE, LABKIT_PID, LIVE_BYTES, TraceFormatError, check_trace, numbered_lanes


class _Odd(torch.nn.Module):
    """A module whose attribute names need escaping in JSON."""

    def __init__(self):
        super().__init__()
        self.add_module('say "hi" & <b>', torch.nn.Linear(4, 4))
        self.add_module("ünï</script>", torch.nn.ReLU())

    def forward(self, x):
        return getattr(self, "ünï</script>")(getattr(self, 'say "hi" & <b>')(x))


class _TimmLike(torch.nn.Module):
    """A timm-style CNN: a stem, stages of blocks with a residual, a head; blocks named like timm's (stages.0.blocks.1)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.BatchNorm2d(8), torch.nn.SiLU())

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(8, 8, 3, 1, 1)
                self.act = torch.nn.GELU()

            def forward(self, x):
                return x + self.act(self.conv(x))

        self.stages = torch.nn.ModuleList([torch.nn.Sequential(Block(), Block()) for _ in range(2)])
        self.head = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x)
        return self.head(x.mean((2, 3)))


def _profile(name):
    if name == "resnet18":
        return profile_model(torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32), runs=2, warmup=1)
    if name == "timm_like":
        return profile_model(_TimmLike().eval(), torch.randn(1, 3, 16, 16), runs=2, warmup=1)
    if name == "hooks":
        return profile_model(torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32), runs=2, warmup=1,
                             mode="modules")
    return profile_model(hf_zoo.build_model(name), kwargs=hf_zoo.example_inputs(name), runs=2, warmup=1)


@pytest.fixture(scope="module", params=["resnet18", "timm_like", "bert", "gpt2", "hooks"])
def traced(request, tmp_path_factory):
    report = _profile(request.param)
    path = report.to_trace(tmp_path_factory.mktemp("trace") / f"{request.param}.json")
    return request.param, report, json.loads(path.read_text()), path


def test_every_timed_run_is_kept_and_the_statistics_are_those_of_its_spans(traced):
    _, report, _, _ = traced
    assert len(report.timeline) == report.runs == 2
    for row in (r for r in report.rows if r.op != "outside"):  # a hooked profile's time between its calls: no span
        durations = [next(s.end - s.start for s in run.spans if s.key == row.name) for run in report.timeline]
        assert row.stats.median == pytest.approx(statistics.median(durations), abs=1e-12)
    for run in report.timeline:
        assert all(0 <= s.start <= s.end <= run.total + 1e-9 for s in run.spans)


def test_every_slice_nests_and_the_file_is_valid_trace_event_json(traced):
    name, report, document, path = traced
    counts = check_trace(path, strict=True, grid=True)
    assert {e["pid"] for e in document["traceEvents"]} == {LABKIT_PID}
    assert counts["M"] >= 2 and counts["X"] > len(report.rows)
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert sum(e["name"].startswith("run ") for e in slices) == 2
    names = {e["args"].get("name") for e in document["traceEvents"] if e["ph"] == "M"}
    assert any(n and "labkit profile of" in n for n in names)
    if name == "hooks":
        assert HOOKS_NOTE in json.dumps(document) and "C" not in counts
    else:
        assert counts["C"] > 0 and any(e["name"] == LIVE_BYTES for e in document["traceEvents"] if e["ph"] == "C")
    assert path.stat().st_size < 400_000  # two runs of a ResNet18 weigh about 80 kB
    print(f"{name}: {path.stat().st_size / 1000:.1f} kB, {counts}")


def test_slice_durations_are_the_reports_timings_in_microseconds(traced):
    _, report, document, _ = traced
    runs: list = []
    for event in document["traceEvents"]:  # each run's slice, then the slices inside it
        if event["ph"] == "X" and event.get("cat") == "run":
            runs.append((event, collections.defaultdict(list)))
        elif event["ph"] == "X" and event.get("cat") in ("node", "module"):
            runs[-1][1][event["name"]].append(event["dur"])
    assert len(runs) == len(report.timeline)
    tolerance = 1 / GRID + 1e-3  # the grid's rounding and the nanosecond's, at each end
    for (run_slice, durations), run in zip(runs, report.timeline):
        assert abs(run_slice["dur"] - run.total * 1e6) <= tolerance
        matched = [span for span in run.spans if span.key in durations]
        assert len(matched) >= 0.9 * len(run.spans)
        for span in matched:
            assert min(abs(d - (span.end - span.start) * 1e6) for d in durations[span.key]) <= tolerance


def _intervals(document, cat):
    return [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e) for e in document["traceEvents"]
            if e["ph"] == "X" and e.get("cat") == cat]


def test_node_time_sits_under_module_slices_and_every_node_has_a_source_line(traced):
    name, report, document, _ = traced
    if name == "hooks":
        return
    modules = [(a, b) for a, b, e in _intervals(document, "module") if e["args"]["module"]]  # the model's own left out
    nodes = _intervals(document, "node")
    inside = sum(b - a for a, b, _ in nodes if any(ma <= a and b <= mb for ma, mb in modules))
    whole = sum(b - a for a, b, _ in nodes)
    root = [e for _, _, e in _intervals(document, "module") if not e["args"]["module"]]
    assert root and root[0]["name"] == report.model
    under_root = sum(b - a for a, b, _ in nodes if any(r["ts"] * 1000 <= a + 1 and b <= (r["ts"] + r["dur"]) * 1000 + 1
                                                       for r in root))
    assert under_root >= 0.99 * whole
    print(f"{name}: {inside / whole:.1%} of node time under a submodule's slice, {under_root / whole:.1%} under a module")
    for _, _, event in nodes:
        assert re.fullmatch(r"[^:]+\.py:\d+", event["args"]["source"]), (event["name"], event["args"]["source"])
        assert isinstance(event["args"]["input shapes"], list)
    share = _own_module_share(document)
    print(f"{name}: {share:.2%} of node time under the slice of the node's own module")
    assert share >= 0.99
    shallow = copy.deepcopy(document)  # module slices of the top-level children only: most nodes lose their own
    shallow["traceEvents"] = [e for e in shallow["traceEvents"]
                              if not (e["ph"] == "X" and e.get("cat") == "module" and "." in e["args"]["module"])]
    print(f"{name}: {_own_module_share(shallow):.2%} with top-level module slices only")
    assert _own_module_share(shallow) < 0.99


def _own_module_share(document):
    """The share of node time that lies inside a slice of the node's own module (its innermost, "" for the model)."""
    modules = collections.defaultdict(list)
    for a, b, event in _intervals(document, "module"):
        modules[event["args"]["module"]].append((a, b))
    nodes = _intervals(document, "node")
    inside = sum(b - a for a, b, e in nodes if any(ma <= a and b <= mb for ma, mb in modules[e["args"]["module"]]))
    return inside / sum(b - a for a, b, _ in nodes)


def test_module_calls_nest_layer_inside_block_inside_stage():
    report = _profile("resnet18")
    events = [e for e in json.loads(json.dumps(__import__("labkit.fx.trace_events", fromlist=["x"]).trace_events(
        report, model_name="ResNet")))]
    by_name = {e["name"]: e for e in events if e["ph"] == "X" and e.get("cat") in ("module", "node")}
    outer, block, conv = by_name["layer1"], by_name["layer1.0"], by_name["layer1_0_conv1"]
    assert outer["ts"] <= block["ts"] <= conv["ts"]
    assert conv["ts"] + conv["dur"] <= block["ts"] + block["dur"] <= outer["ts"] + outer["dur"] + 1e-6
    assert conv["args"]["module"] == "layer1.0.conv1" and conv["args"]["source"].startswith("resnet.py:")
    assert conv["args"]["input shapes"] == [[1, 64, 8, 8]]


def test_any_module_name_is_valid_json(tmp_path):
    hooked = profile_model(_Odd(), torch.randn(2, 4), runs=1, warmup=0, mode="modules")  # fx's code needs identifiers
    path = hooked.to_trace(tmp_path / "odd.json")
    check_trace(path)
    modules = {e["args"].get("module") for e in json.loads(path.read_text(encoding="utf-8"))["traceEvents"] if e["ph"] == "X"}
    assert {'say "hi" & <b>', "ünï</script>"} <= modules
    assert path.read_text(encoding="utf-8").isascii()
    traced = profile_model(torch.nn.Sequential(collections.OrderedDict(ünï=torch.nn.ReLU())), torch.randn(2), runs=1)
    events = json.loads(traced.to_trace(tmp_path / "unicode.json").read_text(encoding="utf-8"))["traceEvents"]
    assert "ünï" in {e["name"] for e in events if e["ph"] == "X"}


def test_the_validator_refuses_overlapping_slices_and_a_missing_process_name():
    good = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}},
        {"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 0.0, "dur": 10.0},
        {"ph": "X", "name": "b", "pid": 1, "tid": 0, "ts": 2.0, "dur": 3.0},
    ]}
    assert check_trace(good) == {"M": 1, "X": 2}
    overlapping = {"traceEvents": [*good["traceEvents"], {"ph": "X", "name": "c", "pid": 1, "tid": 0, "ts": 4.0, "dur": 7.0}]}
    with pytest.raises(TraceFormatError, match="overlap"):
        check_trace(overlapping)
    with pytest.raises(TraceFormatError, match="process_name"):
        check_trace({"traceEvents": good["traceEvents"][1:]})
    with pytest.raises(TraceFormatError, match="dur"):
        check_trace({"traceEvents": [good["traceEvents"][0], {"ph": "X", "name": "a", "pid": 1, "ts": 0, "dur": -1}]})


def test_torch_profilers_own_export_passes_the_same_rules(tmp_path):
    from torch.profiler import profile

    model, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32)
    with torch.no_grad(), profile() as prof:
        model(x)
    prof.export_chrome_trace(str(tmp_path / "torch.json"))
    assert check_trace(tmp_path / "torch.json")["X"] > 0
    raw = json.loads((tmp_path / "torch.json").read_text())
    before = json.dumps(raw)
    with pytest.raises(TraceFormatError, match="integer 'pid' and 'tid'"):  # its "Spans" lane: speedscope opens nothing
        check_trace(raw, strict=True)
    numbered = numbered_lanes(raw)
    assert json.dumps(raw) == before  # a copy: torch's own document is left as it was
    assert check_trace(numbered, strict=True)["X"] == check_trace(raw)["X"]
    names = {e["args"]["name"] for e in numbered["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "PyTorch Profiler" in names  # the string lane's name kept as its thread's name
    assert [e["name"] for e in numbered["traceEvents"] if e["ph"] == "X"] == [e["name"] for e in raw["traceEvents"]
                                                                             if e["ph"] == "X"]


_LANE_NAMES = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
               {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "t"}}]


def _one_slice(**changes):
    return {"traceEvents": [*_LANE_NAMES, {"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 1.0, "dur": 2.0, **changes}]}


@pytest.mark.parametrize(("broken", "rule"), [
    (_one_slice(ts=float("nan")), "strict JSON"),
    (_one_slice(dur=float("inf")), "strict JSON"),
    (_one_slice(ts=-1.0), "ts' >= 0"),
    (_one_slice(dur=-0.5), "dur' >= 0"),
    (_one_slice(ts="1.0"), "finite 'ts'"),
    (_one_slice(pid="labkit"), "integer 'pid'"),
    (_one_slice(tid="main"), "integer 'pid' and 'tid'"),
    (_one_slice(tid=7), "thread_name"),
    ({"traceEvents": [_LANE_NAMES[1], _one_slice()["traceEvents"][-1]]}, "process_name"),
    (_one_slice(ts=1.1), "grid"),
    ({"traceEvents": [*_one_slice()["traceEvents"], {"ph": "X", "name": "b", "pid": 1, "tid": 0, "ts": 2.0, "dur": 2.0}]},
     "overlap"),
    ({"traceEvents": [*_LANE_NAMES, {"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 0.0, "args": {"bytes": "many"}}]},
     "numbers"),
])
def test_the_strict_check_refuses_a_trace_that_breaks_each_rule(broken, rule):
    assert check_trace(_one_slice(), strict=True, grid=True) == {"M": 2, "X": 1}
    with pytest.raises(TraceFormatError, match=rule):
        check_trace(broken, strict=True, grid=True)


def test_a_file_with_nan_is_refused_as_not_strict_json(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(_one_slice(dur=float("nan"))))  # Python's json writes NaN; JSON has no such number
    with pytest.raises(TraceFormatError, match="strict JSON"):
        check_trace(path)
