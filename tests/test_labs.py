"""The registry of labs agrees with notebooks/ and with the packages it names."""
from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit.labs import LABS, NOTEBOOKS_DIR, find_notebooks, lab_for, widget_css_class

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

PACKAGE = Path(labkit.__file__).parent
RENDERERS = {"ipywidgets", "matplotlib"}
# The modules allowed to import a renderer: each lab's widgets, and the core's plotting and generic widget.
MAY_RENDER = {"core/plots.py", "core/fonts.py", "core/widgets.py"}  # fonts: the plots' font list


def test_every_notebook_in_the_folder_is_a_registered_lab():
    assert [p.name for p in find_notebooks(NOTEBOOKS_DIR)] == [lab.notebook for lab in LABS]


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.number)
def test_lab_entry_matches_its_notebook_and_package(lab):
    assert lab.notebook.startswith(f"{lab.number}_") and lab_for(lab.notebook) is lab
    notebook = nbformat.read(NOTEBOOKS_DIR / lab.notebook, as_version=4)
    heading = next(line for cell in notebook.cells if cell.cell_type == "markdown"
                   for line in cell.source.splitlines() if line.startswith("# "))
    assert heading == f"# {lab.number} · {lab.title}"
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    widgets = importlib.import_module(lab.widgets_module) if lab.widgets else None
    for name in lab.widgets:
        widget = getattr(widgets, name)
        assert f"{name}(" in code, f"{lab.notebook} never shows its registered widget {name}"
        assert widget_css_class(name) in inspect.getsource(widget), f"{name} must add_class({widget_css_class(name)!r})"


def test_unknown_notebooks_follow_the_registered_ones(tmp_path):
    for name in ["05_extra.ipynb", "01_fx_profiling.ipynb", "00_start_here.ipynb", "notes.ipynb"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in find_notebooks(tmp_path)] == ["00_start_here.ipynb", "01_fx_profiling.ipynb", "05_extra.ipynb"]


def test_widget_css_class():
    assert widget_css_class("StrideExplorer") == "labkit-stride-explorer"


def _headless_modules() -> list[str]:
    """Every module of the core and the labs except those allowed to render."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        commands = ("learner/", "authoring/", "measurements/")  # the CLI's commands: no lab core, may draw
        if relative.startswith((*commands, "_vendor/", "widgets/")) or path.name == "widgets.py" or relative in MAY_RENDER:
            continue
        names.append("labkit." + relative.removesuffix(".py").removesuffix("/__init__").replace("/", "."))
    return [name.removesuffix(".__init__") for name in names]


@pytest.mark.parametrize("module", _headless_modules())
def test_no_lab_core_module_imports_a_renderer(module):
    """Only a lab's ``widgets`` module (and core.plots/core.widgets) may import ipywidgets or matplotlib."""
    path = Path(importlib.util.find_spec(module).origin)
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            assert name.split(".")[0] not in RENDERERS, f"{module} imports {name}"
            assert not name.endswith((".widgets", ".plots")) or name == "labkit.widgets", f"{module} imports {name}"


def test_importing_every_lab_core_module_stays_headless():
    modules = _headless_modules()
    probe = (
        f"import sys\nfor m in {modules!r}: __import__(m)\n"
        f"print(sorted({{n.split('.')[0] for n in sys.modules}} & set({sorted(RENDERERS)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("package", ["labkit", "labkit.fx", "labkit.memory_format", "labkit.forward_ad", "labkit.capstone",
                                     "labkit.widgets"])
def test_every_lazily_exported_name_resolves(package):
    """A rename inside a lab must not leave its package's export list pointing at nothing."""
    module = importlib.import_module(package)
    assert module.__all__
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_the_registry_lists_every_exercise_its_checkers_and_notebooks_have():
    import re

    from labkit.labs import EXERCISES

    sources = "".join(path.read_text() for path in Path(labkit.__file__).parent.rglob("checks.py"))
    checked = re.findall(r'run_check\(\s*"(\d+\.\d+)"', sources)
    notebooks = "".join(path.read_text() for path in sorted(NOTEBOOKS_DIR.glob("0*.ipynb")))
    in_notebooks = list(dict.fromkeys(re.findall(r'\\"\\"\\"Exercise (\d+\.\d+):', notebooks)))
    assert sorted(checked) == sorted(EXERCISES)
    assert in_notebooks == list(EXERCISES)
