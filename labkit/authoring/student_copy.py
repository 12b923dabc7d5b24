"""Copies of the labs for students: ``python -m labkit student-copy OUTDIR``.

Why: the committed notebooks are executed, with every exercise solved (strict
nbval checks them). A workshop hands out copies without answers: every cell
tagged ``solution`` becomes a stub generated from its solution file (imports,
signatures and docstrings kept, each body replaced by ``raise
NotImplementedError("Exercise N.M: ...")``), so the checker right after it
says "not yet solved" instead of crashing. Outputs are cleared except in
cells tagged ``keep_output``, which an author uses for output a student
should see before running anything. A README for students goes alongside.
``--with-solutions`` also copies ``solutions/`` so ``%load`` works offline.

The copy is built in a staging folder and moved in only when complete, so an
error leaves the previous copy as it was. Updating a copy (``--force``)
replaces only the files this tool wrote and nobody changed since: files an
instructor added stay, and a notebook a learner edited stays too, with the new
version beside it (``01_x.labkit-new.ipynb``); see :mod:`labkit.authoring.output_folder`.
pytest never collects a student copy (the repository's ``conftest.py``), so
one written into ``notebooks/handout`` is not run as tests.

Tracks (``--track core|all``, sections tagged ``extra`` left out) are
:mod:`labkit.learner.tracks`.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from labkit.authoring.docs import describe_notebook
from labkit.authoring.nbrun import read_notebook
from labkit.authoring.output_folder import MANIFEST, OutputFolder
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.labs import checkout_needed, find_notebooks, in_checkout
from labkit.learner.tracks import DEFAULT_TRACK, TRACKS, apply_track, require_track

SOLUTION_TAG = "solution"
KEEP_OUTPUT_TAG = "keep_output"
TOOL = "student-copy"  # the tool named in the output folder's manifest
MARKER = ".labkit-student-copy"  # also marks copies written before manifests
STUB_METADATA = "labkit_stub"  # cell metadata of a stub: its exercise id and solution file
LOAD_LINE = re.compile(r"^# %load (solutions/([\w-]+)\.py)\s*$")
SOLUTION_NAME = re.compile(r"^(\d+)_(\d+)_[\w-]+$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class Exercise:
    """One solution cell: where it is and which file solves it."""

    notebook: str
    cell_index: int
    solution: str  # "solutions/01_2_shape_flop_recorder.py", relative to the notebook

    @property
    def exercise_id(self) -> str:
        """``"1.2"`` for ``solutions/01_2_shape_flop_recorder.py``."""
        return exercise_id(Path(self.solution).stem)


def exercise_id(stem: str) -> str:
    match = SOLUTION_NAME.match(stem)
    if not match:
        raise LabkitValueError(
            f"Solution file {stem}.py is not named "
            "<notebook>_<exercise>_<slug>.py (e.g. 01_2_shape_flop_recorder.py)."
        )
    return f"{int(match[1])}.{int(match[2])}"


def stub_source(source: str, solution: str, with_solutions: bool = False) -> str:
    """The solution file's code with every function and method body replaced by a stub.

    Imports, other top-level statements, decorators, signatures, comments
    before a body and docstrings are kept verbatim. ``solution`` is the solution's
    path (``solutions/01_2_shape_flop_recorder.py``); the stub's message names it only
    ``with_solutions``, in a copy that holds that folder.
    """
    exercise = exercise_id(Path(solution).stem)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise LabkitValueError(f"{solution} is not valid Python ({exc.msg}, line {exc.lineno}); fix it first.") from exc
    lines = source.splitlines()
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        raise LabkitValueError(f"{solution} defines no function or class method to turn into an exercise stub.")
    # Innermost and last first, so earlier line numbers stay valid while editing.
    for node in sorted(functions, key=lambda n: n.lineno, reverse=True):
        if any(node is not other and _encloses(other, node) for other in functions):
            continue  # a nested helper disappears with its enclosing function's body
        first, last = _body_span(node, solution)
        indent = " " * node.body[0].col_offset
        name = _qualified_name(tree, node)
        message = (
            f"Exercise {exercise}: write {name}. See {solution}, or run %load {solution} in this cell."
            if with_solutions else f"Exercise {exercise}: write {name}; its docstring says what to do."
        )
        lines[first:last] = [f"{indent}raise NotImplementedError({message!r})"]
    return "\n".join(lines) + "\n"


def _last_line(node: ast.stmt) -> int:
    """``node.end_lineno``: ast.parse always sets it, though it is typed optional (hand-built nodes lack it)."""
    return node.end_lineno or node.lineno


def _encloses(outer: ast.stmt, inner: ast.stmt) -> bool:
    return outer.lineno < inner.lineno and _last_line(inner) <= _last_line(outer)


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef, solution: str) -> tuple[int, int]:
    """0-based [first, last) line range of the body to replace (after the docstring, if any)."""
    body = node.body
    if body[0].lineno == node.lineno:
        raise LabkitValueError(f"{solution}: put the body of {node.name}() on its own lines, not after the colon.")
    opening = body[0]
    has_docstring = (
        isinstance(opening, ast.Expr) and isinstance(opening.value, ast.Constant) and isinstance(opening.value.value, str)
    )
    first = _last_line(opening) if has_docstring else opening.lineno - 1
    if has_docstring and len(body) == 1:
        return first, first
    return first, _last_line(node)


def _qualified_name(tree: ast.Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for klass in tree.body:
        if isinstance(klass, ast.ClassDef) and node in klass.body:
            return f"{klass.name}.{node.name}"
    return f"{node.name}()"


def stub_cell_source(solution: str, solution_code: str, with_solutions: bool = False) -> str:
    exercise = exercise_id(Path(solution).stem)
    header = f"# Exercise {exercise}: replace each NotImplementedError with your code, then run the checker below.\n"
    return header + stub_source(solution_code, solution, with_solutions)


def exercises_in(path: Path, notebook: nbformat.NotebookNode) -> list[Exercise]:
    """The cells tagged ``solution``, each with the solution file it loads (or, in a student copy, stubs)."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if SOLUTION_TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        first_line = cell.source.splitlines()[0] if cell.source else ""
        match = LOAD_LINE.match(first_line)
        solution = match[1] if match else cell.metadata.get(STUB_METADATA, {}).get("solution")
        if cell.cell_type != "code" or not solution:
            raise LabkitValueError(
                f"{path.name}, cell {index + 1}: a cell tagged '{SOLUTION_TAG}' must be a code cell whose first line is "
                "'# %load solutions/<file>.py' (see CONTRIBUTING.md)."
            )
        found.append(Exercise(path.name, index, solution))
    return found


