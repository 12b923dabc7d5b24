"""What a translation of a markdown cell must keep: its code, links, math, HTML, headings, lists and code blocks.

Why: a translator rewrites the prose, never the parts a reader copies or clicks. Parsed with markdown-it-py
(the parser MyST, and so the docs site, uses), with its dollar-math plugin, so `$x$` is math and `` `$x$` `` code.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

_PARSER = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)


@dataclass
class Structure:
    """The parts of one markdown cell a translation keeps (strings compared as written, in any order)."""

    code_spans: Counter[str] = field(default_factory=Counter)
    link_targets: Counter[str] = field(default_factory=Counter)
    math: Counter[str] = field(default_factory=Counter)
    html: Counter[str] = field(default_factory=Counter)  # e.g. the <!-- extra --> markers the workshop's tracks read
    heading_levels: list[int] = field(default_factory=list)
    list_items: int = 0
    code_blocks: int = 0
    prose: list[str] = field(default_factory=list)  # the text a translator writes: where glossary terms are looked for


def structure(text: str) -> Structure:
    """Parse ``text`` (a markdown cell's source) into the parts a translation must keep."""
    found = Structure()
    _walk(_PARSER.parse(text), found)
    return found


def _walk(tokens: list[Token], found: Structure) -> None:
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            found.heading_levels.append(int(token.tag[1:]))
        elif kind == "list_item_open":
            found.list_items += 1
        elif kind in ("fence", "code_block"):
            found.code_blocks += 1
        elif kind == "code_inline":
            found.code_spans[token.content] += 1
        elif kind in ("link_open", "image"):
            found.link_targets[str(token.attrs.get("href") or token.attrs.get("src") or "")] += 1
        elif kind in ("math_inline", "math_block", "math_block_label", "math_inline_double"):
            found.math[token.content.strip()] += 1
        elif kind in ("html_inline", "html_block"):
            found.html[token.content.strip()] += 1
        elif kind == "text":
            found.prose.append(token.content)
        if token.children:
            _walk(token.children, found)


def differences(english: str, translation: str) -> list[str]:
    """How ``translation``'s structure differs from ``english``'s, one short phrase each (empty: the same)."""
    source, target = structure(english), structure(translation)
    problems = []
    for name, kept, got in (
        ("inline code", source.code_spans, target.code_spans),
        ("link targets", source.link_targets, target.link_targets),
        ("math", source.math, target.math),
        ("HTML", source.html, target.html),
    ):
        if kept != got:
            lost = ", ".join(repr(s) for s in (kept - got).elements())
            added = ", ".join(repr(s) for s in (got - kept).elements())
            problems.append(f"{name} differs" + (f"; missing {lost}" if lost else "")
                            + (f"; not in English {added}" if added else ""))
    if source.heading_levels != target.heading_levels:
        problems.append(f"headings differ: levels {source.heading_levels} in English, {target.heading_levels} here")
    if source.list_items != target.list_items:
        problems.append(f"list items differ: {source.list_items} in English, {target.list_items} here")
    if source.code_blocks != target.code_blocks:
        problems.append(f"code blocks differ: {source.code_blocks} in English, {target.code_blocks} here")
    return problems
