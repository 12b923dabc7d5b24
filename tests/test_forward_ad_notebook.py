"""notebooks/03_forward_ad.ipynb: structure, solution cells, clean stored outputs."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK = NOTEBOOKS / "03_forward_ad.ipynb"
ALLOWED_IGNORES = ("jacobian_cost(", "JacobianScaling(", "print(scaling.sweep)", "jvp_overhead(", "check_jvp(model")


@pytest.fixture(scope="module")
def notebook():
    return nbformat.read(NOTEBOOK, as_version=4)


def _code(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_starts_with_goals_and_setup(notebook):
    assert notebook.cells[0].source.startswith("# 03 ")
    assert "**Learning goals**" in notebook.cells[0].source
    assert _code(notebook)[0].source == "import labkit\n\ndevice = labkit.setup_notebook()"


def test_solution_cells_match_their_files(notebook):
    solutions = [cell for cell in notebook.cells if "solution" in cell.metadata.get("tags", [])]
    assert len(solutions) >= 3
    for cell in solutions:
        first, _, body = cell.source.partition("\n")
        found = re.fullmatch(r"# %load (solutions/03_\d_\w+\.py)", first)
        assert found, f"solution cell must start with '# %load solutions/03_N_slug.py', got {first!r}"
        assert body == (NOTEBOOKS / found.group(1)).read_text(), f"{found.group(1)} and its cell differ"


def test_each_solution_is_followed_by_a_checker(notebook):
    cells = notebook.cells
    for index, cell in enumerate(cells):
        if "solution" in cell.metadata.get("tags", []):
            assert "fad_checks.check_" in cells[index + 1].source


def test_stored_outputs_are_clean(notebook):
    for cell in _code(notebook):
        for output in cell.outputs:
            assert output.output_type != "error"
            assert output.get("name") != "stderr", f"stderr in {cell.source[:60]!r}: {output.text[:200]}"


def test_only_timings_and_widgets_skip_comparison(notebook):
    for cell in _code(notebook):
        if cell.source.startswith("# NBVAL_IGNORE_OUTPUT"):
            assert any(marker in cell.source for marker in ALLOWED_IGNORES), cell.source[:80]


def test_pitfalls_are_shown_running(notebook):
    text = "".join(output.get("text", "") for cell in _code(notebook) for output in cell.outputs)
    for expected in (
        "tangent under no_grad: tensor(",
        "tangent after nn.Parameter: None",
        "NestedForwardADError - ",
        "LabkitTypeError - Primal 0 has dtype torch.int64",
        "must override the setup_context staticmethod",
    ):
        assert expected in text
