"""labkit.workshop.install: pip's progress reaches the instructor as it happens, and a failure or a stall says why."""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

from labkit.workshop import install


class OpensTheGate(io.StringIO):
    """A progress stream that creates ``gate`` when the first line reaches it."""

    def __init__(self, gate: Path) -> None:
        super().__init__()
        self.gate = gate

    def write(self, text: str) -> int:
        self.gate.touch()
        return super().write(text)


def test_each_line_is_shown_while_the_command_still_runs(tmp_path: Path) -> None:
    """The child writes its second line only once its first was shown: with its output captured, it would stall."""
    gate = tmp_path / "first-line-shown"
    code = ("import pathlib, sys, time\nprint('Collecting torch', flush=True)\n"
            "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\nprint('Successfully installed torch')")
    progress = OpensTheGate(gate)
    install._run([sys.executable, "-c", code, str(gate)], progress=progress, timeout=120)
    assert progress.getvalue().splitlines() == [f"  {Path(sys.executable).name}: Collecting torch",
                                                f"  {Path(sys.executable).name}: Successfully installed torch"]


def test_a_failure_names_the_command_and_its_last_lines() -> None:
    code = "import sys\nfor n in range(8): print(f'line {n}')\nsys.exit(1)"
    progress = io.StringIO()
    with pytest.raises(install.InstallError) as failed:
        install._run([sys.executable, "-c", code], progress=progress, timeout=120)
    message = str(failed.value)
    assert "failed:" in message and "line 7" in message and "line 2" not in message  # the last five lines
    assert progress.getvalue().count("line ") == 8  # and every line was shown as it came


def test_a_stalled_command_is_stopped_and_says_so() -> None:
    progress = io.StringIO()
    started = time.monotonic()
    with pytest.raises(install.InstallError, match=r"stopped after 2 s"):
        install._run([sys.executable, "-c", "import time\nprint('Downloading', flush=True)\ntime.sleep(600)"],
                     progress=progress, timeout=2)
    assert time.monotonic() - started < 60 and "Downloading" in progress.getvalue()
