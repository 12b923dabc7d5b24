"""Every lab notebook runs in a real JupyterLab in Chromium, and its widgets work.

Per notebook: open it, clear outputs, Run All, wait for the kernel, then assert
that no cell failed (in the DOM and in the saved file) and that every labkit
widget the notebook shows rendered as a DOM element (its ``labkit-*`` class),
not as a text repr. Then drive each widget as a learner would, and run axe-core
on the page in the light and the dark theme (:mod:`tests.ui.axe`). A screenshot per
notebook lands in build/screenshots/.

A notebook of the learning path that does not exist yet is skipped, with its
name; in CI (``LABKIT_REQUIRE_UI=1``) it is a failure.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from labkit.labs import LABS, widget_css_class
from tests.ui.axe import IPYWIDGETS_UPSTREAM, Upstream, audit, failures, summary
from tests.ui.support import NOTEBOOKS, LabServer, skip_or_fail

pytestmark = pytest.mark.ui

# The learning path and the widgets each notebook shows come from the one
# registry of labs; widgets found in a notebook's code are added to these.
EXPECTED_NOTEBOOKS: dict[str, set[str]] = {lab.stem: set(lab.widgets) for lab in LABS}
WIDGET_CLASSES = {widget: widget_css_class(widget) for lab in LABS for widget in lab.widgets}
RUN_ALL_TIMEOUT_MS = 240_000
WIDGET_TIMEOUT_MS = 30_000
THEMES = ("JupyterLab Light", "JupyterLab Dark")
# What labkit puts on JupyterLab's page: the notebook's outputs (widgets included) and its rendered markdown.
# Everything around them (menus, sidebars, the editors, the cell toolbars) is JupyterLab's.
LAB_CONTENT = ".jp-OutputArea-output, .jp-RenderedMarkdown"
# Serious or critical violations in JupyterLab's own interface (4.6), each with its upstream issue.
LAB_UPSTREAM: list[Upstream] = [
    *IPYWIDGETS_UPSTREAM,
    # Toolbar buttons (Upload Files, Toggle File Filter, Enable Debugger) carry aria-pressed on a role-less element.
    Upstream("aria-allowed-attr", "jp-button", "JupyterLab", "https://github.com/jupyterlab/jupyterlab/issues/16891"),
    # The notebook is a role="feed" whose cells have no role (a feed's children must be articles).
    Upstream("aria-required-children", ".jp-WindowedPanel-viewport", "JupyterLab",
             "https://github.com/jupyterlab/jupyterlab/issues/13704"),
    # A markdown heading's collapse button is an empty <button> with no name.
    Upstream("button-name", ".jp-collapseHeadingButton", "JupyterLab", "no upstream issue found"),
    # Every cell's CodeMirror editor (role="textbox") has no accessible name; CodeMirror leaves the label to the
    # application (https://github.com/codemirror/dev/issues/1127).
    Upstream("aria-input-field-name", ".jp-CodeMirrorEditor .cm-content", "JupyterLab",
             "https://github.com/jupyterlab/jupyterlab/issues/10347"),
]
_WIDGET_CALL = re.compile(r"\b(" + "|".join(WIDGET_CLASSES) + r")\s*\(")


def widgets_in(stem: str) -> set[str]:
    """The labkit widgets a notebook shows: the expected ones plus those its code creates."""
    found = set(EXPECTED_NOTEBOOKS.get(stem, set()))
    path = NOTEBOOKS / f"{stem}.ipynb"
    if path.exists():
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                found.update(_WIDGET_CALL.findall(cell.source))
    return found


def notebooks_showing(widget: str) -> list[str]:
    return [stem for stem in EXPECTED_NOTEBOOKS if widget in widgets_in(stem)]


@dataclass
class LabNotebook:
    """A notebook open in JupyterLab after Run All, and its saved copy."""

    stem: str
    page: object  # playwright Page
    saved: nbformat.NotebookNode

    def widget(self, name: str):
        return self.page.locator(f".jp-OutputArea-output .{WIDGET_CLASSES[name]}").first


@pytest.fixture(scope="module")
def lab_notebook(request: pytest.FixtureRequest, browser, lab_server: LabServer, screenshot_dir: Path) -> Iterator[LabNotebook]:
    """Open ``request.param`` in JupyterLab, Run All, save; close it and its kernel afterwards."""
    stem = request.param
    if not (NOTEBOOKS / f"{stem}.ipynb").exists():
        skip_or_fail(f"notebooks/{stem}.ipynb does not exist yet")
    page = browser.new_page()
    try:
        page.goto(lab_server.url(f"lab/workspaces/ui-{stem}/tree/{stem}.ipynb?reset"))
        _wait_for_idle_kernel(page, lab_server, f"{stem}.ipynb")
        _menu_command(page, "Edit", "editmenu:clear-all")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].every(p => !/\\d/.test(p.textContent))"
        )
        _menu_command(page, "Run", "runmenu:run-all")
        _wait_for_run_all(page, stem)
        saved = _save_and_read(page, lab_server, f"{stem}.ipynb")
        _screenshot(page, screenshot_dir / f"{stem}.png")
        yield LabNotebook(stem, page, saved)
    finally:
        page.close()
        lab_server.shutdown_kernels()


def _wait_for_idle_kernel(page, server: LabServer, name: str) -> None:
    """The notebook is open and its kernel started and idle (the server says so, and so does the page)."""
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
    deadline_ms = 120_000
    while deadline_ms > 0:
        kernels = [s["kernel"] for s in server.api("sessions") if s["path"].endswith(name)]
        if kernels and kernels[0]["execution_state"] == "idle":
            break
        page.wait_for_timeout(500)
        deadline_ms -= 500
    else:
        pytest.fail(f"the kernel of {name} did not start within 120 s")
    page.wait_for_function(
        "() => document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'"
        " && /Idle/.test(document.querySelector('#jp-main-statusbar')?.textContent || '')",
        timeout=60_000,
    )


def _menu_command(page, menu: str, command: str) -> None:
    """Click ``menu`` in the menu bar, then its item for ``command``; wait until the menu closed."""
    page.locator(".lm-MenuBar-item", has_text=menu).first.click()
    item = page.locator(f".lm-Menu-item[data-command='{command}']")
    item.wait_for(state="visible", timeout=10_000)
    item.click()
    page.locator(".lm-Menu").first.wait_for(state="detached", timeout=10_000)


def _wait_for_run_all(page, stem: str) -> None:
    """Run All queues every code cell (prompt ``[*]``); it is done when none is left queued."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
            ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))",
            timeout=30_000,
        )
    except PlaywrightTimeoutError:
        pytest.fail(f"Run All did not start any cell of {stem} within 30 s")
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim());
            const indicator = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
            return prompts.length > 0 && !prompts.some(p => p.includes('*')) && /\\[\\d+\\]/.test(prompts[0])
                && indicator && indicator.dataset.status === 'idle';
        }""",
        timeout=RUN_ALL_TIMEOUT_MS,
        polling=500,
    )


def _save_and_read(page, server: LabServer, name: str) -> nbformat.NotebookNode:
    """Save from JupyterLab (outputs and widget state) and read back what the server stored."""
    _fail_on_dialog(page)
    _menu_command(page, "File", "docmanager:save")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')", timeout=30_000)
    _fail_on_dialog(page)
    return nbformat.from_dict(server.api(f"contents/{name}?content=1")["content"])


def _fail_on_dialog(page) -> None:
    """A JupyterLab dialog (a kernel error, a failed save) would block the test: report it."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count():
        pytest.fail(f"JupyterLab shows a dialog: {dialog.first.inner_text()[:500]}")


