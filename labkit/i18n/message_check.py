"""The check of labkit's own message catalogues (``labkit/locale``), run by ``python -m labkit i18n check``.

Why a check: a message marked ``_()`` but missing from the template, an entry left untranslated or fuzzy, a ``.mo``
compiled before the last edit of its ``.po``, a translation that drops a ``{placeholder}`` (a KeyError in the
learner's verdict) or an inline-code span, or one ``pybabel compile`` refuses would each reach a learner silently or
stop ``make i18n-update``. Each problem names the file, the language and the English message. Needs Babel (the dev
extra), like ``make i18n-update``.
"""

from __future__ import annotations

import gettext
import io
import string
from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from labkit.i18n import glossary, markdown
from labkit.i18n.messages import DOMAIN, LANGUAGES, LOCALE_DIR, SOURCE_LANGUAGE

TEMPLATE = LOCALE_DIR / f"{DOMAIN}.pot"
SOURCE_DIR = LOCALE_DIR.parent  # the labkit package, where the marked messages are
METHOD_MAP = [("**.py", "python"), ("workshop/templates/**.html", "jinja2")]  # as babel.cfg says
TRANSLATED = tuple(code for code in LANGUAGES if code != SOURCE_LANGUAGE)


def catalogue_path(lang: str, suffix: str = ".po", locale_dir: Path = LOCALE_DIR) -> Path:
    return locale_dir / lang / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


def problems(
    langs: tuple[str, ...] = TRANSLATED,
    locale_dir: Path = LOCALE_DIR,
    source_dir: Path | None = SOURCE_DIR,
    glossary_path: Path | None = None,
) -> list[str]:
    """Every problem of the catalogues of ``langs``, one line each; none when all is well.

    ``source_dir`` (None: skip) is compared with the template; ``glossary_path`` adds the forbidden terms.
    """
    template = _read(locale_dir / f"{DOMAIN}.pot")
    found = list(_stale_template(template, locale_dir, source_dir)) if source_dir is not None else []
    terms = glossary.load(glossary_path) if glossary_path is not None else []
    for lang in langs:
        path = catalogue_path(lang, locale_dir=locale_dir)
        if not path.is_file():
            found.append(f"{path}: no catalogue for {lang}; run make i18n-update.")
            continue
        catalogue = _read(path, lang)
        for message in template:
            if message.id:
                found += [
                    f"{path} ({lang}): {problem}: {_english(message)!r}"
                    for problem in _entry_problems(message, catalogue.get(message.id), lang, terms)
                ]
        found += [f"{path} ({lang}): {error}: {_english(message)!r}" for message, errors in catalogue.check() for error in errors]
        found += _stale_mo(path, catalogue, lang)
    return found


def fields(text: str) -> set[str]:
    """The ``{name}`` placeholders of a ``str.format`` template."""
    return {name for _text, name, _spec, _conversion in string.Formatter().parse(text) if name is not None}


def _read(path: Path, lang: str | None = None) -> Catalog:
    with path.open("rb") as file:
        return read_po(file, locale=lang)


def _english(message: Message) -> str:
    return message.id if isinstance(message.id, str) else message.id[0]


def _entry_problems(source: Message, entry: Message | None, lang: str, terms: list[glossary.Term]) -> Iterator[str]:
    forms = () if entry is None else (entry.string,) if isinstance(entry.string, str) else tuple(entry.string or ())
    if not forms or not all(forms):
        yield "no translation"
        return
    assert entry is not None
    if entry.fuzzy:
        yield "fuzzy (the English changed: check the translation, then remove the fuzzy flag)"
    english = source.id if isinstance(source.id, str) else source.id[-1]
    for form in forms:
        if fields(form) != fields(english):
            yield f"placeholders differ: {sorted(fields(english))} in English, {sorted(fields(form))} here"
        yield from markdown.differences(english, form)
        yield from glossary.violations(terms, lang, form)


def _stale_mo(po_path: Path, catalogue: Catalog, lang: str) -> list[str]:
    """The ``.mo`` beside ``po_path`` must hold what compiling the ``.po`` gives now."""
    mo_path = po_path.with_suffix(".mo")
    compiled = io.BytesIO()
    write_mo(compiled, catalogue)
    compiled.seek(0)
    try:
        with mo_path.open("rb") as file:
            shipped = gettext.GNUTranslations(file)
    except (OSError, ValueError) as exc:
        return [f"{mo_path} ({lang}): cannot be read ({exc}); run make i18n-update."]
    if _messages(shipped) != _messages(gettext.GNUTranslations(compiled)):
        return [f"{mo_path} ({lang}): older than {po_path.name} (compiled content differs); run make i18n-update."]
    return []


def _messages(translations: gettext.GNUTranslations) -> dict[object, str]:
    return dict(translations._catalog)  # type: ignore[attr-defined]  # gettext keeps no public view of it


def _stale_template(template: Catalog, locale_dir: Path, source_dir: Path) -> Iterator[str]:
    marked: set[object] = {
        message for _file, _line, message, _comments, _context in extract_from_dir(str(source_dir), METHOD_MAP)
    }
    listed: set[object] = {message.id for message in template if message.id}
    for message in sorted(marked - listed, key=str):
        yield f"{locale_dir / TEMPLATE.name}: lacks {message!r}, marked in labkit's code; run make i18n-update."
    for message in sorted(listed - marked, key=str):
        yield f"{locale_dir / TEMPLATE.name}: holds {message!r}, which labkit's code no longer marks; run make i18n-update."
