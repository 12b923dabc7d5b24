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
