"""python -m labkit profile: prints the top nodes and the by-type table, writes CSV/JSON."""
import json

import pytest

from labkit.__main__ import main

pytest.importorskip("torchvision")


def test_profile_prints_tables_and_writes_files(tmp_path, capsys):
    csv_path, json_path = tmp_path / "out.csv", tmp_path / "out.json"
    argv = ["profile", "resnet18", "--batch", "1", "--size", "32", "--warmup", "0", "--runs", "2", "--top", "3",
            "--mode", "fast", "--csv", str(csv_path), "--json", str(json_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "resnet18, batch 1x3x32x32" in out and "top 3 of 69 nodes" in out and "Time by op type" in out
    assert len(csv_path.read_text().splitlines()) == 70  # header + 69 timed nodes
    assert json.loads(json_path.read_text())["total"]["count"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuchnet"], "Unknown torchvision model 'nosuchnet'"),
        (["resnet18", "--runs", "0"], "runs must be at least 1"),
        (["resnet18", "--batch", "0"], "--batch must be at least 1"),
        (["resnet18", "--device", "gpu0"], "is not a device name"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(args, message, capsys):
    assert main(["profile", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_unknown_mode_is_rejected_by_argparse():
    with pytest.raises(SystemExit):
        main(["profile", "resnet18", "--mode", "turbo"])


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the CLI builds or profiles a model."""
    import labkit.fx.profile
    import labkit.tools.profile

    monkeypatch.setattr(labkit.tools.profile, "_build_model", lambda name: pytest.fail("built the model"))
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
        ("vit_b_16", 64, "vit_b_16 needs an input of at least 224x224 (got 64x64); try --size 224"),
        ("inception_v3", 32, "inception_v3 needs an input of at least 75x75 (got 32x32); try --size 299"),
    ],
)
def test_an_input_below_the_models_minimum_size_is_refused_before_any_work(model, size, message, capsys, no_work):
    assert main(["profile", model, "--size", str(size)]) == 2
    assert capsys.readouterr().err == f"error: {message}, the size its weights were trained at.\n"


def test_a_model_that_fails_on_its_first_run_names_the_size_to_try(capsys, monkeypatch):
    import labkit.fx.profile

    monkeypatch.setattr(labkit.fx.profile, "profile_model", lambda *a, **k: pytest.fail("profiled"))
    assert main(["profile", "vit_b_16", "--size", "256", "--runs", "1", "--warmup", "0"]) == 2  # above its minimum
    err = capsys.readouterr().err
    assert err.startswith("error: vit_b_16 cannot run on a 1x3x256x256 input (AssertionError: Wrong image height! ")
    assert err.endswith("It needs a different input size; try --size 224, the size its weights were trained at.\n")
    assert err.count("\n") == 1


@pytest.mark.slow  # a fresh interpreter imports torch and torchvision
def test_a_wrong_size_ends_in_one_line_and_no_traceback_in_a_real_process():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "labkit", "profile", "vit_b_16", "--size", "64"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr and result.stderr.startswith("error: vit_b_16 needs")
