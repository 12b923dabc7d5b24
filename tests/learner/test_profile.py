"""python -m labkit profile: any torchvision model, its kind's input and size, tracing options, one-line errors."""
import json

import pytest

from labkit.__main__ import main

pytest.importorskip("torchvision")

FAST = ["--warmup", "0", "--runs", "1", "--top", "3"]


def test_profile_prints_tables_and_writes_files(tmp_path, capsys):
    csv_path, json_path = tmp_path / "out.csv", tmp_path / "out.json"
    argv = ["profile", "ResNet18", "--batch", "1", "--size", "32", "--warmup", "0", "--runs", "2", "--top", "3",
            "--mode", "fast", "--csv", str(csv_path), "--json", str(json_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("resnet18 (classification), input 1x3x32x32, device cpu, mode fast\n")
    assert "top 3 of 69 nodes" in out and "Time by op type" in out and "Fell back" not in out
    assert len(csv_path.read_text().splitlines()) == 70  # header + 69 timed nodes
    assert json.loads(json_path.read_text())["total"]["count"] == 2


def test_profile_writes_a_trace_a_viewer_reads(tmp_path, capsys):
    from labkit.fx.trace_events import check_trace

    path = tmp_path / "r18.trace.json"
    assert main(["profile", "resnet18", "--size", "32", *FAST, "--trace", str(path)]) == 0
    assert f"wrote {path}" in capsys.readouterr().out
    assert check_trace(path)["X"] == 1 + 1 + 69 + 75  # the run, the model, its 69 nodes and 75 module calls
    names = {event["name"] for event in json.loads(path.read_text())["traceEvents"]}
    assert {"run 0", "ResNet", "layer1", "layer1.0", "layer1_0_conv1"} <= names


def test_mode_modules_times_the_layers_without_a_trace(capsys):
    assert main(["profile", "resnet18", "--size", "32", "--mode", "modules", *FAST]) == 0
    out = capsys.readouterr().out
    assert "mode modules\n" in out.splitlines()[0] + "\n" and "mode=modules" in out


def test_a_leaf_module_is_one_node(capsys):
    assert main(["profile", "resnet18", "--size", "32", "--leaf-module", "layer1", *FAST]) == 0
    assert "top 3 of 56 nodes" in capsys.readouterr().out  # layer1's 13 nodes become one


def test_tracing_options_reach_profile_model(monkeypatch, capsys):
    import torch.fx

    import labkit.fx.profile
    from labkit.core.errors import LabkitError

    seen = {}

    def record(model, *inputs, **options):
        seen.update(options, inputs=inputs)
        raise LabkitError("stopped by the test")

    monkeypatch.setattr(labkit.fx.profile, "profile_model", record)
    argv = ["profile", "resnet18", "--size", "32", "--concrete-args", "flip=True", "--concrete-args", "scale=(1, 2.5)",
            "--concrete-args", "name='a=b'", "--tracer", "torch.fx:Tracer", "--warmup", "0", "--runs", "1"]
    assert main(argv) == 2
    assert capsys.readouterr().err == "error: stopped by the test\n"
    assert seen["concrete_args"] == {"flip": True, "scale": (1, 2.5), "name": "a=b"}
    assert seen["tracer"] is torch.fx.Tracer and seen["leaf_modules"] == []
    assert [tuple(x.shape) for x in seen["inputs"]] == [(1, 3, 32, 32)]


def test_list_shows_every_kind_with_its_default_input(capsys):
    from labkit.fx.model_zoo import catalog

    assert main(["profile", "--list"]) == 0
    out = capsys.readouterr().out
    for title in ("classification (80 models)", "detection (12 models)", "segmentation (6 models)",
                  "video (9 models)", "optical_flow (2 models)"):
        assert title in out
    assert "Hugging Face types, --hf TYPE (12;" in out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line and line.split()[0] in catalog()}
    assert len(lines) == len(catalog())
    assert lines["inception_v3"] == ["299", "1x3x299x299"] and lines["vit_h_14"] == ["224", "1x3x224x224"]
    assert lines["r3d_18"] == ["112", "1x3x16x112x112"] and lines["raft_small"] == ["128", "two", "1x3x128x128"]
    assert lines["ssd300_vgg16"] == ["320", "list", "of", "1", "image", "3x320x320"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuchnet"], "Unknown torchvision model 'nosuchnet'. Run `python -m labkit profile --list` to see every model."),
        (["resnt18"], "Unknown torchvision model 'resnt18'. Did you mean resnet18, "),
        (["quantized_resnet18"], "quantized_resnet18 is one of torchvision's quantization models"),
        ([], "Name a model to profile"),
        (["resnet18", "--runs", "0"], "runs must be at least 1"),
        (["resnet18", "--batch", "0"], "--batch must be at least 1"),
        (["resnet18", "--device", "gpu0"], "is not a device name"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(args, message, capsys):
    assert main(["profile", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_unknown_mode_is_rejected_by_argparse():
    with pytest.raises(SystemExit):
        main(["profile", "resnet18", "--mode", "turbo"])


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the CLI builds or profiles a model."""
    import labkit.fx.model_zoo
    import labkit.fx.profile

    monkeypatch.setattr(labkit.fx.model_zoo, "build_model", lambda name: pytest.fail("built the model"))
    monkeypatch.setattr(labkit.fx.profile, "profile_model", lambda *a, **k: pytest.fail("profiled"))


def test_an_unwritable_output_path_is_one_clear_line_and_exit_code_2(tmp_path, capsys, no_work):
    missing = tmp_path / "no-such-folder" / "out.csv"
    argv = ["profile", "resnet18", "--size", "32", "--warmup", "0", "--runs", "1", "--csv", str(missing)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: Cannot write {missing}: the folder") and err.count("\n") == 1
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--top", "0"], "--top must be at least 1 (got 0)"),
        (["--top", "-3"], "--top must be at least 1 (got -3)"),
        (["--runs", "-1"], "--runs must be at least 1 (got -1)"),
        (["--warmup", "-1"], "--warmup cannot be negative (got -1)"),
        (["--size", "0"], "--size must be at least 1 (got 0)"),
        (["--json", "{tmp}"], "is a folder"),
        (["--csv", "{tmp}/fifo"], "is a special file"),
        (["--json", "{tmp}/out.json", "--csv", "{tmp}/no/out.csv"], "does not exist"),
        (["--trace", "{tmp}/no/out.trace.json"], "does not exist"),
        (["--concrete-args", "flip=Tru e"], "--concrete-args 'flip=Tru e': 'Tru e' is not a Python literal (SyntaxError)"),
        (["--concrete-args", "flip=print('x')"], "\"print('x')\" is not a Python literal (ValueError)"),
        (["--concrete-args", "flip"], "--concrete-args takes NAME=VALUE, e.g. --concrete-args flip=True (got 'flip')"),
        (["--concrete-args", "2x=1"], "--concrete-args takes NAME=VALUE"),
        (["--tracer", "collections:OrderedDict"], "expected a subclass of torch.fx.Tracer, found a type in collections"),
        (["--tracer", "torch.fx:NoSuchTracer"], "found nothing by that name in torch.fx"),
        (["--tracer", "no_such_module_xyz:Tracer"], "cannot import 'no_such_module_xyz'"),
        (["--tracer", "torch.fx.Tracer"], "--tracer takes module.path:ClassName"),
    ],
)
def test_every_argument_is_checked_before_any_work(args, message, tmp_path, capsys, no_work):
    import os

    os.mkfifo(tmp_path / "fifo")
    assert main(["profile", "resnet18", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


@pytest.mark.parametrize(
    ("model", "size", "message"),
    [
        ("vit_b_16", 64, "vit_b_16 needs an input of at least 224x224 (got 64x64); try --size 224 (the model's default)."),
        ("inception_v3", 32, "inception_v3 needs an input of at least 75x75 (got 32x32); try --size 299 (the model's default)."),
        ("raft_small", 132, "raft_small needs sides that are multiples of 8 (got 132); try --size 128 (the model's default)."),
    ],
)
def test_an_input_the_model_cannot_take_is_refused_before_any_work(model, size, message, capsys, no_work):
    assert main(["profile", model, "--size", str(size)]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


@pytest.mark.parametrize("model", ["swin_t", "swin_v2_t"])
def test_swin_profiles_below_the_size_its_weights_were_trained_at(model, capsys):
    assert main(["profile", model, "--size", "64", *FAST]) == 0
    assert capsys.readouterr().out.startswith(f"{model} (classification), input 1x3x64x64, device cpu")


def test_a_model_that_fails_on_its_first_run_names_the_size_to_try(capsys):
    assert main(["profile", "vit_b_16", "--size", "256", "--runs", "1", "--warmup", "0"]) == 2  # above its minimum
    err = capsys.readouterr().err
    assert err.startswith("error: VisionTransformer itself fails on a 1x3x256x256 float32 tensor")
    assert "Wrong image height! Expected 224 but got 256!" in err
    assert err.endswith(" Try --size 224 (the model's default).\n") and err.count("\n") == 1


def test_a_detection_model_falls_back_and_says_why(capsys):
    assert main(["profile", "SSDlite320_MobileNet_V3_Large", "--size", "32", *FAST]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ssdlite320_mobilenet_v3_large (detection), input list of 1 image 3x32x32, device cpu, "
                          "mode modules\nFell back to mode 'modules'")
    assert "Proxy object cannot be iterated" in out and "It failed in SSD.forward, line " in out
    assert "For node-level detail, profile a part that traces: backbone (" in out


@pytest.mark.slow  # a fresh interpreter imports torch and torchvision
def test_a_wrong_size_ends_in_one_line_and_no_traceback_in_a_real_process():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "labkit", "profile", "vit_b_16", "--size", "64"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr and result.stderr.startswith("error: vit_b_16 needs")


# ---------------------------------------------------------------------- Hugging Face types (--hf)


def test_profile_hf_prints_the_type_its_config_and_keyword_inputs(transformers, tmp_path, capsys):
    csv_path = tmp_path / "out.csv"
    assert main(["profile", "--hf", "t5", *FAST, "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("t5 (T5Model, small config: hidden 64, 2 encoder + 2 decoder layers, 4 heads), inputs "
                          "input_ids 1x16, attention_mask 1x16, decoder_input_ids 1x16, device cpu, mode ")
    assert "Time by op type" in out and csv_path.read_text().startswith("op,name,target,op_type")
    # export captured it: say why symbolic_trace could not, without advice on making symbolic_trace work
    assert "Captured by export, not symbolic_trace. torch.fx could not trace the model:" in out
    assert "concrete_args" not in out and "Options:" not in out


def test_profile_hf_passes_keyword_inputs_and_the_options(transformers, monkeypatch, capsys):
    import labkit.fx.profile
    from labkit.core.errors import LabkitError

    seen = {}

    def record(model, *inputs, **options):
        seen.update(options, inputs=inputs, model=model)
        raise LabkitError("stopped by the test")

    monkeypatch.setattr(labkit.fx.profile, "profile_model", record)
    assert main(["profile", "--hf", "whisper", "--leaf-module", "encoder", "--warmup", "0", "--runs", "1"]) == 2
    assert capsys.readouterr().err == "error: stopped by the test\n"
    assert seen["inputs"] == () and seen["leaf_modules"] == ["encoder"] and type(seen["model"]).__name__ == "WhisperModel"
    shapes = {name: tuple(value.shape) for name, value in seen["kwargs"].items() if name != "use_cache"}
    assert shapes == {"input_features": (1, 80, 64), "decoder_input_ids": (1, 16)} and seen["kwargs"]["use_cache"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hf", "lama"], "Unknown Hugging Face model type 'lama'. Did you mean llama?"),
        (["resnet18", "--hf", "bert"], "Profile one model at a time: resnet18 or --hf bert."),
        (["--hf", "bert,gpt2"], "profile takes one Hugging Face type (got --hf bert,gpt2); `python -m labkit zoo --hf"),
        (["--hf", "bert", "--size", "64"], "--size sets a torchvision model's image side"),
        (["--hf", "bert", "--runs", "0"], "--runs must be at least 1 (got 0)"),
        (["--hf", "bert", "--tracer", "torch.fx:NoSuchTracer"], "found nothing by that name in torch.fx"),
    ],
)
def test_bad_hf_input_is_one_line_before_any_work(args, message, capsys, monkeypatch):
    import labkit.fx.hf_zoo

    monkeypatch.setattr(labkit.fx.hf_zoo, "build_model", lambda *a, **k: pytest.fail("built the model"))
    assert main(["profile", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_profile_hf_without_transformers_names_the_extra(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    assert main(["profile", "--hf", "bert"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Hugging Face models need the transformers package") and err.count("\n") == 1
    assert err.endswith("pip install 'torch-labkit[hf]'\n")
