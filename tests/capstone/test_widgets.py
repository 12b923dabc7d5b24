"""labkit.capstone.widgets.variant_bars: one bar per variant, and nothing drawn past the figure's edges."""
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from labkit.capstone.variants import VariantComparison, VariantResult
from labkit.capstone.widgets import X_LABEL, variant_bars
from labkit.core.errors import LabkitTypeError
from labkit.core.plots import PIXEL_RATIO, SCREEN_DPI
from labkit.core.timing import RunStats


def comparison(names: list[str]) -> VariantComparison:
    """Made-up timings: variant i takes 10/(i+1) ms, with some spread."""
    results = [VariantResult(name, RunStats.from_samples([0.009 / (i + 1), 0.01 / (i + 1), 0.012 / (i + 1)]),
                             float(i + 1), 0.0, True, 0.0) for i, name in enumerate(names)]
    return VariantComparison(results)


def drawn_beyond_the_edges(figure) -> bool:
    """Whether anything drawn (labels included) leaves the figure: what the reader would see cut."""
    figure.set_dpi(SCREEN_DPI * PIXEL_RATIO)  # lay out and draw as figure_image does for the notebook
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    drawn = figure.get_tightbbox(canvas.get_renderer())  # inches, every visible artist in view
    width, height = figure.get_size_inches()
    tolerance = 1 / (SCREEN_DPI * PIXEL_RATIO)  # one pixel
    return drawn.x0 < -tolerance or drawn.y0 < -tolerance or drawn.x1 > width + tolerance or drawn.y1 > height + tolerance


@pytest.mark.parametrize("names", [
    ["eager", "channels_last", "fused", "fused + channels_last", "compiled (fused + channels_last)"],
    ["eager", "a variant with a much longer name than any the capstone builds"],
    ["eager"],
])
def test_no_label_is_cut_off(names):
    figure = variant_bars(comparison(names))
    assert not drawn_beyond_the_edges(figure)
    assert X_LABEL in [text.get_text() for text in figure.findobj(Text)]


def test_the_check_can_see_a_cut_label():
    figure = variant_bars(comparison(["eager", "fused"]))
    figure.axes[0].set_xlabel("a label far too long for this figure, " * 4)
    assert drawn_beyond_the_edges(figure)


def test_one_bar_per_variant_at_its_median_in_order():
    figure = variant_bars(comparison(["eager", "fused", "compiled"]))
    axes = figure.axes[0]
    heights = dict(zip((label.get_text() for label in axes.get_yticklabels()), axes.get_yticks()))
    assert sorted(heights, key=heights.get, reverse=True) == ["eager", "fused", "compiled"]  # eager on top
    widths = {bar.get_y() + bar.get_height() / 2: bar.get_width() for bar in axes.patches}
    assert [widths[heights[name]] for name in ("eager", "fused", "compiled")] == pytest.approx([10.0, 5.0, 10 / 3])


def test_anything_but_a_comparison_is_a_labkit_error():
    with pytest.raises(LabkitTypeError, match="compare_variants"):
        variant_bars([1, 2])


def test_the_chart_has_alt_text_with_every_variants_numbers():
    from labkit.capstone.widgets import variant_bars_alt
    from labkit.core.plots import figure_image

    compared = comparison(["eager", "fused"])
    figure = variant_bars(compared)
    assert figure.get_label() == variant_bars_alt(compared)
    alt = figure_image(figure).alt
    assert "eager 10 ms (1.00x); fused 5 ms (2.00x)" in alt and alt.startswith("Horizontal bar chart")


def test_the_alt_text_of_anything_but_a_comparison_is_a_labkit_error():
    from labkit.capstone.widgets import variant_bars_alt

    with pytest.raises(LabkitTypeError, match="compare_variants"):
        variant_bars_alt({"eager": 1.0})
