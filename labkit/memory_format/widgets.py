"""StrideExplorer: move N, C, H, W sliders and watch strides and memory order change.

Why: channels_last keeps the shape and changes only the strides, which is hard
to believe from a printed tuple. This widget draws each element of a small
tensor at its logical (n, c, h, w) place, labelled and coloured by its offset
in memory, next to the flat memory itself, so the learner sees the channel
dimension become the densest one. Every number comes from
:mod:`labkit.memory_format.layout`: the pictures take the :class:`LayoutDescription`
that :func:`~labkit.memory_format.layout.describe` returns and only draw it.

Each picture comes twice. :func:`layout_figure` and :func:`memory_figure` are
matplotlib figures for a notebook cell (PNG through :func:`labkit.core.plots.to_png`).
:func:`layout_svg` and :func:`memory_svg` draw the same cells as SVG for the
widget: matplotlib took about 190 ms (over 400 ms on a loaded 2-core machine) to lay
out and rasterise every numbered cell of both pictures, so dragging a slider lagged;
the SVG takes a few milliseconds and the browser draws it. The widget keeps them in
``ipywidgets.Image`` (format ``svg+xml``), which the notebook's stored widget state
carries, so the static docs still show the grid.
"""
from __future__ import annotations

import html
import numbers

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import Colormap
from matplotlib.figure import Figure

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.plots import new_figure, svg_document, svg_text
from labkit.core.widgets import show_picture
from labkit.memory_format.layout import (
    CONVERSION_METHODS,
    FORMATS,
    FormatLike,
    LayoutDescription,
    convert,
    describe,
    format_name,
)

# ---------------------------------------------------------------- the two pictures

MEMORY_ROW = 16  # elements per row in the flat-memory panel
#: The layout pictures label every element, so they stay readable (and fast) only for small tensors.
MAX_DRAWN_ELEMENTS = 512


def _check_drawable(layout: object, what: str) -> LayoutDescription:
    """Reject what the layout pictures cannot draw, with the fix, before matplotlib is touched."""
    if isinstance(layout, torch.Tensor):
        raise LabkitTypeError(
            f"{what} draws a layout description, not a tensor (got a tensor of shape {tuple(layout.shape)}); "
            f"pass describe(x): {what}(describe(x))."
        )
    if not isinstance(layout, LayoutDescription):
        raise LabkitTypeError(
            f"{what} draws a LayoutDescription, got {type(layout).__name__}; "
            f"make one with labkit.memory_format.describe(x) and pass that: {what}(describe(x))."
        )
    shape = layout.shape
    if len(shape) not in (4, 5):
        raise LabkitValueError(
            f"{what} draws 4-D (N, C, H, W) or 5-D (N, C, D, H, W) tensors; got shape {shape}. "
            "Reshape it first, e.g. describe(x.reshape(1, 1, 1, -1)) for a 1-D x."
        )
    if layout.numel == 0:
        raise LabkitValueError(f"{what} got a tensor with no elements (shape {shape}); give every dimension size 1 or more.")
    if layout.numel > MAX_DRAWN_ELEMENTS:
        raise LabkitValueError(
            f"{what} labels every element, so it draws at most {MAX_DRAWN_ELEMENTS} elements; got "
            f"{layout.numel} (shape {shape}). Draw a small slice, e.g. describe(x[:1, :3, :4, :4])."
        )
    return layout


Label = tuple[float, str]  # (position on the axis, text)


def _block_grid(layout: LayoutDescription) -> tuple[np.ndarray, list[Label], list[Label]]:
    """Offsets laid out as blocks of H x W cells: one block column per channel, one block row per n (and d).

    Returns the grid (NaN in the one-cell gaps between blocks) and the column and
    row labels as (position, text) for the picture.
    """
    offsets = layout.memory_offsets()
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


