"""labkit.learner.workspace: `make lab` serves blank exercises, and a learner's work survives every later run.

The behaviour tests use a small synthetic lab (fast, and its upstream can be
changed); the solution-code checks run on the real notebooks, once headless
and once through a real Jupyter server's REST API, as `make lab` serves them.
"""
from __future__ import annotations

import argparse
import ast
import errno
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import main
from labkit.authoring import hosted, student_copy
from labkit.authoring.output_folder import MANIFEST
from labkit.core import files
from labkit.core.errors import LabkitValueError
from labkit.learner import workspace
from labkit.learner.edition import RECORD
from tests.ui.support import jupyter_lab

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"

SOLUTION = '''\
def double(x):
    """Exercise 1.1: return twice ``x``."""
    doubled = x + x  # the solution's own line
    return doubled
'''


# --- what counts as solution code -------------------------------------------------


def solution_lines(source: str) -> set[str]:
    """Lines found only inside the solution file's function bodies (not imports, signatures or docstrings)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    in_bodies: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring stays in the stub
            for statement in body:
                in_bodies.update(range(statement.lineno - 1, statement.end_lineno or statement.lineno))
    elsewhere = {lines[i].strip() for i in range(len(lines)) if i not in in_bodies}
    found = {lines[i].strip() for i in in_bodies}
    return {line for line in found - elsewhere if len(line) >= 8 and not line.startswith("#")}


def assert_no_solution_code(name: str, notebook: nbformat.NotebookNode, solutions: dict[str, str]) -> set[str]:
    """Every exercise cell is a stub holding no solution line; no code cell shows a stored output. Returns the solutions used."""
    exercises = student_copy.exercises_in(Path(name), notebook)
    for exercise in exercises:
        cell = notebook.cells[exercise.cell_index]
        leaked = [line for line in solution_lines(solutions[exercise.solution]) if line in cell.source]
        assert not leaked, f"{name}, exercise {exercise.exercise_id}: solution code in the exercise cell: {leaked}"
        assert f"Exercise {exercise.exercise_id}" in cell.source and "raise NotImplementedError" in cell.source
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and "keep_output" not in cell.metadata.get("tags", []):
            assert cell.outputs == [], f"{name}, cell {index + 1} keeps an output (a checker's verdict?)"
    return {exercise.solution for exercise in exercises}


def real_solutions() -> dict[str, str]:
    return {f"solutions/{p.name}": p.read_text(encoding="utf-8") for p in sorted((NOTEBOOKS / "solutions").glob("*.py"))}


@pytest.fixture(scope="module")
def lab_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace made from the real notebooks (read only: tests that change one make their own)."""
    folder = tmp_path_factory.mktemp("lab") / "workspace"
    result = workspace.prepare_workspace(folder, NOTEBOOKS)
    assert result.created and not result.beside and not result.left_alone
    return folder


def test_the_first_run_gives_every_lab_with_blank_exercises_and_no_solutions(lab_workspace: Path) -> None:
    solutions = real_solutions()
    used: set[str] = set()
    names = sorted(p.name for p in lab_workspace.glob("*.ipynb"))
    assert names == sorted(p.name for p in NOTEBOOKS.glob("0*.ipynb"))
    for name in names:
        used |= assert_no_solution_code(name, nbformat.read(lab_workspace / name, as_version=4), solutions)
    assert used == set(solutions), "every solution file is an exercise of some notebook, and each was checked"
    assert not (lab_workspace / "solutions").exists()
    assert "make lab-reference" in (lab_workspace / "README.md").read_text(encoding="utf-8")


def test_the_check_catches_the_solved_reference_notebooks() -> None:
    solved = nbformat.read(NOTEBOOKS / "01_fx_profiling.ipynb", as_version=4)
    with pytest.raises(AssertionError, match="solution code in the exercise cell"):
        assert_no_solution_code("01_fx_profiling.ipynb", solved, real_solutions())


def test_solution_lines_finds_the_body_and_nothing_else() -> None:
    assert solution_lines(SOLUTION) == {"doubled = x + x  # the solution's own line", "return doubled"}
    stub = student_copy.stub_source(SOLUTION, "solutions/01_1_double.py")
    assert not [line for line in solution_lines(SOLUTION) if line in stub]


# --- a small synthetic lab ----------------------------------------------------------


