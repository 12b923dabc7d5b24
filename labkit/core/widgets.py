"""The smallest live widget: a slider that redraws a matplotlib plot.

Why: notebook 00 uses it as a smoke test. If moving the slider redraws the
curve, the widgets extension works and every later lab's widgets will render.
It is also the pattern the lab widgets follow: controls on top, one
``ipywidgets.Image`` holding a PNG that is re-rendered on every change.
"""
from __future__ import annotations

import math
import numbers

import ipywidgets as widgets

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.plots import new_figure, to_png

SAMPLES = 200
#: The frequencies the slider offers: FREQUENCY_MIN to FREQUENCY_MAX in steps of FREQUENCY_STEP.
FREQUENCY_MIN, FREQUENCY_MAX, FREQUENCY_STEP = 0.5, 5.0, 0.5


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


class SliderPlot(widgets.VBox):
    """A frequency slider and a sine curve that follows it."""

    def __init__(self, frequency: float = 1.0) -> None:
        self.slider = widgets.FloatSlider(
            value=_check_frequency(frequency),
            min=FREQUENCY_MIN,
            max=FREQUENCY_MAX,
            step=FREQUENCY_STEP,
            description="frequency",
            continuous_update=True,
        )
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        super().__init__([self.slider, self.status, self.image])
        self.add_class("labkit-slider-plot")
        self.slider.observe(self._on_change, names="value")
        self.redraw()

    def _on_change(self, _change: dict) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Draw the curve for the slider's current frequency."""
        frequency = self.slider.value
        xs, ys = wave_points(frequency)
        figure = new_figure(5.0, 2.2)
        axes = figure.add_subplot()
        axes.plot(xs, ys)
        axes.set_xlabel("x")
        axes.set_title(f"sin(2π · {frequency:g} · x)")
        self.image.value = to_png(figure)
        self.status.value = f"<b>Widgets work.</b> Drawn with frequency = {frequency:g}."
