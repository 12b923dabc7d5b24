"""``labkit lab --lang zh|ru`` (``make lab LAB_LANG=zh``): a workspace of the labs in that language, which labkit speaks.

The workspace is made from ``notebooks/<lang>/`` (blank exercises, either track), records its language in the
manifest, and never changes language: another ``--lang`` is refused before anything is written.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import main
from labkit.authoring.output_folder import MANIFEST
from labkit.core.errors import LabkitValueError
from labkit.learner import lab, workspace
from tests.learner.test_workspace import NOTEBOOKS, assert_no_solution_code, holds_side_trip, real_solutions, tracked_lab

__all__ = ["tracked_lab"]  # a fixture, used by name

# Runs in the workspace, as a learner's kernel would: the stub of exercise 3.1 from the workspace's own notebook,
# then its checker, whose verdict labkit words in the workspace's language (no LABKIT_LANG is set).
RUN_CHECKER = """
import json, sys
notebook = json.load(open("03_forward_ad.ipynb", encoding="utf-8"))
stub = next(c for c in notebook["cells"] if c["metadata"].get("labkit_stub", {}).get("exercise") == "3.1")
exec("".join(stub["source"]))
from labkit.forward_ad import checks
print(checks.check_directional_derivative(directional_derivative))
"""


def language(ws: Path) -> str:
    return json.loads((ws / MANIFEST).read_text(encoding="utf-8"))["language"]


@pytest.fixture(scope="module")
def zh_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``labkit lab WS --lang zh --track core`` up to the moment it would start JupyterLab."""
    ws = tmp_path_factory.mktemp("lab") / "ws"
    with pytest.MonkeyPatch.context() as patch:
        started: list[list[str]] = []
        patch.setattr(lab.os, "execv", lambda path, command: started.append(command))
        assert main(["lab", str(ws), "--lang", "zh", "--track", "core", "--notebooks", str(NOTEBOOKS)]) == 0
    assert started and f"--ServerApp.root_dir={ws}" in started[0]
    return ws


def test_lab_lang_zh_makes_the_workspace_from_the_chinese_notebooks_with_blank_exercises(zh_workspace: Path) -> None:
    assert language(zh_workspace) == "zh"
    assert json.loads((zh_workspace / MANIFEST).read_text())["track"] == "core"
    solutions = real_solutions()
    for path in sorted(NOTEBOOKS.glob("0*.ipynb")):
        made = nbformat.read(zh_workspace / path.name, as_version=4)
        translated = nbformat.read(NOTEBOOKS / "zh" / path.name, as_version=4)
        title = translated.cells[0].source.splitlines()[0]  # the Chinese title, not the English one
        assert made.cells[0].source.splitlines()[0] == title
        assert title != nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
        assert_no_solution_code(path.name, made, solutions)


def test_a_checker_run_in_the_zh_workspace_words_its_verdict_in_chinese(zh_workspace: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name not in ("LABKIT_LANG", "LC_ALL", "LC_MESSAGES")}
    done = subprocess.run([sys.executable, "-c", RUN_CHECKER], cwd=zh_workspace, capture_output=True, text=True,
                          timeout=300, env={**env, "LANG": "C", "LABKIT_PROGRESS": "off"})
    assert done.returncode == 0, done.stderr
    assert "练习 3.1：尚未解出。" in done.stdout, done.stdout


