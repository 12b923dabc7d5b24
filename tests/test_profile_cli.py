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


def test_an_unwritable_output_path_is_one_clear_line_and_exit_code_2(tmp_path, capsys):
    missing = tmp_path / "no-such-folder" / "out.csv"
    argv = ["profile", "resnet18", "--size", "32", "--warmup", "0", "--runs", "1", "--csv", str(missing)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot write {missing}: No such file or directory\n"
    assert not missing.parent.exists()
