"""``labkit workshop push`` (labkit.workshop.push): a fix mid-workshop reaches every workspace, every edit kept.

A room of two learners made the way the hub's spawn makes them (``shared-account``: the hub's own workspace command,
as a subprocess), an instructor who fixes a notebook and pushes, and a learner who tries to push. The browser side
(her open notebook over the room's HTTPS) is tests/workshop/test_push_room.py's.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.core.errors import LabkitValueError
from labkit.workshop import learner_workspace, push
from labkit.workshop.board.versions import version_texts
from labkit.workshop.settings import PREFIX, HubSettings
from tests.workshop.hub import TEST_INSTALL

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "02_memory_format.ipynb"
TYPO, FIX = "Memory formats", "Memory formats (fixed at 10:40)"

# The hub's workspace command is `python -I -m labkit.workshop.learner_workspace ...`: this shim runs it with the labkit
# under test (this checkout), as the hub does once this labkit is the one installed.
SHIM = """#!/bin/sh
shift; shift; module="$1"; shift
exec {python} -I -c "import runpy, sys; sys.path.insert(0, '{repo}'); runpy.run_module('$module', run_name='__main__', \
alter_sys=True)" "$@"
"""


@pytest.fixture
def room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HubSettings:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in (REPO / "notebooks").glob("*.ipynb"):
        shutil.copy(path, notebooks / path.name)
    shutil.copytree(REPO / "notebooks" / "solutions", notebooks / "solutions")
    shim = tmp_path / "python"
    shim.write_text(SHIM.format(python=sys.executable, repo=REPO))
    shim.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(shim))
    settings = HubSettings(spawner="shared-account", homes=tmp_path / "learners", state=tmp_path / "state",
                           notebooks=notebooks)
    settings.state.mkdir(mode=0o700)
    for name in ("ada", "bob"):  # each learner's first log-in: her workspace, as the spawn makes it
        settings.workspace(name).parent.mkdir(parents=True)
        assert learner_workspace.main([str(settings.workspace(name)), "--language", "en", "--room", "--notebooks",
                                       str(notebooks), "--track", settings.track]) == 0
        push.record_spawn(settings, name)
    return settings


def fix_a_typo(settings: HubSettings) -> None:
    path = settings.notebooks / NOTEBOOK
    text = path.read_text()
    assert TYPO in text
    path.write_text(text.replace(TYPO, FIX, 1))


def test_a_push_refreshes_an_untouched_notebook_keeps_an_edited_one_and_says_what_changed(room: HubSettings):
    ada, bob = room.workspace("ada"), room.workspace("bob")
    edited = (ada / NOTEBOOK).read_text().replace('"source": [', '"source": [\n    "# ada was here\\n",', 1)
    (ada / NOTEBOOK).write_text(edited)
    fix_a_typo(room)

    version, results = push.push(room, note="fixed the title of notebook 02")

    assert version == 2 and [(r.learner, r.ok) for r in results] == [("ada", True), ("bob", True)], results
    assert (ada / NOTEBOOK).read_text() == edited  # her edit, byte for byte
    assert FIX in (ada / "02_memory_format.labkit-new.ipynb").read_text()  # the fix beside it
    assert FIX in (bob / NOTEBOOK).read_text() and not (bob / "02_memory_format.labkit-new.ipynb").exists()
    ada_notice, bob_notice = ((folder / "labkit-update-2.md").read_text() for folder in (ada, bob))
    assert ada_notice.startswith("# Version 2 of the labs\n\nfixed the title of notebook 02\n")
    assert f"- {NOTEBOOK} → 02_memory_format.labkit-new.ipynb" in ada_notice and f"- {NOTEBOOK}\n" not in ada_notice
    assert "Updated in place" in bob_notice and f"- {NOTEBOOK}\n" in bob_notice and "beside" not in bob_notice
    assert version_texts(room.board_state / "push.json", ["ada", "bob", "cy"]) == {
        "ada": "version 2", "bob": "version 2", "cy": "not recorded"}


def test_a_second_push_writes_a_new_notice_never_over_one_and_a_learner_behind_shows_on_the_board(room: HubSettings):
    planted = room.workspace("ada") / "labkit-update-2.md"
    planted.write_text("ada's own notes")
    push.push(room, names=["ada"])
    assert planted.read_text() == "ada's own notes"
    push.push(room, names=["ada"])
    assert "Nothing changed in your workspace." in (room.workspace("ada") / "labkit-update-3.md").read_text()
    assert version_texts(room.board_state / "push.json", ["ada", "bob"]) == {
        "ada": "version 3", "bob": "version 1 (the room's: 3)"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anything: the learner-account test below is root's")
def test_whoever_cannot_write_the_hubs_state_cannot_push_and_nothing_changes(room: HubSettings, tmp_path: Path):
    before = (room.board_state / "push.json").read_bytes()
    room.state.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(LabkitValueError, match="hub's state"):
            push.push(room)
    finally:
        room.state.chmod(0o700)
    separated = HubSettings(spawner="system-users", state=room.state, install=tmp_path / "opt")
    with pytest.raises(LabkitValueError, match="as root"):
        push.push(separated)
    assert (room.board_state / "push.json").read_bytes() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the command as another account")
def test_a_learner_account_running_the_push_command_is_refused_and_nothing_changes(room: HubSettings):
    learner_python = HubSettings(install=TEST_INSTALL).learner_python  # what a learner's account can run
    if not learner_python.exists():
        pytest.skip(f"no learner venv at {TEST_INSTALL} (tests/workshop/hub.py's learner_install makes it)")
    before = (room.board_state / "push.json").read_bytes()
    workspace = room.workspace("bob") / NOTEBOOK
    kept = workspace.read_bytes()
    fix_a_typo(room)
    for spawner, refusal in (("system-users", "start it as root"), ("shared-account", "push writes the hub's state")):
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(REPO), PREFIX + "SPAWNER": spawner,
               PREFIX + "STATE": str(room.state), PREFIX + "NOTEBOOKS": str(room.notebooks)}
        done = subprocess.run([str(learner_python), "-m", "labkit", "workshop", "push"], capture_output=True, text=True,
                              env=env, cwd="/", user="nobody", timeout=120)
        assert done.returncode == 2 and refusal in done.stderr, (spawner, done.returncode, done.stdout, done.stderr)
    assert (room.board_state / "push.json").read_bytes() == before and workspace.read_bytes() == kept
