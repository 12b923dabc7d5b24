"""The language switcher on every page: English / 中文 / Русский, each a link to the same page in that edition.

Why: the site is built once per language (``python -m labkit docs`` builds the translated editions
into ``zh/`` and ``ru/``, see :mod:`labkit.authoring.docs`), and a reader who lands on a page in the
wrong language should reach the same page in theirs in one click. A page that an edition lacks
(the API pages exist in English only) leads to that edition's home instead.

Which editions exist, and which pages each has, comes from the file the docs command writes into
every Sphinx source folder (``_labkit_edition.json``): the pages of another edition are found in its
source folder with Sphinx's own discovery and this project's include patterns, so the links follow
exactly what that edition builds. Without the file (a plain ``sphinx-build docs``) there is no switcher.
The links are plain relative ``<a>`` elements in a labelled ``<nav>``: keyboard-reachable, and they
work from ``file://`` as from a web server.

It also mends Sphinx 9.0's Chinese search (:class:`ChineseSearch`).
"""
from __future__ import annotations

import functools
import json
import posixpath
from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.project import Project
from sphinx.search.zh import SearchChinese

EDITION_FILE = "_labkit_edition.json"  # labkit.authoring.docs.EDITION_FILE
GENERATED_PAGES = frozenset({"search", "genindex"})  # pages every edition's builder writes without a source


@dataclass(frozen=True)
class Edition:
    code: str
    label: str
    lang: str  # Sphinx's language, as <html lang> writes it: the link's hreflang
    root: str  # "" or "zh/"
    pages: frozenset[str]


@dataclass(frozen=True)
class Editions:
    current: Edition
    switcher_name: str
    all: tuple[Edition, ...]


@functools.cache
def _editions(srcdir: str, suffixes: tuple[str, ...], include: tuple[str, ...], exclude: tuple[str, ...]) -> Editions | None:
    path = Path(srcdir) / EDITION_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    editions = tuple(
        Edition(e["code"], e["label"], e["lang"].replace("_", "-"), e["root"],
                frozenset(Project(e["source"], suffixes).discover(exclude, include)))
        for e in record["editions"]
    )
    current = next(e for e in editions if e.code == record["current"])
    return Editions(current, record["switcher_name"], editions)


def editions_of(app: Sphinx) -> Editions | None:
    config = app.config
    return _editions(str(app.srcdir), tuple(config.source_suffix), tuple(config.include_patterns),
                     tuple(config.exclude_patterns))


def link(editions: Editions, target: Edition, pagename: str, root_doc: str) -> str:
    """The relative address of ``pagename`` in ``target`` (its home if it has no such page), from this page."""
    has_page = pagename in target.pages or pagename in GENERATED_PAGES
    here = posixpath.dirname(editions.current.root + pagename)
    return posixpath.relpath(target.root + (pagename if has_page else root_doc) + ".html", here or ".")


def add_switcher(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """``labkit_languages`` for the template ``labkit-languages.html``: label, hreflang, address, current or not."""
    editions = editions_of(app)
    if editions is None or len(editions.all) < 2:
        return
    context["labkit_languages_name"] = editions.switcher_name
    context["labkit_languages"] = [
        {"label": e.label, "lang": e.lang, "href": link(editions, e, pagename, app.config.root_doc),
         "current": e == editions.current}
        for e in editions.all
    ]


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search, whose page works: Sphinx 9.0 ends its ``language_data.js`` with ``window.Stemmer =
    ChineseStemmer``, a class its ``english-stemmer.js`` does not define, so every search on a zh page stops with
    "ChineseStemmer is not defined" (sphinx-doc/sphinx#14229, fixed by #14416 after 9.0.4, the last release for
    Python 3.11). Its stemmer is the English one (for the Latin words), so it is named so; jieba still splits the
    Chinese words."""

    language_name = "English"


def setup(app: Sphinx) -> dict[str, object]:
    app.add_search_language(ChineseSearch)
    app.connect("html-page-context", add_switcher)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
