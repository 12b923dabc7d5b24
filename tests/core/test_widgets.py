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
