"""The fonts labkit's pictures draw text in: DejaVu Sans, then an installed font that has Chinese glyphs.

Why: matplotlib draws every label in DejaVu Sans, which has Latin and Cyrillic but no Chinese, so a zh learner's
picture showed boxes and her notebook filled with "Glyph ... missing from font" warnings. matplotlib (3.6+)
falls back glyph by glyph along a list of families, so labkit gives each of its own figures' texts that list
(never the user's ``rcParams``). Where no such font is installed, one labkit warning says what to install,
instead of a warning per glyph.
"""
from __future__ import annotations

import functools
import unicodedata
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib import font_manager, rcParams
from matplotlib.figure import Figure
from matplotlib.text import Text

from labkit.i18n.messages import _


class MissingFontWarning(UserWarning):
    """No installed font draws some of a picture's text (Chinese, here): its labels show as boxes."""


BASE_FONT = "DejaVu Sans"  # matplotlib's own: every labkit picture is measured and drawn in it first
#: Families with Chinese glyphs, in the order tried: Linux (Noto, Source Han, WenQuanYi), Windows, macOS.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB", "Heiti SC", "Arial Unicode MS")


@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The first of :data:`CJK_FONTS` matplotlib knows on this machine, else None."""
    installed = {font.name for font in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def families() -> list[str]:
    """The font list of labkit's pictures: DejaVu Sans, then the Chinese font when there is one."""
    return [BASE_FONT, *([font] if (font := cjk_font()) else [])]


def is_wide(character: str) -> bool:
    """True for a character a terminal or font draws two columns wide (Chinese, Japanese, Korean, full-width)."""
    return unicodedata.east_asian_width(character) in ("W", "F")


def use_fallback_fonts(figure: Figure) -> None:
    """Give each text of ``figure`` left in the default family the list of :func:`families` (the figure only)."""
    default = list(rcParams["font.family"])
    chosen = families()
    for text in figure.findobj(Text):
        if list(text.get_fontfamily()) == default:
            text.set_fontfamily(chosen)


@contextmanager
def glyphs_accounted_for(texts: Iterator[str] | list[str]) -> Iterator[None]:
    """Draw or measure ``texts`` without matplotlib's per-glyph warnings; one labkit warning if Chinese has no font.

    The warning filter is the standard library's ``catch_warnings``: the caller's filters are as they were after.
    """
    if cjk_font() is None and any(is_wide(character) for text in texts for character in text):
        warnings.warn(_("No font on this machine draws Chinese, so this picture's labels show as boxes (its text "
                        "version says the same). Install one, e.g. sudo apt install fonts-noto-cjk, then restart the "
                        "kernel; if the boxes stay, delete matplotlib's font cache (matplotlib.get_cachedir())."),
                      MissingFontWarning, stacklevel=3)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        yield


def figure_texts(figure: Figure) -> list[str]:
    """Every string ``figure`` draws."""
    return [text.get_text() for text in figure.findobj(Text)]
