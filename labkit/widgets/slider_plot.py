"""The smallest live widget: a slider that redraws a matplotlib plot.

Why: notebook 00 uses it as a smoke test. If moving the slider redraws the
curve, the widgets extension works and every later lab's widgets will render.
It is also the pattern the lab widgets follow: controls on top, one
``ipywidgets.Image`` holding a PNG that is re-rendered on every change.
"""
from __future__ import annotations

import math

import ipywidgets as widgets

from labkit.plots import new_figure, to_png

SAMPLES = 200


def wave_points(frequency: float, samples: int = SAMPLES) -> tuple[list[float], list[float]]:
    """x in [0, 1) and sin(2*pi*frequency*x): the curve the widget draws."""
    xs = [i / samples for i in range(samples)]
    return xs, [math.sin(2 * math.pi * frequency * x) for x in xs]


class SliderPlot(widgets.VBox):
    """A frequency slider and a sine curve that follows it."""

    def __init__(self, frequency: float = 1.0) -> None:
        self.slider = widgets.FloatSlider(
            value=frequency, min=0.5, max=5.0, step=0.5, description="frequency", continuous_update=True
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
