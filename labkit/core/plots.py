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

Why every picture carries its own colours for a light and a dark page: labkit's pictures reach the
page as an ``<img>`` (:func:`picture_html`: in a widget, in a cell's output, on the docs site), and an
image is a document of its own that inherits neither the page's text colour nor its CSS. So an SVG
takes its ink and card from its own ``prefers-color-scheme`` rule, which browsers answer inside an
image with the ``color-scheme`` of the ``<img>`` element: the docs site sets it in dark mode, and
:data:`THEME_STYLE` sets it from JupyterLab's theme (JupyterLab's dark theme does not). Drawn inline
instead, an SVG follows the page's ``currentColor``. Data colours keep a relative luminance inside
:data:`DATA_LUMINANCE`, at least 3:1 against every background of :data:`PAGE_BACKGROUNDS` (WCAG's
contrast for graphics), so a bar or a cell reads on either page without knowing which. A PNG cannot
change once drawn: it is an opaque white card with rounded corners (:data:`CARD_RADIUS_PX`), black on
white inside whatever the page, a deliberate card on a dark page rather than a white rectangle. Text
on a transparent PNG would need one colour at 4.5:1 against white and near-black at once, and no grey
has that. Every picture carries a text alternative (:class:`Picture`, :func:`picture_html`).
"""
from __future__ import annotations

import base64
import functools
import html
import io
import math
import warnings
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text
from matplotlib.textpath import TextToPath
from PIL import Image as PILImage
from PIL import ImageDraw

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.fonts import cjk_font, families, figure_texts, glyphs_accounted_for, is_wide, use_fallback_fonts
from labkit.core.tables import Table
from labkit.i18n.messages import N_, _

#: CSS pixels per figure inch: the size a figure is shown at.
SCREEN_DPI = 90
#: Image pixels per CSS pixel: 2 is sharp on a HiDPI screen and scales down cleanly on any other.
PIXEL_RATIO = 2

# ---------------------------------------------------------------- colours that read on a light and on a dark page

#: The backgrounds a picture may sit on, by where: a light page, JupyterLab's dark theme (``--jp-layout-color0``
#: around outputs, ``--jp-layout-color1`` of a cell), the docs site's dark mode (pydata-sphinx-theme's background).
PAGE_BACKGROUNDS = {
    "light page": "#ffffff",
    "JupyterLab dark": "#111111",
    "JupyterLab dark cell": "#212121",
    "docs site dark": "#14181e",
}
#: Text and axes of an SVG picture, and the card behind them, for each colour scheme.
SVG_INK = {"light": "#1f1f1f", "dark": "#e6e6e6"}
SVG_CARD = {"light": "#ffffff", "dark": "#1b1b1b"}
#: Relative luminance every data colour (bar, curve, cell) keeps: 3:1 or more against each of PAGE_BACKGROUNDS and
#: SVG_CARD (WCAG 1.4.11 for graphics), and black or white text on it reaches 4.5:1 (:func:`ink_on`).
DATA_LUMINANCE = (0.15, 0.28)
#: WCAG's contrast for graphics and for text.
GRAPHIC_CONTRAST, TEXT_CONTRAST = 3.0, 4.5

_LUMA = np.array([0.2126, 0.7152, 0.0722])


def _linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _srgb(linear: np.ndarray) -> np.ndarray:
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * np.maximum(linear, 0) ** (1 / 2.4) - 0.055)


def relative_luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a colour (``"#1f77b4"``, ``"white"``): 0 for black, 1 for white."""
    return float(_linear(np.array(to_rgb(colour))) @ _LUMA)


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2's contrast ratio of two colours, 1 (none) to 21 (black on white)."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


#: The luminance at which black and white text contrast equally with a fill: (L + 0.05)^2 = 1.05 * 0.05.
_INK_SWITCH = math.sqrt(1.05 * 0.05) - 0.05


def ink_on(fill: str) -> str:
    """Black or white, whichever contrasts more with ``fill``: the colour of a number written on it."""
    return "#000000" if relative_luminance(fill) > _INK_SWITCH else "#ffffff"


