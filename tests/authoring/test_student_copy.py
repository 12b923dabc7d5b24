"""labkit.authoring.student_copy: stubs from solution files, cleared outputs, and checkers that do not crash.

The end-to-end tests run a student copy in a real kernel (nbclient): every
checker must answer "not yet solved" against the stubs, and "solved" after the
solution is run back in through IPython's own ``%load`` magic.
"""
from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from labkit.authoring import student_copy
from labkit.core.errors import LabkitValueError
from labkit.learner import tracks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
VERDICT = re.compile(r"Exercise (\d+\.\d+): (solved|not yet solved|not solved)")

SOLUTION = '''\
import math

SCALE = 2  # a constant the exercise may use


def double(x: float, *, times: int = SCALE) -> float:
    """Exercise 1.1: return ``x`` multiplied by ``times``."""
    # a comment inside the body goes with it
    def helper(y):
        return y * times
    return helper(x)


class Circle:
    """Exercise 1.1: a circle that knows its area."""

    kind = "round"

    def __init__(self, radius: float) -> None:
        self.radius = radius

    @property
    def area(self) -> float:
        return math.pi * self.radius ** 2


def only_a_docstring():
    """Nothing to write here yet."""
'''

CHECKER = '''\
from labkit.core.checks import run_check


def _check():
    assert double(3) == 6, "double(3) should be 6"
    assert round(Circle(1.0).area, 4) == 3.1416, "the area of a unit circle is pi"
    return "double and Circle work."


run_check("1.1", _check)'''


def load_namespace(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<stub>", "exec"), namespace)  # noqa: S102 - our own test source
    return namespace


# --- stubs ----------------------------------------------------------------------


def test_stub_keeps_imports_signatures_docstrings_and_raises_with_the_exercise() -> None:
    stub = student_copy.stub_source(SOLUTION, "solutions/01_1_double.py")
    solved, stubbed = load_namespace(SOLUTION), load_namespace(stub)
    assert "import math" in stub and "SCALE = 2  # a constant" in stub and 'kind = "round"' in stub
    assert "helper" not in stub and "return helper" not in stub and "math.pi" not in stub
    for name in ("double", "Circle", "only_a_docstring"):
        assert inspect.signature(stubbed[name]) == inspect.signature(solved[name])
        assert stubbed[name].__doc__ == solved[name].__doc__
    with pytest.raises(NotImplementedError, match=r"Exercise 1\.1: write double\(\); its docstring says what to do\.$"):
        stubbed["double"](3)
    with_solutions = load_namespace(student_copy.stub_source(SOLUTION, "solutions/01_1_double.py", with_solutions=True))
    with pytest.raises(NotImplementedError, match=r"Exercise 1\.1: write double\(\)\. See solutions/01_1_double\.py"):
        with_solutions["double"](3)
    with pytest.raises(NotImplementedError, match=r"write Circle\.__init__"):
        stubbed["Circle"](1.0)
    with pytest.raises(NotImplementedError, match=r"write only_a_docstring\(\)"):
        stubbed["only_a_docstring"]()


def test_stub_of_a_body_after_the_colon_or_a_badly_named_file_is_refused() -> None:
    with pytest.raises(LabkitValueError, match="own lines"):
        student_copy.stub_source("def f(): return 1\n", "solutions/01_1_f.py")
    with pytest.raises(LabkitValueError, match="is not named"):
        student_copy.stub_source("def f():\n    return 1\n", "solutions/f.py")
    with pytest.raises(LabkitValueError, match="no function"):
        student_copy.stub_source("X = 1\n", "solutions/01_1_x.py")
    with pytest.raises(LabkitValueError, match="not valid Python"):
        student_copy.stub_source("def f(:\n", "solutions/01_1_x.py")


# --- a small synthetic lab --------------------------------------------------------


def write_lab(folder: Path, solution_first_line: str | None = None) -> Path:
    """notebooks/01_demo.ipynb with one exercise, a kept output and an ordinary output."""
    (folder / "solutions").mkdir(parents=True)
    (folder / "solutions" / "01_1_double.py").write_text(SOLUTION)
    first_line = solution_first_line or "# %load solutions/01_1_double.py"
    cells = [
        nbformat.v4.new_markdown_cell("# 01 · Demo\n\n**Learning goals**\n- double things\n"),
        nbformat.v4.new_code_cell("print('kept')", metadata={"tags": ["keep_output"]}),
        nbformat.v4.new_code_cell("print('cleared')"),
        nbformat.v4.new_code_cell(f"{first_line}\n{SOLUTION}", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell(CHECKER),
    ]
    for number, cell in enumerate(c for c in cells if c.cell_type == "code"):
        cell.execution_count = number + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"output {number}\n")]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path = folder / "01_demo.ipynb"
    nbformat.write(notebook, path)
    return path


