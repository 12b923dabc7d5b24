"""labkit.core.fonts: a Chinese label is drawn in a font that has it, or one labkit warning says what to install."""
from __future__ import annotations

import os
import warnings

import matplotlib
import pytest

from labkit.core import fonts, plots


def chinese_figure() -> matplotlib.figure.Figure:
    figure = plots.new_figure(4, 2)
    axes = figure.add_subplot()
    axes.set_title("每个变体的中位时间")
    axes.set_xlabel("время, мс")
    return figure


def drawn(figure: matplotlib.figure.Figure) -> list[str]:
    """The warnings drawing ``figure`` gives, every one recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plots.to_png(figure)
    return [f"{warning.category.__name__}: {warning.message}" for warning in caught]


def test_with_a_chinese_font_the_labels_are_drawn_in_it_and_nothing_is_warned() -> None:
    if fonts.cjk_font() is None:
        if os.environ.get("LABKIT_REQUIRE_UI") == "1":
            pytest.fail("no Chinese font here: .ci/run installs fonts-noto-cjk", pytrace=False)
        pytest.skip("no Chinese font installed (sudo apt install fonts-noto-cjk)")
    figure = chinese_figure()
    assert drawn(figure) == []
    title = figure.axes[0].title
    assert title.get_fontfamily() == ["DejaVu Sans", fonts.cjk_font()]
    assert plots.text_width("形状与步幅") > 4 * plots.text_width("n"), "Chinese characters measured as wide"


def test_without_one_a_single_labkit_warning_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fonts, "cjk_font", lambda: None)
    monkeypatch.setattr(plots, "cjk_font", lambda: None)
    found = drawn(chinese_figure())
    assert len(found) == 1 and found[0].startswith("MissingFontWarning") and "fonts-noto-cjk" in found[0], found
    assert drawn(plots.new_figure()) == [], "a picture without Chinese warns of nothing"
    assert plots.text_width("形状") == pytest.approx(2 * 11 * 1.1), "one em per character the browser draws"


def test_the_users_font_settings_and_warning_filters_are_left_as_they_were() -> None:
    before_rc, before_filters = dict(matplotlib.rcParams), list(warnings.filters)
    plots.to_png(chinese_figure())
    plots.text_width("形状与步幅")
    assert dict(matplotlib.rcParams) == before_rc
    assert list(warnings.filters) == before_filters


def test_a_text_in_a_family_of_its_own_keeps_it() -> None:
    figure = plots.new_figure()
    label = figure.text(0.5, 0.5, "x = 1", family="monospace")
    plots.to_png(figure)
    assert label.get_fontfamily() == ["monospace"]