def write_notebook(folder: Path, name: str, intro: str, *, solution: str | None = None) -> Path:
    """``folder/name``: a title, an intro, one executed code cell and, with ``solution``, an exercise."""
    cells = [nbformat.v4.new_markdown_cell(f"# {name[:2]} · Demo\n\n{intro}\n"), nbformat.v4.new_code_cell("print(1)")]
    cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    if solution:
        (folder / "solutions").mkdir(parents=True, exist_ok=True)
        (folder / "solutions" / f"{solution}.py").write_text(SOLUTION)
        load = f"# %load solutions/{solution}.py\n"
        cells.append(nbformat.v4.new_code_cell(load + SOLUTION, metadata={"tags": ["solution"]}))
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / name)
    return folder / name


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A notebooks folder with one lab and its exercise; the workspace goes to ``tmp_path / "ws"``."""
    write_notebook(tmp_path / "notebooks", "01_demo.ipynb", "First version.", solution="01_1_double")
    return tmp_path / "notebooks"


def edit_exercise(path: Path) -> bytes:
    """What a learner does: solve the exercise in JupyterLab and save. Returns the saved bytes."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[2].source = "def double(x):\n    return 2 * x  # mine\n"
    nbformat.write(notebook, path)
    return path.read_bytes()


def prepare(lab: Path) -> workspace.WorkspaceResult:
    return workspace.prepare_workspace(lab.parent / "ws", lab)


def test_a_synthetic_first_run_writes_the_learner_edition_and_a_manifest(lab: Path) -> None:
    result = prepare(lab)
    ws = lab.parent / "ws"
    assert result.created and result.added == ["01_demo.ipynb", "README.md"]
    assert sorted(p.name for p in ws.iterdir()) == [MANIFEST, "01_demo.ipynb", "README.md"]
    used = assert_no_solution_code("01_demo.ipynb", nbformat.read(ws / "01_demo.ipynb", as_version=4),
                                   {"solutions/01_1_double.py": SOLUTION})
    assert used == {"solutions/01_1_double.py"}
    assert result.lines()[0].startswith(f"created {ws}: 1 notebooks with blank exercises")
    assert "%load ../notebooks/solutions/<file>.py" in (ws / "README.md").read_text(encoding="utf-8")
    assert prepare(lab).lines() == [f"{ws} is up to date"]


def test_a_second_run_keeps_an_edited_cell_byte_for_byte(lab: Path) -> None:
    prepare(lab)
    mine = edit_exercise(lab.parent / "ws" / "01_demo.ipynb")
    result = prepare(lab)
    assert (lab.parent / "ws" / "01_demo.ipynb").read_bytes() == mine
    assert not result.beside and not result.refreshed, "nothing changed upstream: nothing to put beside"
    assert not (lab.parent / "ws" / "01_demo.labkit-new.ipynb").exists()


def test_an_upstream_change_to_an_edited_notebook_lands_beside_it_with_a_note(lab: Path) -> None:
    ws = lab.parent / "ws"
    prepare(lab)
    mine = edit_exercise(ws / "01_demo.ipynb")
    write_notebook(lab, "01_demo.ipynb", "Second version, with a fix.", solution="01_1_double")
    result = prepare(lab)
    assert (ws / "01_demo.ipynb").read_bytes() == mine
    assert result.beside == [("01_demo.ipynb", "01_demo.labkit-new.ipynb")]
    assert "Second version" in (ws / "01_demo.labkit-new.ipynb").read_text(encoding="utf-8")
    assert any(line.startswith("NOTE:") and "01_demo.labkit-new.ipynb" in line for line in result.lines())
    assert "labkit-new.ipynb" in (ws / "README.md").read_text(encoding="utf-8")
    assert prepare(lab).lines() == [f"{ws} is up to date"], "the note is given once"
    (ws / "01_demo.labkit-new.ipynb").unlink()  # the learner merged it
    assert prepare(lab).lines() == [f"{ws} is up to date"] and not (ws / "01_demo.labkit-new.ipynb").exists()
    write_notebook(lab, "01_demo.ipynb", "Third version.", solution="01_1_double")
    assert prepare(lab).beside == [("01_demo.ipynb", "01_demo.labkit-new.ipynb")]
    assert (ws / "01_demo.ipynb").read_bytes() == mine


def test_a_learner_edited_new_version_is_not_replaced(lab: Path) -> None:
    ws = lab.parent / "ws"
    prepare(lab)
    edit_exercise(ws / "01_demo.ipynb")
    write_notebook(lab, "01_demo.ipynb", "Second version.", solution="01_1_double")
    prepare(lab)
    merged = edit_exercise(ws / "01_demo.labkit-new.ipynb")
    write_notebook(lab, "01_demo.ipynb", "Third version.", solution="01_1_double")
    result = prepare(lab)
    assert (ws / "01_demo.labkit-new.ipynb").read_bytes() == merged
    assert [name for name, _ in result.left_alone] == ["01_demo.ipynb"] and "rename it" in result.lines()[-1]