def _screenshot(page, path: Path) -> None:
    widget = page.locator(".jp-OutputArea-output [class*='labkit-']").first
    if widget.count():
        widget.scroll_into_view_if_needed()
    page.screenshot(path=str(path))


def _lab_params(stems: list[str]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("lab_notebook", stems, indirect=True, scope="module")


# --- every notebook --------------------------------------------------------------


@_lab_params(list(EXPECTED_NOTEBOOKS))
def test_run_all_shows_no_error(lab_notebook: LabNotebook) -> None:
    page = lab_notebook.page
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
    not_run = [i for i, p in enumerate(prompts) if not re.search(r"\[\d+\]", p)]
    assert not not_run, f"Run All stopped: code cells {not_run} never ran (an earlier cell failed)"
    shown = page.locator(".jp-OutputArea-output").all_inner_texts()
    assert not [t for t in shown if "Traceback (most recent call last)" in t], "a cell shows a traceback"
    errors = [
        (index, output.get("ename"), output.get("evalue"))
        for index, cell in enumerate(lab_notebook.saved.cells)
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]
    assert not errors, f"cells failed in JupyterLab: {errors}"


@_lab_params(list(EXPECTED_NOTEBOOKS))
def test_widgets_render_as_dom_elements(lab_notebook: LabNotebook) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    page = lab_notebook.page
    texts = page.locator(".jp-OutputArea-output[data-mime-type='text/plain']").all_inner_texts()
    reprs = [t[:80] for t in texts if re.search(r"\b(" + "|".join(WIDGET_CLASSES) + r"|VBox|HBox)\(children=", t)]
    assert not reprs, f"widgets shown as text, not rendered (is @jupyter-widgets/jupyterlab-manager installed?): {reprs}"
    failed = page.locator(".jp-OutputArea-output", has_text="Error displaying widget")
    assert failed.count() == 0, "a widget failed to display"
    for name in sorted(widgets_in(lab_notebook.stem)):
        widget = lab_notebook.widget(name)
        try:
            widget.wait_for(state="visible", timeout=WIDGET_TIMEOUT_MS)
        except PlaywrightTimeoutError:
            pytest.fail(f"{name} did not render: no visible .{WIDGET_CLASSES[name]} element in any output")
        box = widget.bounding_box()
        assert box and box["width"] > 50 and box["height"] > 20, f"{name} rendered with no size: {box}"


# --- widget interactions ---------------------------------------------------------


def _image_src(widget) -> str:
    return widget.locator("img").first.get_attribute("src") or ""


def _wait_for_new_image(widget, old_src: str) -> str:
    """The widget's first picture shows a new ``src`` (a redraw may replace the ``<img>`` element itself)."""
    widget.page.wait_for_function(
        "([widget, old]) => { const src = widget.querySelector('img')?.getAttribute('src'); return src && src !== old; }",
        arg=[widget.element_handle(), old_src],
        timeout=WIDGET_TIMEOUT_MS,
    )
    return _image_src(widget)


def _step_slider(widget, index: int = 0) -> None:
    """Move a slider one step with the keyboard, as a learner can (right, or left at the maximum)."""
    handle = widget.locator(".noUi-handle").nth(index)
    at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    handle.focus()
    handle.press("ArrowLeft" if at_max else "ArrowRight")


def _slider_value(widget, index: int = 0) -> float:
    return float(widget.locator(".widget-readout").nth(index).inner_text())


@_lab_params(notebooks_showing("SliderPlot"))
def test_slider_plot_redraws_when_the_slider_moves(lab_notebook: LabNotebook) -> None:
    widget = lab_notebook.widget("SliderPlot")
    before_src, before_value = _image_src(widget), _slider_value(widget)
    _step_slider(widget)
    after_src = _wait_for_new_image(widget, before_src)
    after_value = _slider_value(widget)
    assert after_value != before_value
    assert after_src != before_src
    status = widget.locator(".widget-html").first
    status.page.wait_for_function(
        "([el, v]) => el.textContent.includes('frequency = ' + v)", arg=[status.element_handle(), f"{after_value:g}"]
    )


def parse_tuple(text: str) -> tuple[int, ...]:
    """``"(150528, 1, 672, 3)"`` (possibly inside other text) -> the tuple of ints."""
    match = re.search(r"\(([\d,\s]+)\)", text)
    assert match, f"no stride tuple in {text!r}"
    return tuple(ast.literal_eval(f"({match[1]},)"))


def dense_strides(shape: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a dense tensor of ``shape`` whose dims are laid out ``order`` (outermost first)."""
    strides = [0] * len(shape)
    step = 1
    for dim in reversed(order):
        strides[dim] = step
        step *= shape[dim]
    return tuple(strides)


def layout_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The dims from outermost to innermost, as the strides say (ties keep dim order)."""
    order = tuple(sorted(range(len(shape)), key=lambda d: (-strides[d], d)))
    assert dense_strides(shape, order) == strides, f"strides {strides} are not a dense layout of {shape}"
    return order


def _sizes_from_sliders(widget) -> dict[str, int]:
    labels = widget.locator(".widget-slider .widget-label").all_inner_texts()
    readouts = widget.locator(".widget-slider .widget-readout").all_inner_texts()
    return {label.strip(): int(float(value)) for label, value in zip(labels, readouts)}


@_lab_params(notebooks_showing("StrideExplorer"))
def test_stride_explorer_updates_strides_and_plot(lab_notebook: LabNotebook) -> None:
    """Moving the width slider keeps the memory order and recomputes every stride from the new size."""
    widget = lab_notebook.widget("StrideExplorer")
    strides_el = widget.locator(".labkit-strides").first
    before_text = strides_el.inner_text()
    before_strides, before_sizes, before_src = parse_tuple(before_text), _sizes_from_sliders(widget), _image_src(widget)
    # The batch size enters no stride of an NCHW tensor in any layout; the width enters some in all.
    labels = [label.strip().upper() for label in before_sizes]
    _step_slider(widget, next((i for i, label in enumerate(labels) if label.startswith("W")), len(labels) - 1))
    after_src = _wait_for_new_image(widget, before_src)
    lab_notebook.page.wait_for_function(
        "([el, old]) => el.innerText !== old", arg=[strides_el.element_handle(), before_text], timeout=WIDGET_TIMEOUT_MS
    )
    after_sizes, after_strides = _sizes_from_sliders(widget), parse_tuple(strides_el.inner_text())
    changed = [k for k in after_sizes if after_sizes[k] != before_sizes.get(k)]
    assert changed, f"no slider value changed: {before_sizes} -> {after_sizes}"
    assert after_src != before_src, "the plot did not redraw"
    shape_before, shape_after = _shape(before_sizes, len(before_strides)), _shape(after_sizes, len(after_strides))
    order = layout_order(shape_before, before_strides)
    expected = dense_strides(shape_after, order)
    assert after_strides == expected, (
        f"after {changed[0]} {before_sizes[changed[0]]} -> {after_sizes[changed[0]]}: strides {after_strides}, "
        f"expected {expected} for shape {shape_after} in the same memory order"
    )


def _shape(sizes: dict[str, int], ndim: int) -> tuple[int, ...]:
    """Shape (N, C, H, W) or (N, C, D, H, W) from sliders labelled N/C/D/H/W (or batch/channels/...)."""
    by_letter = {label.strip().upper()[:1]: value for label, value in sizes.items()}
    letters = {4: "NCHW", 5: "NCDHW"}.get(ndim)
    assert letters and all(letter in by_letter for letter in letters), f"cannot read a shape from sliders {sizes}"
    return tuple(by_letter[letter] for letter in letters)


@_lab_params(notebooks_showing("LiveProfile"))
def test_live_profile_fills_the_table_run_by_run(lab_notebook: LabNotebook) -> None:
    """Pressing the run button re-renders the table after every run, not once at the end."""
    widget = lab_notebook.widget("LiveProfile")
    page = lab_notebook.page
    # Snapshot the table and the status line at every DOM change inside the widget.
    page.evaluate(
        """(el) => {
            window.__labkitSnapshots = [];
            const snap = () => {
                const table = el.querySelector('table');
                window.__labkitSnapshots.push({
                    rows: table ? table.querySelectorAll('tbody tr').length : 0,
                    table: table ? table.outerHTML : '',
                    text: el.innerText,
                });
            };
            new MutationObserver(snap).observe(el, {subtree: true, childList: true, characterData: true});
        }""",
        widget.element_handle(),
    )
    button = widget.locator("button", has_text=re.compile("run|profile", re.IGNORECASE)).first
    button.click()
    page.wait_for_function("(b) => b.disabled", arg=button.element_handle(), timeout=WIDGET_TIMEOUT_MS)
    page.wait_for_function("(b) => !b.disabled", arg=button.element_handle(), timeout=RUN_ALL_TIMEOUT_MS)
    page.wait_for_timeout(500)  # the last redraw's messages
    snapshots = page.evaluate("window.__labkitSnapshots")
    runs = [int(m[1]) for s in snapshots for m in [re.search(r"run (\d+) of (\d+)", s["text"])] if m]
    total = int(re.search(r"run \d+ of (\d+)", snapshots[-1]["text"])[1])
    runs = runs[runs.index(1):] if 1 in runs else runs  # before run 1: the previous press's last status
    assert sorted(set(runs)) == list(range(1, total + 1)), f"the status did not count runs 1..{total}: {sorted(set(runs))}"
    assert runs == sorted(runs), f"runs went backwards: {runs}"
    first_run = next(i for i, s in enumerate(snapshots) if re.search(r"run 1 of", s["text"]))
    distinct = list(dict.fromkeys(s["table"] for s in snapshots[first_run:] if s["rows"]))
    assert len(distinct) >= min(total, 2), f"the table was drawn {len(distinct)} time(s) during {total} runs"
    assert snapshots[-1]["rows"] >= 2, f"the table has {snapshots[-1]['rows']} row(s) after the run"


@_lab_params(notebooks_showing("MemoryTimeline"))
def test_memory_timeline_outlines_the_next_node_when_the_slider_moves(lab_notebook: LabNotebook) -> None:
    """It starts at the peak; one step with the keyboard names the next node and redraws the outlined picture."""
    widget = lab_notebook.widget("MemoryTimeline")
    caption = widget.locator(".widget-html-content").first
    before_src, before_caption = _image_src(widget), caption.inner_text()
    assert re.search(r"node 1 of \d+: conv1 \(Conv2d\)", before_caption), before_caption  # the peak of ResNet18
    _step_slider(widget)
    after_src = _wait_for_new_image(widget, before_src)
    widget.page.wait_for_function("([el, old]) => el.innerText !== old", arg=[caption.element_handle(), before_caption],
                                  timeout=WIDGET_TIMEOUT_MS)
    assert re.search(r"node 2 of \d+: bn1 \(BatchNorm2d\)", caption.inner_text()), caption.inner_text()
    assert after_src != before_src


@_lab_params(notebooks_showing("JacobianScaling"))
def test_jacobian_scaling_redraws_when_a_slider_moves(lab_notebook: LabNotebook) -> None:
    widget = lab_notebook.widget("JacobianScaling")
    before_src = _image_src(widget)
    before_value = widget.locator(".widget-readout").first.inner_text()
    _step_slider(widget)
    after_src = _wait_for_new_image(widget, before_src)
    assert widget.locator(".widget-readout").first.inner_text() != before_value
    assert after_src != before_src


# --- accessibility ---------------------------------------------------------------


def _set_theme(page, theme: str) -> None:
    """Switch JupyterLab's theme with its own command (as Settings > Theme does) and wait until it applies."""
    page.evaluate("(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme)
    page.wait_for_function("(theme) => document.body.dataset.jpThemeName === theme", arg=theme, timeout=30_000)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")  # restyled


@_lab_params(list(EXPECTED_NOTEBOOKS))
def test_axe_finds_no_serious_violation_of_labkit_in_either_theme(lab_notebook: LabNotebook, screenshot_dir: Path) -> None:
    """axe-core on the notebook after Run All, its widgets drawn, in each theme; a screenshot in the dark one."""
    page = lab_notebook.page
    page.wait_for_function(  # an earlier test's slider may still be redrawing its widget
        "() => document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'",
        timeout=RUN_ALL_TIMEOUT_MS,
    )
    found = {}
    try:
        for theme in THEMES:
            _set_theme(page, theme)
            found[theme] = audit(page, LAB_CONTENT, LAB_UPSTREAM)
            if theme != THEMES[0]:
                _screenshot(page, screenshot_dir / f"{lab_notebook.stem}_{theme.split()[-1].lower()}.png")
            print(f"axe {theme} {lab_notebook.stem}: {summary(found[theme])}")
    finally:
        _set_theme(page, THEMES[0])  # the next notebook opens in the default theme
    failed = [f"{theme}: {finding.line()}" for theme, findings in found.items() for finding in failures(findings)]
    assert not failed, "serious or critical violations that are labkit's or not allow-listed:\n" + "\n".join(failed)
