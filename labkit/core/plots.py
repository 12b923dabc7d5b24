"""Matplotlib figures, built without pyplot: the one place every lab's figures start from.

Why no pyplot: pyplot keeps global state and, under the inline backend, shows
every figure it creates. Widgets need PNG bytes they control, and notebooks
need exactly one image per cell, so we build ``matplotlib.figure.Figure``
objects directly and turn them into PNG bytes (PNG, not SVG: nbval skips PNG,
and SVG carries random ids).
"""
from __future__ import annotations

import io

from matplotlib.figure import Figure


def new_figure(width: float = 6.0, height: float = 3.5) -> Figure:
    """A pyplot-free figure with constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def to_png(figure: Figure, dpi: int = 90) -> bytes:
    """Render a figure to PNG bytes (for ``ipywidgets.Image`` or ``IPython.display.Image``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()
