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
the SVG takes a few milliseconds and the browser draws it. The widget shows them as
``<img>`` with alt text (:class:`labkit.core.widgets.PictureView`), which the notebook's stored
widget state carries, so the static docs still show the grid; a notebook cell shows them with
:func:`layout_picture` and :func:`memory_picture`. Each picture's numbers are also a table
(:func:`layout_numbers`, :func:`memory_numbers`) folded under it, for a screen reader.

Colours read on a light and a dark page (:mod:`labkit.core.plots`): offsets in viridis's hues with
luminance kept inside :data:`~labkit.core.plots.DATA_LUMINANCE`, channels in tab10's, each number in
black or white, whichever contrasts more with its cell.
"""
from __future__ import annotations

import html
import numbers

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.plots import TAB10, Palette, Picture, new_figure, sequential_palette, svg_document, svg_text
from labkit.core.tables import Table
from labkit.core.widgets import PictureView, show_picture
from labkit.i18n.messages import N_, _
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


Elements = list[tuple[int, ...]]  # each element's logical index, in memory order (elements_in_memory_order)


def _memory_strip(elements: Elements) -> np.ndarray:
    """Each element's channel, in memory order, folded into rows of MEMORY_ROW (NaN after the last element)."""
    channels = [index[1] for index in elements]
    strip = np.full((-(-len(channels) // MEMORY_ROW), MEMORY_ROW), np.nan)
    strip.flat[: len(channels)] = channels
    return strip


LAYOUT_TITLE = N_("logical layout, number = offset in memory")
MEMORY_TITLE = N_("flat memory, offset 0 top left; colour and number = channel c")


def offset_palette() -> Palette:
    """The colours of memory offsets, 0 first: viridis's hues, legible on a light and a dark page."""
    return sequential_palette("viridis")


def _colormap(palette: Palette) -> ListedColormap:
    return ListedColormap(list(palette.fills))


def _offset_fractions(offsets: np.ndarray, numel: int) -> np.ndarray:
    return offsets / max(numel - 1, 1)


def _channel_fractions(channels: np.ndarray) -> np.ndarray:
    """Where each channel's colour sits in TAB10 (channels past 9 share the last colour)."""
    return np.minimum(channels, len(TAB10) - 1) / (len(TAB10) - 1)


def layout_figure(layout: LayoutDescription, title: str = "") -> Figure:
    """Each element at its logical place, labelled and coloured by its memory offset.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    layout = _check_drawable(layout, "layout_figure")
    numel = layout.numel
    grid, column_labels, row_labels = _block_grid(layout)
    figure = new_figure(max(4.2, 0.42 * grid.shape[1] + 1.6), max(1.8, 0.42 * grid.shape[0] + 0.9))
    figure.set_label(layout_alt(layout, title))
    axes = figure.add_subplot()
    palette = offset_palette()
    image = axes.imshow(grid, cmap=_colormap(palette), vmin=0, vmax=max(numel - 1, 1))
    for (row, col), value in np.ndenumerate(grid):
        if not np.isnan(value):
            ink = palette.at(_offset_fractions(np.array([value]), numel))[1][0]
            axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=8, color=ink)
    for x, label in column_labels:
        axes.text(x, -0.9, label, ha="center", va="center", fontsize=8)
    for y, label in row_labels:
        axes.text(-0.9, y, label, ha="right", va="center", fontsize=8)
    axes.set_xlim(-1.5, grid.shape[1] - 0.5)
    axes.set_ylim(grid.shape[0] - 0.5, -1.5)
    axes.set_axis_off()
    figure.colorbar(image, ax=axes, shrink=0.8, label=_("offset in memory"))
    axes.set_title(title or _(LAYOUT_TITLE), fontsize=9)
    return figure


def memory_figure(layout: LayoutDescription) -> Figure:
    """The flat memory, in order, each cell coloured and numbered by its element's channel.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    strip = _memory_strip(_check_drawable(layout, "memory_figure").elements_in_memory_order())
    rows = strip.shape[0]
    figure = new_figure(0.42 * MEMORY_ROW + 0.6, 0.42 * rows + 0.8)
    figure.set_label(memory_alt(layout))
    axes = figure.add_subplot()
    axes.imshow(strip, cmap=_colormap(TAB10), vmin=0, vmax=len(TAB10) - 1)
    for (row, col), value in np.ndenumerate(strip):
        if not np.isnan(value):
            ink = TAB10.at(_channel_fractions(np.array([value])))[1][0]
            axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=8, color=ink)
    axes.set_xticks(range(MEMORY_ROW))
    axes.set_yticks(range(rows), [f"{MEMORY_ROW * r}" for r in range(rows)])
    axes.tick_params(labelsize=7, length=0)
    axes.set_title(_(MEMORY_TITLE), fontsize=9)
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


def _offset_scale(x: float, y: float, width: float, top_value: int) -> list[str]:
    """A horizontal bar of the offset colours from 0 to ``top_value``, labelled at both ends: the colorbar of the PNG."""
    fractions = np.linspace(0, 1, SCALE_STOPS)
    stops = [f'<stop offset="{fraction:g}" stop-color="{colour}"/>'
             for fraction, colour in zip(fractions, offset_palette().at(fractions)[0], strict=True)]
    label_y = y + SCALE_PX + LABEL_PX / 2
    return [
        '<defs><linearGradient id="offset-scale">', *stops, "</linearGradient></defs>",
        f'<rect x="{x:g}" y="{y:g}" width="{width:g}" height="{SCALE_PX}" fill="url(#offset-scale)"/>',
        svg_text(x, label_y, "0", anchor="start"),
        svg_text(x + width / 2, label_y, _("offset in memory")),
        svg_text(x + width, label_y, str(top_value), anchor="end"),
    ]


def layout_svg(layout: LayoutDescription, title: str = "") -> bytes:
    """The picture of :func:`layout_figure` as SVG bytes: the same cells, numbers, colours and labels.

    ``layout`` is ``describe(x)`` of a small 4-D or 5-D tensor ``x``.
    """
    layout = _check_drawable(layout, "layout_svg")
    title = title or _(LAYOUT_TITLE)
    numel = layout.numel
    grid, column_labels, row_labels = _block_grid(layout)
    rows, columns = grid.shape
    left = 12 + max(_text_width(label) for _, label in row_labels)
    top = TITLE_PX + LABEL_PX
    top_value = max(numel - 1, 1)
    places = np.argwhere(~np.isnan(grid))
    offsets = grid[~np.isnan(grid)]  # row by row, as argwhere lists the places
    fills, inks = offset_palette().at(_offset_fractions(offsets, numel))
    parts = [
        _svg_cell(left + col * CELL_PX, top + row * CELL_PX, fill, int(offset), ink)
        for (row, col), offset, fill, ink in zip(places.tolist(), offsets.tolist(), fills, inks, strict=True)
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
    return _memory_svg(_check_drawable(layout, "memory_svg").elements_in_memory_order())


def _memory_svg(elements: Elements) -> bytes:
    strip = _memory_strip(elements)
    rows = strip.shape[0]
    title = _(MEMORY_TITLE)
    left = 12 + _text_width(str(MEMORY_ROW * (rows - 1)))
    top = TITLE_PX + LABEL_PX
    places = np.argwhere(~np.isnan(strip))
    channels = strip[~np.isnan(strip)].astype(int)
    fills, inks = TAB10.at(_channel_fractions(channels))  # as memory_figure: channels past 9 share the last colour
    parts = [
        _svg_cell(left + col * CELL_PX, top + row * CELL_PX, fill, channel, ink)
        for (row, col), channel, fill, ink in zip(places.tolist(), channels.tolist(), fills, inks, strict=True)
    ]
    parts += [svg_text(left + (col + 0.5) * CELL_PX, TITLE_PX + LABEL_PX / 2, str(col), size=9) for col in range(MEMORY_ROW)]
    parts += [svg_text(left - 6, top + (row + 0.5) * CELL_PX, str(MEMORY_ROW * row), anchor="end", size=9)
              for row in range(rows)]
    parts.append(svg_text(4, TITLE_PX / 2, title, anchor="start"))
    width = max(left + MEMORY_ROW * CELL_PX, 8 + _text_width(title)) + 6
    return svg_document(width, top + rows * CELL_PX + 6, title, parts)


# ---------------------------------------------------------------- the pictures' text alternatives

def _tensor_words(layout: LayoutDescription) -> str:
    return _("a tensor of shape {shape}, format {format}, strides {strides}, memory order {order}").format(
        shape=layout.shape, format=layout.format, strides=layout.strides, order=layout.memory_order)


def layout_alt(layout: LayoutDescription, title: str = "") -> str:
    """The layout picture in words: what it draws, for which tensor, and where its numbers are."""
    layout = _check_drawable(layout, "layout_alt")
    blocks = _("n and d") if len(layout.shape) == 5 else "n"
    return _("{title}: {tensor}. Each element sits at its logical place, one block "
             "of H x W cells per channel c (left to right) and per {blocks} (top to bottom), numbered and coloured "
             "by its offset in memory.").format(title=title or _(LAYOUT_TITLE), tensor=_tensor_words(layout), blocks=blocks)


def memory_alt(layout: LayoutDescription) -> str:
    """The flat-memory picture in words, with the channels of the first memory slots."""
    return _memory_alt(layout, _check_drawable(layout, "memory_alt").elements_in_memory_order())


def _memory_alt(layout: LayoutDescription, elements: Elements) -> str:
    channels = ", ".join(str(index[1]) for index in elements[:MEMORY_ROW])
    return _("{title}: {tensor}. The first {count} memory slots hold elements of channels {channels}.").format(
        title=_(MEMORY_TITLE), tensor=_tensor_words(layout), count=MEMORY_ROW, channels=channels)


def layout_numbers(layout: LayoutDescription) -> Table:
    """The layout picture's numbers: one row per (n, c[, d], h), the offsets along w, as the picture's rows."""
    offsets = _check_drawable(layout, "layout_numbers").memory_offsets()
    index_names = list("ncdh" if offsets.dim() == 5 else "nch")
    along_w = offsets.reshape(-1, offsets.shape[-1]).tolist()  # the rows in np.ndindex's order
    rows = [[*index, *row] for index, row in zip(np.ndindex(*offsets.shape[:-1]), along_w, strict=True)]
    offset_at = _("offset at w={w}")
    return Table([*index_names, *(offset_at.format(w=w) for w in range(offsets.shape[-1]))], rows,
                 title=_("Offset in memory of every element"))


def memory_numbers(layout: LayoutDescription) -> Table:
    """The flat-memory picture's numbers: each memory slot's element (its logical index) and channel, in memory order."""
    return _memory_numbers(layout, _check_drawable(layout, "memory_numbers").elements_in_memory_order())


def _memory_numbers(layout: LayoutDescription, elements: Elements) -> Table:
    names = ", ".join(layout.dim_names.lower())
    return Table([_("offset"), _("element ({names})").format(names=names), _("channel c")],
                 [[offset, str(index), index[1]] for offset, index in enumerate(elements)],
                 title=_("What each memory slot holds, in memory order"))


def layout_picture(layout: LayoutDescription, title: str = "") -> Picture:
    """:func:`layout_svg` for a notebook cell: with its alt text and its numbers folded under it."""
    layout = _check_drawable(layout, "layout_picture")
    return Picture(layout_svg(layout, title), layout_alt(layout, title), numbers=layout_numbers(layout))


def memory_picture(layout: LayoutDescription) -> Picture:
    """:func:`memory_svg` for a notebook cell: with its alt text and its numbers folded under it."""
    layout = _check_drawable(layout, "memory_picture")
    return Picture(memory_svg(layout), memory_alt(layout), numbers=memory_numbers(layout))


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
        self.five_d = widgets.Checkbox(value=five_d, description=_("5-D (add D)"))
        self.format = widgets.Dropdown(options=list(FORMATS), value=memory_format, description=_("format"))
        self.method = widgets.Dropdown(options=list(CONVERSION_METHODS), value=method, description=_("method"))
        self.strides = widgets.HTML()
        self.strides.add_class("labkit-strides")
        self.description = widgets.HTML()
        self.layout_image = PictureView()
        self.memory_image = PictureView()
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
            self.strides.value = _("<b>strides:</b> —")
            self.description.value = f'<p class="labkit-error">⚠ {html.escape(self.error)}</p>'
            self.layout_image.clear()  # the message only: no picture, not an empty (broken) image
            self.memory_image.clear()
            return
        self.error = ""
        layout = self.layout_description = describe(self.tensor)
        self.strides.value = _("<b>strides:</b> <code>{strides}</code>").format(strides=layout.strides)
        self.description.value = layout.to_html()
        show_picture(self.layout_image, layout_svg(layout), layout_alt(layout), numbers=layout_numbers(layout))
        elements = layout.elements_in_memory_order()  # once: the flat-memory picture, its words and its table share it
        show_picture(self.memory_image, _memory_svg(elements), _memory_alt(layout, elements),
                     numbers=_memory_numbers(layout, elements))
