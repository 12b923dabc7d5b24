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

import numpy as np
import torch
from matplotlib.figure import Figure

from labkit.errors import LabkitTypeError, LabkitValueError
from labkit.memory_format import elements_in_memory_order, memory_offsets

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
    from labkit.capstone import VariantComparison  # at call time: plots must not import the capstone's models

    if not isinstance(comparison, VariantComparison):
        raise LabkitTypeError(
            f"comparison must be the result of capstone.compare_variants(...), got {type(comparison).__name__}."
        )
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


MEMORY_ROW = 16  # elements per row in the flat-memory panel
#: The layout pictures label every element, so they stay readable (and fast) only for small tensors.
MAX_DRAWN_ELEMENTS = 512


def _check_drawable(tensor: object, what: str) -> torch.Tensor:
    """Reject what the layout pictures cannot draw, with the fix, before matplotlib is touched."""
    if not isinstance(tensor, torch.Tensor):
        raise LabkitTypeError(f"{what} needs a torch.Tensor, got {type(tensor).__name__}.")
    shape = tuple(tensor.shape)
    if tensor.dim() not in (4, 5):
        raise LabkitValueError(
            f"{what} draws 4-D (N, C, H, W) or 5-D (N, C, D, H, W) tensors; got shape {shape}. "
            "Reshape it first, e.g. x.reshape(1, 1, 1, -1) for a 1-D x."
        )
    if tensor.numel() == 0:
        raise LabkitValueError(f"{what} got a tensor with no elements (shape {shape}); give every dimension size 1 or more.")
    if tensor.numel() > MAX_DRAWN_ELEMENTS:
        raise LabkitValueError(
            f"{what} labels every element, so it draws at most {MAX_DRAWN_ELEMENTS} elements; got "
            f"{tensor.numel()} (shape {shape}). Draw a small slice, e.g. x[:1, :3, :4, :4]."
        )
    return tensor


def _block_grid(tensor: torch.Tensor) -> tuple[np.ndarray, list[tuple[int, int, str]], list[tuple[int, int, str]]]:
    """Offsets laid out as blocks of H x W cells: one block column per channel, one block row per n (and d).

    Returns the grid (NaN in the one-cell gaps between blocks) and the column and
    row labels as (position, ..., text) for the picture.
    """
    offsets = memory_offsets(tensor)
    five_d = offsets.dim() == 5
    if not five_d:
        offsets = offsets.unsqueeze(2)  # treat NCHW as NCDHW with D = 1
    n_size, c_size, d_size, h_size, w_size = offsets.shape
    grid = np.full((n_size * d_size * (h_size + 1) - 1, c_size * (w_size + 1) - 1), np.nan)
    row_labels = []
    for n in range(n_size):
        for d in range(d_size):
            row = (n * d_size + d) * (h_size + 1)
            row_labels.append((row + (h_size - 1) / 2, f"n={n}, d={d}" if five_d else f"n={n}"))
            for c in range(c_size):
                col = c * (w_size + 1)
                grid[row : row + h_size, col : col + w_size] = offsets[n, c, d].numpy()
    column_labels = [(c * (w_size + 1) + (w_size - 1) / 2, f"c={c}") for c in range(c_size)]
    return grid, column_labels, row_labels


def layout_figure(tensor: torch.Tensor, title: str = "") -> Figure:
    """Each element at its logical place, labelled and coloured by its memory offset."""
    tensor = _check_drawable(tensor, "layout_figure")
    grid, column_labels, row_labels = _block_grid(tensor)
    figure = new_figure(max(4.2, 0.42 * grid.shape[1] + 1.6), max(1.8, 0.42 * grid.shape[0] + 0.9))
    axes = figure.add_subplot()
    image = axes.imshow(grid, cmap="viridis", vmin=0, vmax=max(tensor.numel() - 1, 1))
    for (row, col), value in np.ndenumerate(grid):
        if not np.isnan(value):
            axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=8,
                      color="white" if value < 0.6 * tensor.numel() else "black")
    for x, label in column_labels:
        axes.text(x, -0.9, label, ha="center", va="center", fontsize=8)
    for y, label in row_labels:
        axes.text(-0.9, y, label, ha="right", va="center", fontsize=8)
    axes.set_xlim(-1.5, grid.shape[1] - 0.5)
    axes.set_ylim(grid.shape[0] - 0.5, -1.5)
    axes.set_axis_off()
    figure.colorbar(image, ax=axes, shrink=0.8, label="offset in memory")
    axes.set_title(title or "logical layout, number = offset in memory", fontsize=9)
    return figure


def memory_figure(tensor: torch.Tensor) -> Figure:
    """The flat memory, in order, each cell coloured and numbered by its element's channel."""
    tensor = _check_drawable(tensor, "memory_figure")
    channels = [index[1] for index in elements_in_memory_order(tensor)]
    rows = -(-len(channels) // MEMORY_ROW)
    strip = np.full((rows, MEMORY_ROW), np.nan)
    strip.flat[: len(channels)] = channels
    figure = new_figure(0.42 * MEMORY_ROW + 0.6, 0.42 * rows + 0.8)
    axes = figure.add_subplot()
    axes.imshow(strip, cmap="tab10", vmin=0, vmax=9)
    for (row, col), value in np.ndenumerate(strip):
        if not np.isnan(value):
            axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=8, color="white")
    axes.set_xticks(range(MEMORY_ROW))
    axes.set_yticks(range(rows), [f"{MEMORY_ROW * r}" for r in range(rows)])
    axes.tick_params(labelsize=7, length=0)
    axes.set_title("flat memory, offset 0 top left; colour and number = channel c", fontsize=9)
    return figure
