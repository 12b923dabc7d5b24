"""labkit.tools.workspace: `make lab` serves blank exercises, and a learner's work survives every later run.

The behaviour tests use a small synthetic lab (fast, and its upstream can be
changed); the solution-code checks run on the real notebooks, once headless
and once through a real Jupyter server's REST API, as `make lab` serves them.
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import nbformat
import pytest

from labkit.core.errors import LabkitValueError
from labkit.tools import student_copy, workspace
from labkit.tools.output_folder import MANIFEST
from tests.ui.support import jupyter_lab

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
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    workspace.add_arguments(parser)
    assert workspace.run(parser.parse_args([str(lab.parent / "ws"), "--notebooks", str(lab)])) == 0
    assert capsys.readouterr().out.startswith(f"workspace: created {lab.parent / 'ws'}")
    (tmp_path / "file").write_text("")
    assert workspace.run(parser.parse_args([str(tmp_path / "file"), "--notebooks", str(lab)])) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert parser.parse_args([]).folder == Path("workspace")


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