def _memory_strip(layout: LayoutDescription) -> np.ndarray:
    """Each element's channel, in memory order, folded into rows of MEMORY_ROW (NaN after the last element)."""
    channels = [index[1] for index in layout.elements_in_memory_order()]
    strip = np.full((-(-len(channels) // MEMORY_ROW), MEMORY_ROW), np.nan)
    strip.flat[: len(channels)] = channels
    return strip


LAYOUT_TITLE = "logical layout, number = offset in memory"
MEMORY_TITLE = "flat memory, offset 0 top left; colour and number = channel c"


def _offset_text_colour(offset: float, numel: int) -> str:
    """White numbers on the dark end of viridis, black on the light end (both pictures use this rule)."""
    return "white" if offset < 0.6 * numel else "black"


def layout_figure(layout: LayoutDescription, title: str = "") -> Figure:
    """Each element at its logical place, labelled and coloured by its memory offset.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    layout = _check_drawable(layout, "layout_figure")
    numel = layout.numel
    grid, column_labels, row_labels = _block_grid(layout)
    figure = new_figure(max(4.2, 0.42 * grid.shape[1] + 1.6), max(1.8, 0.42 * grid.shape[0] + 0.9))
    axes = figure.add_subplot()
    image = axes.imshow(grid, cmap="viridis", vmin=0, vmax=max(numel - 1, 1))
    for (row, col), value in np.ndenumerate(grid):
        if not np.isnan(value):
            axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=8,
                      color=_offset_text_colour(value, numel))
    for x, label in column_labels:
        axes.text(x, -0.9, label, ha="center", va="center", fontsize=8)
    for y, label in row_labels:
        axes.text(-0.9, y, label, ha="right", va="center", fontsize=8)
    axes.set_xlim(-1.5, grid.shape[1] - 0.5)
    axes.set_ylim(grid.shape[0] - 0.5, -1.5)
    axes.set_axis_off()
    figure.colorbar(image, ax=axes, shrink=0.8, label="offset in memory")
    axes.set_title(title or LAYOUT_TITLE, fontsize=9)
    return figure


def memory_figure(layout: LayoutDescription) -> Figure:
    """The flat memory, in order, each cell coloured and numbered by its element's channel.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    strip = _memory_strip(_check_drawable(layout, "memory_figure"))
    rows = strip.shape[0]
    figure = new_figure(0.42 * MEMORY_ROW + 0.6, 0.42 * rows + 0.8)
    axes = figure.add_subplot()
    axes.imshow(strip, cmap="tab10", vmin=0, vmax=9)
    for (row, col), value in np.ndenumerate(strip):
        if not np.isnan(value):
            axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=8, color="white")
    axes.set_xticks(range(MEMORY_ROW))
    axes.set_yticks(range(rows), [f"{MEMORY_ROW * r}" for r in range(rows)])
    axes.tick_params(labelsize=7, length=0)
    axes.set_title(MEMORY_TITLE, fontsize=9)
    return figure


# ---------------------------------------------------------------- the same pictures as SVG, for the widget

CELL_PX = 30  # one element's square: 0.42 inch at 72 dpi, as in the PNG figures
CHAR_PX = 6.5  # about the width of one character at the SVG font size (11 px), to size labels and titles
TITLE_PX, LABEL_PX = 22, 18  # heights of the title line and of the column labels under it
SCALE_PX, SCALE_MIN_WIDTH_PX, SCALE_STOPS = 10, 150, 9  # the offset colour scale under the layout grid


def _svg_cell(x: float, y: float, fill: str, number: int, colour: str) -> str:
    """One element: a coloured square with its number in the middle."""
    square = f'<rect x="{x:g}" y="{y:g}" width="{CELL_PX}" height="{CELL_PX}" fill="{fill}"/>'
    return f'<g class="element">{square}{svg_text(x + CELL_PX / 2, y + CELL_PX / 2, str(number), colour=colour)}</g>'


def _text_width(text: str) -> float:
    return len(text) * CHAR_PX


def _hex_colours(colormap: Colormap, values: np.ndarray) -> list[str]:
    """``to_hex(colormap(v))`` for every value at once: one colormap call, not one per cell (that took most of a redraw)."""
    channels = np.rint(colormap(values)[:, :3] * 255).astype(int)
    return [f"#{red:02x}{green:02x}{blue:02x}" for red, green, blue in channels.tolist()]


def _offset_scale(x: float, y: float, width: float, top_value: int) -> list[str]:
    """A horizontal viridis bar from offset 0 to ``top_value``, labelled at both ends: the colorbar of the PNG."""
    fractions = np.linspace(0, 1, SCALE_STOPS)
    stops = [f'<stop offset="{fraction:g}" stop-color="{colour}"/>'
             for fraction, colour in zip(fractions, _hex_colours(colormaps["viridis"], fractions), strict=True)]
    label_y = y + SCALE_PX + LABEL_PX / 2
    return [
        '<defs><linearGradient id="offset-scale">', *stops, "</linearGradient></defs>",
        f'<rect x="{x:g}" y="{y:g}" width="{width:g}" height="{SCALE_PX}" fill="url(#offset-scale)"/>',
        svg_text(x, label_y, "0", anchor="start"),
        svg_text(x + width / 2, label_y, "offset in memory"),
        svg_text(x + width, label_y, str(top_value), anchor="end"),
    ]


def layout_svg(layout: LayoutDescription, title: str = "") -> bytes:
    """The picture of :func:`layout_figure` as SVG bytes: the same cells, numbers, colours and labels.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    layout = _check_drawable(layout, "layout_svg")
    title = title or LAYOUT_TITLE
    numel = layout.numel
    grid, column_labels, row_labels = _block_grid(layout)
    rows, columns = grid.shape
    left = 12 + max(_text_width(label) for _, label in row_labels)
    top = TITLE_PX + LABEL_PX
    top_value = max(numel - 1, 1)
    places = np.argwhere(~np.isnan(grid))
    offsets = grid[~np.isnan(grid)]  # row by row, as argwhere lists the places
    fills = _hex_colours(colormaps["viridis"], offsets / top_value)
    parts = [
        _svg_cell(left + col * CELL_PX, top + row * CELL_PX, fill, int(offset), _offset_text_colour(offset, numel))
        for (row, col), offset, fill in zip(places.tolist(), offsets.tolist(), fills, strict=True)
    ]
    parts += [svg_text(left + (x + 0.5) * CELL_PX, TITLE_PX + LABEL_PX / 2, label) for x, label in column_labels]
    parts += [svg_text(left - 6, top + (y + 0.5) * CELL_PX, label, anchor="end") for y, label in row_labels]
    scale_width = max(columns * CELL_PX, SCALE_MIN_WIDTH_PX)
    parts += _offset_scale(left, top + rows * CELL_PX + 8, scale_width, top_value)
    parts.append(svg_text(4, TITLE_PX / 2, title, anchor="start"))
    width = max(left + scale_width, 8 + _text_width(title)) + 6
    return svg_document(width, top + rows * CELL_PX + 8 + SCALE_PX + LABEL_PX + 4, title, parts)


def memory_svg(layout: LayoutDescription) -> bytes:
    """The picture of :func:`memory_figure` as SVG bytes: the flat memory, each cell numbered by its channel.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    strip = _memory_strip(_check_drawable(layout, "memory_svg"))
    rows = strip.shape[0]
    left = 12 + _text_width(str(MEMORY_ROW * (rows - 1)))
    top = TITLE_PX + LABEL_PX
    palette = colormaps["tab10"]
    places = np.argwhere(~np.isnan(strip))
    channels = strip[~np.isnan(strip)].astype(int)
    fills = _hex_colours(palette, np.minimum(channels, palette.N - 1))  # as memory_figure: channels past 9 share the last
    parts = [
        _svg_cell(left + col * CELL_PX, top + row * CELL_PX, fill, channel, "white")
        for (row, col), channel, fill in zip(places.tolist(), channels.tolist(), fills, strict=True)
    ]
    parts += [svg_text(left + (col + 0.5) * CELL_PX, TITLE_PX + LABEL_PX / 2, str(col), size=9) for col in range(MEMORY_ROW)]
    parts += [svg_text(left - 6, top + (row + 0.5) * CELL_PX, str(MEMORY_ROW * row), anchor="end", size=9)
              for row in range(rows)]
    parts.append(svg_text(4, TITLE_PX / 2, MEMORY_TITLE, anchor="start"))
    width = max(left + MEMORY_ROW * CELL_PX, 8 + _text_width(MEMORY_TITLE)) + 6
    return svg_document(width, top + rows * CELL_PX + 6, MEMORY_TITLE, parts)


# ---------------------------------------------------------------- the widget

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
        _is_size(size) and 1 <= size <= SLIDER_MAX[letter] for letter, size in zip(letters, shape, strict=False)
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

    def __init__(
        self, shape: tuple[int, ...] = (2, 3, 2, 2), memory_format: FormatLike = "channels_last", method: str = "to"
    ) -> None:
        shape, memory_format = _check_arguments(shape, memory_format, method)
        five_d = len(shape) == 5
        n, c, *spatial = shape
        h, w = spatial[-2:]
        depth = spatial[0] if five_d else 2
        self.n, self.c, self.h, self.w = (
            _slider(letter, size, SLIDER_MAX[letter]) for letter, size in zip("NCHW", (n, c, h, w), strict=True)
        )
        self.d = _slider("D", depth, SLIDER_MAX["D"])
        self.five_d = widgets.Checkbox(value=five_d, description="5-D (add D)")
        self.format = widgets.Dropdown(options=list(FORMATS), value=memory_format, description="format")
        self.method = widgets.Dropdown(options=list(CONVERSION_METHODS), value=method, description="method")
        self.strides = widgets.HTML()
        self.strides.add_class("labkit-strides")
        self.description = widgets.HTML()
        self.layout_image = widgets.Image(format="svg+xml")
        self.memory_image = widgets.Image(format="svg+xml")
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
        show_picture(self.layout_image, layout_svg(self.layout_description))
        show_picture(self.memory_image, memory_svg(self.layout_description))
