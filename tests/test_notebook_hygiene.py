"""Every stored notebook is fit to be documentation and to be checked by strict nbval."""
import getpass
import re
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("0*.ipynb"))
LOCAL_PATH = re.compile(r"(/root/|/home/|/Users/|/tmp/|/work/|[A-Z]:\\\\Users)")
LOAD_LINE = re.compile(r"^# %load (solutions/\S+\.py)\n")


def _outputs(notebook):
    for cell in notebook.cells:
        if cell.cell_type == "code":
            yield from ((cell, out) for out in cell.outputs)


def _output_text(output) -> str:
    parts = [output.get("text", "")]
    parts += [v for k, v in output.get("data", {}).items() if k.startswith("text/")]
    return "".join("".join(p) if isinstance(p, list) else str(p) for p in parts)


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def notebook(request):
    return request.param, nbformat.read(request.param, as_version=4)


def test_the_start_here_notebook_exists():
    assert (NOTEBOOKS_DIR / "00_start_here.ipynb") in NOTEBOOKS


def test_kernelspec_is_python3(notebook):
    _, nb = notebook
    assert nb.metadata.kernelspec.name == "python3"


def test_executed_top_to_bottom(notebook):
    _, nb = notebook
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert None not in counts, "some cells were never executed: run `make notebooks`"
    assert counts == list(range(1, len(counts) + 1)), "cells were not executed once, top to bottom"


def test_no_stored_errors_and_clean_stderr(notebook):
    _, nb = notebook
    for cell, out in _outputs(nb):
        assert out.output_type != "error", f"stored error in cell: {cell.source[:80]!r}"
        assert not (out.output_type == "stream" and out.name == "stderr"), (
            f"stderr in cell {cell.source[:80]!r}: {out.text[:200]!r}"
        )


def test_no_local_paths_or_user_names(notebook):
    _, nb = notebook
    user = getpass.getuser()
    user_pattern = re.compile(rf"\b{re.escape(user)}\b") if user not in ("root", "runner", "jovyan") else None
    for cell, out in _outputs(nb):
        text = _output_text(out)
        assert not LOCAL_PATH.search(text), f"local path in output of {cell.source[:60]!r}"
        assert not (user_pattern and user_pattern.search(text)), f"user name in output of {cell.source[:60]!r}"


def test_first_code_cell_sets_up_the_notebook(notebook):
    _, nb = notebook
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "labkit.setup_notebook()" in first.source


def test_learning_goals_come_first(notebook):
    _, nb = notebook
    assert nb.cells[0].cell_type == "markdown" and "Learning goals" in nb.cells[0].source


def test_ignored_outputs_are_marked_on_the_first_line(notebook):
    _, nb = notebook
    for cell in nb.cells:
        if "NBVAL_IGNORE_OUTPUT" in cell.source:
            assert cell.source.startswith("# NBVAL_IGNORE_OUTPUT"), cell.source[:80]


def test_widget_state_is_stored_when_widgets_are_shown(notebook):
    _, nb = notebook
    shows_widget = any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for _, out in _outputs(nb))
    if shows_widget:
        state = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
        assert state, "widgets are displayed but no widget state is stored"


def test_solution_cells_match_their_files(notebook):
    _, nb = notebook
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            match = LOAD_LINE.match(cell.source)
            assert match, f"a solution cell must start with '# %load solutions/<file>.py': {cell.source[:60]!r}"
            solution_file = NOTEBOOKS_DIR / match.group(1)
            assert solution_file.is_file(), f"{solution_file.name} is missing"
            assert cell.source[match.end():].strip() == solution_file.read_text().strip(), (
                f"the solution cell and {solution_file.name} have drifted apart"
            )


# A measured figure in prose: digits, then a time unit, a ratio (x, ×) or a percentage. Dimensions ("224×224",
# "2 × 3 × 2 × 2") are not figures; inline code and LaTeX are skipped (they hold code and formulas).
MEASURED_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|us|ns|s|x|×|%)(?!\w)(?!\s?\d)")
NOT_PROSE = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", re.DOTALL)


def measured_numbers(markdown: str) -> list[str]:
    """The figures in ``markdown`` that look measured (``"49.2 ms"``, ``"5.1x"``, ``"12%"``)."""
    return [m.group(0) for m in MEASURED_NUMBER.finditer(NOT_PROSE.sub(" ", markdown))]


def test_the_measured_number_pattern_finds_figures_and_spares_dimensions():
    assert measured_numbers("median 49.2 ms, 5.1x faster, 12% of the time, 3 s to compile, 1.5×") == [
        "49.2 ms", "5.1x", "12%", "3 s", "1.5×"
    ]
    assert measured_numbers("two 224×224 images, a 2 × 3 × 2 × 2 tensor, `x[:2]`, $2x\\,t$, 32 × 32 = 1024") == []


def test_prose_states_no_measured_number(notebook):
    """Figures come from the run: a reader's CPU, GPU and core count give other numbers than the author's."""
    path, nb = notebook
    found = {index: measured_numbers(cell.source) for index, cell in enumerate(nb.cells) if cell.cell_type == "markdown"}
    found = {index: figures for index, figures in found.items() if figures}
    assert not found, f"{path.name}: markdown cells state measured figures {found}; render them from a code cell"