#: A line that speaks to the notebook tests (``# NBVAL_IGNORE_OUTPUT``), not to a learner: left out of their copy.
TEST_MARKER = re.compile(r"^[ \t]*#[ \t]*NBVAL_[A-Z_]+[ \t]*\n?", re.MULTILINE)


def without_test_markers(source: str) -> str:
    """``source`` without its nbval marker lines (their cells' outputs are cleared in a learner's copy anyway)."""
    return TEST_MARKER.sub("", source)


def student_notebook(path: Path, with_solutions: bool = False, track: str = DEFAULT_TRACK) -> nbformat.NotebookNode:
    """``path`` as students get it: stubs for solutions, outputs cleared except ``keep_output`` cells.

    The stubs point at ``solutions/`` only ``with_solutions`` (a copy that holds it).
    ``track`` ``"core"`` leaves out the sections tagged ``extra`` (see the module's docstring).
    """
    notebook = apply_track(path, read_notebook(path, write=False), track)
    for exercise in exercises_in(path, notebook):
        solution_file = path.parent / exercise.solution
        if not solution_file.is_file():
            raise LabkitValueError(f"{path.name} loads {exercise.solution}, which does not exist.")
        cell = notebook.cells[exercise.cell_index]
        cell.source = stub_cell_source(exercise.solution, solution_file.read_text(encoding="utf-8"), with_solutions)
        cell.metadata[STUB_METADATA] = {"exercise": exercise.exercise_id, "solution": exercise.solution}
        cell.metadata["tags"] = [t for t in cell.metadata["tags"] if t != KEEP_OUTPUT_TAG]
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.source = without_test_markers(cell.source)
        if cell.cell_type == "code" and KEEP_OUTPUT_TAG not in cell.metadata.get("tags", []):
            cell.outputs, cell.execution_count = [], None
    kept_widgets = any(WIDGET_VIEW in out.get("data", {}) for c in notebook.cells if c.cell_type == "code" for out in c.outputs)
    if not kept_widgets:
        notebook.metadata.pop("widgets", None)  # the state of widgets whose outputs were cleared
    return notebook


README = """\
# {title}

Your copy of the labkit labs. Work through the notebooks in order:

{notebook_list}

## Start

From the folder that holds these notebooks, with the labkit environment active
(your instructor set it up; in a labkit checkout, it is the checkout's `.venv`):

    jupyter lab

Open `00_start_here.ipynb` first and run it (*Run > Run All Cells*): its
preflight must say READY and its slider must redraw the plot. If you see
a line of text such as `SliderPlot(children=...)` instead of a slider, tell
your instructor (the widgets extension is missing).

## Exercises

Every lab after `00_start_here.ipynb` ends with exercises. An exercise is two
cells:

1. a code cell with the functions or classes to write. Their docstrings say
   what to do; their bodies `raise NotImplementedError` until you replace them;
2. a checker cell right after it. It answers *not yet solved* (the stub is
   still there), *not solved* with a hint, or *solved*.

Run the exercise cell after each change, then the checker again.

## Solutions

Stuck? Solutions live in `solutions/` (your instructor may hand that folder
out later). In the exercise cell, replace everything with
`%load solutions/<file>.py` (one file per exercise: exercise 2.1 is
`02_1_<name>.py`) and run the cell: it loads the solution into the cell;
run it once more, then the checker.
{solutions_note}{track_note}"""