def run_and_solve(path: Path) -> list[tuple[str, str, str]]:
    """Run a student notebook top to bottom in a kernel, then solve each exercise through ``%load``.

    Returns (exercise, checker verdict in the first run, verdict after the
    solution was loaded and run). A failing cell in the first run fails the
    test: only checkers may call the stubs, and they report instead of raising.
    """
    notebook = nbformat.read(path, as_version=4)
    exercises = student_copy.exercises_in(path, notebook)
    replies: dict[int, dict] = {}
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=lambda cell, cell_index, execute_reply: replies.__setitem__(cell_index, execute_reply),
    )

    def execute_extra(source: str) -> nbformat.NotebookNode:
        """Run a cell we add (nbclient stores every executed cell in the notebook, so append it)."""
        cell = nbformat.v4.new_code_cell(source)
        notebook.cells.append(cell)
        client.execute_cell(cell, len(notebook.cells) - 1)
        return cell

    results = []
    with client.setup_kernel():
        for index, cell in list(enumerate(notebook.cells)):
            if cell.cell_type == "code":
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError as exc:
                    pytest.fail(f"{path.name}, cell {index + 1} failed in the student copy:\n{str(exc)[-1500:]}")
        for exercise in exercises:
            checker = next_code_cell(notebook, exercise.cell_index)
            before = verdict(checker, exercise.exercise_id)
            execute_extra(f"%load {exercise.solution}")
            payload = replies[len(notebook.cells) - 1]["content"]["payload"]
            loaded = next(p["text"] for p in payload if p["source"] == "set_next_input")
            assert loaded.startswith(f"# %load {exercise.solution}\n")
            execute_extra(loaded)
            rerun = execute_extra(checker.source)
            results.append((exercise.exercise_id, before, verdict(rerun, exercise.exercise_id)))
    return results


def next_code_cell(notebook: nbformat.NotebookNode, index: int) -> nbformat.NotebookNode:
    following = [c for c in notebook.cells[index + 1 :] if c.cell_type == "code"]
    assert following, f"no checker cell after the solution cell {index + 1}"
    return following[0]


def verdict(cell: nbformat.NotebookNode, exercise: str) -> str:
    text = "".join(
        "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")) for out in cell.outputs
    )
    found = [status for ex, status in VERDICT.findall(text) if ex == exercise]
    assert found, f"the checker cell printed no verdict for exercise {exercise}: {text[:300]!r}"
    return found[-1]


def test_synthetic_lab_copy_clears_outputs_and_stubs_solutions(tmp_path: Path) -> None:
    write_lab(tmp_path / "notebooks")
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "student")
    copy = nbformat.read(tmp_path / "student" / "01_demo.ipynb", as_version=4)
    kept, cleared, stub, checker = copy.cells[1:]
    assert kept.outputs and kept.execution_count == 1
    assert cleared.outputs == [] and cleared.execution_count is None
    assert stub.outputs == [] and "raise NotImplementedError" in stub.source and "helper" not in stub.source
    assert stub.metadata["tags"] == ["solution"] and checker.source == CHECKER
    assert "widgets" not in copy.metadata
    assert not (tmp_path / "student" / "solutions").exists()
    readme = (tmp_path / "student" / "README.md").read_text()
    assert "`01_demo.ipynb`: 01 · Demo" in readme and "does not include `solutions/`" in readme


@pytest.mark.slow
def test_synthetic_lab_checker_says_not_yet_then_solved_after_load(tmp_path: Path) -> None:
    write_lab(tmp_path / "notebooks")
    [path] = student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "student", with_solutions=True)
    assert run_and_solve(path) == [("1.1", "not yet solved", "solved")]


