import subprocess
import sys

import pytest

from labkit.__main__ import COMMANDS, main


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_unknown_command_is_rejected(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help(command):
    result = subprocess.run([sys.executable, "-m", "labkit", command, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage: python -m labkit " + command in result.stdout


@pytest.mark.parametrize("command", ["student-copy", "docs"])
def test_output_commands_refuse_a_file_as_outdir_without_traceback(command, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    result = subprocess.run([sys.executable, "-m", "labkit", command, str(afile)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"{command}: ") and result.stderr.count("\n") == 1, result.stderr
    assert "is a file, not a folder" in result.stderr and afile.read_text() == "mine"


@pytest.mark.parametrize("argv", [["docs", "site"], ["student-copy", "student"], ["hosted"]])
def test_the_authors_commands_say_they_need_a_checkout_when_run_from_an_installed_labkit(
    argv, tmp_path, monkeypatch, capsys
):
    """An installed wheel has no notebooks/ or docs/ beside it (test_wheel.py runs these from a real one)."""
    from labkit import labs
    from labkit.authoring import docs, hosted

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(labs, "NOTEBOOKS_DIR", tmp_path / "site-packages" / "notebooks")
    monkeypatch.setattr(hosted, "NOTEBOOKS_DIR", labs.NOTEBOOKS_DIR)
    monkeypatch.setattr(docs, "DOCS_SOURCE", tmp_path / "site-packages" / "docs")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{argv[0]}: `labkit {argv[0]}` works in a checkout of labkit's repository (") and err.count("\n") == 1
    assert "installed without one" in err and "pip install -e '.[docs]'" not in err
    assert not list(tmp_path.iterdir())  # nothing written