CORE_TRACK_NOTE = """
## The core track

This copy holds the workshop's core track: the sections your instructor
planned for the time you have. Where a section was left out, a one-line note
says so; the full edition of each lab has it.
"""


def write_readme(folder: Path, notebooks: list[Path], with_solutions: bool, track: str = DEFAULT_TRACK) -> None:
    lines = []
    for path in notebooks:
        page = describe_notebook(path, read_notebook(path, write=False))
        lines.append(f"- `{path.name}`: {page.title}")
    note = "\nThis copy includes `solutions/`.\n" if with_solutions else "\nThis copy does not include `solutions/` yet.\n"
    text = README.format(
        title="labkit labs: student copy", notebook_list="\n".join(lines), solutions_note=note,
        track_note=CORE_TRACK_NOTE if track == "core" else "",
    )
    (folder / "README.md").write_text(text, encoding="utf-8")


def _output(out_dir: Path) -> OutputFolder:
    return OutputFolder(out_dir, tool=TOOL, marker=MARKER, what="a student copy")


def is_student_copy(folder: Path) -> bool:
    """Whether ``folder`` holds a student copy: test runners must not collect its stub notebooks."""
    if (folder / MARKER).is_file():
        return True
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["tool"] == TOOL
    except (OSError, ValueError, KeyError, TypeError):
        return False


def make_student_copy(
    notebooks_dir: str | Path, out_dir: str | Path, *, with_solutions: bool = False, force: bool = False,
    track: str = DEFAULT_TRACK,
) -> list[Path]:
    """Write student notebooks, README.md (and solutions/ if asked) into ``out_dir``; return the notebooks.

    A folder that already holds a student copy is updated only with
    ``force``, and then only the files this tool wrote there and nobody
    changed are replaced (see :mod:`labkit.authoring.output_folder`): files an
    instructor added are kept, and a notebook a learner edited is kept with
    the new version written beside it (``01_x.labkit-new.ipynb``). What was
    kept is printed. Nothing is written unless every notebook converts.
    ``track="core"`` leaves out the sections tagged ``extra``.
    """
    notebooks_dir, out_dir = Path(notebooks_dir), Path(out_dir)
    require_track(track)
    output = _output(out_dir)
    if output.inspect() != "new" and not force:
        raise LabkitValueError(
            f"{out_dir} already holds a student copy; pass --force "
            "to update it (files you added or changed are kept)."
        )
    sources = find_notebooks(notebooks_dir)
    # fails before anything is written
    converted = {path.name: student_notebook(path, with_solutions, track) for path in sources}

    def build(staging: Path) -> None:
        for name, notebook in converted.items():
            nbformat.write(notebook, staging / name)
        write_readme(staging, sources, with_solutions, track)
        if with_solutions:
            shutil.copytree(notebooks_dir / "solutions", staging / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
        (staging / MARKER).write_text("written by python -m labkit student-copy\n", encoding="utf-8")

    report = output.update(build)
    for line in report.lines():
        print(f"student-copy: {line}")
    moved = dict(report.changed)  # a learner's edited notebook stays; ours went beside it
    return [out_dir / moved.get(name, name) for name in converted]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", type=Path, help="folder to write the student copy to, e.g. build/student")
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="the labs' notebooks folder")
    parser.add_argument("--with-solutions", action="store_true", help="also copy solutions/ (for %%load)")
    parser.add_argument(
        "--track", choices=TRACKS, default=DEFAULT_TRACK,
        help="core: leave out the sections tagged 'extra' (a workshop's shorter path); all (default): every section",
    )
    parser.add_argument(
        "--force", action="store_true",
        help="update an earlier student copy in OUTDIR (only files it wrote and nobody changed are replaced)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        if not args.notebooks.is_dir() and not in_checkout():
            raise checkout_needed("student-copy", "the solved notebooks/ and notebooks/solutions/; or give --notebooks")
        written = make_student_copy(
            args.notebooks, args.out_dir, with_solutions=args.with_solutions, force=args.force, track=args.track
        )
    except LabkitError as exc:
        print(f"student-copy: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"student-copy: interrupted; nothing half-written was left in {args.out_dir}.", file=sys.stderr)
        return 130
    extra = " and solutions/" if args.with_solutions else ""
    track = " (core track)" if args.track == "core" else ""
    print(f"student-copy: {len(written)} notebooks{track}, README.md{extra} in {args.out_dir}")
    return 0
