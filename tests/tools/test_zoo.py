"""python -m labkit zoo: one row per model, measured in its own process; a failure or a timeout is a row too."""
import argparse
import csv
import dataclasses
import json
import sys

import pytest

from labkit.__main__ import main
from labkit.core.errors import LabkitValueError

pytest.importorskip("torchvision")

from labkit.tools import zoo  # noqa: E402


def test_a_small_traced_model_gets_every_column():
    row = zoo.measure_model("ResNet18", size=32, warmup=0, runs=2)
    assert (row.model, row.kind, row.input) == ("resnet18", "classification", "1x3x32x32")
    assert (row.outcome, row.traced) == ("traced", "yes")
    assert (row.mode, row.nodes, row.top_op, row.why) == ("fast", 69, "Conv2d", "")
    assert row.over_eager is not None and row.over_eager > 0 and row.over_eager_text.startswith(f"{row.over_eager:.2f}x")
    assert row.fusion_same == "yes, 20 BN folded"
    assert (row.channels_last_drops, row.channels_last_same) == ("none", "yes")


def test_outputs_are_compared_relative_to_their_scale_and_an_empty_one_is_not_compared():
    import torch

    reference = {"out": torch.tensor([100.0, -50.0])}
    assert zoo._same_text(reference, {"out": torch.tensor([100.001, -50.0])}, "the variant") == "yes"
    assert zoo._same_text(reference, {"out": torch.tensor([100.5, -50.0])}, "the variant", "3 BN folded") == (
        "NO (max diff 0.5), 3 BN folded")
    empty = [{"boxes": torch.zeros(0, 4)}]  # a detector that kept no box
    assert zoo._same_text(empty, empty, "the variant") == "n/a (empty output)"
    assert zoo._same_text(reference, [torch.ones(2)], "the variant") == "n/a (The outputs differ in structure)"


def test_a_size_the_model_cannot_take_is_a_failed_row_without_building_it(monkeypatch):
    import labkit.fx.model_zoo

    monkeypatch.setattr(labkit.fx.model_zoo, "build_model", lambda name: pytest.fail("built the model"))
    row = zoo.measure_model("vit_b_32", size=64)
    assert (row.outcome, row.traced, row.mode, row.nodes) == ("failed", "-", "", None)
    assert row.why == "vit_b_32 needs an input of at least 224x224 (got 64x64); try --size 224 (the model's default)."


def test_a_model_that_fails_by_itself_is_a_failed_row(monkeypatch):
    import torch

    import labkit.fx.model_zoo

    monkeypatch.setattr(labkit.fx.model_zoo, "build_model", lambda name: torch.nn.Linear(3, 4).eval())
    row = zoo.measure_model("resnet18", size=32)
    assert row.outcome == "failed" and row.why.startswith("the model itself failed, before labkit: RuntimeError: ")


@pytest.mark.slow  # about 3 s on an idle 2-core machine, 27 s under load; tests/tools/test_profile.py covers the fallback
def test_a_detection_model_falls_back_and_skips_fusion():
    row = zoo.measure_model("ssdlite320_mobilenet_v3_large", size=32, warmup=0, runs=1)
    assert (row.outcome, row.traced, row.mode, row.fusion_same) == ("fell back", "no", "modules", "n/a (not traced)")
    assert row.why.startswith("TraceError: Proxy object cannot be iterated. It failed in SSD.forward, line ")
    assert row.nodes and row.over_eager and row.top_op and row.channels_last_same


def _args(**overrides):
    values = {"batch": 1, "warmup": 0, "runs": 1, "size": 32, "device": None, "timeout": 120.0}
    return argparse.Namespace(**{**values, **overrides})


