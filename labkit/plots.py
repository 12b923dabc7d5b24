"""Matplotlib figures from labkit's result objects.

Why no pyplot: pyplot keeps global state and, under the inline backend, shows
every figure it creates. Widgets need PNG bytes they control, and notebooks
need exactly one image per cell, so we build ``matplotlib.figure.Figure``
objects directly and turn them into PNG bytes (PNG, not SVG: nbval skips PNG,
and SVG carries random ids).
"""
from __future__ import annotations

import io
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

if TYPE_CHECKING:
    from labkit.capstone import VariantComparison


def new_figure(width: float = 6.0, height: float = 3.5) -> Figure:
    """A pyplot-free figure with constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def to_png(figure: Figure, dpi: int = 90) -> bytes:
    """Render a figure to PNG bytes (for ``ipywidgets.Image`` or ``IPython.display.Image``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def variant_bars(comparison: VariantComparison) -> Figure:
    """Horizontal bars of each variant's median time, IQR as error bars, speedup as labels."""
    results = comparison.results
    names = [r.name for r in results]
    medians = [r.stats.median * 1e3 for r in results]
    iqrs = [r.stats.iqr * 1e3 for r in results]
    figure = new_figure(6.5, 0.5 + 0.45 * len(results))
    axes = figure.add_subplot()
    positions = list(range(len(results)))[::-1]
    half_iqrs = [iqr / 2 for iqr in iqrs]
    axes.barh(positions, medians, xerr=half_iqrs, color="tab:blue", alpha=0.85, capsize=3)
    axes.set_yticks(positions, names)
    for y, result in zip(positions, results):
        axes.text(0, y, f" {result.speedup:.2f}x", va="center", color="white", fontweight="bold")
    axes.set_xlabel("median time per forward pass (ms); error bar spans the IQR")
    return figure
