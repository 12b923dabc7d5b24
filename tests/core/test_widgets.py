import html
import io
import math
import re

import pytest

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.widgets import wave_points
from labkit.widgets import SliderPlot

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def test_wave_points_follow_the_frequency():
    xs, ys = wave_points(1.0, samples=4)
    assert xs == [0.0, 0.25, 0.5, 0.75]
    assert [round(y, 6) for y in ys] == [0.0, 1.0, 0.0, -1.0]


def test_moving_the_slider_redraws_the_plot():
    widget = SliderPlot(frequency=1.0)
    first_png = widget.image.picture
    assert first_png.startswith(b"\x89PNG") and "frequency = 1" in widget.status.value
    widget.slider.value = 3.0
    assert widget.image.picture != first_png
    assert "frequency = 3" in widget.status.value
    assert "labkit-slider-plot" in widget._dom_classes


def test_the_picture_has_alt_text_that_follows_the_slider():
    widget = SliderPlot(frequency=1.0)
    assert widget.image.alt == "Plot of sin(2π · 1 · x) for x from 0 to 1: a sine wave between -1 and 1, 1 period."
    widget.slider.value = 2.5
    assert "sin(2π · 2.5 · x)" in widget.image.alt and "2.5 periods" in widget.image.alt
    assert f'alt="{html.escape(widget.image.alt)}"' in widget.image.value


def test_the_slider_has_a_visible_label_that_names_it():
    assert SliderPlot().slider.description == "frequency"


@pytest.mark.parametrize("frequency", [1000, 0.0, -1.0, 5.5, 1.3, math.nan, math.inf])
def test_out_of_range_or_non_finite_frequency_is_rejected_with_the_range(frequency):
    with pytest.raises(LabkitValueError, match=r"frequency must be .*0\.5 to 5.*steps of 0\.5"):
        SliderPlot(frequency=frequency)


@pytest.mark.parametrize("frequency", ["1", True, None, [1.0]])
def test_non_number_frequency_is_a_type_error(frequency):
    with pytest.raises(LabkitTypeError, match="frequency must be a number"):
        SliderPlot(frequency=frequency)


@pytest.mark.parametrize("frequency", [0.5, 2, 5.0])
def test_every_slider_value_is_accepted_as_given(frequency):
    assert SliderPlot(frequency=frequency).slider.value == frequency


def test_the_picture_is_a_hidpi_png_shown_at_its_css_width_never_stretched():
    from PIL import Image

    from labkit.core.plots import PIXEL_RATIO

    widget = SliderPlot(frequency=1.0)
    width, height = Image.open(io.BytesIO(widget.image.picture)).size
    css_width = int(re.search(r'<img [^>]*width="(\d+)"', widget.image.value)[1])
    assert width == PIXEL_RATIO * css_width and height < width
    assert "height:auto" in widget.image.value and widget.image.layout.align_self == "flex-start"


def test_a_slider_step_repaints_only_the_curve_and_looks_like_a_fresh_drawing():
    moved = SliderPlot(frequency=1.0)
    moved.slider.value = 3.0
    moved.slider.value = 3.5
    assert moved._figure.full_draws == 1  # the axes were drawn once
    assert moved.image.value == SliderPlot(frequency=3.5).image.value


def test_the_status_is_plain_text_so_printing_it_shows_no_markup():
    widget = SliderPlot(frequency=2.0)
    assert widget.status.value == "Widgets work: drawn with frequency = 2."


def test_show_picture_sets_the_css_width_of_a_png_and_leaves_an_svg_its_own():
    from labkit.core.widgets import PictureView, show_picture

    view = PictureView()
    show_picture(view, b"\x89PNG\r\n\x1a\n...", "a png", 300.4)
    assert '<img class="labkit-picture" src="data:image/png;base64,' in view.value and 'width="300"' in view.value
    assert (view.picture, view.alt) == (b"\x89PNG\r\n\x1a\n...", "a png")
    show_picture(view, b"<svg/>", "an svg")
    assert "data:image/svg+xml;base64," in view.value and " width=" not in view.value
    assert view.layout.align_self == "flex-start"  # never stretched to the box's width


def test_an_empty_picture_view_shows_nothing_not_a_broken_image():
    from labkit.core.widgets import PictureView, show_picture

    view = PictureView()
    assert view.value == "" and "labkit-picture-view" in view._dom_classes
    show_picture(view, b"<svg/>", "an svg")
    view.clear()
    assert (view.value, view.picture, view.alt) == ("", b"", "")


def test_show_picture_refuses_a_picture_without_alt_text_and_keeps_the_last_one():
    from labkit.core.widgets import PictureView, show_picture

    view = PictureView()
    show_picture(view, b"<svg/>", "first")
    before = view.value
    with pytest.raises(LabkitValueError, match="needs a text alternative"):
        show_picture(view, b"<svg/>", "")
    assert (view.value, view.alt) == (before, "first")
