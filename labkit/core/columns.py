"""Text measured in terminal columns: a wide (East Asian) character takes two, a combining mark none.

Why not ``len`` and :mod:`textwrap`: a Chinese table head such as 状态 is two characters but four columns, and a
Chinese sentence has no spaces to break at, so a line wrapped by characters runs past the terminal's edge. The
standard library's data only (as wcwidth, tabulate's, would): ``labkit doctor`` uses it before anything else may
be imported.
"""
from __future__ import annotations

import unicodedata

NO_LINE_START = "，。、；：！？）》」』"  # closing punctuation stays at the end of the line before it


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes."""
    return sum(0 if unicodedata.combining(char) else 2 if _wide(char) else 1 for char in text)


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"


def _pieces(text: str) -> list[str]:
    """``text`` cut where a line may break: spaces (kept as " "), and before and after each wide character but
    closing punctuation."""
    pieces: list[str] = []
    for char in text:
        if char.isspace():
            if pieces and pieces[-1] != " ":
                pieces.append(" ")
        elif char in NO_LINE_START and pieces and pieces[-1] != " ":
            pieces[-1] += char
        elif _wide(char) or not pieces or pieces[-1] == " " or _wide(pieces[-1][-1]):
            pieces.append(char)
        else:
            pieces[-1] += char
    return pieces


def fill(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """:func:`textwrap.fill` by columns: no line longer than ``width`` columns unless one word is."""
    lines: list[str] = []
    line, used, space = initial_indent, columns(initial_indent), False
    empty = True  # nothing but the indent on this line yet
    for piece in _pieces(text):
        if piece == " ":
            space = not empty
            continue
        needed = columns(piece) + (1 if space else 0)
        if not empty and used + needed > width:
            lines.append(line)
            line, used, space = subsequent_indent, columns(subsequent_indent), False
            needed = columns(piece)
        line += (" " if space else "") + piece
        used += needed
        space, empty = False, False
    lines.append(line)
    return "\n".join(lines)
