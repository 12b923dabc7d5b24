"""The pre-spawn hook's command (labkit.workshop.provision): isolated from the learner's folder, bounded in output and time."""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from labkit.workshop import provision
from labkit.workshop.provision import workspace_command
from labkit.workshop.settings import HubSettings

T = TypeVar("T")


def _in_a_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` in a thread of its own: an event loop may already run in this one (a browser test's)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _run(code: str) -> tuple[str, int | None]:
    async def go() -> tuple[str, int | None]:
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.STDOUT)
        return await provision._bounded(process)
    return _in_a_thread(go())


def test_output_is_read_whole_and_made_printable():
    text, code = _run("import sys; print('created \\x1b[31mred\\x1b[0m'); sys.exit(3)")
    assert code == 3 and text == "created ?[31mred?[0m"


def test_a_command_that_prints_too_much_is_stopped(monkeypatch):
    monkeypatch.setattr(provision, "OUTPUT_LIMIT", 1000)
    text, code = _run("import sys\nwhile True: sys.stdout.write('x' * 100)")
    assert code is None and "printed more than 1000 bytes" in text


def test_a_command_that_hangs_is_stopped(monkeypatch):
    monkeypatch.setattr(provision, "SECONDS", 1)
    text, code = _run("import time; time.sleep(30)")
    assert code is None and "ran over 1 s" in text


@pytest.mark.parametrize("spawner", ["system-users", "shared-account"])
def test_the_command_runs_isolated_from_a_labkit_planted_in_the_folder(spawner: str, tmp_path: Path):
    command = workspace_command(HubSettings(spawner=spawner), tmp_path / "labkit-workspace")
    assert command[1:3] == ["-I", "-m"] and command[3].startswith("labkit.")
    planted = tmp_path / "labkit"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text("print('the learner ran this')")
    probe = _in_a_thread(_probe(tmp_path))
    assert "the learner ran this" not in probe and "usage: python -m labkit" in probe


async def _probe(folder: Path) -> str:
    """Run ``python -I -m labkit --help`` from ``folder``, as the hook would if it ran from there."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-I", "-m", "labkit", "--help", cwd=folder,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await process.communicate()
    return output.decode()


def test_the_shared_account_makes_the_workspace_of_the_hubs_track_from_the_notebooks(tmp_path: Path):
    trusted = HubSettings(spawner="shared-account", track="core", notebooks=tmp_path / "notebooks")
    command = workspace_command(trusted, tmp_path / "ws")
    assert command[command.index("--track") + 1] == "core" and command[command.index("--notebooks") + 1] == str(
        tmp_path / "notebooks")


def test_a_room_makes_the_workspace_from_the_learner_edition_with_the_learner_venv(tmp_path: Path):
    room = HubSettings(spawner="system-users", install=tmp_path / "opt")
    command = workspace_command(room, tmp_path / "ws")
    assert command[0] == str(room.learner_python) and command[command.index("--edition") + 1] == str(room.edition)
    assert "--room" in command and "--notebooks" not in command
