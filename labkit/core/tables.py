"""Rows -> text and HTML tables, for notebooks and the CLI.

Why: every result object in labkit (a profile, a layout description, a
benchmark) renders through this one module, so tables look alike everywhere and
the notebook's stored text output is stable for nbval. Rendering is tabulate's;
this module only fixes the conventions (headers, number format, a title). A wide
character (a Chinese table head: 练习 is four columns, not two) is measured as wide:
tabulate does so with wcwidth, a declared dependency for that reason.
"""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

Row = Sequence[Any]


def render_text(rows: Iterable[Row], headers: Sequence[str], *, floatfmt: str = ".4g") -> str:
    """Plain-text table (tabulate's ``simple`` format)."""
    return tabulate(list(rows), headers=list(headers), floatfmt=floatfmt, tablefmt="simple")


def render_html(rows: Iterable[Row], headers: Sequence[str], *, floatfmt: str = ".4g") -> str:
    """HTML ``<table>`` with every cell escaped."""
    rows = list(rows)
    plain = _plain_html(rows, headers)
    return tabulate(rows, headers=list(headers), floatfmt=floatfmt, tablefmt="html") if plain is None else plain


def _is_plain_text(value: object) -> bool:
    """One line of printable ASCII, trimmed, that tabulate cannot read as a number, a bool or a missing value."""
    if not (type(value) is str and value and value.isascii() and value.isprintable() and value == value.strip()):
        return False
    if value in ("True", "False"):
        return False
    try:
        float(value.replace(",", ""))  # everything tabulate reads as a number (and more) parses so
    except ValueError:
        return True
    return False


def _plain_html(rows: list[Row], headers: Sequence[str]) -> str | None:
    """tabulate's HTML for a table of whole numbers and plain text only, built without tabulate; None for any other.

    Why: tabulate guesses every cell's type and measures its width in Python, about 10 µs a cell, so the
    StrideExplorer's two number tables (1,300 cells) took most of a slider step. Here each column is whole
    numbers (``int``, right-aligned) or plain text (left-aligned), widths are ``len``, and the markup is
    tabulate's ``html`` format byte for byte (``tests/core/test_tables.py`` compares the two); anything else,
    floats, wide characters, numbers written as text, goes to tabulate.
    """
    width = len(headers)
    if not rows or not all(_is_plain_text(header) for header in headers):
        return None
    if not all(len(row) == width for row in rows):
        return None
    columns = list(zip(*rows, strict=True))
    numeric = [all(type(value) is int for value in column) for column in columns]  # a bool is no int here
    if not all(is_number or all(map(_is_plain_text, column)) for is_number, column in zip(numeric, columns, strict=True)):
        return None
    texts = [[str(value) for value in column] for column in columns]
    widths = [max(len(header) + _MIN_PADDING, *map(len, column)) for header, column in zip(headers, texts, strict=True)]
    # a whole number is digits, a minus sign and spaces: only text needs escaping
    aligned = [[value.rjust(size) if is_number else html.escape(value.ljust(size)) for value in column]
               for column, size, is_number in zip(texts, widths, numeric, strict=True)]
    styles = [_RIGHT if is_number else "" for is_number in numeric]

    def row_html(tag: str, cells: Iterable[str]) -> str:
        return "<tr>" + "".join(f"<{tag}{style}>{cell}</{tag}>" for style, cell in zip(styles, cells, strict=True)) + "</tr>"

    head = [html.escape(header.rjust(size) if is_number else header.ljust(size))
            for header, size, is_number in zip(headers, widths, numeric, strict=True)]
    body = "\n".join(row_html("td", cells) for cells in zip(*aligned, strict=True))
    return f"<table>\n<thead>\n{row_html('th', head)}\n</thead>\n<tbody>\n{body}\n</tbody>\n</table>"


_MIN_PADDING = 2  # tabulate's: a column is at least its header plus two wide
_RIGHT = ' style="text-align: right;"'


@dataclass(repr=False)
class Table:
    """A titled table that shows itself as text (``print``, plain repr) and HTML (Jupyter)."""

    headers: Sequence[str]
    rows: Sequence[Row] = field(default_factory=list)
    title: str = ""
    floatfmt: str = ".4g"

    def to_text(self) -> str:
        body = render_text(self.rows, self.headers, floatfmt=self.floatfmt)
        return f"{self.title}\n{body}" if self.title else body

    def to_html(self) -> str:
        """The table in a region that scrolls sideways when it is wider than the page, reachable with the keyboard
        (Tab, then the arrow keys: axe's ``scrollable-region-focusable``) and named for a screen reader."""
        body = render_html(self.rows, self.headers, floatfmt=self.floatfmt)
        name = html.escape(self.title or "table: " + ", ".join(str(header) for header in self.headers), quote=True)
        region = (f'<div class="labkit-table" role="region" tabindex="0" aria-label="{name}" '
                  f'style="overflow-x: auto">\n{body}\n</div>')
        if self.title:
            return f"<p><strong>{html.escape(self.title)}</strong></p>\n{region}"
        return region

    def column(self, header: str) -> list[Any]:
        """All values of one column, by header name."""
        index = list(self.headers).index(header)
        return [row[index] for row in self.rows]

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return self.to_html()


class ShowsAsTable:
    """Mixin for result objects: define ``table()``; get text, ``print``, IPython and HTML views.

    ``repr`` is the text table too, so IPython's plain-text view shows it;
    dataclasses using the mixin pass ``repr=False`` to keep it.
    """

    def table(self) -> Table:
        raise NotImplementedError(f"{type(self).__name__} must define table()")

    def to_text(self) -> str:
        return self.table().to_text()

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return self.table().to_html()
