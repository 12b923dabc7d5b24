"""StrideExplorer: move N, C, H, W sliders and watch strides and memory order change.

Why: channels_last keeps the shape and changes only the strides, which is hard
to believe from a printed tuple. This widget draws each element of a small
tensor at its logical (n, c, h, w) place, labelled and coloured by its offset
in memory, next to the flat memory itself, so the learner sees the channel
dimension become the densest one. Every number comes from
:mod:`labkit.memory_format` and both pictures from :mod:`labkit.plots`; this
module only wires the controls to them.
"""
from __future__ import annotations

import html
import numbers

import ipywidgets as widgets
import numpy as np
import torch

from labkit.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.memory_format import (
    CONVERSION_METHODS,
    FORMATS,
    FormatLike,
    LayoutDescription,
    convert,
    describe,
    format_name,
)
from labkit.plots import layout_figure, memory_figure, to_png

#: The largest size each slider offers: small enough that every element stays readable.
SLIDER_MAX = {"N": 2, "C": 4, "D": 2, "H": 4, "W": 4}


def _is_size(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_arguments(shape: object, memory_format: FormatLike, method: object) -> tuple[tuple[int, ...], str]:
    """Reject what the controls cannot show, before any widget is built; return the shape and format name."""
    if not isinstance(shape, (tuple, list)):  # torch.Size is a tuple
        raise LabkitTypeError(
            f"shape must be a tuple (N, C, H, W) or (N, C, D, H, W), got {type(shape).__name__} {shape!r}. "
            "Try shape=(2, 3, 2, 2)."
        )
    letters = "NCDHW" if len(shape) == 5 else "NCHW"
    sizes_ok = len(shape) in (4, 5) and all(
        _is_size(size) and 1 <= size <= SLIDER_MAX[letter] for letter, size in zip(letters, shape)
    )
    if not sizes_ok:
        limits = ", ".join(f"{letter} 1..{top}" for letter, top in SLIDER_MAX.items())
        raise LabkitValueError(
            f"shape must be (N, C, H, W) or (N, C, D, H, W) with whole-number sizes {limits} "
            f"(what the sliders offer); got {shape!r}. Try shape=(2, 3, 2, 2)."
        )
    name = format_name(memory_format)
    if not isinstance(method, str) or method not in CONVERSION_METHODS:
        error = LabkitValueError if isinstance(method, str) else LabkitTypeError
        raise error(f"method must be one of {', '.join(CONVERSION_METHODS)}; got {method!r}.")
    return tuple(int(size) for size in shape), name


def _slider(name: str, value: int, top: int) -> widgets.IntSlider:
    return widgets.IntSlider(value=value, min=1, max=top, description=name, continuous_update=True)


class StrideExplorer(widgets.VBox):
    """Sliders for N, C, H, W (and D), format and method dropdowns, and live pictures."""

    def __init__(self, shape: tuple[int, ...] = (2, 3, 2, 2), memory_format: FormatLike = "channels_last", method: str = "to") -> None:
        shape, memory_format = _check_arguments(shape, memory_format, method)
        five_d = len(shape) == 5
        n, c, *spatial = shape
        h, w = spatial[-2:]
        depth = spatial[0] if five_d else 2
        self.n, self.c, self.h, self.w = (_slider(letter, size, SLIDER_MAX[letter]) for letter, size in zip("NCHW", (n, c, h, w)))
        self.d = _slider("D", depth, SLIDER_MAX["D"])
        self.five_d = widgets.Checkbox(value=five_d, description="5-D (add D)")
        self.format = widgets.Dropdown(options=list(FORMATS), value=memory_format, description="format")
        self.method = widgets.Dropdown(options=list(CONVERSION_METHODS), value=method, description="method")
        self.strides = widgets.HTML()
        self.strides.add_class("labkit-strides")
        self.description = widgets.HTML()
        self.layout_image = widgets.Image(format="png")
        self.memory_image = widgets.Image(format="png")
        self.tensor: torch.Tensor | None = None
        self.layout_description: LayoutDescription | None = None
        self.error = ""
        controls = widgets.HBox([
            widgets.VBox([self.n, self.c, self.h, self.w]),
            widgets.VBox([self.five_d, self.d, self.format, self.method]),
        ])
        super().__init__([controls, self.strides, self.description, self.layout_image, self.memory_image])
        self.add_class("labkit-stride-explorer")
        for control in (self.n, self.c, self.h, self.w, self.d, self.five_d, self.format, self.method):
            control.observe(self._on_change, names="value")
        self.redraw()

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape the sliders describe."""
        spatial = (self.d.value, self.h.value, self.w.value) if self.five_d.value else (self.h.value, self.w.value)
        return (self.n.value, self.c.value, *spatial)

    def _on_change(self, _change: dict) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Convert a fresh tensor of the chosen shape and re-render every panel."""
        self.d.disabled = not self.five_d.value
        source = torch.arange(int(np.prod(self.shape)), dtype=torch.float32).reshape(self.shape)
        try:
            self.tensor = convert(source, self.format.value, self.method.value)
        except LabkitError as exc:
            self.tensor, self.layout_description, self.error = None, None, str(exc)
            self.strides.value = "<b>strides:</b> —"
            self.description.value = f'<p class="labkit-error">⚠ {html.escape(self.error)}</p>'
            self.layout_image.value = b""
            self.memory_image.value = b""
            return
        self.error = ""
        self.layout_description = describe(self.tensor)
        self.strides.value = f"<b>strides:</b> <code>{self.layout_description.strides}</code>"
        self.description.value = self.layout_description.to_html()
        self.layout_image.value = to_png(layout_figure(self.tensor), dpi=72)
        self.memory_image.value = to_png(memory_figure(self.tensor), dpi=72)
