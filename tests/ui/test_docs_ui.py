"""The docs site in a real Chromium: every page opens cleanly and offline, search, solutions, stored widgets.

The site is built once for the module from the real notebooks (``make docs`` does the
same) and served from a loopback HTTP server. Every request that leaves the machine is
aborted and recorded, so a page that needs a CDN fails here instead of on a
participant's laptop. axe-core checks every built page, in light and in dark mode
(:mod:`tests.ui.axe`).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.authoring import docs
from labkit.labs import find_notebooks
from tests.ui.axe import IPYWIDGETS_UPSTREAM, Upstream, audit, failures, summary
from tests.ui.support import NOTEBOOKS, docs_site, static_server
from tests.ui.test_lab_ui import WIDGET_CLASSES, widgets_in

pytestmark = pytest.mark.ui
RENDER_TIMEOUT_MS = 30_000
STEMS = [path.stem for path in find_notebooks(NOTEBOOKS)]
API_PAGES = sorted(f"api/{page.stem}" for page in (docs.DOCS_SOURCE / "api").glob("*.md"))
PAGES = ["index", "running", "api", *API_PAGES, *[f"notebooks/{stem}" for stem in STEMS]]
# No box of a widget holds more than it shows: a row of controls wider than the column would be cut off.
FITS_THE_COLUMN = """(widget) => [widget, ...widget.querySelectorAll(".widget-box")].every(
    (box) => box.clientWidth === 0 || box.scrollWidth <= box.clientWidth + 1
)"""
RAW_MARKUP = re.compile(r"</?(?:b|i|em|strong|code|span|div|br)\s*/?>")  # HTML printed as text, not rendered
WIDGET_VIEW = "script[type='application/vnd.jupyter.widget-view+json']"


# What labkit writes on a page: the article (its notebooks' cells and outputs, the API pages' docstrings). The
# theme's navigation, header, sidebars and footer around it, and Sphinx's own markup, are upstream's.
DOCS_CONTENT = "article.bd-article"
# Serious or critical violations on the site that are not labkit's, each with its upstream issue (pydata-sphinx-theme
# 0.20, sphinx-book-theme 1.4; none of them is in the article).
DOCS_UPSTREAM: list[Upstream] = [
    *IPYWIDGETS_UPSTREAM,
    # The search button's accessible name "Search" leaves out the "Ctrl+K" it shows (WCAG 2.5.3 label in name).
    Upstream("label-content-name-mismatch", "button.search-button__button", "theme (pydata-sphinx-theme)",
             "no upstream issue found; the shown shortcut is discussed in "
             "https://github.com/pydata/pydata-sphinx-theme/issues/1499"),
    # The sidebar's expand/collapse <summary> holds only a presentational chevron: no name.
    Upstream("summary-name", ".bd-sidebar-primary details > summary", "theme (pydata-sphinx-theme)",
             "no pydata-sphinx-theme issue found; the same violation is patched downstream in "
             "https://github.com/pytorch/pytorch_sphinx_theme/pull/234"),
]


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return docs_site(tmp_path_factory)  # every edition, built once per session (test_docs_i18n_ui.py shares it)


@pytest.fixture(scope="module")
def site_url(site_dir: Path) -> Iterator[str]:
    with static_server(site_dir) as url:
        yield url


@pytest.fixture
def page(browser, site_url: str) -> Iterator[object]:
    """A page on which every request that leaves the site is aborted and recorded, and every console error is recorded."""
    page = browser.new_page()
    page.blocked, page.errors = [], []

    def only_the_site(route) -> None:
        if route.request.url.startswith((site_url, "data:", "blob:")):
            route.continue_()
        else:
            page.blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_site)
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    page.close()


def open_page(page, site_url: str, name: str) -> None:
    page.goto(f"{site_url}/{name}.html")
    page.wait_for_load_state("load")


FROZEN_NOTE = "A frozen snapshot of this widget, stored when the notebook was run: run the notebook to interact."


def check_stored_widgets(page, stem: str, note: str = FROZEN_NOTE) -> None:
    """Each labkit widget the notebook shows is drawn from its stored state: image loaded, values shown, ``note`` above."""
    for name in sorted(widgets_in(stem) & set(WIDGET_CLASSES)):
        widget = page.locator(f".{WIDGET_CLASSES[name]}").first
        widget.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
        image = widget.locator("img").first
        image.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
        loaded = page.evaluate("(img) => img.complete && img.naturalWidth > 0", image.element_handle())
        assert loaded, f"{name}: its stored image did not load"
        shown_w, shown_h, pixels_w, pixels_h = image.evaluate(
            "(i) => [i.clientWidth, i.clientHeight, i.naturalWidth, i.naturalHeight]"
        )
        assert shown_w <= pixels_w, f"{name}: its image is scaled up ({pixels_w} px shown {shown_w} px wide), so blurry"
        assert shown_w / shown_h == pytest.approx(pixels_w / pixels_h, rel=0.02), f"{name}: its image is stretched"
        assert widget.evaluate(FITS_THE_COLUMN), f"{name}: part of it runs past the text column, cut off"
        readouts = [text.strip() for text in widget.locator(".widget-readout").all_inner_texts()]
        assert all(readouts), f"{name}: a slider shows no value: {readouts}"
    if stem == "00_start_here":
        slider = page.locator(".labkit-slider-plot .widget-slider")
        assert slider.count() == 1 and slider.locator(".widget-readout").inner_text().strip() == "2.00"
    views = page.locator(WIDGET_VIEW).count()
    notes = page.locator("p.labkit-frozen-widget")
    assert notes.count() == views, "every stored widget has the frozen-snapshot note"
    for i in range(views):
        assert notes.nth(i).is_visible() and notes.nth(i).inner_text().strip() == note
    assert page.locator(".jupyter-widgets", has_text="Error").count() == 0


@pytest.mark.parametrize("name", PAGES)
def test_page_opens_offline_without_console_errors(page, site_url: str, screenshot_dir: Path, name: str) -> None:
    open_page(page, site_url, name)
    assert page.locator("nav.bd-links").is_visible() and page.locator("form.bd-search, .search-button").count() > 0
    if name.startswith("notebooks/"):
        check_stored_widgets(page, name.removeprefix("notebooks/"))
        raw_markup = [text for text in page.locator(".cell_output").all_inner_texts() if RAW_MARKUP.search(text)]
        assert raw_markup == [], f"an output shows HTML tags as text: {raw_markup[:3]}"
    aligned = page.locator(".bd-article td:not([style]), .bd-article th:not([style])").evaluate_all(
        "(cells) => cells.map((c) => getComputedStyle(c).textAlign)"
    )
    assert set(aligned) <= {"left", "start"}, "table text reads from the left (numbers keep their own alignment)"
    page.screenshot(path=str(screenshot_dir / f"docs_{name.replace('/', '_')}.png"), full_page=True)
    assert page.errors == [], f"{name}: console errors {page.errors}"
    assert page.blocked == [], f"{name}: fetched from the network; every script must come from _static/"


def test_landing_page_lists_the_learning_path_with_goals_and_run_times(page, site_url: str) -> None:
    open_page(page, site_url, "index")
    path = page.locator(".labkit-learning-path")
    hrefs = [link.get_attribute("href") for link in path.locator("strong a, a:has(strong)").all()]
    assert hrefs == [f"notebooks/{stem}.html" for stem in STEMS]
    text = path.inner_text()
    assert len(re.findall(r"ran in \d+ s", text)) == len(STEMS), "a run time per notebook"
    assert "channels_last" in text
    sidebar = [link.inner_text() for link in page.locator("nav.bd-links a").all()]
    assert len([label for label in sidebar if label[:2].isdigit()]) == len(STEMS), sidebar
    assert not any("`" in label for label in sidebar), f"sidebar labels show backticks: {sidebar}"


def test_notebook_page_has_toc_prev_next_and_ipynb_download(page, site_url: str) -> None:
    open_page(page, site_url, "notebooks/02_memory_format")
    assert page.locator(".page-toc a").count() > 3, "in-page table of contents"
    labels = page.locator(".prev-next-area").inner_text()
    assert "Profiling" in labels and "Forward-mode" in labels and "`" not in labels, labels
    download = page.locator("a.btn-download-source-button").get_attribute("href")
    assert download and download.endswith("02_memory_format.ipynb")
    notebook = page.request.get(f"{site_url}/notebooks/{download}").json()
    assert notebook["cells"][0]["source"]


def test_search_for_channels_last_reaches_notebook_02(page, site_url: str) -> None:
    open_page(page, site_url, "index")
    assert page.locator(".search-button__button:visible").count() == 1, "one search control on the page"
    page.locator("button.search-button__button:visible").first.click()
    query = page.locator("input[name='q']:visible").first
    query.fill("channels_last")
    query.press("Enter")
    result = page.locator("#search-results a[href*='02_memory_format']").first
    result.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    snippet = page.locator("#search-results li:has(a[href*='02_memory_format']) p.context").first
    snippet.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    words = snippet.inner_text().split()
    theme_words = {"Light", "Dark", "System", "Settings", ".ipynb", ".pdf", "English", "中文", "Русский"}
    assert words and not theme_words & set(words[:8]), f"the snippet starts with the theme's words: {words[:12]}"
    result.click()
    page.wait_for_url("**/notebooks/02_memory_format.html*")
    assert "channels_last" in page.locator("h1").first.inner_text()
    assert page.errors == [] and page.blocked == []


def test_solution_is_hidden_until_the_toggle_is_clicked_and_the_checker_stays_visible(page, site_url: str) -> None:
    open_page(page, site_url, "notebooks/02_memory_format")
    solution = page.locator(".cell.tag_solution").first
    source = solution.locator(".cell_input")
    checker = solution.locator("xpath=following-sibling::div[contains(@class, 'cell')][1]").locator(".cell_output")
    button = solution.locator("summary")
    assert source.is_hidden() and button.inner_text().strip() == "Show solution"
    assert checker.is_visible() and checker.inner_text().strip(), "the checker's verdict is visible with the solution folded"
    button.click()
    source.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    assert "def " in source.inner_text() and button.inner_text().strip() == "Hide solution"
    others = page.locator(".cell.tag_solution .cell_input").all()[1:]
    assert others and all(other.is_hidden() for other in others), "the other solutions stay folded"


TRANSLATED = ("zh", "ru")  # the editions under the English site
DARK_TRANSLATED_SAMPLE = {f"{lang}/{page}" for lang in TRANSLATED for page in ("index", "notebooks/02_memory_format")}


def built_pages(site: Path) -> list[str]:
    """Every HTML page of the built site (its own files, not the vendored ones under _static/), as ``name``."""
    return sorted(
        path.relative_to(site).with_suffix("").as_posix()
        for path in site.rglob("*.html")
        if not {"_static", "_sources", "_images"} & set(path.relative_to(site).parts)
    )


def wait_until_rendered(page, name: str) -> None:
    """Stored widgets drawn, images loaded, MathJax typeset: what a reader sees is what axe checks."""
    if name.startswith("notebooks/"):
        for widget in sorted(widgets_in(name.removeprefix("notebooks/")) & set(WIDGET_CLASSES)):
            page.locator(f".{WIDGET_CLASSES[widget]}").first.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_function("() => [...document.images].every((img) => img.complete)", timeout=RENDER_TIMEOUT_MS)
    page.evaluate("() => window.MathJax?.startup?.promise")


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_axe_finds_no_serious_violation_of_labkit_on_any_page(page, site_dir: Path, site_url: str, mode: str) -> None:
    """Every built page, in the reader's light or dark mode (the theme follows the system: default_mode "auto")."""
    page.emulate_media(color_scheme=mode)
    names = built_pages(site_dir)
    assert {"index", "running", "api", *API_PAGES, *(f"notebooks/{stem}" for stem in STEMS)} <= set(names)
    assert DARK_TRANSLATED_SAMPLE <= set(names), "the zh and ru editions are missing from the site"
    if mode == "dark":  # the zh/ru pages share the English pages' chrome and outputs: every one in light, two in dark
        names = [name for name in names if name.split("/")[0] not in TRANSLATED or name in DARK_TRANSLATED_SAMPLE]
    found: dict[str, list] = {}
    for name in names:
        open_page(page, site_url, name)
        assert page.evaluate("() => document.documentElement.dataset.theme") == mode, f"{name}: not in {mode} mode"
        wait_until_rendered(page, name)
        found[name] = audit(page, DOCS_CONTENT, DOCS_UPSTREAM)
        print(f"axe {mode} {name}: {summary(found[name])}")
    failed = {name: failures(findings) for name, findings in found.items() if failures(findings)}
    assert not failed, f"{mode} mode: serious or critical violations that are labkit's or not allow-listed:\n" + "\n".join(
        f"{name}: {finding.line()}" for name, findings in failed.items() for finding in findings
    )