def test_a_model_past_its_time_limit_is_a_timeout_row_and_the_sweep_goes_on(tmp_path, capsys):
    csv_path = tmp_path / "zoo.csv"
    assert main(["zoo", "resnet18", "squeezenet1_1", "--timeout", "0.01", "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    assert "[1/2] resnet18: timeout (stopped after 0.01 s (--timeout))" in out and "[2/2] squeezenet1_1: timeout" in out
    assert "2 models: 0 traced, 0 fell back to mode 'modules', 2 failed (2 timeout); wall time " in out
    rows = list(csv.DictReader(csv_path.open()))
    assert [(r["model"], r["outcome"], r["input"]) for r in rows] == [
        ("resnet18", "timeout", "1x3x224x224"), ("squeezenet1_1", "timeout", "1x3x224x224")]


def test_a_process_that_dies_without_a_row_is_a_crashed_row(monkeypatch):
    monkeypatch.setattr(zoo, "_child_command", lambda name, args: [sys.executable, "-c", "import sys; sys.exit('out of memory')"])
    row = zoo.run_in_child("resnet18", _args())
    assert (row.model, row.outcome, row.why) == ("resnet18", "crashed", "process ended with code 1: out of memory")


def test_the_child_reports_its_row_on_one_marked_line(monkeypatch):
    row = zoo.ZooRow("resnet18", "classification", "1x3x32x32", "traced", mode="fast", nodes=69, over_eager=1.02)
    line = zoo.ROW_MARKER + json.dumps(dataclasses.asdict(row))
    code = f"print('model noise'); print({line!r})"
    monkeypatch.setattr(zoo, "_child_command", lambda name, args: [sys.executable, "-c", code])
    measured = zoo.run_in_child("resnet18", _args())
    assert measured.seconds > 0 and measured == dataclasses.replace(row, seconds=measured.seconds)


def test_the_table_totals_csv_and_markdown(tmp_path):
    rows = [
        zoo.ZooRow("resnet18", "classification", "1x3x32x32", "traced", mode="fast", nodes=69, over_eager=1.02,
                   top_op="Conv2d", channels_last_drops="none", channels_last_same="yes", fusion_same="yes, 20 BN folded",
                   seconds=5),
        zoo.ZooRow("raft_small", "optical_flow", "two 1x3x128x128", "fell back", why="TraceError: " + "x" * 100,
                   mode="modules", nodes=70, over_eager=1.3, noisy=True, seconds=9),
        zoo.ZooRow("vit_h_14", "classification", "1x3x224x224", "timeout", why="stopped after 300 s (--timeout)", seconds=300),
    ]
    result = zoo.ZooResult(rows, seconds=330)
    assert result.totals() == ("3 models: 1 traced, 1 fell back to mode 'modules', 1 failed (1 timeout); wall time 5.5 min")
    table = result.table()
    assert table.column("traced") == ["yes", "no", "timeout"] and table.column("x eager") == ["1.02x", "1.30x (noisy)", ""]
    assert len(table.column("why")[1]) == zoo.WHY_WIDTH and table.column("why")[1].endswith("...")
    result.to_csv(tmp_path / "zoo.csv")
    written = list(csv.DictReader((tmp_path / "zoo.csv").open()))
    assert written[1]["why"] == rows[1].why and written[0]["over_eager"] == "1.02" and written[2]["nodes"] == ""
    assert [r["noisy"] for r in written] == ["False", "True", "False"]
    markdown = result.to_markdown(tmp_path / "zoo.md").read_text()
    assert markdown.startswith("# torchvision model zoo\n\n| model ") and rows[1].why in markdown
    assert markdown.endswith(result.totals() + "\n")


@pytest.mark.parametrize(
    ("names", "every", "kinds", "chosen"),
    [
        (["ResNet18", "resnet18", "raft_small"], False, [], ["resnet18", "raft_small"]),
        ([], False, ["optical_flow"], ["raft_large", "raft_small"]),
        (["resnet18", "raft_small"], False, ["optical_flow"], ["raft_small"]),
    ],
)
def test_which_models_a_sweep_takes(names, every, kinds, chosen):
    assert zoo.selected_models(names, every, kinds) == chosen


def test_all_takes_the_whole_catalog_in_its_order():
    from labkit.fx.model_zoo import catalog

    assert zoo.selected_models([], True, []) == list(catalog())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Name the models to try"),
        (["resnt18"], "Unknown torchvision model 'resnt18'. Did you mean resnet18"),
        (["resnet18", "--kind", "video"], "None of the named models is of kind video."),
        (["resnet18", "--timeout", "0"], "--timeout must be a number of seconds above 0 (got 0.0)"),
        (["resnet18", "--timeout", "nan"], "--timeout must be a number of seconds above 0 (got nan)"),
        (["resnet18", "--runs", "0"], "--runs must be at least 1 (got 0)"),
        (["resnet18", "--size", "0"], "--size must be at least 1 (got 0)"),
        (["resnet18", "--markdown", "{tmp}/no/zoo.md"], "does not exist"),
    ],
)
def test_bad_arguments_are_one_line_before_any_model_runs(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(zoo, "run_in_child", lambda *a: pytest.fail("ran a model"))
    assert main(["zoo", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_selected_models_refuses_nothing_to_do():
    with pytest.raises(LabkitValueError):
        zoo.selected_models([], False, [])


@pytest.mark.slow  # two fresh interpreters import torch and torchvision
def test_a_real_sweep_of_two_small_models_writes_its_table(tmp_path, capsys):
    md, csv_path = tmp_path / "zoo.md", tmp_path / "zoo.csv"
    argv = ["zoo", "squeezenet1_1", "mobilenet_v3_small", "--size", "32", "--runs", "2", "--warmup", "0",
            "--markdown", str(md), "--csv", str(csv_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 models: 2 traced, 0 fell back to mode 'modules', 0 failed; wall time" in out
    rows = list(csv.DictReader(csv_path.open()))
    assert [(r["model"], r["outcome"], r["mode"], r["channels_last_same"]) for r in rows] == [
        ("squeezenet1_1", "traced", "fast", "yes"), ("mobilenet_v3_small", "traced", "fast", "yes")]
    assert rows[1]["fusion_same"] == "yes, 34 BN folded" and rows[0]["fusion_same"] == "yes, 0 BN folded"
    assert "| squeezenet1_1 " in md.read_text()
