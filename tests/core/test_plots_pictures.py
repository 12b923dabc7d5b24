"""Every SVG picture labkit draws, on a light and on a dark page: colours computed, then seen in Chromium.

The unit tests of each picture (tests/<lab>/test_widgets.py) check what it draws; these check how it
reads: text and lines in ``currentColor`` (the picture's ink for its colour scheme), every other
colour 3:1 or more against every page and card, and, in a real Chromium, an SVG inside an ``<img>``
drawn in light ink on a dark page (JupyterLab's dark theme, the docs site's dark mode) whatever the
operating system's setting, and in dark ink on a light page.
"""
from __future__ import annotations

import io
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from labkit.core.plots import (
    GRAPHIC_CONTRAST,
    PAGE_BACKGROUNDS,
    SVG_CARD,
    SVG_INK,
    TEXT_CONTRAST,
    contrast_ratio,
    picture_html,
    relative_luminance,
)
from labkit.core.timing import RunStats
from labkit.forward_ad.jacobian_cost import JacobianCost, JacobianSweep
from labkit.forward_ad.widgets import sweep_svg
from labkit.fx.widgets import bar_svg
from labkit.memory_format.layout import describe
from labkit.memory_format.widgets import layout_svg, memory_svg

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = Path("/usr/bin/chromium")
BACKGROUNDS = {**PAGE_BACKGROUNDS, **{f"{scheme} card": colour for scheme, colour in SVG_CARD.items()}}
NOT_A_COLOUR = re.compile(r"^(currentColor|none|url\(#[\w-]+\))$")


def _stats(median: float) -> RunStats:
    return RunStats.from_samples([0.9 * median, median, 1.1 * median])


def pictures() -> dict[str, bytes]:
    """One of each SVG picture labkit draws, as the widgets and notebooks show them."""
    layout = describe(torch.zeros(2, 4, 2, 2).to(memory_format=torch.channels_last))
    points = [JacobianCost(8, out, 16, jacfwd=_stats(1e-4), jacrev=_stats(out * 2e-5)) for out in (2, 4, 8, 16, 32)]
    sweep = JacobianSweep(8, 16, points)
    return {
        "layout_svg": layout_svg(layout),
        "memory_svg": memory_svg(describe(torch.zeros(1, 12, 2, 2))),  # more channels than tab10 has colours
        "bar_svg": bar_svg(["conv1", "relu", "linear"], [3.0, 0.4, 1.2], "3 of 9 nodes, slowest first", "mean (ms)"),
        "sweep_svg": sweep_svg(sweep, 16),
    }


def _cell_numbers(root: ET.Element) -> set[ET.Element]:
    """The numbers written on data colours: the one place black or white is chosen per fill."""
    return {text for group in root.iter(f"{SVG}g") if group.get("class") == "element" for text in group.iter(f"{SVG}text")}


@pytest.mark.parametrize("name", list(pictures()))
def test_text_and_lines_are_current_colour_and_every_other_colour_reads_on_every_page(name):
    root = ET.fromstring(pictures()[name])
    numbers = _cell_numbers(root)
    for element in root.iter():
        tag = element.tag.removeprefix(SVG)
        for attribute in ("fill", "stroke", "stop-color"):
            value = element.get(attribute)
            if value is None or NOT_A_COLOUR.match(value):
                continue
            assert tag != "text" or element in numbers, f"{name}: text drawn in a fixed colour {value}: {element.text!r}"
            assert tag != "line" or attribute != "stroke" or relative_luminance(value) not in (0.0, 1.0), (
                f"{name}: a line in black or white ({value}) vanishes on one of the pages")
            if element in numbers:
                continue  # checked against its own cell below
            worst = min(BACKGROUNDS, key=lambda where: contrast_ratio(value, BACKGROUNDS[where]))
            assert contrast_ratio(value, BACKGROUNDS[worst]) >= GRAPHIC_CONTRAST, f"{name}: {tag} {attribute}={value} on {worst}"


@pytest.mark.parametrize("name", ["layout_svg", "memory_svg"])
def test_every_cell_number_reads_on_its_cell(name):
    root = ET.fromstring(pictures()[name])
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "element":
            fill, ink = group.find(f"{SVG}rect").get("fill"), group.find(f"{SVG}text").get("fill")
            assert contrast_ratio(fill, ink) >= TEXT_CONTRAST, f"{name}: {ink} on {fill}"


# ---------------------------------------------------------------- in Chromium

def _pages(body: str) -> dict[str, str]:
    """The page around the pictures, as JupyterLab's themes and the docs site's modes set it."""
    return {
        "JupyterLab light": f'<html><body data-jp-theme-light="true" style="background:#fff">{body}</body></html>',
        "JupyterLab dark": f'<html><body data-jp-theme-light="false" style="background:#111">{body}</body></html>',
        "docs site dark": (f'<html data-theme="dark" style="color-scheme:dark"><body style="background:#14181e">{body}'
                           "</body></html>"),
    }


@pytest.fixture(scope="module")
def chromium():
    if not CHROMIUM.is_file():
        reason = f"{CHROMIUM} not found; install it with `apt-get update && apt-get install -y chromium`"
        if os.environ.get("LABKIT_REQUIRE_UI") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield browser
        browser.close()


def _card_and_text(png: bytes) -> tuple[float, float]:
    """Relative luminance of the most common colour of a screenshot (the card) and of the one least like it (text)."""
    from PIL import Image

    pixels = Image.open(io.BytesIO(png)).convert("RGB")
    colours = pixels.getcolors(pixels.width * pixels.height)
    counted = [(count, relative_luminance("#%02x%02x%02x" % colour)) for count, colour in colours]
    card = max(counted)[1]
    return card, max((luminance for _, luminance in counted), key=lambda luminance: abs(luminance - card))


@pytest.mark.ui
@pytest.mark.parametrize("os_scheme", ["light", "dark"])
def test_in_chromium_an_svg_picture_is_drawn_in_the_ink_of_the_page_not_of_the_operating_system(chromium, os_scheme):
    """The title line of each picture: its card is the page's scheme, and its text stands out from the card."""
    shown = pictures()
    body = "".join(f'<div id="{name}" style="margin:8px">{picture_html(svg, name)}</div>' for name, svg in shown.items())
    for where, page_html in _pages(body).items():
        scheme = "light" if "light" in where else "dark"
        page = chromium.new_page(color_scheme=os_scheme)
        try:
            page.set_content(page_html)
            page.wait_for_load_state("load")
            for name in shown:
                image = page.locator(f"#{name} img")
                box = image.bounding_box()
                title_line = {"x": box["x"] + 2, "y": box["y"] + 2, "width": min(box["width"], 300) - 4, "height": 18}
                card, text = _card_and_text(page.screenshot(clip=title_line))
                expected_card = relative_luminance(SVG_CARD[scheme])
                assert card == pytest.approx(expected_card, abs=0.01), f"{where} (OS {os_scheme}): {name} sits on the wrong card"
                contrast = (max(card, text) + 0.05) / (min(card, text) + 0.05)
                assert contrast >= TEXT_CONTRAST, f"{where} (OS {os_scheme}): {name}'s title is hard to read ({contrast:.1f}:1)"
                ink = relative_luminance(SVG_INK[scheme])
                assert (text > card) == (ink > expected_card), f"{where}: {name}'s text is not in the {scheme} ink"
        finally:
            page.close()
