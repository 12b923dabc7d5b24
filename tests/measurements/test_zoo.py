"""python -m labkit zoo: one row per model, measured in its own process; a failure or a timeout is a row too."""
import argparse
import csv
import dataclasses
import json
import subprocess
import sys

import pytest

from labkit.__main__ import main
from labkit.core.errors import LabkitValueError

pytest.importorskip("torchvision")

import torch  # noqa: E402

from labkit.measurements import zoo  # noqa: E402


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


class ConvBnPerImage(torch.nn.Module):
    """Conv + BatchNorm, then a loop over the batch: symbolic_trace fails ("Proxy object cannot be iterated"),
    torch.export captures it (the batch size is static)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.stack([image.relu() for image in self.bn(self.conv(x))])


def test_an_exported_model_is_fused_in_its_exported_graph(monkeypatch):
    """Fusion works wherever a graph profile does (issue 34), so the zoo's column covers exported models too."""
    import labkit.fx.model_zoo

    def build(name):
        torch.manual_seed(0)
        model = ConvBnPerImage().eval()
        model.bn.running_mean.uniform_(-1, 1), model.bn.running_var.uniform_(0.5, 2)
        return model

    monkeypatch.setattr(labkit.fx.model_zoo, "build_model", build)
    row = zoo.measure_model("resnet18", size=16, warmup=0, runs=1)
    assert (row.outcome, row.mode, row.capture) == ("traced", "fast", "export")
    assert row.fusion_same == "yes, 1 BN folded in the exported graph"


@pytest.mark.slow  # about 3 s on an idle 2-core machine, 27 s under load; tests/learner/test_profile.py covers the fallback
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
    assert "2 models: 2 traced, 0 fell back to mode 'modules', 0 failed" in out
    rows = list(csv.DictReader(csv_path.open()))
    assert [(r["model"], r["outcome"], r["mode"], r["channels_last_same"]) for r in rows] == [
        ("squeezenet1_1", "traced", "fast", "yes"), ("mobilenet_v3_small", "traced", "fast", "yes")]
    assert rows[1]["fusion_same"] == "yes, 34 BN folded" and rows[0]["fusion_same"] == "yes, 0 BN folded"
    assert "| squeezenet1_1 " in md.read_text()


# ---------------------------------------------------------------------- Hugging Face types (--hf)


def _in_process(name, args):
    """run_in_child without the child: the same row, measured here (a fresh interpreter costs seconds)."""
    return zoo._measure_one(argparse.Namespace(**{**vars(args), "one": name}))


def test_a_hf_type_gets_a_row_with_its_keyword_inputs(transformers):
    row = zoo.measure_hf_model("gpt2", warmup=0, runs=1)
    assert (row.model, row.kind, row.input) == ("gpt2", "hf text", "input_ids 1x16, attention_mask 1x16")
    assert row.outcome in ("traced", "fell back") and row.mode and row.nodes and row.over_eager and row.top_op
    assert (row.fusion_same, row.channels_last_same) == ("n/a (no BatchNorm)", "n/a (no image input)")
    if row.mode == "modules":  # hooks: the report's "outside" row is the share no module accounts for
        assert row.outside_pct is not None and 0 < row.outside_pct < 100