def test_an_unedited_notebook_is_refreshed_and_a_new_lab_or_a_deleted_one_is_written(lab: Path) -> None:
    ws = lab.parent / "ws"
    prepare(lab)
    write_notebook(lab, "01_demo.ipynb", "Second version.", solution="01_1_double")
    write_notebook(lab, "02_more.ipynb", "A new lab.")
    result = prepare(lab)
    assert result.refreshed == ["01_demo.ipynb", "README.md"] and result.added == ["02_more.ipynb"]
    assert "Second version" in (ws / "01_demo.ipynb").read_text(encoding="utf-8")
    (ws / "02_more.ipynb").unlink()  # the learner starts that lab over
    assert prepare(lab).added == ["02_more.ipynb"]


def test_files_the_learner_added_are_untouched_and_nothing_is_deleted(lab: Path) -> None:
    ws = lab.parent / "ws"
    prepare(lab)
    (ws / "my_notes.md").write_text("mine")
    (ws / "scratch").mkdir()
    (ws / "scratch" / "try.ipynb").write_text("{}")
    (lab / "01_demo.ipynb").rename(lab / "01_renamed.ipynb")  # the lab is gone upstream
    result = prepare(lab)
    assert (ws / "my_notes.md").read_text() == "mine" and (ws / "scratch" / "try.ipynb").read_text() == "{}"
    assert (ws / "01_demo.ipynb").is_file(), "labkit never deletes a file in the workspace"
    assert result.added == ["01_renamed.ipynb"]
    manifest = (ws / MANIFEST).read_text()
    assert "my_notes" not in manifest and "scratch" not in manifest


def test_a_symlink_is_never_followed(lab: Path, tmp_path: Path) -> None:
    ws = lab.parent / "ws"
    prepare(lab)
    outside = tmp_path / "elsewhere.ipynb"
    outside.write_text("the learner's own file")
    (ws / "01_demo.ipynb").unlink()
    (ws / "01_demo.ipynb").symlink_to(outside)
    (ws / "01_demo.labkit-new.ipynb").symlink_to(outside)
    write_notebook(lab, "01_demo.ipynb", "Second version.", solution="01_1_double")
    result = prepare(lab)
    assert outside.read_text() == "the learner's own file"
    assert (ws / "01_demo.ipynb").is_symlink() and (ws / "01_demo.labkit-new.ipynb").is_symlink()
    assert [name for name, _ in result.left_alone] == ["01_demo.ipynb"]
    (ws / "01_demo.ipynb").unlink()
    (ws / "01_demo.ipynb").write_text("edited by hand")
    result = prepare(lab)  # the new version would go beside, where the link is
    assert outside.read_text() == "the learner's own file" and (ws / "01_demo.labkit-new.ipynb").is_symlink()
    assert "is not labkit's" in result.left_alone[0][1]


@pytest.mark.filterwarnings("ignore:Cell is missing an id")  # nbformat's warning as it makes ids up
def test_cells_saved_without_ids_convert_the_same_on_every_run(lab: Path) -> None:
    """A notebook being written (cells without ids) gets random ids from nbformat; it must not look changed."""
    raw = json.loads((lab / "01_demo.ipynb").read_text())
    for cell in raw["cells"]:
        del cell["id"]
    (lab / "01_demo.ipynb").write_text(json.dumps(raw))
    ids = [[cell.id for cell in student_copy.student_notebook(lab / "01_demo.ipynb").cells] for _ in range(2)]
    assert ids[0] != ids[1], "the premise: nbformat makes up new ids on every read"
    prepare(lab)
    edit_exercise(lab.parent / "ws" / "01_demo.ipynb")
    result = prepare(lab)
    assert not result.beside and not result.refreshed


def test_a_folder_that_is_not_a_workspace_is_refused_and_left_as_it_was(lab: Path, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "thesis.tex").write_text("mine")
    with pytest.raises(LabkitValueError, match="not a labkit workspace"):
        workspace.prepare_workspace(busy, lab)
    assert [p.name for p in busy.iterdir()] == ["thesis.tex"]
    student_copy.make_student_copy(lab, tmp_path / "student")
    with pytest.raises(LabkitValueError, match="written by student-copy"):
        workspace.prepare_workspace(tmp_path / "student", lab)
    prepare(lab)
    with pytest.raises(LabkitValueError, match="written by workspace"):
        student_copy.make_student_copy(lab, lab.parent / "ws", force=True)


