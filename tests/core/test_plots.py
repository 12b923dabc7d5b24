"""labkit.core.plots: pyplot-free figures and their PNG bytes."""
import io

import pytest
from matplotlib.figure import Figure
from PIL import Image

from labkit.core.plots import new_figure, to_png


def test_new_figure_is_a_plain_figure_of_the_size_asked_for():
    figure = new_figure(4.0, 2.5)
    assert type(figure) is Figure and tuple(figure.get_size_inches()) == (4.0, 2.5)
    assert figure.get_layout_engine() is not None and figure.axes == []
    assert tuple(new_figure().get_size_inches()) == (6.0, 3.5)


def test_new_figure_leaves_pyplot_alone():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    new_figure()
    assert plt.get_fignums() == before  # no pyplot figure: the inline backend shows nothing by itself


def test_to_png_renders_at_the_dpi_asked_for():
    figure = new_figure(4.0, 2.0)
    figure.add_subplot().plot([0, 1], [1, 0])
    png = to_png(figure, dpi=50)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(io.BytesIO(png)).size == (200, 100)
    assert Image.open(io.BytesIO(to_png(figure))).size == (360, 180)  # default dpi 90


def test_to_png_is_the_same_bytes_every_time():
    figure = new_figure(2.0, 2.0)
    figure.add_subplot().bar(["a", "b"], [1, 2])
    assert to_png(figure) == to_png(figure) and b"Software" not in to_png(figure)  # no version stamp


def test_a_negative_size_is_matplotlibs_error():
    with pytest.raises(ValueError, match="figure size must be positive"):
        new_figure(-1, 3)


def test_css_size_is_inches_at_the_screen_dpi():
    from labkit.core.plots import SCREEN_DPI, css_size

    assert css_size(new_figure(4.0, 2.0)) == (4 * SCREEN_DPI, 2 * SCREEN_DPI)


def test_figure_image_has_twice_the_pixels_and_shows_at_the_css_width():
    from labkit.core.plots import PIXEL_RATIO, css_size, figure_image

    figure = new_figure(4.0, 2.0)
    figure.add_subplot().plot([0, 1], [1, 0])
    image = figure_image(figure)
    assert image.width == css_size(figure)[0] and image.height is None  # the height follows: aspect kept
    assert Image.open(io.BytesIO(image.data)).size == tuple(PIXEL_RATIO * side for side in css_size(figure))


def _live_line(y_end: float):
    from labkit.core.plots import LiveFigure

    figure = new_figure(3.0, 2.0)
    axes = figure.add_subplot()
    axes.set_ylim(0, 2)
    line = axes.plot([0, 1], [0, y_end])[0]
    return LiveFigure(figure, changing=[line]), line


def test_a_live_figure_repaints_changes_over_its_background_as_a_full_drawing_would():
    live, line = _live_line(1.0)
    first = live.png()
    line.set_ydata([0, 2.0])
    assert live.png() != first and live.full_draws == 1
    assert live.png() == _live_line(2.0)[0].png()  # the same pixels as a figure drawn from scratch
    assert Image.open(io.BytesIO(first)).size == tuple(2 * side for side in live.css_size)


def test_a_new_background_key_draws_the_figure_again():
    live, _ = _live_line(1.0)
    live.png("a")
    live.png("a")
    assert live.full_draws == 1
    live.figure.axes[0].set_ylim(0, 4)
    live.png("b")
    assert live.full_draws == 2


def test_text_width_follows_the_letters_and_the_size():
    from labkit.core.plots import text_width

    assert text_width("WWWW") > text_width("iiii") > 0
    assert text_width("abc", 22) == pytest.approx(2 * text_width("abc", 11), rel=0.05)


def test_svg_document_is_sized_xml_with_an_escaped_title():
    import xml.etree.ElementTree as ET

    from labkit.core.plots import svg_document, svg_text

    root = ET.fromstring(svg_document(120, 40, "a < b", [svg_text(10, 20, "x & y", anchor="start", weight="bold")]))
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("120", "40", "0 0 120 40")
    namespace = "{http://www.w3.org/2000/svg}"
    assert root.find(f"{namespace}title").text == "a < b"
    text = root.find(f"{namespace}text")
    assert (text.text, text.get("font-weight"), text.get("text-anchor")) == ("x & y", "bold", "start")