def test_bad_solution_cell_or_foreign_folder_leaves_nothing_written(tmp_path: Path) -> None:
    write_lab(tmp_path / "notebooks", solution_first_line="# my solution")
    with pytest.raises(LabkitValueError, match="# %load solutions/<file>.py"):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "student")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks"]

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(LabkitValueError, match="not a student copy"):
        student_copy.make_student_copy(NOTEBOOKS, foreign)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


def test_existing_copy_is_replaced_only_with_force(tmp_path: Path) -> None:
    write_lab(tmp_path / "notebooks")
    out = tmp_path / "student"
    student_copy.make_student_copy(tmp_path / "notebooks", out)
    with pytest.raises(LabkitValueError, match="--force"):
        student_copy.make_student_copy(tmp_path / "notebooks", out, with_solutions=True)
    assert not (out / "solutions").exists()
    student_copy.make_student_copy(tmp_path / "notebooks", out, with_solutions=True, force=True)
    assert (out / "solutions" / "01_1_double.py").read_text() == SOLUTION


def test_force_keeps_files_an_instructor_added_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_lab(tmp_path / "notebooks")
    out = tmp_path / "student"
    student_copy.make_student_copy(tmp_path / "notebooks", out)
    (out / "instructor_notes.md").write_text("answers to the open questions")
    (out / "extra").mkdir()
    (out / "extra" / "slides.pdf").write_bytes(b"%PDF")
    capsys.readouterr()
    student_copy.make_student_copy(tmp_path / "notebooks", out, with_solutions=True, force=True)
    assert (out / "instructor_notes.md").read_text() == "answers to the open questions"
    assert (out / "extra" / "slides.pdf").read_bytes() == b"%PDF"
    assert (out / "solutions" / "01_1_double.py").read_text() == SOLUTION
    assert "kept 2 files you added: extra/slides.pdf, instructor_notes.md" in capsys.readouterr().out


def test_force_never_overwrites_a_learners_edited_notebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_lab(tmp_path / "notebooks")
    out = tmp_path / "student"
    student_copy.make_student_copy(tmp_path / "notebooks", out)
    notebook = nbformat.read(out / "01_demo.ipynb", as_version=4)
    notebook.cells[3].source = "def double(x, *, times=2):\n    return x * times\n"  # the learner's answer
    nbformat.write(notebook, out / "01_demo.ipynb")
    edited = (out / "01_demo.ipynb").read_bytes()
    capsys.readouterr()
    student_copy.make_student_copy(tmp_path / "notebooks", out, force=True)
    assert (out / "01_demo.ipynb").read_bytes() == edited
    assert "raise NotImplementedError" in (out / "01_demo.labkit-new.ipynb").read_text()
    assert "01_demo.ipynb (new version: 01_demo.labkit-new.ipynb)" in capsys.readouterr().out


def test_copy_from_before_manifests_is_updated_with_force_keeping_added_files(tmp_path: Path) -> None:
    write_lab(tmp_path / "notebooks")
    out = tmp_path / "student"
    student_copy.make_student_copy(tmp_path / "notebooks", out)
    (out / ".labkit-manifest.json").unlink()  # what the old code left: the marker only
    (out / "instructor_notes.md").write_text("mine")
    with pytest.raises(LabkitValueError, match="--force"):
        student_copy.make_student_copy(tmp_path / "notebooks", out, with_solutions=True)
    student_copy.make_student_copy(tmp_path / "notebooks", out, with_solutions=True, force=True)
    assert (out / "instructor_notes.md").read_text() == "mine"
    assert (out / "solutions" / "01_1_double.py").is_file() and (out / ".labkit-manifest.json").is_file()
    # a folder from before manifests: labkit cannot tell an edit from its older output, so the notebook (other bytes
    # than the new copy's) is kept and the new version goes beside it
    assert (out / "01_demo.labkit-new.ipynb").exists()


