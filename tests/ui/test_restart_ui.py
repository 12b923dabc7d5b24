"""A stored widget survives a JupyterLab restart: the reopened notebook shows its picture, not "model not found".

Why: ipywidgets keep their models in the kernel. Without saving the widget state
with the notebook (the widget manager's ``saveState`` setting, which labkit's
servers turn on: :data:`labkit.learner.lab.LAB_SETTINGS`), a notebook reopened after
a restart shows "Error displaying widget: model not found" for every widget.
The test does what a learner does: JupyterLab started as ``labkit lab`` starts it
on a copy of notebook 00, Run All, save, stop JupyterLab, start it again, reopen.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.ui.support import NOTEBOOKS, jupyter_lab, skip_or_fail
from tests.ui.test_lab_ui import (
    WIDGET_CLASSES,
    WIDGET_TIMEOUT_MS,
    _menu_command,
    _save_and_read,
    _wait_for_idle_kernel,
    _wait_for_run_all,
)

pytestmark = pytest.mark.ui
NOTEBOOK = "00_start_here.ipynb"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _slider_plot_model(saved) -> str:
    """The model id of the SliderPlot the saved notebook displays (the output of ``display(demo)``)."""
    ids = [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in saved.cells
        if cell.cell_type == "code" and "SliderPlot(" in cell.source
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]
    assert len(ids) == 1, f"notebook 00 should display one SliderPlot, found views {ids}"
    return ids[0]


def _news_toasts(page) -> list[str]:
    """The notifications on screen that ask about, or bring, Jupyter news or updates (the toast over the outputs)."""
    texts = page.locator(".Toastify__toast").all_inner_texts()
    return [text for text in texts if "news" in text.lower() or "update" in text.lower()]


def test_a_stored_widget_shows_its_picture_after_a_restart(browser, tmp_path: Path) -> None:
    if not (NOTEBOOKS / NOTEBOOK).exists():
        skip_or_fail(f"notebooks/{NOTEBOOK} does not exist yet")
    workspace, home = tmp_path / "workspace", tmp_path / "jupyter"
    workspace.mkdir()
    shutil.copy(NOTEBOOKS / NOTEBOOK, workspace / NOTEBOOK)
    with jupyter_lab(workspace, home, quiet=False) as (server, _):
        page = browser.new_page()
        try:
            page.goto(server.url(f"lab/workspaces/restart/tree/{NOTEBOOK}?reset"))
            _wait_for_idle_kernel(page, server, NOTEBOOK)
            assert _news_toasts(page) == [], "labkit's JupyterLab asks about Jupyter news or updates"
            _menu_command(page, "Run", "runmenu:run-all")
            _wait_for_run_all(page, NOTEBOOK)
            page.locator(f".jp-OutputArea-output .{WIDGET_CLASSES['SliderPlot']} img").first.wait_for(
                state="visible", timeout=WIDGET_TIMEOUT_MS
            )
            saved = _save_and_read(page, server, NOTEBOOK)
            assert _news_toasts(page) == [], "labkit's JupyterLab asks about Jupyter news or updates"
        finally:
            page.close()
    model = _slider_plot_model(saved)
    state = saved.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert model in state, "JupyterLab saved no state for the SliderPlot it shows: is saveState on (labkit/learner/lab_settings)?"

    with jupyter_lab(workspace, home, quiet=False) as (server, _):
        page = browser.new_page()
        try:
            page.goto(server.url(f"lab/workspaces/restart/tree/{NOTEBOOK}?reset"))
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
            widget = page.locator(f".jp-OutputArea-output .{WIDGET_CLASSES['SliderPlot']}").first
            failed = page.locator(".jp-OutputArea-output", has_text="Error displaying widget")
            widget.or_(failed).first.wait_for(state="visible", timeout=WIDGET_TIMEOUT_MS)
            assert failed.count() == 0, f"after the restart: {failed.first.inner_text()[:200]}"
            image = widget.locator("img").first
            image.wait_for(state="visible", timeout=WIDGET_TIMEOUT_MS)
            page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle())
            assert widget.locator(".widget-readout").first.inner_text().strip() == "2.00", "the slider's last value"
        finally:
            page.close()