def test_run_prints_what_changed_and_exits_2_on_a_user_error(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = argparse.ArgumentParser()
    workspace.add_arguments(parser)
    assert workspace.run(parser.parse_args([str(lab.parent / "ws"), "--notebooks", str(lab)])) == 0
    assert capsys.readouterr().out.startswith(f"workspace: created {lab.parent / 'ws'}")
    (tmp_path / "file").write_text("")
    assert workspace.run(parser.parse_args([str(tmp_path / "file"), "--notebooks", str(lab)])) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert parser.parse_args([]).folder is None  # the default folder, workspace/: run() names it
    monkeypatch.chdir(tmp_path)
    assert workspace.run(parser.parse_args(["--notebooks", str(lab)])) == 0 and (tmp_path / "workspace" / MANIFEST).is_file()


# --- through a real Jupyter server, as `make lab` serves it ---------------------------


@pytest.mark.slow
def test_the_server_make_lab_starts_serves_no_solution_code(lab_workspace: Path, tmp_path: Path) -> None:
    solutions = real_solutions()
    used: set[str] = set()
    with jupyter_lab(lab_workspace, tmp_path) as (server, process):
        listing = server.api("contents")
        assert isinstance(listing, dict)
        names = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert "solutions" not in {item["name"] for item in listing["content"]}
        assert names == sorted(p.name for p in NOTEBOOKS.glob("0*.ipynb"))
        for name in names:
            model = server.api(f"contents/{name}?content=1")
            assert isinstance(model, dict)
            used |= assert_no_solution_code(name, nbformat.from_dict(model["content"]), solutions)
    assert process.poll() is not None, "the server must be stopped"
    assert used == set(solutions)


# --- tracks: make lab TRACK=core -------------------------------------------------------


@pytest.fixture
def tracked_lab(tmp_path: Path) -> Path:
    """A notebooks folder whose one lab has a section tagged extra; the workspace goes to ``tmp_path / "ws"``."""
    folder = tmp_path / "notebooks"
    (folder / "solutions").mkdir(parents=True)
    (folder / "solutions" / "01_1_double.py").write_text(SOLUTION)
    cells = [
        nbformat.v4.new_markdown_cell("# 01 · Demo\n\nTracks."),
        nbformat.v4.new_code_cell("base = 2"),
        nbformat.v4.new_markdown_cell("## Core part"),
        nbformat.v4.new_code_cell("print(base)"),
        nbformat.v4.new_markdown_cell("## A side trip", metadata={"tags": ["extra"]}),
        nbformat.v4.new_code_cell("print('only in the full edition')"),
        nbformat.v4.new_markdown_cell("## Exercises"),
        nbformat.v4.new_code_cell(f"# %load solutions/01_1_double.py\n{SOLUTION}", metadata={"tags": ["solution"]}),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "01_demo.ipynb")
    write_notebook(folder, "02_plain.ipynb", "A lab without extra sections.")
    return folder


def holds_side_trip(path: Path) -> bool:
    return "only in the full edition" in path.read_text(encoding="utf-8")


def manifest_track(ws: Path) -> str:
    return json.loads((ws / MANIFEST).read_text())["track"]


def test_track_core_leaves_out_extra_sections_records_the_track_and_keeps_it(tracked_lab: Path) -> None:
    ws = tracked_lab.parent / "ws"
    result = workspace.prepare_workspace(ws, tracked_lab, track="core")
    assert result.created and result.track == "core" and result.previous_track is None
    assert not holds_side_trip(ws / "01_demo.ipynb") and "Left out of this workshop's core track" in (
        ws / "01_demo.ipynb"
    ).read_text(encoding="utf-8")
    assert "raise NotImplementedError" in (ws / "01_demo.ipynb").read_text(encoding="utf-8")
    assert manifest_track(ws) == "core" and "core track" in (ws / "README.md").read_text(encoding="utf-8")
    again = workspace.prepare_workspace(ws, tracked_lab)  # no track asked for: the workspace keeps its own
    assert again.track == "core" and again.lines() == [f"{ws} is up to date"]


def test_switching_tracks_refreshes_unedited_notebooks_and_puts_the_new_version_beside_an_edited_one(tracked_lab: Path) -> None:
    ws = tracked_lab.parent / "ws"
    workspace.prepare_workspace(ws, tracked_lab, track="core")
    notebook = nbformat.read(ws / "01_demo.ipynb", as_version=4)
    notebook.cells[1].source = "base = 3  # mine"
    nbformat.write(notebook, ws / "01_demo.ipynb")
    mine = (ws / "01_demo.ipynb").read_bytes()
    plain = (ws / "02_plain.ipynb").read_bytes()
    result = workspace.prepare_workspace(ws, tracked_lab, track="all")
    assert (ws / "01_demo.ipynb").read_bytes() == mine, "an edited notebook is never overwritten"
    assert result.beside == [("01_demo.ipynb", "01_demo.labkit-new.ipynb")] and holds_side_trip(ws / "01_demo.labkit-new.ipynb")
    assert result.refreshed == ["README.md"] and (ws / "02_plain.ipynb").read_bytes() == plain, "no extra sections: same bytes"
    assert result.previous_track == "core" and manifest_track(ws) == "all"
    assert any(line.startswith("switched from the core track to the all track") for line in result.lines())
    assert "make lab TRACK=core" in (ws / "README.md").read_text(encoding="utf-8")


def test_a_workspace_from_before_tracks_holds_every_section(tracked_lab: Path) -> None:
    ws = tracked_lab.parent / "ws"
    workspace.prepare_workspace(ws, tracked_lab)
    record = json.loads((ws / MANIFEST).read_text())
    assert record.pop("track") == "all"
    (ws / MANIFEST).write_text(json.dumps(record))
    assert workspace.prepare_workspace(ws, tracked_lab).lines() == [f"{ws} is up to date"]
    result = workspace.prepare_workspace(ws, tracked_lab, track="core")
    assert result.previous_track == "all" and result.refreshed == ["01_demo.ipynb", "README.md"]
    assert not holds_side_trip(ws / "01_demo.ipynb")


def test_an_unknown_track_is_refused_before_anything_is_written(tracked_lab: Path, tmp_path: Path) -> None:
    ws = tracked_lab.parent / "ws"
    with pytest.raises(LabkitValueError, match="Unknown track 'short'"):
        workspace.prepare_workspace(ws, tracked_lab, track="short")
    assert not ws.exists()
    workspace.prepare_workspace(ws, tracked_lab)
    record = json.loads((ws / MANIFEST).read_text())
    (ws / MANIFEST).write_text(json.dumps({**record, "track": "short"}))
    with pytest.raises(LabkitValueError, match=r"records the track 'short'.*--track"):
        workspace.prepare_workspace(ws, tracked_lab)
    assert workspace.prepare_workspace(ws, tracked_lab, track="core").track == "core"  # an explicit track repairs it


def test_cli_track(tracked_lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    workspace.add_arguments(parser)
    ws = tracked_lab.parent / "ws"
    assert parser.parse_args([]).track is None
    assert workspace.run(parser.parse_args([str(ws), "--notebooks", str(tracked_lab), "--track", "core"])) == 0
    assert manifest_track(ws) == "core"
    assert workspace.run(parser.parse_args([str(ws), "--notebooks", str(tracked_lab), "--track", "all"])) == 0
    assert "workspace: switched from the core track to the all track" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args([str(ws), "--track", "short"])
    assert "invalid choice: 'short'" in capsys.readouterr().err


# --- a run that stops half way: the next one finishes the job ----------------------------


@pytest.fixture
def two_labs(lab: Path) -> Path:
    write_notebook(lab, "02_more.ipynb", "A second lab.")
    return lab


def contents(ws: Path) -> dict[str, str]:
    """Every file of the workspace but the manifest and hidden leftovers of killed writes, with its text."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(ws.iterdir()) if p.is_file() and not p.name.startswith(".")}


def hidden(ws: Path) -> list[str]:
    return sorted(p.name for p in ws.iterdir() if p.name.startswith(".") and p.name != MANIFEST)


def failing_writes(fail_at: int, exception: BaseException, calls: list[str]) -> Callable[[Path, str], Path]:
    """``write_text`` whose ``fail_at``-th call writes part of the file, then raises ``exception`` (labkit's real error path)."""
    def write_text(path: Path, text: str) -> Path:
        calls.append(Path(path).name)
        if len(calls) != fail_at:
            return files.write_text(path, text)

        def part_then_fail(handle) -> None:
            handle.write(text[: len(text) // 2])
            raise exception

        return files.write_file(path, part_then_fail)

    return write_text


@pytest.mark.parametrize("exception", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")],
                         ids=["ctrl-c", "disk-full"])
def test_a_first_run_stopped_at_any_write_is_finished_by_the_next(
    two_labs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exception: BaseException
) -> None:
    clean_calls: list[str] = []
    monkeypatch.setattr(workspace, "write_text", failing_writes(0, exception, clean_calls))
    workspace.prepare_workspace(tmp_path / "clean", two_labs)
    assert clean_calls[0] == MANIFEST and clean_calls.count(MANIFEST) > 3, "the manifest first, then after each file"
    for fail_at in range(1, len(clean_calls) + 1):
        ws = tmp_path / f"stopped-at-{fail_at}"
        monkeypatch.setattr(workspace, "write_text", failing_writes(fail_at, exception, []))
        expected = KeyboardInterrupt if isinstance(exception, KeyboardInterrupt) else LabkitValueError
        with pytest.raises(expected, match="No space left" if expected is LabkitValueError else None):
            workspace.prepare_workspace(ws, two_labs)
        monkeypatch.undo()
        assert hidden(ws) == [], f"write {fail_at}: a half-written file or staging folder was left"
        result = workspace.prepare_workspace(ws, two_labs)  # never "exists and is not a labkit workspace"
        assert result.created and not result.beside and ": 2 notebooks with blank exercises" in result.lines()[0], fail_at
        assert contents(ws) == contents(tmp_path / "clean"), f"write {fail_at}"
        assert (ws / MANIFEST).read_text() == (tmp_path / "clean" / MANIFEST).read_text(), f"write {fail_at}"
        assert workspace.prepare_workspace(ws, two_labs).lines() == [f"{ws} is up to date"]


def test_a_finishing_run_says_so_and_keeps_what_the_learner_changed_meanwhile(two_labs: Path, monkeypatch) -> None:
    ws = two_labs.parent / "ws"
    monkeypatch.setattr(workspace, "write_text", failing_writes(4, KeyboardInterrupt(), []))  # after 01_demo, at 02_more
    with pytest.raises(KeyboardInterrupt):
        workspace.prepare_workspace(ws, two_labs)
    monkeypatch.undo()
    assert json.loads((ws / MANIFEST).read_text())["creating"] is True
    mine = edit_exercise(ws / "01_demo.ipynb")  # the learner opened the labs meanwhile
    result = workspace.prepare_workspace(ws, two_labs)
    assert result.lines()[0] == f"created {ws}, finishing what an interrupted run had begun: 2 notebooks with blank exercises, " \
        "and README.md"
    assert (ws / "01_demo.ipynb").read_bytes() == mine and "creating" not in json.loads((ws / MANIFEST).read_text())


KILLED_RUN = """
import os, signal, sys
from labkit.core import files
from labkit.learner import workspace
calls = []
def write_text(path, text):
    calls.append(path)
    if len(calls) < int(sys.argv[1]):
        return files.write_text(path, text)
    def half_then_killed(handle):
        handle.write(text[: len(text) // 2])
        handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return files.write_file(path, half_then_killed)
workspace.write_text = write_text
from labkit.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("killed_at", [1, 2, 4], ids=["first-manifest", "first-notebook", "second-notebook"])
def test_a_first_run_killed_part_way_is_finished_by_the_next(
    two_labs: Path, tmp_path: Path, killed_at: int, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    command = [sys.executable, "-c", KILLED_RUN, str(killed_at), "workspace", str(ws), "--notebooks", str(two_labs)]
    killed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert main(["workspace", str(ws), "--notebooks", str(two_labs)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith(f"workspace: created {ws}")
    workspace.prepare_workspace(tmp_path / "clean", two_labs)
    assert contents(ws) == contents(tmp_path / "clean")
    assert workspace.prepare_workspace(ws, two_labs).lines() == [f"{ws} is up to date"]


def test_a_folder_labkit_did_not_start_is_still_refused(lab: Path, tmp_path: Path) -> None:
    prepare(lab)
    copied = tmp_path / "copied"  # labkit's very files, copied without the manifest: still not a workspace labkit started
    copied.mkdir()
    for name in ("01_demo.ipynb", "README.md"):
        (copied / name).write_bytes((lab.parent / "ws" / name).read_bytes())
    (tmp_path / "mine" / ".labkit-staging-dead").mkdir(parents=True)  # a killed run's staging beside a user's file
    (tmp_path / "mine" / "notes.md").write_text("mine")
    for folder in (copied, tmp_path / "mine"):
        before = sorted(p.name for p in folder.iterdir())
        with pytest.raises(LabkitValueError, match="exists and is not a labkit workspace"):
            workspace.prepare_workspace(folder, lab)
        assert sorted(p.name for p in folder.iterdir()) == before


# --- a workshop room: the learner edition, built once, and the room's README ------------------


def assert_names_nothing_outside(readme: str, *outside: Path) -> None:
    assert "lab-reference" not in readme and "../" not in readme and "notebooks/solutions" not in readme
    assert not [str(path) for path in outside if str(path) in readme]
    assert "%load solutions/<file>.py" in readme and "`solutions/` in this workspace" in readme
    assert "hands the solutions out" in readme


def test_a_room_edition_of_the_real_labs_holds_no_solution_and_names_nothing_outside(tmp_path: Path) -> None:
    edition = workspace.write_learner_edition(NOTEBOOKS, tmp_path / "edition", "core", room=True)
    assert (edition.track, edition.room) == ("core", True)
    assert sorted(p.name for p in (tmp_path / "edition").iterdir()) == sorted([*edition.files, RECORD])
    solutions = real_solutions()
    for name, text in edition.files.items():
        if name.endswith(".ipynb"):
            assert_no_solution_code(name, nbformat.reads(text, as_version=4), solutions)
    assert_names_nothing_outside(edition.files["README.md"], ROOT, NOTEBOOKS, tmp_path)
    assert "make lab TRACK" not in edition.files["README.md"]


def test_a_workspace_from_an_edition_needs_no_notebooks_and_keeps_the_usual_rules(lab: Path, tmp_path: Path) -> None:
    workspace.write_learner_edition(lab, tmp_path / "edition", "core")
    ws = tmp_path / "ws"
    hidden_labs = lab.rename(tmp_path / "instructor-only")  # the learner's account cannot read the labs
    result = workspace.prepare_workspace(ws, tmp_path / "no-such-notebooks", edition=tmp_path / "edition", room=True)
    assert result.created and result.track == "core" and manifest_track(ws) == "core"
    edition = json.loads((tmp_path / "edition" / RECORD).read_text())
    assert contents(ws) == {name: (tmp_path / "edition" / name).read_text() for name in edition["files"]}
    assert_names_nothing_outside((ws / "README.md").read_text(), hidden_labs, tmp_path)
    mine = edit_exercise(ws / "01_demo.ipynb")
    write_notebook(hidden_labs, "01_demo.ipynb", "Second version.", solution="01_1_double")
    workspace.write_learner_edition(hidden_labs, tmp_path / "edition", "core")  # rebuilt in place
    again = workspace.prepare_workspace(ws, edition=tmp_path / "edition")
    assert (ws / "01_demo.ipynb").read_bytes() == mine and again.beside == [("01_demo.ipynb", "01_demo.labkit-new.ipynb")]
    assert "Second version" in (ws / "01_demo.labkit-new.ipynb").read_text()


def test_an_edition_of_another_track_or_without_room_is_refused_before_anything_is_written(lab: Path, tmp_path: Path) -> None:
    workspace.write_learner_edition(lab, tmp_path / "core", "core")
    with pytest.raises(LabkitValueError, match="holds the core track, not all: leave out --track"):
        workspace.prepare_workspace(tmp_path / "ws", edition=tmp_path / "core", track="all")
    workspace.write_learner_edition(lab, tmp_path / "self", "all", room=False)
    with pytest.raises(LabkitValueError, match="built without --room"):
        workspace.prepare_workspace(tmp_path / "ws", edition=tmp_path / "self", room=True)
    with pytest.raises(LabkitValueError, match="holds no edition.json"):
        workspace.prepare_workspace(tmp_path / "ws", edition=lab)
    assert not (tmp_path / "ws").exists()
    assert workspace.prepare_workspace(tmp_path / "ws", edition=tmp_path / "core", track="core").track == "core"


def test_a_self_learners_edition_points_at_the_solutions_by_their_absolute_path(lab: Path, tmp_path: Path) -> None:
    edition = workspace.write_learner_edition(lab, tmp_path / "edition", room=False)
    assert f"%load {(lab / 'solutions').resolve().as_posix()}/<file>.py" in edition.files["README.md"]
    assert "make lab-reference" in edition.files["README.md"]


def test_room_without_an_edition_gives_the_room_readme(lab: Path, tmp_path: Path) -> None:
    workspace.prepare_workspace(tmp_path / "ws", lab, room=True)
    assert_names_nothing_outside((tmp_path / "ws" / "README.md").read_text(), lab, tmp_path)
    result = workspace.prepare_workspace(tmp_path / "ws", lab)  # make lab there: the self-learner's README, by the usual rules
    assert result.refreshed == ["README.md"] and "make lab-reference" in (tmp_path / "ws" / "README.md").read_text()


def test_cli_writes_an_edition_and_makes_workspaces_from_it(
    tracked_lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edition, ws = tmp_path / "edition", tmp_path / "ws"
    assert main(["workspace", "--write-edition", str(edition), "--notebooks", str(tracked_lab), "--track", "core", "--room"]) == 0
    assert capsys.readouterr().out == (
        f"workspace: wrote the learner edition to {edition}: 2 notebooks of the core track and a workshop room's README.md\n"
    )
    assert main(["workspace", str(ws), "--edition", str(edition), "--room"]) == 0
    assert capsys.readouterr().out.startswith(f"workspace: created {ws}: 2 notebooks")
    assert not holds_side_trip(ws / "01_demo.ipynb")
    assert main(["workspace", str(ws), "--edition", str(edition), "--track", "all"]) == 2
    assert "holds the core track, not all" in capsys.readouterr().err
    assert main(["workspace", str(ws), "--write-edition", str(edition)]) == 2
    assert "give no workspace folder" in capsys.readouterr().err
    (edition / "01_demo.ipynb").write_text("tampered")
    assert main(["workspace", str(ws), "--edition", str(edition)]) == 2
    err = capsys.readouterr().err
    assert "changed since the learner edition was built" in err and "Traceback" not in err


# --- an installed labkit: the labs its wheel carries (labkit/_labs, written by the build) -------------------------


@pytest.fixture
def installed(tracked_lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """labkit as a wheel installs it: no checkout's notebooks/ in reach, the learner edition of each track in the package."""
    packaged = tmp_path / "site-packages" / "labkit" / "_labs"
    workspace.write_packaged_labs(tracked_lab, packaged)
    monkeypatch.setattr(workspace, "NOTEBOOKS_DIR", tmp_path / "site-packages" / "notebooks")
    monkeypatch.setattr(workspace, "PACKAGED_LABS", packaged)
    monkeypatch.chdir(tmp_path)
    return packaged


def test_an_installed_labkit_makes_the_workspace_that_make_lab_makes_from_the_labs_it_carries(
    installed: Path, tracked_lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert workspace.labs_in_reach() is None
    assert main(["workspace"]) == 0  # in any folder, as `labkit workspace` or `labkit lab` runs it
    assert capsys.readouterr().out.startswith("workspace: created workspace: 2 notebooks with blank exercises")
    from_checkout = workspace.learner_edition(tracked_lab, tmp_path / "workspace", "all")
    for name in ("01_demo.ipynb", "02_plain.ipynb"):
        assert (tmp_path / "workspace" / name).read_text() == from_checkout[name]
    readme = (tmp_path / "workspace" / "README.md").read_text()
    assert "`labkit lab`" in readme and "make lab" not in readme and "../" not in readme
    assert hosted.repository_link("notebooks/solutions") in readme and "labkit lab --track core" in readme
    core = workspace.prepare_workspace(tmp_path / "core-ws", track="core")
    assert core.track == "core" and not holds_side_trip(tmp_path / "core-ws" / "01_demo.ipynb")
    assert workspace.prepare_workspace(tmp_path / "core-ws").lines() == [f"{tmp_path / 'core-ws'} is up to date"]
    assert manifest_track(tmp_path / "core-ws") == "core"  # a later run without --track keeps the track


def test_an_installed_labkit_refuses_what_needs_the_labs_notebooks_before_writing_anything(
    installed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(LabkitValueError, match="--room needs the room's learner edition"):
        workspace.prepare_workspace(tmp_path / "ws", room=True)
    assert main(["workspace", "--write-edition", str(tmp_path / "edition")]) == 2
    assert "--write-edition converts the labs' notebooks: pass --notebooks DIR" in capsys.readouterr().err
    shutil.rmtree(installed)
    assert main(["workspace", str(tmp_path / "ws")]) == 2
    assert "This labkit carries no labs" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists() and not (tmp_path / "edition").exists()


def test_in_a_checkout_the_labs_are_its_notebooks_wherever_the_command_runs() -> None:
    assert workspace.labs_in_reach() == NOTEBOOKS  # `labkit lab` in another folder: no more "notebooks is not a folder"
    assert workspace.PACKAGED_LABS.parent == Path(workspace.__file__).resolve().parents[1]
    assert not workspace.PACKAGED_LABS.exists(), "only a built wheel carries labkit/_labs; a checkout uses notebooks/"
