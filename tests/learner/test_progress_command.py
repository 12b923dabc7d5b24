"""``labkit progress`` reads the journal of the workspace the learner is in (or made here), and says which.

A newcomer types ``labkit lab`` in a folder (it makes ``workspace/`` there), later ``labkit progress`` in the same
folder: the table must be that workspace's, not a journal in the home folder (on a shared machine, another
person's attempts), and it must name the file it read.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.progress import journal
from labkit.progress.events import Event

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

CORE = ["1.1", "1.2", "2.1", "3.1", "3.2", "3.3", "3.4", "4.1"]  # a track of 8: what the manifest lists is shown


@pytest.fixture
def lab_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder where ``labkit lab`` made ``workspace/`` (its manifest lists a track of 8), a home and data folder
    of the test's own, and one solved exercise in the workspace's journal."""
    monkeypatch.delenv(journal.ENVIRONMENT, raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")  # whose events the table shows; no board is set, so none is asked
    monkeypatch.delenv("LABKIT_BOARD_URL", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "course"
    workspace = folder / "workspace"
    (workspace / "notes").mkdir(parents=True)
    (workspace / journal.WORKSPACE_MARKER).write_text(json.dumps({"exercises": CORE}))
    journal.append(Event("ada", "check", "1.1", "solved"), workspace / journal.FOLDER / journal.FILE)
    return folder


def progress(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["progress", *args]) == 0
    return capsys.readouterr().out


def test_typed_where_labkit_lab_was_it_reads_that_workspaces_journal(
        lab_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    journal_file = (lab_folder / "workspace" / journal.FOLDER / journal.FILE).resolve()
    for where in (lab_folder, lab_folder / "workspace", lab_folder / "workspace" / "notes"):
        monkeypatch.chdir(where)
        shown = progress(capsys)
        expected = f"Journal: {journal_file} (the journal of your workspace {journal_file.parents[1]})."
        assert shown.splitlines()[0] == expected, where
        assert "1 of 8 solved." in shown, where


def test_with_labkit_progress_set_the_track_is_still_the_workspaces(
        lab_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    elsewhere = tmp_path / "elsewhere.jsonl"
    journal.append(Event("ada", "check", "2.1", "solved"), elsewhere)
    monkeypatch.setenv(journal.ENVIRONMENT, str(elsewhere))
    monkeypatch.chdir(lab_folder / "workspace" / "notes")
    shown = progress(capsys)
    assert shown.splitlines()[0] == f"Journal: {elsewhere} (set by {journal.ENVIRONMENT})."
    assert "1 of 8 solved." in shown  # the workspace's track of 8, not every exercise of the labs


def test_outside_a_workspace_the_journal_is_in_the_platforms_user_data_and_an_old_one_stays_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv(journal.ENVIRONMENT, raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.delenv("LABKIT_BOARD_URL", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    place = journal.locate()
    assert place.origin == "user data"
    assert place.path == tmp_path / "home" / ".local" / "share" / "labkit" / journal.FILE  # platformdirs, on Linux
    assert "labkit's folder of your user data" in progress(capsys).splitlines()[0]
    old = tmp_path / "home" / journal.FOLDER / journal.FILE  # where labkit kept it before
    journal.append(Event("ada", "check", "1.1", "solved"), old)
    assert journal.locate() == journal.JournalPlace(old, "old user data")
    shown = progress(capsys)
    assert shown.splitlines()[0] == f"Journal: {old} (outside any workspace: the folder an older labkit used)."
    assert "1 of 11 solved." in shown
