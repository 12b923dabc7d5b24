"""A checker's verdict in the learner's language, in a real JupyterLab whose server runs with ``LABKIT_LANG=zh`` (or ru).

Why a few cells and not the notebook: Run All of a translated notebook takes a minute per language and repeats
what tests/ui/test_lab_ui.py checks in English; what is new here is the language labkit speaks in a kernel that
JupyterLab started. So the workspace gets a copy of notebooks/<lang>/02_memory_format.ipynb cut down to its title,
its first two code cells (the setup and the imports), the solution of exercise 2.1 and that exercise's checker.
After Run All the checker's verdict on the page must be the one labkit gives in that language (computed here,
in this process, with the same ``LABKIT_LANG``), written in that language's script, and not the English one.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from tests.ui.support import NOTEBOOKS, jupyter_lab, skip_or_fail
from tests.ui.test_lab_ui import _menu_command, _save_and_read, _wait_for_idle_kernel, _wait_for_run_all

pytestmark = pytest.mark.ui
NOTEBOOK = "02_memory_format.ipynb"
SCRIPTS = {"zh": re.compile(r"[\u4e00-\u9fff]"), "ru": re.compile(r"[А-Яа-яЁё]")}


def checker_notebook(lang: str) -> tuple[nbformat.NotebookNode, list[str]]:
    """The translated notebook cut down to title, setup, imports, the first solution and its checker (no outputs);
    and the sources of the code cells, in order."""
    source = nbformat.read(NOTEBOOKS / lang / NOTEBOOK, as_version=4)
    code = [i for i, cell in enumerate(source.cells) if cell.cell_type == "code"]
    solution = next(i for i in code if "solution" in source.cells[i].metadata.get("tags", []))
    checker = next(i for i in code if i > solution)
    cells = [source.cells[0], *(source.cells[i] for i in [*code[:2], solution, checker])]
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={
        key: source.metadata[key] for key in ("kernelspec", "language_info") if key in source.metadata
    })
    return notebook, [cell.source for cell in cells if cell.cell_type == "code"]


def verdict_here(sources: list[str], lang: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """What the checker cell shows when these cells run in this process with ``LABKIT_LANG=lang``: the verdict expected."""
    monkeypatch.setenv("LABKIT_LANG", lang)
    monkeypatch.setenv("LABKIT_PROGRESS", "off")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    *cells, checker = sources[1:]  # the first cell is the hosted-install and setup cell: labkit is installed here
    for cell in cells:
        exec(cell, namespace)  # noqa: S102 - the notebook's own cells, as the kernel runs them
    *body, last = ast.parse(checker).body
    exec(compile(ast.Module(body, []), "checker", "exec"), namespace)  # noqa: S102
    return str(eval(compile(ast.Expression(last.value), "checker", "eval"), namespace))  # noqa: S307


@pytest.mark.parametrize("lang", sorted(SCRIPTS))
def test_a_checker_speaks_the_servers_language(browser, lang: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (NOTEBOOKS / lang / NOTEBOOK).exists():
        skip_or_fail(f"notebooks/{lang}/{NOTEBOOK} does not exist yet (make i18n-build)")
    notebook, sources = checker_notebook(lang)
    workspace, home = tmp_path / "workspace", tmp_path / "jupyter"
    workspace.mkdir()
    nbformat.write(notebook, workspace / NOTEBOOK)
    expected = verdict_here(sources, lang, monkeypatch, tmp_path)
    english = verdict_here(sources, "en", monkeypatch, tmp_path)
    assert SCRIPTS[lang].search(expected) and expected != english, f"labkit has no {lang} verdict to expect: {expected!r}"
    with jupyter_lab(workspace, home, env={"LABKIT_LANG": lang, "LABKIT_PROGRESS": "off"}) as (server, _):
        page = browser.new_page()
        try:
            page.goto(server.url(f"lab/workspaces/i18n-{lang}/tree/{NOTEBOOK}?reset"))
            _wait_for_idle_kernel(page, server, NOTEBOOK)
            _menu_command(page, "Run", "runmenu:run-all")
            _wait_for_run_all(page, NOTEBOOK)
            shown = page.locator(".jp-CodeCell").last.locator(".jp-OutputArea-output").first.inner_text().strip()
            saved = _save_and_read(page, server, NOTEBOOK)
        finally:
            page.close()
    errors = [output.get("ename") for cell in saved.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert errors == [], f"cells failed in JupyterLab: {errors}"
    assert shown == expected.strip(), f"the checker said {shown!r} in JupyterLab; in {lang} labkit says {expected!r}"