def test_cli_outdir_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from labkit.__main__ import main

    write_lab(tmp_path / "notebooks")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert main(["student-copy", str(afile), "--notebooks", str(tmp_path / "notebooks")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("student-copy: ") and "is a file, not a folder" in err and err.count("\n") == 1
    assert afile.read_text() == "mine"
    assert main(["student-copy", str(afile / "out"), "--notebooks", str(tmp_path / "notebooks")]) == 2
    assert "is a file" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits; tests/test_output_folder.py simulates it")
def test_cli_read_only_parent_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from labkit.__main__ import main

    write_lab(tmp_path / "notebooks")
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        assert main(["student-copy", str(parent / "out"), "--notebooks", str(tmp_path / "notebooks")]) == 2
    finally:
        parent.chmod(0o755)
    err = capsys.readouterr().err
    assert "no permission to write" in err and err.count("\n") == 1


def test_cli_ctrl_c_is_one_line_exit_130_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from labkit.__main__ import main

    write_lab(tmp_path / "notebooks")

    def interrupted(*args, **kwargs) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(student_copy, "write_readme", interrupted)
    assert main(["student-copy", str(tmp_path / "out"), "--notebooks", str(tmp_path / "notebooks")]) == 130
    err = capsys.readouterr().err
    assert err.startswith("student-copy: interrupted") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_pytest_never_collects_a_student_copy(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_lab(project / "notebooks")
    student_copy.make_student_copy(project / "notebooks", project / "notebooks" / "handout")
    assert student_copy.is_student_copy(project / "notebooks" / "handout")
    assert not student_copy.is_student_copy(project / "notebooks")
    shutil.copy(ROOT / "conftest.py", project / "conftest.py")
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = notebooks\naddopts = --nbval -p no:cacheprovider\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "notebooks/01_demo.ipynb::" in result.stdout  # the real lab is collected ...
    assert "handout" not in result.stdout  # ... its student copy never


def test_cli_reports_errors_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from labkit.__main__ import main

    assert main(["student-copy", str(tmp_path / "out"), "--notebooks", str(tmp_path / "none")]) == 2
    captured = capsys.readouterr()
    assert "student-copy:" in captured.err and "not a folder" in captured.err and captured.out == ""
    write_lab(tmp_path / "notebooks")
    assert main(["student-copy", str(tmp_path / "out"), "--notebooks", str(tmp_path / "notebooks"), "--with-solutions"]) == 0
    assert "1 notebooks, README.md and solutions/" in capsys.readouterr().out


# --- the real labs ----------------------------------------------------------------


def labs_with_exercises() -> list[Path]:
    return [
        path for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
        if student_copy.exercises_in(path, nbformat.read(path, as_version=4))
    ]


def test_every_real_solution_cell_has_a_stub_that_compiles(tmp_path: Path) -> None:
    written = student_copy.make_student_copy(NOTEBOOKS, tmp_path / "student", with_solutions=True)
    assert [p.name for p in written] == [p.name for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
    for path in written:
        notebook = nbformat.read(path, as_version=4)
        for exercise in student_copy.exercises_in(path, notebook):
            source = notebook.cells[exercise.cell_index].source
            compile(source, f"{path.name} cell {exercise.cell_index + 1}", "exec")
            assert f"Exercise {exercise.exercise_id}:" in source and "NotImplementedError" in source
        assert all(
            c.outputs == [] for c in notebook.cells if c.cell_type == "code" and "keep_output" not in c.metadata.get("tags", [])
        )


@pytest.fixture(scope="module")
def real_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student") / "copy"
    student_copy.make_student_copy(NOTEBOOKS, out, with_solutions=True)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("lab", labs_with_exercises(), ids=lambda p: p.stem)
def test_real_lab_checkers_say_not_yet_then_solved_after_load(real_copy: Path, lab: Path) -> None:
    path = real_copy / lab.name
    expected = [e.exercise_id for e in student_copy.exercises_in(path, nbformat.read(path, as_version=4))]
    results = run_and_solve(path)
    assert [r[0] for r in results] == expected
    assert [r for r in results if r[1:] != ("not yet solved", "solved")] == []


# --- tracks: the core track leaves out sections tagged extra --------------------------

TRIPLE = '''\
def triple(x):
    """Exercise 1.2: return three times ``x``."""
    return 3 * x
'''


def markdown(source: str, *tags: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source, metadata={"tags": list(tags)} if tags else {})


def write_tracked_lab(folder: Path, *, later_reads: str = "print(value)", side_tags: tuple[str, ...] = ("extra",)) -> Path:
    """01_demo.ipynb with a core section, an extra one, and exercises of which 1.2 is extra."""
    (folder / "solutions").mkdir(parents=True)
    (folder / "solutions" / "01_1_double.py").write_text(SOLUTION)
    (folder / "solutions" / "01_2_triple.py").write_text(TRIPLE)
    cells = [
        markdown("# 01 · Demo\n\n**Learning goals**\n- double things\n"),
        nbformat.v4.new_code_cell("import math\nbase = 2"),
        markdown("## Core basics\n\nThe part everyone does."),
        nbformat.v4.new_code_cell("value = base * 3"),
        markdown("### A detail"),
        nbformat.v4.new_code_cell("print(value)"),
        markdown("## Side trip\n\nInteresting, not needed.", *side_tags),
        nbformat.v4.new_code_cell("side = value + 1\nprint(side)"),
        markdown("### Inside the side trip"),
        nbformat.v4.new_code_cell("print(side)"),
        markdown("## Exercises\n\nEach exercise has a stub and a checker."),
        markdown("### Exercise 1.1: double"),
        nbformat.v4.new_code_cell(f"# %load solutions/01_1_double.py\n{SOLUTION}", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell(CHECKER),
        markdown("### Exercise 1.2: triple", "extra"),
        nbformat.v4.new_code_cell(f"# %load solutions/01_2_triple.py\n{TRIPLE}", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell("print('the checker of 1.2')"),
        markdown("## Summary"),
        nbformat.v4.new_code_cell(later_reads),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "01_demo.ipynb")
    return folder / "01_demo.ipynb"


def headings(notebook: nbformat.NotebookNode) -> list[str]:
    return [c.source.splitlines()[0] for c in notebook.cells if c.cell_type == "markdown" and c.source.startswith("#")]


def test_core_track_leaves_out_extra_sections_and_subsections_and_keeps_the_rest(tmp_path: Path) -> None:
    write_tracked_lab(tmp_path / "notebooks")
    [path] = student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    copy = nbformat.read(path, as_version=4)
    assert headings(copy) == [
        "# 01 · Demo", "## Core basics", "### A detail", "## Exercises", "### Exercise 1.1: double", "## Summary"
    ]
    sources = "\n".join(c.source for c in copy.cells)
    assert "side" not in sources.replace("Side trip", "") and "the checker of 1.2" not in sources
    notes = [c.source for c in copy.cells if c.source.startswith("> **Left out")]
    assert notes == [
        "> **Left out of this workshop's core track:** the section *Side trip*. The full edition of this lab has it.",
        "> **Left out of this workshop's core track:** the part *Exercise 1.2: triple*. The full edition of this lab has it.",
    ]
    assert [e.exercise_id for e in student_copy.exercises_in(path, copy)] == ["1.1"]
    assert all("raise NotImplementedError" in copy.cells[e.cell_index].source for e in student_copy.exercises_in(path, copy))
    assert "core track" in (tmp_path / "core" / "README.md").read_text()
    again = nbformat.read(student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "again", track="core")[0], 4)
    assert [c.id for c in again.cells] == [c.id for c in copy.cells], "the same copy every time: notes get stable ids"


def test_all_track_is_the_default_and_keeps_every_section(tmp_path: Path) -> None:
    write_tracked_lab(tmp_path / "notebooks")
    default = student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "default")[0]
    every = student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "all", track="all")[0]
    assert default.read_bytes() == every.read_bytes()
    copy = nbformat.read(every, as_version=4)
    assert "## Side trip" in headings(copy) and [e.exercise_id for e in student_copy.exercises_in(every, copy)] == ["1.1", "1.2"]
    assert "core track" not in (tmp_path / "all" / "README.md").read_text()


def test_core_track_refuses_when_a_kept_cell_reads_a_name_only_a_left_out_cell_defines(tmp_path: Path) -> None:
    write_tracked_lab(tmp_path / "notebooks", later_reads="print(side, value)")
    with pytest.raises(LabkitValueError) as raised:
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    message = str(raised.value)
    assert "01_demo.ipynb, cell 19 reads `side`, which cell 8 defines in the left-out section 'Side trip'" in message
    assert "`value`" not in message, "value is defined by a kept cell"
    assert not (tmp_path / "core").exists()
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "all", track="all")  # the full edition is fine


def test_core_track_checks_function_bodies_and_rebinding_too(tmp_path: Path) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks", later_reads="def report():\n    return side\n")
    with pytest.raises(LabkitValueError, match=r"cell 19 reads `side`, which cell 8 defines"):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[7].source = "value = 100  # changes what later cells see"
    notebook.cells[-1].source = "print(value)"
    nbformat.write(notebook, lab)
    with pytest.raises(LabkitValueError, match=r"cell 19 reads `value`, which cell 8 defines in the left-out section"):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    notebook.cells[-1].source = "value = 1\nprint([value * k for k in range(3)])"
    nbformat.write(notebook, lab)
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")  # binds value before reading it


def test_cell_names_reads_before_binds_in_running_order() -> None:
    names = tracks.cell_names(
        "%matplotlib inline\nimport torch.nn as nn\ntotal += 1\nx = f(y)\ny = [x * k for k in ks]\n"
        "def g(a):\n    return a + hidden\nwith open(p) as handle:\n    lines = handle.read()\n",
        "cell 1",
    )
    assert names.reads == {"total", "f", "y", "ks", "open", "p", "get_ipython"}
    assert names.binds == {"nn", "total", "x", "y", "g", "handle", "lines"}
    assert names.deferred == {"hidden"}
    with pytest.raises(LabkitValueError, match="cell 1 is not valid Python"):
        tracks.cell_names("def broken(:\n", "cell 1")


@pytest.mark.parametrize(
    ("index", "source", "expected"),
    [
        (1, None, r"cell 2 \(code: 'import math'\) is tagged 'extra'"),
        (2, "The part everyone does.", r"cell 3 \(markdown: 'The part everyone does.'\) is tagged 'extra'"),
        (0, None, r"cell 1 \(markdown: '# 01 · Demo'\) is tagged 'extra'.*'## ' heading"),
    ],
)
def test_extra_on_a_cell_that_is_not_a_section_heading_is_an_error(
    tmp_path: Path, index: int, source: str | None, expected: str
) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[index].metadata["tags"] = ["extra"]
    if source is not None:
        notebook.cells[index].source = source
    nbformat.write(notebook, lab)
    for track in ("core", "all"):
        with pytest.raises(LabkitValueError, match=expected):
            student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / track, track=track)
        assert not (tmp_path / track).exists()


def test_lines_marked_extra_leave_the_core_track_and_stay_in_the_full_one(tmp_path: Path) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[0].source += "- take a side trip <!-- extra -->\n- come back\n"
    nbformat.write(notebook, lab)
    core = nbformat.read(student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")[0], 4)
    full = nbformat.read(student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "all", track="all")[0], 4)
    assert core.cells[0].source.endswith("- double things\n- come back\n")
    assert "- take a side trip <!-- extra -->" in full.cells[0].source


@pytest.mark.parametrize("reference", [
    "Later, the side trip shows more.",  # the title, any case, markup left out
    "As you will see in [the detour](#side-trip).",  # a link to its anchor
    "Exercise 1.2 builds on this.",  # a left-out exercise by its number
])
def test_a_kept_cell_that_names_a_left_out_section_is_an_error_in_the_core_track(tmp_path: Path, reference: str) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[2].source += f"\n\n{reference}"
    nbformat.write(notebook, lab)
    named = r"01_demo.ipynb, cell 3 names the left-out (section 'Side trip'|part 'Exercise 1.2)"
    with pytest.raises(LabkitValueError, match=named):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    assert not (tmp_path / "core").exists()
    notebook.cells[2].source += " <!-- extra -->"  # the marker leaves that line out of the core track
    nbformat.write(notebook, lab)
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")


@pytest.mark.parametrize("reference", [
    "It also checks your input, as you will see in the pitfalls section.",  # the title's first clause, no article
    "A dual tensor cannot be a parameter (see the pitfalls), hence the swap.",
    "Section 9 shows each check.",  # a numbered section by its number
])
def test_a_kept_cell_that_points_at_a_left_out_section_by_a_short_form_is_an_error(tmp_path: Path, reference: str) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[6].source = "## 9. Pitfalls, each one running\n\nInteresting, not needed."
    notebook.cells[2].source += f"\n\n{reference}"
    nbformat.write(notebook, lab)
    with pytest.raises(LabkitValueError, match=r"cell 3 names the left-out section '9\. Pitfalls, each one running'"):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    notebook.cells[2].source = notebook.cells[2].source.replace(reference, "Pitfalls abound; section 90 and 9.5 are elsewhere.")
    nbformat.write(notebook, lab)  # the word alone, in a sentence that points at no section, is fine
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")


def test_a_list_whose_last_items_are_left_out_ends_with_its_final_punctuation() -> None:
    goals = "**Learning goals**\n- profile it;\n- fuse it; <!-- extra -->\n- judge it. <!-- extra -->\n\nThen more."
    assert tracks.without_extra_lines(goals) == "**Learning goals**\n- profile it.\n\nThen more."
    middle = "- profile it;\n- fuse it; <!-- extra -->\n- judge it."
    assert tracks.without_extra_lines(middle) == "- profile it;\n- judge it."  # the list goes on: nothing to fix


def write_second_lab(folder: Path) -> None:
    """02_other.ipynb next to 01_demo: a kept section about a tracker, a left-out one whose cell names a benchmark."""
    cells = [
        markdown("# 02 · Other\n\n**Learning goals**\n- other things\n"),
        markdown("## The tracker\n\nA tracker records formats."),
        markdown("## What it buys\n\n`benchmark_formats` times it with `torch.utils.benchmark`.", "extra"),
        markdown("## Summary"),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "02_other.ipynb")


def test_a_kept_cell_that_points_at_another_labs_left_out_section_is_an_error_in_the_core_track(tmp_path: Path) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    write_second_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[2].source += "\n\nOn a GPU, add fp16, as lab 02's benchmark does."
    nbformat.write(notebook, lab)
    with pytest.raises(LabkitValueError, match=r"01_demo.ipynb, cell 3 points at the section 'What it buys' of 02_other"):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    assert not (tmp_path / "core").exists()
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "all", track="all")  # the full edition has it
    notebook.cells[2].source = notebook.cells[2].source.replace("benchmark does", "tracker does")
    nbformat.write(notebook, lab)  # the tracker's section is kept
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")


