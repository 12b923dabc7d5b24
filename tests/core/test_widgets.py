import io
import math

import pytest

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.widgets import wave_points
from labkit.widgets import SliderPlot


def test_wave_points_follow_the_frequency():
    xs, ys = wave_points(1.0, samples=4)
    assert xs == [0.0, 0.25, 0.5, 0.75]
    assert [round(y, 6) for y in ys] == [0.0, 1.0, 0.0, -1.0]


def test_moving_the_slider_redraws_the_plot():
    widget = SliderPlot(frequency=1.0)
    first_png = bytes(widget.image.value)
    assert first_png.startswith(b"\x89PNG") and "frequency = 1" in widget.status.value
    widget.slider.value = 3.0
    assert bytes(widget.image.value) != first_png
    assert "frequency = 3" in widget.status.value
    assert "labkit-slider-plot" in widget._dom_classes


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
    width, height = Image.open(io.BytesIO(widget.image.value)).size
    css_width = int(widget.image.layout.width.removesuffix("px"))
    assert width == PIXEL_RATIO * css_width and height < width
    assert widget.image.layout.height == "auto" and widget.image.layout.align_self == "flex-start"


def test_a_slider_step_repaints_only_the_curve_and_looks_like_a_fresh_drawing():
    moved = SliderPlot(frequency=1.0)
    moved.slider.value = 3.0
    moved.slider.value = 3.5
    assert moved._figure.full_draws == 1  # the axes were drawn once
    assert bytes(moved.image.value) == bytes(SliderPlot(frequency=3.5).image.value)


def test_the_status_is_plain_text_so_printing_it_shows_no_markup():
    widget = SliderPlot(frequency=2.0)
    assert widget.status.value == "Widgets work: drawn with frequency = 2."


def test_show_picture_sets_the_css_width_of_a_png_and_leaves_an_svg_its_own():
    import ipywidgets

    from labkit.core.widgets import show_picture

    image = ipywidgets.Image(format="png")
    show_picture(image, b"\x89PNG...", 300.4)
    assert (image.layout.width, image.layout.height, image.value) == ("300px", "auto", b"\x89PNG...")
    show_picture(image, b"<svg/>")
    assert image.layout.width == "auto" and image.layout.align_self == "flex-start"
