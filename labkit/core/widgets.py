"""The smallest live widget: a slider that redraws a matplotlib plot.

Why: notebook 00 uses it as a smoke test. If moving the slider redraws the
curve, the widgets extension works and every later lab's widgets will render.
It is also the pattern the lab widgets follow: controls on top, each with a
``description`` (its visible label, and the name a screen reader reads for a text box,
a dropdown, a checkbox or a button), then one :class:`PictureView` holding a picture
that is re-rendered on every change, with its alt text, shown at a fixed CSS size
(:func:`show_picture`), so a HiDPI PNG or an SVG is never stretched or blurred, in
JupyterLab or on the static docs site.

Why not ``ipywidgets.Image``: its ``<img>`` has no alt text (and its ``tooltip`` breaks
the view of a widget without a description), it shows a broken-image icon while empty,
and an SVG inside it cannot be told JupyterLab's theme. :class:`PictureView` is an
``ipywidgets.HTML`` holding :func:`labkit.core.plots.picture_html`: an ``<img>`` with alt
text and a data URL, stored with the notebook like the Image widget's bytes, and nothing
at all while empty.
"""
from __future__ import annotations

import math
import numbers

import ipywidgets as widgets

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.plots import LiveFigure, new_figure, picture_html
from labkit.core.tables import Table
from labkit.i18n.messages import _

SAMPLES = 200
#: The frequencies the slider offers: FREQUENCY_MIN to FREQUENCY_MAX in steps of FREQUENCY_STEP.
FREQUENCY_MIN, FREQUENCY_MAX, FREQUENCY_STEP = 0.5, 5.0, 0.5


class PictureView(widgets.HTML):
    """A widget's picture: an ``<img>`` with alt text (see the module's docstring); :func:`show_picture` fills it.

    ``picture`` and ``alt`` keep what it shows (bytes and text, on the Python side only), for tests.
    """

    def __init__(self) -> None:
        super().__init__()
        self.add_class("labkit-picture-view")
        self.layout.align_self = "flex-start"  # a widget box would stretch it to its full width
        self.picture, self.alt = b"", ""

    def clear(self) -> None:
        """Show nothing (never an empty image, which a browser draws as a broken-image icon)."""
        self.picture, self.alt, self.value = b"", "", ""


def show_picture(view: PictureView, picture: bytes, alt: str, width_px: float | None = None,
                 numbers: Table | None = None) -> None:
    """Show ``picture`` (PNG or SVG bytes) in ``view`` at its own proportions, with ``alt`` and ``numbers``.

    Why: a stretched ``<img>`` is blurry and out of proportion on the docs site, so the picture keeps
    its size. A PNG rendered at :data:`~labkit.core.plots.PIXEL_RATIO` times the pixels needs
    ``width_px``, its CSS width, or it would show that many times too large; an SVG carries its own
    size. ``alt`` is its text alternative, ``numbers`` a table of what it shows, folded under it
    (:func:`labkit.core.plots.picture_html`).
    """
    view.value = picture_html(picture, alt, width_px, numbers)
    view.picture, view.alt = picture, alt


def wave_points(frequency: float, samples: int = SAMPLES) -> tuple[list[float], list[float]]:
    """x in [0, 1) and sin(2*pi*frequency*x): the curve the widget draws."""
    xs = [i / samples for i in range(samples)]
    return xs, [math.sin(2 * math.pi * frequency * x) for x in xs]


def _check_frequency(frequency: object) -> float:
    """Reject a start value the slider cannot show, instead of letting ipywidgets clamp or keep it."""
    allowed = f"a number from {FREQUENCY_MIN:g} to {FREQUENCY_MAX:g} in steps of {FREQUENCY_STEP:g}"
    if isinstance(frequency, bool) or not isinstance(frequency, numbers.Real):
        raise LabkitTypeError(f"frequency must be {allowed}, got {type(frequency).__name__} {frequency!r}. Try frequency=1.0.")
    value = float(frequency)
    steps = (value - FREQUENCY_MIN) / FREQUENCY_STEP if math.isfinite(value) else math.nan
    if not (FREQUENCY_MIN <= value <= FREQUENCY_MAX and math.isclose(steps, round(steps))):
        raise LabkitValueError(
            f"frequency must be {allowed} (the slider's range), got {frequency!r}. Try frequency=1.0."
        )
    return value


def _title(frequency: float) -> str:
    return f"sin(2π · {frequency:g} · x)"


def wave_alt(frequency: float) -> str:
    """The picture in words: the curve, its range, and how many periods it shows."""
    periods = _("1 period") if frequency == 1 else _("{frequency} periods").format(frequency=f"{frequency:g}")
    return _("Plot of {title} for x from 0 to 1: a sine wave between -1 and 1, {periods}.").format(
        title=_title(frequency), periods=periods)


class SliderPlot(widgets.VBox):
    """A frequency slider and a sine curve that follows it.

    The axes are drawn once; a slider step redraws only the curve and the title (:class:`LiveFigure`).
    """

    def __init__(self, frequency: float = 1.0) -> None:
        self.slider = widgets.FloatSlider(
            value=_check_frequency(frequency),
            min=FREQUENCY_MIN,
            max=FREQUENCY_MAX,
            step=FREQUENCY_STEP,
            description=_("frequency"),
            continuous_update=True,
        )
        self.status = widgets.HTML()
        self.image = PictureView()
        figure = new_figure(5.0, 2.2)
        axes = figure.add_subplot()
        self._curve = axes.plot(*wave_points(frequency))[0]
        axes.set_ylim(-1.1, 1.1)  # fixed, so the axes never need redrawing
        axes.set_xlabel("x")
        self._title = axes.set_title(_title(FREQUENCY_MAX))  # the layout makes room for the widest title
        self._figure = LiveFigure(figure, changing=[self._curve, self._title])
        super().__init__([self.slider, self.status, self.image])
        self.add_class("labkit-slider-plot")
        self.slider.observe(self._on_change, names="value")
        self.redraw()

    def _on_change(self, _change: dict) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Draw the curve for the slider's current frequency."""
        frequency = self.slider.value
        self._curve.set_ydata(wave_points(frequency)[1])
        self._title.set_text(_title(frequency))
        show_picture(self.image, self._figure.png(), wave_alt(frequency), self._figure.css_size[0])
        self.status.value = _("Widgets work: drawn with frequency = {frequency}.").format(frequency=f"{frequency:g}")
