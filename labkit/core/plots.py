"""Matplotlib figures and SVG pictures, built without pyplot: the one place every lab's figures start from.

Why no pyplot: pyplot keeps global state and, under the inline backend, shows
every figure it creates. Widgets need bytes they control, and notebooks
need exactly one image per cell, so we build ``matplotlib.figure.Figure``
objects directly and turn them into PNG bytes (PNG, not matplotlib's SVG, in
notebook outputs: nbval skips PNG, and matplotlib's SVG carries random ids).

Why two sizes: a picture is shown at its *CSS size* (figure inches times
:data:`SCREEN_DPI`) but rendered with :data:`PIXEL_RATIO` times as many pixels, so it
stays sharp on a HiDPI screen and when the reader zooms. :func:`figure_image` does this
for a notebook cell, :class:`LiveFigure` for a widget that redraws, and the SVG helpers
(:func:`svg_document`, :func:`svg_text`, :func:`text_width`) draw simple charts as
vector pictures, sharp at any zoom.
"""
from __future__ import annotations

import html
import io
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath
from PIL import Image as PILImage

if TYPE_CHECKING:
    from IPython.display import Image

#: CSS pixels per figure inch: the size a figure is shown at.
SCREEN_DPI = 90
#: Image pixels per CSS pixel: 2 is sharp on a HiDPI screen and scales down cleanly on any other.
PIXEL_RATIO = 2


def new_figure(width: float = 6.0, height: float = 3.5) -> Figure:
    """A pyplot-free figure with constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def to_png(figure: Figure, dpi: int = SCREEN_DPI) -> bytes:
    """Render a figure to PNG bytes (for ``ipywidgets.Image`` or ``IPython.display.Image``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def css_size(figure: Figure) -> tuple[int, int]:
    """Width and height in CSS pixels that ``figure`` is shown at (its inches times :data:`SCREEN_DPI`)."""
    width, height = figure.get_size_inches()
    return round(width * SCREEN_DPI), round(height * SCREEN_DPI)


def figure_image(figure: Figure) -> Image:
    """A notebook cell's picture of ``figure``: PNG at :data:`PIXEL_RATIO` times the pixels, shown at its CSS size.

    ``IPython.display.Image(to_png(figure))`` shows one image pixel per CSS pixel, which looks blurry on
    a HiDPI screen; this keeps the size and doubles the detail. Only the width is fixed, so the
    aspect ratio holds when a narrow page shrinks it.
    """
    from IPython.display import Image

    return Image(to_png(figure, dpi=SCREEN_DPI * PIXEL_RATIO), width=css_size(figure)[0])


def _png_of_canvas(canvas: FigureCanvasAgg) -> bytes:
    """The canvas's pixels as PNG: RGB (the figures are opaque), no metadata, the same bytes every time."""
    buffer = io.BytesIO()
    pixels = PILImage.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    pixels.convert("RGB").save(buffer, format="png")
    return buffer.getvalue()


class LiveFigure:
    """A figure a widget redraws often: the unchanging part is drawn once, only the changing artists each time.

    Why: building and laying out a figure took 150-500 ms, nearly all of it ticks, labels and
    layout that do not change when a slider moves. This keeps the pixels of everything except
    ``changing`` (Agg blitting), and :meth:`png` paints the changing artists over them. Pass a
    ``background_key`` that changes whenever the unchanging part does (new axis limits, a new
    legend): the figure is then laid out and drawn in full once more.
    """

    def __init__(self, figure: Figure, changing: Iterable[Artist]) -> None:
        figure.set_dpi(SCREEN_DPI * PIXEL_RATIO)
        self.figure = figure
        self.canvas = FigureCanvasAgg(figure)
        self.changing = list(changing)
        for artist in self.changing:
            artist.set_animated(True)  # left out of full draws: painted by png() only
        self._background: object = None
        self._background_key: Hashable = None
        self.full_draws = 0

    @property
    def css_size(self) -> tuple[int, int]:
        """The CSS size to show the PNG at (it has :data:`PIXEL_RATIO` times as many pixels)."""
        return css_size(self.figure)

    def png(self, background_key: Hashable = None) -> bytes:
        """PNG bytes of the figure as it is now; a full draw only the first time or when ``background_key`` changed."""
        if self._background is None or background_key != self._background_key:
            self.canvas.draw()  # lays the figure out and draws all but the changing artists
            self._background, self._background_key = self.canvas.copy_from_bbox(self.figure.bbox), background_key
            self.full_draws += 1
        else:
            self.canvas.restore_region(self._background)
        for artist in self.changing:
            self.figure.draw_artist(artist)
        return _png_of_canvas(self.canvas)


# ---------------------------------------------------------------- SVG pictures drawn by hand

#: The font of labkit's SVG pictures; its metrics (matplotlib's bundled DejaVu Sans) size every label.
SVG_FONT_FAMILY = "DejaVu Sans, Verdana, sans-serif"
SVG_FONT_PX = 11
_TEXT_PATHS = TextToPath()


def text_width(text: str, size: float = SVG_FONT_PX) -> float:
    """Width in pixels of ``text`` in DejaVu Sans at ``size`` px, plus 10% for a browser's fallback font.

    Measured with matplotlib's font metrics rather than guessed per character, so a label is
    never cut, however wide its letters.
    """
    width, _height, _descent = _TEXT_PATHS.get_text_width_height_descent(
        text, FontProperties(family="DejaVu Sans", size=size), ismath=False
    )
    return width * 1.1


def svg_text(x: float, y: float, text: str, anchor: str = "middle", colour: str = "black", size: float = SVG_FONT_PX,
             weight: str = "normal") -> str:
    """Text centred vertically on ``y``; ``anchor`` is where ``x`` sits: start, middle or end of the text."""
    bold = ' font-weight="bold"' if weight == "bold" else ""
    return (f'<text x="{x:g}" y="{y:g}" text-anchor="{anchor}" dominant-baseline="central" fill="{colour}" '
            f'font-size="{size:g}"{bold}>{html.escape(text)}</text>')


def svg_document(width: float, height: float, title: str, parts: list[str]) -> bytes:
    """A standalone SVG: sized, so an ``<img>`` has a natural size, with a ``<title>`` for screen readers."""
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
            f'viewBox="0 0 {width:g} {height:g}" font-family="{SVG_FONT_FAMILY}" font-size="{SVG_FONT_PX}">')
    background = '<rect width="100%" height="100%" fill="white"/>'
    return "\n".join([head, f"<title>{html.escape(title)}</title>", background, *parts, "</svg>"]).encode()
