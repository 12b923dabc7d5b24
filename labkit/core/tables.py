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
    return tabulate(list(rows), headers=list(headers), floatfmt=floatfmt, tablefmt="html")


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