@pytest.mark.parametrize("lang", ["zh", "ru"])
def test_both_tracks_in_each_language(tracked_lab: Path, tmp_path: Path, lang: str) -> None:
    (tracked_lab / lang).mkdir()
    for path in tracked_lab.glob("0*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        notebook.cells[0].source = f"# {lang} title"
        nbformat.write(notebook, tracked_lab / lang / path.name)
    for track in ("all", "core"):
        result = workspace.prepare_workspace(tmp_path / track, tracked_lab, track, language=lang)
        assert result.language == lang == language(tmp_path / track) and result.track == track
        made = nbformat.read(tmp_path / track / "01_demo.ipynb", as_version=4)
        assert made.cells[0].source == f"# {lang} title"
        assert holds_side_trip(tmp_path / track / "01_demo.ipynb") == (track == "all")
        assert result.lines()[0].startswith({"zh": "已创建 ", "ru": "создана "}[lang])  # what labkit lab prints, in lang
    assert (tracked_lab / lang / "solutions").is_symlink()  # made when missing (an unpacked sdist keeps no link)


def test_a_workspace_keeps_its_language_and_refuses_another_before_writing_anything(
    tracked_lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    workspace.prepare_workspace(ws, tracked_lab)  # English: no --lang
    before = {path.name: path.read_bytes() for path in ws.iterdir()}
    assert main(["workspace", str(ws), "--notebooks", str(tracked_lab), "--lang", "zh"]) == 2
    err = capsys.readouterr().err
    assert f"{ws} holds the labs in en" in err and f"labkit lab {ws}-zh --lang zh" in err and "LAB_LANG=zh" in err
    assert {path.name: path.read_bytes() for path in ws.iterdir()} == before
    assert workspace.prepare_workspace(ws, tracked_lab).language == "en"  # no --lang: the one it holds
    assert workspace.prepare_workspace(ws, tracked_lab, language="en").language == "en"


def test_a_language_without_notebooks_is_a_clear_error(tracked_lab: Path, tmp_path: Path) -> None:
    with pytest.raises(LabkitValueError, match=r"holds no labs in ru .*make i18n-build"):
        workspace.prepare_workspace(tmp_path / "ws", tracked_lab, language="ru")
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("command", ["lab", "workspace"])
def test_a_wrong_language_is_refused_naming_those_labkit_speaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit) as refused:
        main([command, str(tmp_path / "ws"), "--lang", "fr"])
    assert refused.value.code == 2 and "labkit speaks en, zh, ru, not 'fr'" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()
    with pytest.raises(LabkitValueError, match="language must be one of en, zh, ru, got 'de': choose one with --lang"):
        workspace.prepare_workspace(tmp_path / "ws", NOTEBOOKS, language="de")


def test_the_packaged_labs_hold_every_language_and_track_and_an_installed_labkit_serves_them(
    tracked_lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tracked_lab / "zh").mkdir()
    for path in tracked_lab.glob("0*.ipynb"):
        (tracked_lab / "zh" / path.name).write_bytes(path.read_bytes())
    packaged = tmp_path / "site-packages" / "labkit" / "_labs"
    editions = workspace.write_packaged_labs(tracked_lab, packaged)
    assert sorted(e.folder.relative_to(packaged).as_posix() for e in editions) == ["en/all", "en/core", "zh/all", "zh/core"]
    monkeypatch.setattr(workspace, "NOTEBOOKS_DIR", tmp_path / "site-packages" / "notebooks")
    monkeypatch.setattr(workspace, "PACKAGED_LABS", packaged)
    made = workspace.prepare_workspace(tmp_path / "ws", track="core", language="zh")
    assert made.language == "zh" and made.track == "core"
    with pytest.raises(LabkitValueError, match="carries no labs in ru .* leave out --lang for the English labs"):
        workspace.prepare_workspace(tmp_path / "ru-ws", language="ru")


def test_make_lab_passes_lab_lang_on(tmp_path: Path) -> None:
    stamp = tmp_path / "installed"  # a venv stamp newer than pyproject.toml: make plans lab alone, installs nothing
    stamp.touch()
    done = subprocess.run(["make", "-n", "lab", "LAB_LANG=zh", f"STAMP={stamp}"], cwd=NOTEBOOKS.parent,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [command] = [line for line in done.stdout.splitlines() if "-m labkit lab " in line]
    assert " --lang zh " in command


README_TITLE = {"en": "# Your labkit workspace", "zh": "# 你的 labkit 工作区", "ru": "# Ваша рабочая папка labkit"}


@pytest.mark.parametrize("kind", ["checkout", "room", "installed"])
@pytest.mark.parametrize("track", ["all", "core"])
def test_the_readme_is_in_the_workspaces_language_whatever_this_process_speaks(
    tracked_lab: Path, monkeypatch: pytest.MonkeyPatch, kind: str, track: str
) -> None:
    monkeypatch.setenv("LABKIT_LANG", "ru")  # the README follows the workspace, not the process
    readmes = {lang: workspace.learner_edition(tracked_lab, None, track, room=kind == "room", installed=kind == "installed",
                                               language=lang)["README.md"] for lang in README_TITLE}
    english = readmes["en"]
    for lang, readme in readmes.items():
        assert readme.startswith(README_TITLE[lang] + "\n")
        assert re.findall(r"`[^`]+`", readme) == re.findall(r"`[^`]+`", english), lang  # commands and paths as typed
        assert "READY" in readme and "{" not in readme
    assert "Stuck?" not in readmes["zh"] + readmes["ru"] and "This workspace holds" not in readmes["zh"] + readmes["ru"]
