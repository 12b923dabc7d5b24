"""labkit.core.plots: pyplot-free figures and their PNG bytes."""
import io

import pytest
from matplotlib.figure import Figure
from PIL import Image

from labkit.core.plots import new_figure, to_png

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


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
    image = figure_image(figure, alt="a falling line")
    assert image.width == css_size(figure)[0]
    assert Image.open(io.BytesIO(image.data)).size == tuple(PIXEL_RATIO * side for side in css_size(figure))
    shown = _img(image._repr_html_())
    assert shown["width"] == str(css_size(figure)[0]) and "height:auto" in shown["style"]  # the height follows
    assert shown["alt"] == "a falling line" and repr(image) == "[picture] a falling line"


def test_figure_image_takes_its_alt_text_from_the_figure_label_and_refuses_none():
    from labkit.core.errors import LabkitValueError
    from labkit.core.plots import figure_image

    figure = new_figure(2.0, 1.0)
    with pytest.raises(LabkitValueError, match="needs a text alternative: pass alt="):
        figure_image(figure)
    figure.set_label("an empty chart")
    assert figure_image(figure).alt == "an empty chart"
    assert figure_image(figure, alt="said otherwise").alt == "said otherwise"


def _img(markup: str) -> dict[str, str]:
    """The attributes of the one ``<img>`` in ``markup``."""
    from html.parser import HTMLParser

    found: list[dict[str, str]] = []

    class Images(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "img":
                found.append({name: value or "" for name, value in attrs})

    Images().feed(markup)
    assert len(found) == 1, markup[:200]
    return found[0]


def _data_url_bytes(source: str) -> bytes:
    import base64

    header, data = source.split(",", 1)
    assert header.endswith(";base64")
    return base64.b64decode(data)


def test_a_png_is_an_opaque_card_with_transparent_rounded_corners():
    from labkit.core.plots import CARD_RADIUS_PX

    figure = new_figure(2.0, 1.0)
    figure.add_subplot().plot([0, 1], [0, 1])
    pixels = Image.open(io.BytesIO(to_png(figure)))
    assert pixels.mode == "RGBA"
    width, height = pixels.size
    assert pixels.getpixel((0, 0))[3] == 0 and pixels.getpixel((width - 1, height - 1))[3] == 0  # corners cut
    assert pixels.getpixel((CARD_RADIUS_PX, 0)) == (255, 255, 255, 255)  # the card's edge: white, opaque
    assert pixels.getpixel((width // 2, height - 2))[3] == 255


def test_contrast_follows_wcag():
    from labkit.core.plots import contrast_ratio, ink_on, relative_luminance

    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#777777") == 1.0
    assert contrast_ratio("#767676", "white") == pytest.approx(4.54, abs=0.01)  # the well-known 4.5:1 grey
    assert relative_luminance("#ffffff") == 1.0 and relative_luminance("black") == 0.0
    assert ink_on("#ffff00") == "#000000" and ink_on("#000080") == "#ffffff"


def _all_palettes():
    from labkit.core.plots import TAB10, sequential_palette

    return {"viridis": sequential_palette("viridis"), "tab10": TAB10}


@pytest.mark.parametrize("name", ["viridis", "tab10"])
def test_every_data_colour_reads_on_every_page_and_its_number_reads_on_it(name):
    from labkit.core.plots import GRAPHIC_CONTRAST, PAGE_BACKGROUNDS, SVG_CARD, TEXT_CONTRAST, contrast_ratio

    palette = _all_palettes()[name]
    backgrounds = {**PAGE_BACKGROUNDS, **{f"{scheme} card": colour for scheme, colour in SVG_CARD.items()}}
    worst = {where: min(contrast_ratio(fill, colour) for fill in palette.fills) for where, colour in backgrounds.items()}
    assert min(worst.values()) >= GRAPHIC_CONTRAST, worst
    assert min(contrast_ratio(fill, ink) for fill, ink in zip(palette.fills, palette.inks, strict=True)) >= TEXT_CONTRAST


def test_the_svg_ink_reads_on_its_card_and_on_the_page_of_its_scheme():
    from labkit.core.plots import PAGE_BACKGROUNDS, SVG_CARD, SVG_INK, TEXT_CONTRAST, contrast_ratio

    assert contrast_ratio(SVG_INK["light"], SVG_CARD["light"]) >= TEXT_CONTRAST
    assert contrast_ratio(SVG_INK["light"], PAGE_BACKGROUNDS["light page"]) >= TEXT_CONTRAST
    dark_pages = [colour for where, colour in PAGE_BACKGROUNDS.items() if "dark" in where]
    assert min(contrast_ratio(SVG_INK["dark"], colour) for colour in [SVG_CARD["dark"], *dark_pages]) >= TEXT_CONTRAST


def test_the_sequential_palette_keeps_viridis_order_in_hue_and_lightness():
    from labkit.core.plots import DATA_LUMINANCE, relative_luminance, sequential_palette

    luminance = [relative_luminance(fill) for fill in sequential_palette("viridis").fills]
    assert all(later > earlier - 0.003 for earlier, later in zip(luminance, luminance[1:])), "rises, up to 8-bit rounding"
    assert luminance[128] == pytest.approx(sum(DATA_LUMINANCE) / 2, abs=0.003)  # evenly
    assert luminance[0] == pytest.approx(DATA_LUMINANCE[0], abs=0.003)
    assert luminance[-1] == pytest.approx(DATA_LUMINANCE[1], abs=0.003)


def test_a_colour_already_in_the_band_is_kept():
    from labkit.core.plots import TAB10

    assert TAB10.fills[0] == "#1f77b4" and TAB10.fills[3] == "#d62728"  # tab:blue and tab:red need no change


def test_an_svg_follows_the_colour_scheme_and_draws_in_current_colour():
    import xml.etree.ElementTree as ET

    from labkit.core.plots import SVG_CARD, SVG_INK, svg_document, svg_text

    svg = svg_document(50, 20, "t", [svg_text(1, 1, "x")])
    root = ET.fromstring(svg)
    namespace = "{http://www.w3.org/2000/svg}"
    style = root.find(f"{namespace}style").text
    light, dark = style.split("@media (prefers-color-scheme: dark)")
    assert SVG_INK["light"] in light and SVG_CARD["light"] in light
    assert SVG_INK["dark"] in dark and SVG_CARD["dark"] in dark
    assert ":root" in light and "svg.labkit-svg:root" in dark  # inline in a page, the rules match nothing
    assert root.find(f"{namespace}text").get("fill") == "currentColor"
    card = root.find(f"{namespace}rect")
    assert card.get("class") == "labkit-card" and card.get("fill") == "none"  # transparent where drawn inline
    assert (root.get("role"), root.get("aria-label")) == ("img", "t")


def test_picture_html_is_an_img_with_alt_text_and_a_data_url_of_the_picture():
    from labkit.core.plots import THEME_STYLE, picture_html, svg_document

    svg = svg_document(30, 10, "t", [])
    markup = picture_html(svg, 'a "quoted" <alt>')
    shown = _img(markup)
    assert shown["alt"] == 'a "quoted" <alt>' and shown["class"] == "labkit-picture"
    assert shown["src"].startswith("data:image/svg+xml;base64,") and _data_url_bytes(shown["src"]) == svg
    assert "width" not in shown and "max-width:100%" in shown["style"]  # an SVG keeps its own size
    assert markup.startswith(THEME_STYLE)  # JupyterLab's theme reaches the SVG through the img's color-scheme


def test_picture_html_folds_the_numbers_under_the_picture():
    from labkit.core.plots import NUMBERS_NOTE, NUMBERS_SUMMARY, picture_html
    from labkit.core.tables import Table

    figure = new_figure(1.0, 1.0)
    markup = picture_html(to_png(figure), "one", 90, Table(["x", "y"], [[1, 2]]))
    assert _img(markup)["width"] == "90" and "<style>" not in markup  # a PNG needs no colour scheme
    assert f"<details class=\"labkit-picture-numbers\"><summary>{NUMBERS_SUMMARY}</summary>" in markup
    assert "<td" in markup and markup.endswith("</details>")
    assert _img(markup)["alt"] == "one" + NUMBERS_NOTE  # the alt text says where the numbers are


@pytest.mark.parametrize(("picture", "alt", "error", "message"), [
    (b"GIF89a", "x", "LabkitValueError", "must be PNG or SVG bytes"),
    (b"<svg/>", "  ", "LabkitValueError", "needs a text alternative"),
    (b"<svg/>", None, "LabkitTypeError", "alt must be a string"),
])
def test_a_picture_without_alt_text_or_of_another_kind_is_refused(picture, alt, error, message):
    from labkit.core import errors
    from labkit.core.plots import Picture, picture_html

    for make in (lambda: picture_html(picture, alt), lambda: Picture(picture, alt)):
        with pytest.raises(getattr(errors, error), match=message):
            make()


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


@pytest.mark.parametrize(("size", "dpi"), [((6.5, 3.05), 180), ((3.33, 2.17), 137), ((4.0, 2.0), 90)])
def test_to_png_is_the_card_of_what_savefig_draws_as_png(size, dpi):
    """to_png takes matplotlib's raw pixels, not its PNG: the same card, byte for byte, whole pixels truncated alike."""
    from labkit.core.plots import _card_png

    figure = new_figure(*size)
    axes = figure.add_subplot()
    axes.barh([1, 0], [3.0, 1.5], xerr=[0.2, 0.1], capsize=3)
    axes.set_yticks([1, 0], ["baseline", "channels_last"])
    figure.supxlabel("median time (ms)\nsecond line")
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=dpi)
    assert to_png(figure, dpi=dpi) == _card_png(Image.open(png), dpi)


def test_to_png_is_the_whole_figure_whatever_the_users_savefig_bbox():
    """figure_image shows the card at the figure's size, so a user's savefig.bbox = tight must not crop it."""
    import matplotlib

    figure = new_figure(3.0, 2.0)
    figure.add_subplot().plot([0, 1], [1, 0])
    with matplotlib.rc_context({"savefig.bbox": "tight"}):
        png = to_png(figure, dpi=50)
    assert Image.open(io.BytesIO(png)).size == (150, 100)