#: sRGB (linear) -> LMS -> OKLab, Björn Ottosson's matrices: OKLab's lightness and hue match what the eye sees.
_TO_LMS = np.array([[0.4122214708, 0.5363325363, 0.0514459929], [0.2119034982, 0.6806995451, 0.1073969566],
                    [0.0883024619, 0.2817188376, 0.6299787005]])
_TO_OKLAB = np.array([[0.2104542553, 0.7936177850, -0.0040720468], [1.9779984951, -2.4285922050, 0.4505937099],
                      [0.0259040371, 0.7827717662, -0.8086757660]])
_FROM_LMS, _FROM_OKLAB = np.linalg.inv(_TO_LMS), np.linalg.inv(_TO_OKLAB)
_BISECTIONS = 30


def _in_gamut(lightness: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Linear sRGB of OKLab (lightness, a, b) with its chroma scaled down as little as keeps it displayable."""
    low, high = np.zeros_like(lightness), np.ones_like(lightness)
    for _step in range(_BISECTIONS):
        scale = (low + high) / 2
        linear = (np.stack([lightness, a * scale, b * scale], axis=1) @ _FROM_OKLAB.T) ** 3 @ _FROM_LMS.T
        fits = np.all((linear >= -1e-7) & (linear <= 1 + 1e-7), axis=1)
        low, high = np.where(fits, scale, low), np.where(fits, high, scale)
    return np.clip((np.stack([lightness, a * low, b * low], axis=1) @ _FROM_OKLAB.T) ** 3 @ _FROM_LMS.T, 0, 1)


def with_luminance(colours: np.ndarray, luminance: np.ndarray | float) -> list[str]:
    """Each sRGB colour (rows of ``colours``, 0..1) at the relative luminance asked for, its OKLab hue kept: hex.

    Why OKLab: mixing a dark purple with white to lighten it turns it grey; moving its OKLab lightness
    keeps it purple, with as much of its chroma as the screen can show.
    """
    lab = np.cbrt(_linear(np.asarray(colours, dtype=float)[:, :3]) @ _TO_LMS.T) @ _TO_OKLAB.T
    target = np.broadcast_to(np.asarray(luminance, dtype=float), lab.shape[:1])
    low, high = np.zeros_like(target), np.ones_like(target)
    for _step in range(_BISECTIONS):  # luminance grows with OKLab lightness: halve the interval around the target
        middle = (low + high) / 2
        darker = _in_gamut(middle, lab[:, 1], lab[:, 2]) @ _LUMA > target
        low, high = np.where(darker, low, middle), np.where(darker, middle, high)
    return [to_hex(colour) for colour in np.clip(_srgb(_in_gamut((low + high) / 2, lab[:, 1], lab[:, 2])), 0, 1)]


@dataclass(frozen=True)
class Palette:
    """Data colours legible on a light and a dark page, each with the ink its number is written in."""

    fills: tuple[str, ...]
    inks: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.fills)

    def at(self, fractions: np.ndarray) -> tuple[list[str], list[str]]:
        """Fills and inks at ``fractions`` (0 is the first colour, 1 the last), one lookup for all."""
        indices = np.rint(np.clip(np.asarray(fractions, dtype=float), 0, 1) * (len(self.fills) - 1)).astype(int)
        return [self.fills[i] for i in indices.tolist()], [self.inks[i] for i in indices.tolist()]


def _palette(fills: list[str]) -> Palette:
    return Palette(tuple(fills), tuple(ink_on(fill) for fill in fills))


@functools.cache
def sequential_palette(colormap: str = "viridis", steps: int = 256) -> Palette:
    """``colormap``'s hues in order, with luminance rising evenly across :data:`DATA_LUMINANCE`.

    Why not the colormap itself: viridis runs from near-black to near-white, so one end vanishes
    on a dark page and the other on a light one; here order shows in hue and, within the band, lightness.
    """
    low, high = DATA_LUMINANCE
    return _palette(with_luminance(colormaps[colormap](np.linspace(0, 1, steps)), np.linspace(low, high, steps)))


def categorical_palette(colours: Sequence[str]) -> Palette:
    """``colours`` (e.g. matplotlib's tab10) each brought into :data:`DATA_LUMINANCE`, hue kept, moved no more than needed."""
    rgb = np.array([to_rgb(colour) for colour in colours])
    current = _linear(rgb) @ _LUMA
    return _palette(with_luminance(rgb, np.clip(current, *DATA_LUMINANCE)))


#: matplotlib's ten categorical colours (tab10), each moved into DATA_LUMINANCE.
TAB10 = categorical_palette([to_hex(colour) for colour in colormaps["tab10"](range(10))])

# ---------------------------------------------------------------- matplotlib figures as PNG cards

#: Corner radius of a PNG picture's card, in CSS pixels.
CARD_RADIUS_PX = 8


def new_figure(width: float = 6.0, height: float = 3.5) -> Figure:
    """A pyplot-free figure with constrained layout, on the white card every PNG picture has."""
    return Figure(figsize=(width, height), layout="constrained", facecolor="white")


@functools.lru_cache(maxsize=16)
def _card_mask(size: tuple[int, int], radius: int) -> PILImage.Image:
    """Opaque inside a rounded rectangle of ``size``, transparent in its corners."""
    mask = PILImage.new("L", size, 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, size[0] - 1, size[1] - 1), radius=radius, fill=255)
    return mask


def _card_png(pixels: PILImage.Image, dpi: float) -> bytes:
    """``pixels`` as PNG with the card's rounded corners cut out; no metadata, the same bytes every time."""
    card = pixels.convert("RGBA")
    card.putalpha(_card_mask(card.size, round(CARD_RADIUS_PX * dpi / SCREEN_DPI)))
    buffer = io.BytesIO()
    card.save(buffer, format="png")
    return buffer.getvalue()


def to_png(figure: Figure, dpi: int = SCREEN_DPI) -> bytes:
    """Render a figure to PNG bytes: an opaque card with rounded corners (see the module's docstring).

    Why ``savefig`` writes raw RGBA here, not PNG: the card is encoded as PNG anyway, and encoding
    matplotlib's PNG only to decode it again cost a third of a chart's time (the same pixels either way:
    Agg's PNG is its RGBA buffer, which the raw format writes as it is). The card is always the whole
    figure, whatever the user's ``savefig.bbox``: :func:`figure_image` shows it at the figure's size.
    """
    buffer = io.BytesIO()
    use_fallback_fonts(figure)
    with glyphs_accounted_for(figure_texts(figure)), rc_context({"savefig.bbox": "standard"}):
        figure.savefig(buffer, format="rgba", dpi=dpi)
    # Agg's canvas is the figure's size at this dpi, each side truncated to whole pixels, as matplotlib sizes it
    width, height = (int(side * dpi) for side in figure.get_size_inches())
    pixels = np.frombuffer(buffer.getbuffer(), dtype=np.uint8).reshape(height, width, 4)  # raises if not that size
    return _card_png(PILImage.fromarray(pixels), dpi)


def css_size(figure: Figure) -> tuple[int, int]:
    """Width and height in CSS pixels that ``figure`` is shown at (its inches times :data:`SCREEN_DPI`)."""
    width, height = figure.get_size_inches()
    return round(width * SCREEN_DPI), round(height * SCREEN_DPI)


# ---------------------------------------------------------------- pictures with their text alternative

#: Where JupyterLab tells its theme (``data-jp-theme-light`` on ``<body>``), give labkit's pictures the matching
#: ``color-scheme``: JupyterLab's dark theme does not set one, and without it an SVG inside an ``<img>`` would
#: follow the operating system's setting instead. Elsewhere (the docs site) the page's own ``color-scheme`` applies.
THEME_STYLE = (
    '<style>body[data-jp-theme-light="true"] img.labkit-picture{color-scheme:light}'
    'body[data-jp-theme-light="false"] img.labkit-picture{color-scheme:dark}</style>'
)
#: The label of the fold under a picture that holds its numbers as a table, and what its alt text then adds.
NUMBERS_SUMMARY = N_("The numbers in this picture, as a table")
NUMBERS_NOTE = " Its numbers are in the table under it."


def _mime_type(picture: bytes) -> str:
    if picture.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if picture.lstrip().startswith(b"<svg"):
        return "image/svg+xml"
    raise LabkitValueError(f"a picture must be PNG or SVG bytes, got bytes starting {picture[:12]!r}.")


def _require_alt(alt: object) -> str:
    if not isinstance(alt, str):
        raise LabkitTypeError(f"alt must be a string (the picture's text alternative), got {type(alt).__name__}.")
    if not alt.strip():
        raise LabkitValueError(
            "a picture needs a text alternative: pass alt='...' saying what it shows (with its numbers, or "
            "where a table holds them), so a screen reader can read it."
        )
    return alt


def picture_html(picture: bytes, alt: str, width_px: float | None = None, numbers: Table | None = None) -> str:
    """HTML that shows ``picture`` (PNG or SVG bytes) as an ``<img>`` with ``alt``, and ``numbers`` folded under it.

    Why an ``<img>`` with a data URL: it carries alt text (ipywidgets' Image widget has none), it is
    stored with the notebook and shown by the docs site, and it keeps its aspect ratio (``max-width``
    shrinks it on a narrow page, ``height: auto`` follows). A PNG drawn at :data:`PIXEL_RATIO` times its
    pixels needs ``width_px``, its CSS width; an SVG carries its own size. ``numbers``, a table of what
    the picture shows, sits in a ``<details>`` fold that a keyboard opens (Enter) and a screen reader reads;
    the alt text then says so (:data:`NUMBERS_NOTE`).
    """
    mime, alt = _mime_type(picture), _require_alt(alt) + ("" if numbers is None else NUMBERS_NOTE)
    width = "" if width_px is None else f' width="{round(width_px)}"'
    source = f"data:{mime};base64,{base64.b64encode(picture).decode()}"
    image = (f'<img class="labkit-picture" src="{source}" alt="{html.escape(alt)}"{width} '
             'style="display:block;max-width:100%;height:auto">')
    fold = "" if numbers is None else (
        f'<details class="labkit-picture-numbers"><summary>{html.escape(_(NUMBERS_SUMMARY))}</summary>'
        f'{numbers.to_html()}</details>'
    )
    return (THEME_STYLE if mime == "image/svg+xml" else "") + image + fold


@dataclass(frozen=True, repr=False)
class Picture:
    """A picture for a notebook cell, with its text alternative: shows as :func:`picture_html`, prints as its alt text.

    Why not ``IPython.display.Image`` or ``SVG``: JupyterLab draws both as an ``<img>`` without alt
    text, and an SVG output would follow the operating system's colour scheme, not JupyterLab's theme.
    """

    data: bytes
    alt: str
    width: float | None = None
    numbers: Table | None = None

    def __post_init__(self) -> None:
        _mime_type(self.data)
        _require_alt(self.alt)

    def _repr_html_(self) -> str:
        return picture_html(self.data, self.alt, self.width, self.numbers)

    def __repr__(self) -> str:
        return f"[picture] {self.alt}"


def figure_image(figure: Figure, alt: str | None = None) -> Picture:
    """A notebook cell's picture of ``figure``: PNG at :data:`PIXEL_RATIO` times the pixels, shown at its CSS size.

    ``IPython.display.Image(to_png(figure))`` shows one image pixel per CSS pixel, which looks blurry on
    a HiDPI screen; this keeps the size and doubles the detail. Only the width is fixed, so the
    aspect ratio holds when a narrow page shrinks it. ``alt`` is its text alternative; without it the
    figure's label (``figure.set_label``, which labkit's figures set) is used.
    """
    text = figure.get_label() if alt is None else alt
    return Picture(to_png(figure, dpi=SCREEN_DPI * PIXEL_RATIO), _require_alt(text), css_size(figure)[0])


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
        use_fallback_fonts(figure)
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
        full = self._background is None or background_key != self._background_key
        if full:
            use_fallback_fonts(self.figure)  # a text added since (a new title) gets the fonts too
        # A blit redraws only the changing artists: only their texts are looked at, not the whole figure's.
        texts = figure_texts(self.figure) if full else [a.get_text() for a in self.changing if isinstance(a, Text)]
        with glyphs_accounted_for(texts):
            if full:
                self.canvas.draw()  # lays the figure out and draws all but the changing artists
                self._background, self._background_key = self.canvas.copy_from_bbox(self.figure.bbox), background_key
                self.full_draws += 1
            else:
                self.canvas.restore_region(self._background)
            for artist in self.changing:
                self.figure.draw_artist(artist)
        pixels = PILImage.frombuffer("RGBA", self.canvas.get_width_height(), self.canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        return _card_png(pixels, self.figure.dpi)


# ---------------------------------------------------------------- SVG pictures drawn by hand

#: The font of labkit's SVG pictures; its metrics (matplotlib's bundled DejaVu Sans) size every label.
SVG_FONT_FAMILY = "DejaVu Sans, Verdana, sans-serif"
SVG_FONT_PX = 11
_TEXT_PATHS = TextToPath()
#: Inside an ``<img>`` the SVG is the root (``:root``) and picks ink and card by colour scheme; drawn inline in a
#: page, ``:root`` is the page's, these rules match nothing and the picture follows the page's ``currentColor``.
SVG_STYLE = (
    "<style>svg.labkit-svg:root{{color:{light_ink}}}svg.labkit-svg:root .labkit-card{{fill:{light_card}}}"
    "@media (prefers-color-scheme: dark){{svg.labkit-svg:root{{color:{dark_ink}}}"
    "svg.labkit-svg:root .labkit-card{{fill:{dark_card}}}}}</style>"
).format(light_ink=SVG_INK["light"], light_card=SVG_CARD["light"], dark_ink=SVG_INK["dark"], dark_card=SVG_CARD["dark"])
#: What an SVG picture draws text, axes and lines in: the scheme's ink of SVG_STYLE (or the page's text colour).
INK = "currentColor"


def text_width(text: str, size: float = SVG_FONT_PX) -> float:
    """Width in pixels of ``text`` in DejaVu Sans at ``size`` px, plus 10% for a browser's fallback font.

    Measured with matplotlib's font metrics rather than guessed per character, so a label is
    never cut, however wide its letters: Chinese in the installed Chinese font, or one em per
    character where there is none (the browser draws it in its own).
    """
    narrow = text if cjk_font() else "".join(character for character in text if not is_wide(character))
    with warnings.catch_warnings():  # a glyph DejaVu Sans lacks: counted below, not warned about
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        width, _height, _descent = _TEXT_PATHS.get_text_width_height_descent(
            narrow, FontProperties(family=families(), size=size), ismath=False
        )
    return (width + size * (len(text) - len(narrow))) * 1.1


def svg_text(x: float, y: float, text: str, anchor: str = "middle", colour: str = INK, size: float = SVG_FONT_PX,
             weight: str = "normal") -> str:
    """Text centred vertically on ``y``; ``anchor`` is where ``x`` sits: start, middle or end of the text."""
    bold = ' font-weight="bold"' if weight == "bold" else ""
    return (f'<text x="{x:g}" y="{y:g}" text-anchor="{anchor}" dominant-baseline="central" fill="{colour}" '
            f'font-size="{size:g}"{bold}>{html.escape(text)}</text>')


def svg_document(width: float, height: float, title: str, parts: list[str]) -> bytes:
    """A standalone SVG: sized (an ``<img>`` gets its natural size), on a card, its colours by scheme (SVG_STYLE).

    The ``<title>`` and ``aria-label`` name it where it is drawn inline; in an ``<img>`` the alt text does.
    """
    name = html.escape(title)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="labkit-svg" width="{width:g}" height="{height:g}" '
            f'viewBox="0 0 {width:g} {height:g}" role="img" aria-label="{name}" '
            f'font-family="{SVG_FONT_FAMILY}" font-size="{SVG_FONT_PX}">')
    card = '<rect class="labkit-card" width="100%" height="100%" rx="6" fill="none"/>'
    return "\n".join([head, f"<title>{name}</title>", SVG_STYLE, card, *parts, "</svg>"]).encode()
