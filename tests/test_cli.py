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