def test_a_mention_that_only_looks_like_a_left_out_name_is_fine(tmp_path: Path) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[2].source += "\n\nExercise 1.20 and a side tripwire are other things."
    nbformat.write(notebook, lab)
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")


def test_the_labs_core_tracks_name_nothing_they_leave_out() -> None:
    from labkit.learner.tracks import apply_track

    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("0*.ipynb")):
        apply_track(path, nbformat.read(path, as_version=4), "core")  # raises naming the cell


def test_a_section_heading_below_the_first_line_of_a_cell_is_an_error_in_the_core_track(tmp_path: Path) -> None:
    lab = write_tracked_lab(tmp_path / "notebooks")
    notebook = nbformat.read(lab, as_version=4)
    notebook.cells[9].cell_type, notebook.cells[9].source = "markdown", "Done.\n\n```\n## in a code fence: fine\n```"
    notebook.cells[9].pop("outputs"), notebook.cells[9].pop("execution_count")
    notebook.cells[10].source = "That was all.\n\n## Exercises\n\nEach exercise has a stub and a checker."
    nbformat.write(notebook, lab)
    with pytest.raises(LabkitValueError, match=r"cell 11: the heading '## Exercises' is not the first line of its cell.*Split"):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", track="core")
    student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "all")  # sections do not matter to the full edition


