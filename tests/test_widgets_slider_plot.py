from labkit.widgets import SliderPlot
from labkit.widgets.slider_plot import wave_points


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
