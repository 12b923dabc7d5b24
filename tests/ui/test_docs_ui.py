"""The built docs site shows each widget's stored state in a browser, without a kernel, offline."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.tools import docs
from tests.ui.support import NOTEBOOKS
from tests.ui.test_lab_ui import WIDGET_CLASSES, widgets_in

pytestmark = pytest.mark.ui
RENDER_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    docs.build_site(NOTEBOOKS, out)
    return out


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A page that records every request leaving the machine (there must be none)."""
    page = browser.new_page()
    page.remote_requests = []
    page.on("request", lambda r: page.remote_requests.append(r.url) if r.url.startswith(("http:", "https:")) else None)
    yield page
    page.close()


def test_index_lists_the_learning_path_in_order(site: Path, page, screenshot_dir: Path) -> None:
    page.goto((site / "index.html").as_uri())
    links = page.locator("main a[href$='.html']:not(.labkit-nav-home):not(.labkit-nav-next)")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    expected = [p.with_suffix(".html").name for p in docs.find_notebooks(NOTEBOOKS)]
    assert hrefs == expected
    page.screenshot(path=str(screenshot_dir / "docs_index.png"), full_page=True)
    assert page.remote_requests == []


@pytest.mark.parametrize("stem", [p.stem for p in docs.find_notebooks(NOTEBOOKS)])
def test_page_renders_stored_widget_state_without_a_kernel(site: Path, page, screenshot_dir: Path, stem: str) -> None:
    page.goto((site / f"{stem}.html").as_uri())
    shown = sorted(widgets_in(stem) & set(WIDGET_CLASSES))
    for name in shown:
        widget = page.locator(f".{WIDGET_CLASSES[name]}").first
        widget.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
        image = widget.locator("img").first
        image.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
        loaded = page.evaluate("(img) => img.complete && img.naturalWidth > 0", image.element_handle())
        assert loaded, f"{name}: image did not load"
    if stem == "00_start_here":
        slider = page.locator(".labkit-slider-plot .widget-slider")
        assert slider.count() == 1 and slider.locator(".widget-readout").inner_text().strip() == "2.00"
    assert page.locator(".jupyter-widgets", has_text="Error").count() == 0
    page.screenshot(path=str(screenshot_dir / f"docs_{stem}.png"), full_page=True)
    assert page.remote_requests == [], "the page fetched from the network; scripts must come from _static/"
