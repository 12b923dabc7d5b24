"""notebooks/03_forward_ad.ipynb: what only this notebook must show (the shared rules are in test_notebook_hygiene)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK = NOTEBOOKS / "03_forward_ad.ipynb"
ALLOWED_IGNORES = ("jacobian_cost(", "JacobianScaling(", "print(scaling.sweep)", "jvp_overhead(", "verify_jvp(model")


@pytest.fixture(scope="module")
def notebook():
    return nbformat.read(NOTEBOOK, as_version=4)


def _code(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_each_solution_is_followed_by_a_checker(notebook):
    cells = notebook.cells
    for index, cell in enumerate(cells):
        if "solution" in cell.metadata.get("tags", []):
            assert "fad_checks.check_" in cells[index + 1].source


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
