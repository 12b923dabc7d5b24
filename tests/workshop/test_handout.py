"""hand-out-solutions and the hub's settings (labkit.workshop.handout, workshop_hub); the hub itself: tests/workshop/."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.authoring.output_folder import MANIFEST
from labkit.workshop import handout
from labkit.workshop.handout import TEMP_PREFIX, hand_out_solutions, learner_workspaces
from labkit.workshop.settings import HubSettings

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "notebooks" / "solutions"


def _workspace(homes: Path, name: str) -> Path:
    workspace = homes / name / "labkit-workspace"
    workspace.mkdir(parents=True)
    (workspace / MANIFEST).write_text("{}")
    (workspace / "01_fx_profiling.ipynb").write_text("the learner's notebook")
    return workspace


def test_hand_out_copies_every_solution_and_touches_nothing_else(tmp_path: Path):
    workspace = _workspace(tmp_path, "ada")
    result = hand_out_solutions(workspace, SOLUTIONS)
    expected = sorted(path.name for path in SOLUTIONS.glob("*.py"))
    assert expected and result.written == expected and not result.refused
    for name in expected:
        assert (workspace / "solutions" / name).read_bytes() == (SOLUTIONS / name).read_bytes()
    assert (workspace / "01_fx_profiling.ipynb").read_text() == "the learner's notebook"


def test_hand_out_never_overwrites_a_file_already_there(tmp_path: Path):
    workspace = _workspace(tmp_path, "ada")
    first = sorted(SOLUTIONS.glob("*.py"))[0].name
    (workspace / "solutions").mkdir()
    (workspace / "solutions" / first).write_text("my own attempt")
    result = hand_out_solutions(workspace, SOLUTIONS)
    assert result.kept == [first] and first not in result.written
    assert (workspace / "solutions" / first).read_text() == "my own attempt"
    again = hand_out_solutions(workspace, SOLUTIONS)  # handing out twice writes nothing new
    assert again.written == [] and len(again.kept) == len(result.written) + 1


def test_hand_out_refuses_links(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = _workspace(tmp_path, "ada")
    (workspace / "solutions").symlink_to(elsewhere)
    assert "not a folder" in hand_out_solutions(workspace, SOLUTIONS).refused
    linked = tmp_path / "linked-workspace"
    linked.symlink_to(workspace)
    assert "a link is refused" in hand_out_solutions(linked, SOLUTIONS).refused
    assert list(elsewhere.iterdir()) == []


def test_workspaces_are_found_by_their_manifest(tmp_path: Path):
    ada, grace = _workspace(tmp_path, "ada"), _workspace(tmp_path, "grace")
    (tmp_path / "not-a-learner" / "labkit-workspace").mkdir(parents=True)  # no manifest: not made by labkit
    settings = HubSettings(homes=tmp_path, spawner="shared-account")
    assert learner_workspaces(settings) == [ada, grace]


def test_the_command_hands_out_to_every_learner(tmp_path: Path, monkeypatch, capsys):
    workspaces = [_workspace(tmp_path, name) for name in ("ada", "grace")]
    monkeypatch.setenv("LABKIT_WORKSHOP_HOMES", str(tmp_path))
    monkeypatch.setenv("LABKIT_WORKSHOP_SPAWNER", "shared-account")
    assert main(["workshop", "hand-out-solutions", "--solutions", str(SOLUTIONS)]) == 0
    assert capsys.readouterr().out.count("solutions handed out") == 2
    assert all((workspace / "solutions").is_dir() for workspace in workspaces)


def test_the_command_says_when_it_finds_no_workspace(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_WORKSHOP_HOMES", str(tmp_path / "nobody"))
    monkeypatch.setenv("LABKIT_WORKSHOP_SPAWNER", "shared-account")
    assert main(["workshop", "hand-out-solutions", "--solutions", str(SOLUTIONS)]) == 2
    assert "found no learner workspace" in capsys.readouterr().err


# --- a full disk: each file whole or not at all, one line, and a later run finishes ------------------


def leftovers(workspace: Path) -> list[str]:
    """Temporary files of a hand-out, and solution files that are not whole."""
    folder = workspace / "solutions"
    found = [p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX)] if folder.is_dir() else []
    return found + [p.name for p in folder.glob("*.py") if p.read_bytes() != (SOLUTIONS / p.name).read_bytes()]


@contextlib.contextmanager
def disk_full_after(monkeypatch: pytest.MonkeyPatch, whole_files: int, error: BaseException | None = None) -> Iterator[None]:
    """``os.write`` in labkit.workshop.handout fails (a full disk) once ``whole_files`` writes went through."""
    real_write, calls = os.write, []

    def write(fd: int, data) -> int:
        calls.append(fd)
        if len(calls) > whole_files:
            raise error or OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(handout.os, "write", write)
    try:
        yield
    finally:
        monkeypatch.undo()


def test_a_full_disk_leaves_no_partial_file_and_a_later_run_completes_the_hand_out(tmp_path: Path, monkeypatch):
    workspace = _workspace(tmp_path, "ada")
    with disk_full_after(monkeypatch, whole_files=2):
        result = hand_out_solutions(workspace, SOLUTIONS)
    assert len(result.written) == 2 and "No space left on device" in result.failed and not result.refused
    assert sorted(p.name for p in (workspace / "solutions").iterdir()) == result.written and leftovers(workspace) == []
    assert result.line() == (f"{workspace}: 2 solutions handed out, then failed: No space left on device; no partial file "
                             "was left, run this again to finish")
    again = hand_out_solutions(workspace, SOLUTIONS)
    expected = sorted(path.name for path in SOLUTIONS.glob("*.py"))
    assert again.kept == result.written and sorted(again.written + again.kept) == expected and not again.failed
    assert leftovers(workspace) == [] and sorted(p.name for p in (workspace / "solutions").iterdir()) == expected


def test_the_command_says_one_line_per_workspace_and_exits_1_when_one_failed(tmp_path: Path, monkeypatch, capsys):
    ada, grace = _workspace(tmp_path, "ada"), _workspace(tmp_path, "grace")
    with disk_full_after(monkeypatch, whole_files=len(list(SOLUTIONS.glob("*.py")))):  # ada gets all; grace none
        status = main(["workshop", "hand-out-solutions", str(ada), str(grace), "--solutions", str(SOLUTIONS)])
    out, err = capsys.readouterr()
    assert status == 1 and err == "" and len(out.splitlines()) == 2
    assert out.splitlines()[1].startswith(f"hand-out-solutions: {grace}: 0 solutions handed out, then failed: No space left")
    assert leftovers(grace) == []
    assert main(["workshop", "hand-out-solutions", str(ada), str(grace), "--solutions", str(SOLUTIONS)]) == 0


def test_ctrl_c_leaves_no_partial_file_and_no_traceback(tmp_path: Path, monkeypatch, capsys):
    workspace = _workspace(tmp_path, "ada")
    with disk_full_after(monkeypatch, whole_files=1, error=KeyboardInterrupt()):
        status = main(["workshop", "hand-out-solutions", str(workspace), "--solutions", str(SOLUTIONS)])
    assert status == 130 and "interrupted" in capsys.readouterr().err and leftovers(workspace) == []


def test_a_bad_solutions_folder_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys):
    workspace = _workspace(tmp_path, "ada")
    assert main(["workshop", "hand-out-solutions", str(workspace), "--solutions", str(tmp_path / "missing")]) == 2
    assert "Cannot read" in capsys.readouterr().err
    (tmp_path / "link").symlink_to(SOLUTIONS)
    assert main(["workshop", "hand-out-solutions", str(workspace), "--solutions", str(tmp_path / "link")]) == 2
    assert "is not a folder of solutions" in capsys.readouterr().err

    def unreadable(path: Path) -> bytes:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(Path, "read_bytes", unreadable)  # root reads everything: what an instructor's account would meet
    assert main(["workshop", "hand-out-solutions", str(workspace), "--solutions", str(SOLUTIONS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Permission denied" in err and "Traceback" not in err
    assert not (workspace / "solutions").exists()


@contextlib.contextmanager
def tiny_disk(folder: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs at ``folder`` (root only); skips where mounting is not allowed."""
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine does not allow mounting a tmpfs: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_really_full_disk(tmp_path: Path):
    with tiny_disk(tmp_path / "disk") as disk:
        workspace = _workspace(disk, "ada")
        (workspace / "solutions").mkdir()
        filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):  # fill the disk
            while True:
                os.write(filler, b"x" * 4096)
        os.close(filler)
        result = hand_out_solutions(workspace, SOLUTIONS)
        assert "No space left on device" in result.failed and result.written == [] and leftovers(workspace) == []
        assert list((workspace / "solutions").iterdir()) == []
        (disk / "filler").unlink()
        again = hand_out_solutions(workspace, SOLUTIONS)
        assert not again.failed and again.written == sorted(p.name for p in SOLUTIONS.glob("*.py"))
        assert leftovers(workspace) == []
