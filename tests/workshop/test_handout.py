"""hand-out-solutions and the hub's settings (labkit.workshop.handout, workshop_hub); the hub itself: tests/workshop/."""
from __future__ import annotations

import pwd
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.core.errors import LabkitValueError
from labkit.tools.output_folder import MANIFEST
from labkit.workshop.handout import hand_out_solutions, learner_workspaces
from labkit.workshop.provision import workspace_command
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
    settings = HubSettings(homes=tmp_path)
    assert learner_workspaces(settings) == [ada, grace]


def test_the_command_hands_out_to_every_learner(tmp_path: Path, monkeypatch, capsys):
    workspaces = [_workspace(tmp_path, name) for name in ("ada", "grace")]
    monkeypatch.setenv("LABKIT_WORKSHOP_HOMES", str(tmp_path))
    assert main(["workshop", "hand-out-solutions", "--solutions", str(SOLUTIONS)]) == 0
    assert capsys.readouterr().out.count("solutions handed out") == 2
    assert all((workspace / "solutions").is_dir() for workspace in workspaces)


def test_the_command_says_when_it_finds_no_workspace(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_WORKSHOP_HOMES", str(tmp_path / "nobody"))
    assert main(["workshop", "hand-out-solutions", "--solutions", str(SOLUTIONS)]) == 2
    assert "found no learner workspace" in capsys.readouterr().err


@pytest.mark.parametrize("name, value, message", [
    ("TRACK", "short", "choose one of all, core"),
    ("SPAWNER", "docker", "choose one of shared-account, system-users"),
    ("PORT", "eighty", "give a whole number"),
    ("PASSWORD", "only-the-learners-one", "Set both"),
    ("THREADS", "0", "at least 1"),
    ("THREADS", "two", "give a whole number"),
    ("KERNEL_CULL_AFTER_S", "-5", "at least 1"),
])
def test_bad_settings_are_refused_with_what_to_do(name: str, value: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        HubSettings.from_environment({f"LABKIT_WORKSHOP_{name}": value})


def test_defaults_are_loopback_core_track_and_no_shared_password():
    settings = HubSettings.from_environment({})
    assert (settings.ip, settings.track, settings.password, settings.spawner) == ("127.0.0.1", "core", "", "shared-account")
    assert settings.workspace("ada") == settings.homes / "ada" / "labkit-workspace"
    assert (settings.threads, settings.kernel_cull_after_s) == (2, 1800)
    command = workspace_command(settings, settings.workspace("ada"))
    assert command[-2:] == ["--track", "core"] and "workspace" in command


def test_system_users_work_in_their_home():
    settings = HubSettings(spawner="system-users")
    assert settings.workspace("root") == Path(pwd.getpwnam("root").pw_dir) / "labkit-workspace"
