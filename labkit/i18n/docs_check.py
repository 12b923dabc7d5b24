"""The docs site's catalogues (``docs/locale``): ``python -m labkit i18n update`` writes them, ``check`` judges them.

Why: the zh and ru editions of the site translate their landing page and "How to run these labs" with Sphinx's own
gettext (``locale_dirs`` in ``docs/conf.py``: one catalogue per page, ``docs/locale/<language>/LC_MESSAGES/<page>.po``)
and the words the site's extension writes (the run-time line, the frozen-widget note, "Show solution") with the
``labkit_docs`` catalogue. Sphinx shows the English text of an entry that is missing or fuzzy, and of one whose
English changed, without a word: this check names each (page, language, English text), as the notebooks' check does.

The English messages are what Sphinx's gettext builder extracts from the translated pages alone (no notebooks, no
API reference: a few seconds), and what Babel extracts from ``_()`` in ``docs/_ext``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

from labkit.core.errors import LabkitError
from labkit.i18n import glossary, markdown
from labkit.i18n.message_check import fields

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
#: The learner-facing pages the translated editions translate; the others say they are in English (labkit_docs.py).
TRANSLATED_PAGES = ("index", "running", "install")
EXTENSION_CATALOGUE = "labkit_docs"  # docs/_ext/labkit_docs.py's words
SPHINX_LANGUAGES = {"zh": "zh_CN", "ru": "ru"}  # labkit's language code -> the docs edition's Sphinx language
_ERROR_LINES = 20


def catalogue_path(docs_dir: Path, lang: str, name: str) -> Path:
    return docs_dir / "locale" / SPHINX_LANGUAGES[lang] / "LC_MESSAGES" / f"{name}.po"


def templates(docs_dir: Path = DOCS_DIR) -> dict[str, Catalog]:
    """Catalogue name (a page, or ``labkit_docs``) -> its English messages, as they are today."""
    if not (docs_dir / "conf.py").is_file():
        raise LabkitError(f"{docs_dir} holds no Sphinx project (conf.py): run this in a checkout of labkit's repository.")
    found = _page_templates(docs_dir)
    extension = Catalog(project="labkit docs")
    for _file, _line, message, _comments, _context in extract_from_dir(str(docs_dir / "_ext"), [("**.py", "python")]):
        extension.add(message)
    found[EXTENSION_CATALOGUE] = extension
    return found


def _page_templates(docs_dir: Path) -> dict[str, Catalog]:
    """``sphinx-build -b gettext`` on a copy of the Sphinx project with the translated pages only."""
    with tempfile.TemporaryDirectory(prefix="labkit-docs-gettext-") as scratch:
        source, out = Path(scratch) / "source", Path(scratch) / "pot"
        shutil.copytree(docs_dir, source, ignore=shutil.ignore_patterns("api", "_static", "locale", "_build", "__pycache__"))
        pages = ",".join(f"{page}.md" for page in TRANSLATED_PAGES)
        command = [sys.executable, "-m", "sphinx", "-q", "-b", "gettext", "-D", "gettext_compact=0",
                   "-D", f"include_patterns={pages}", str(source), str(out)]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        if done.returncode != 0:
            lines = (done.stdout + done.stderr).strip().splitlines()
            raise LabkitError("sphinx-build -b gettext failed on the docs pages:\n" + "\n".join(lines[-_ERROR_LINES:]))
        found = {}
        for page in TRANSLATED_PAGES:
            with (out / f"{page}.pot").open("rb") as file:
                found[page] = read_po(file)
        return found


def update(langs: tuple[str, ...], docs_dir: Path = DOCS_DIR) -> list[str]:
    """Bring every docs catalogue of ``langs`` up to the English: new entries empty, changed ones fuzzy."""
    changes = []
    for name, template in templates(docs_dir).items():
        for lang in langs:
            path = catalogue_path(docs_dir, lang, name)
            catalogue = _read(path, lang) if path.is_file() else Catalog(
                locale=SPHINX_LANGUAGES[lang], project="labkit docs", header_comment=_header(name, lang))
            before = {message.id: (message.string, message.fuzzy) for message in catalogue if message.id}
            catalogue.update(template)
            after = {message.id: (message.string, message.fuzzy) for message in catalogue if message.id}
            if after != before or not path.is_file():
                catalogue.fuzzy = False  # the header: Sphinx compiles only what is not fuzzy
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("wb") as file:
                    write_po(file, catalogue, no_location=True, omit_header=False)
                changes.append(f"{path}: {len(after.keys() - before.keys())} new, "
                               f"{sum(1 for key, value in after.items() if value[1] and not before.get(key, ('', False))[1])} "
                               f"fuzzy, {len(before.keys() - after.keys())} no longer in English")
    return changes


def problems(langs: tuple[str, ...], docs_dir: Path = DOCS_DIR, glossary_path: Path | None = None) -> list[str]:
    """Every missing, fuzzy, stale or off-glossary docs translation of ``langs``, one line each."""
    terms = glossary.load(glossary_path) if glossary_path is not None else []
    found = []
    for name, template in templates(docs_dir).items():
        where = "the site's generated words (docs/_ext)" if name == EXTENSION_CATALOGUE else f"page {name}.md"
        for lang in langs:
            path = catalogue_path(docs_dir, lang, name)
            if not path.is_file():
                found.append(f"{path}: no catalogue for {where} in {lang}; run make i18n-update.")
                continue
            catalogue = _read(path, lang)
            for message in template:
                if isinstance(message.id, str) and message.id:  # a docs message has no plural forms
                    found += [f"{path} ({lang}), {where}: {problem}: {message.id!r}"
                              for problem in _entry_problems(message.id, catalogue.get(message.id), lang, terms,
                                                             placeholders=name == EXTENSION_CATALOGUE)]
            found += [f"{path} ({lang}), {where}: no longer in the English page (run make i18n-update): {message.id!r}"
                      for message in catalogue if message.id and message.id not in template]
    return found


def _header(name: str, lang: str) -> str:
    what = "the docs site's generated words (docs/_ext)" if name == EXTENSION_CATALOGUE else f"docs/{name}.md"
    return (f"# The {lang} translation of {what}.\n# Written by python -m labkit i18n update (make i18n-update); "
            "checked by make i18n-check.")


def _read(path: Path, lang: str) -> Catalog:
    with path.open("rb") as file:
        return read_po(file, locale=SPHINX_LANGUAGES[lang])


def _entry_problems(english: str, entry: Message | None, lang: str, terms: list[glossary.Term], *,
                    placeholders: bool) -> Iterator[str]:
    """``placeholders``: the entry is a ``str.format`` template (the extension's words; a page's text is Markdown)."""
    translation = entry.string if entry is not None and isinstance(entry.string, str) else ""
    if entry is None or not translation:
        yield "no translation"
        return
    if entry.fuzzy:
        yield "fuzzy (the English changed: check the translation, then remove the fuzzy flag)"
    if placeholders and fields(translation) != fields(english):
        yield f"placeholders differ: {sorted(fields(english))} in English, {sorted(fields(translation))} here"
    yield from markdown.differences(english, translation)
    yield from glossary.violations(terms, lang, translation)