def test_an_unknown_track_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from labkit.__main__ import main

    write_tracked_lab(tmp_path / "notebooks")
    with pytest.raises(LabkitValueError, match=r"Unknown track 'short': choose one of all, core\."):
        student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "out", track="short")
    with pytest.raises(SystemExit) as exited:
        main(["student-copy", str(tmp_path / "out"), "--notebooks", str(tmp_path / "notebooks"), "--track", "short"])
    assert exited.value.code == 2 and "invalid choice: 'short'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_track_core_writes_the_core_track(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from labkit.__main__ import main

    write_tracked_lab(tmp_path / "notebooks")
    assert main(["student-copy", str(tmp_path / "out"), "--notebooks", str(tmp_path / "notebooks"), "--track", "core"]) == 0
    assert "1 notebooks (core track), README.md in" in capsys.readouterr().out
    assert "## Side trip" not in headings(nbformat.read(tmp_path / "out" / "01_demo.ipynb", as_version=4))


@pytest.mark.slow
def test_a_core_track_copy_runs_top_to_bottom_and_its_exercise_still_solves(tmp_path: Path) -> None:
    write_tracked_lab(tmp_path / "notebooks")
    [path] = student_copy.make_student_copy(tmp_path / "notebooks", tmp_path / "core", with_solutions=True, track="core")
    assert run_and_solve(path) == [("1.1", "not yet solved", "solved")]