def test_zoo_hf_prints_a_table_row(transformers, monkeypatch, capsys):
    monkeypatch.setattr(zoo, "run_in_child", _in_process)
    assert main(["zoo", "--hf", "BERT", "--runs", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] bert: " in out and "\nHugging Face model zoo\n" in out and "1 models: " in out
    row = next(line for line in out.splitlines() if line.startswith("bert "))
    assert " hf text " in row and " n/a (no BatchNorm) " in row


def test_a_hf_image_input_gets_the_channels_last_check(transformers):
    row = zoo.measure_hf_model("vit", warmup=0, runs=1)
    assert row.input == "pixel_values 1x3x32x32" and row.channels_last_same == "yes"


def test_the_capture_the_report_names_fills_its_column(monkeypatch):
    from labkit.core.timing import RunStats
    from labkit.fx.report import NodeTiming, ProfileReport

    @dataclasses.dataclass(frozen=True, repr=False)
    class ExportedReport(ProfileReport):  # as a report of the torch.export tier will read
        capture: str = "export"

    stats = RunStats.from_samples([1e-3, 1e-3])
    report = ExportedReport([NodeTiming("call_function", "mm", "mm", "mm", stats, 96.0)], stats, "fast", 0, graph_nodes=1,
                            fallback_reason="torch.fx could not trace the model: TypeError: no. More.")
    monkeypatch.setattr(zoo, "_profile_against_eager", lambda *a: (report, 1.05, False))
    row, graph_captured = zoo._profiled_row(zoo.ZooRow("m", "hf text", "x", "failed"), None, zoo.Call(), 0, 1, "cpu")
    assert (row.outcome, row.mode, row.capture, graph_captured) == ("traced", "fast", "export", True), "it gets fused"
    assert row.why == "not by symbolic_trace: TypeError: no."
    # the report's own outside_pct (100 - 96 %) where it has one; else its "outside" rows, here none
    assert row.outside_pct == (pytest.approx(4.0) if hasattr(ProfileReport, "outside_pct") else None)
    totals = zoo.ZooResult([row], 60).totals()
    assert totals == "1 models: 1 traced, 0 fell back to mode 'modules', 0 failed; by capture: export 1; wall time 1.0 min"


def test_the_outside_column_is_the_reports_outside_rows():
    table = zoo.ZooResult([zoo.ZooRow("bert", "hf text", "x", "fell back", mode="modules", outside_pct=61.4)], 1).table()
    assert table.column("outside") == ["61.4%"] and table.column("capture") == [""]


@pytest.mark.parametrize(
    ("names", "hf", "chosen"),
    [
        ([], ["bert,gpt2", "BERT"], ["hf:bert", "hf:gpt2"]),
        (["resnet18"], ["t5"], ["resnet18", "hf:t5"]),
        ([], ["all"], [f"hf:{name}" for name in ("bert", "distilbert", "roberta", "gpt2", "llama", "mistral", "qwen2",
                                                  "t5", "bart", "vit", "whisper", "clip")]),
    ],
)
def test_which_hf_types_a_sweep_takes(names, hf, chosen):
    assert zoo.selected_models(names, False, [], hf) == chosen


def test_a_hf_child_gets_no_size():
    command = zoo._child_command("hf:bert", _args(size=64))
    assert command[command.index("--one") + 1] == "hf:bert" and "--size" not in command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hf", "bret"], "Unknown Hugging Face model type 'bret'. Did you mean bert, bart? Run `python -m labkit zoo --list`"),
        (["--hf", "bert", "--size", "64"], "--size sets a torchvision model's image side; a Hugging Face type's inputs"),
    ],
)
def test_bad_hf_arguments_are_one_line_before_any_model_runs(args, message, capsys, monkeypatch):
    monkeypatch.setattr(zoo, "run_in_child", lambda *a: pytest.fail("ran a model"))
    assert main(["zoo", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_transformers_missing_is_one_line_naming_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    monkeypatch.setattr(zoo, "run_in_child", lambda *a: pytest.fail("ran a model"))
    assert main(["zoo", "--hf", "bert"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Hugging Face models need the transformers package") and err.count("\n") == 1
    assert err.endswith("pip install 'torch-labkit[hf]'\n")
    row = zoo.measure_hf_model("bert")  # the child alone: a failed row that says the same
    assert row.outcome == "failed" and row.why.endswith("pip install 'torch-labkit[hf]'")


def test_list_shows_the_hf_types_without_transformers(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert main(["zoo", "--list"]) == 0
    out = capsys.readouterr().out
    assert "Hugging Face types, --hf TYPE (12; small configs, random weights, attn_implementation='eager'" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "WhisperModel" in lines["whisper"] and "input_features 1x80x64, decoder_input_ids 1x16" in lines["whisper"]
    assert "classification (80 models)" in out  # the torchvision catalog too


@pytest.mark.slow  # a fresh interpreter imports torch and transformers
def test_a_real_hf_sweep_writes_its_row(tmp_path, transformers):
    csv_path = tmp_path / "zoo.csv"
    done = subprocess.run([sys.executable, "-m", "labkit", "zoo", "--hf", "llama", "--runs", "1", "--warmup", "0",
                           "--csv", str(csv_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (row,) = csv.DictReader(csv_path.open())
    assert (row["model"], row["kind"]) == ("llama", "hf text") and row["outcome"] in ("traced", "fell back")


def test_outputs_are_compared_as_plain_dicts_whatever_mapping_holds_them():
    import collections

    import torch

    class ModelOutput(collections.OrderedDict):  # as transformers' outputs: a mapping pytree may know without keys
        pass

    reference = ModelOutput(last_hidden_state=torch.ones(2), pooler=[torch.zeros(1)])
    assert zoo._plain(reference) == {"last_hidden_state": reference["last_hidden_state"], "pooler": reference["pooler"]}
    assert type(zoo._plain(reference)) is dict
    assert zoo._same_text(reference, ModelOutput(last_hidden_state=torch.ones(2), pooler=[torch.zeros(1)]), "the run") == "yes"
