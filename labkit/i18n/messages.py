"""labkit's own messages in the learner's language: the gettext domain ``labkit``.

Why gettext: verdicts, hints and tables are marked ``_("...")`` in the English source, Babel extracts them into
``labkit/locale/labkit.pot`` and each language's ``labkit/locale/<lang>/LC_MESSAGES/labkit.po`` holds a teacher's
translation, compiled to ``labkit.mo`` beside it and shipped in the wheel (``make i18n-update``). English is the
source itself, so English output is the marked text, byte for byte.

The language is looked up at every call, so setting ``LABKIT_LANG`` in a running kernel takes effect at once:
``LABKIT_LANG`` (``en``, ``zh``, ``ru``), then the workspace's ``language`` (its ``.labkit-manifest.json``, written by
``labkit lab --lang``), then the system locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``, :func:`locale.getlocale`),
else English. A value labkit does not know means English; it never raises.

Data that is marked where it is defined (the mistakes' descriptions) uses the no-op :func:`N_` and is translated
with :func:`_` where it is shown.
"""

from __future__ import annotations

import gettext
import json
import locale
import os
from functools import lru_cache
from pathlib import Path

from labkit.progress.journal import WORKSPACE_MARKER, workspace_folder

DOMAIN = "labkit"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
LANGUAGES = ("en", "zh", "ru")
ENVIRONMENT = "LABKIT_LANG"
SOURCE_LANGUAGE = "en"  # the language of the marked text itself: no catalogue
_SYSTEM_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")  # gettext's own order


def known(value: object) -> str | None:
    """The labkit language ``value`` names (``zh_CN.UTF-8`` -> ``zh``), or None for one labkit does not speak."""
    if not isinstance(value, str):
        return None
    code = value.strip().lower().replace("-", "_").split(".")[0].split("@")[0].split("_")[0]
    return code if code in LANGUAGES else None


def language() -> str:
    """The language labkit speaks now: ``LABKIT_LANG``, the workspace's, the system's, else ``en``."""
    setting = os.environ.get(ENVIRONMENT, "").strip()
    if setting:
        return known(setting) or SOURCE_LANGUAGE
    return workspace_language() or system_language() or SOURCE_LANGUAGE


def workspace_language(cwd: Path | None = None) -> str | None:
    """The ``language`` recorded in the manifest of the workspace holding ``cwd``; None outside one or if unreadable."""
    folder = workspace_folder(cwd)
    if folder is None:
        return None
    try:
        record = json.loads((folder / WORKSPACE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return known(record.get("language")) if isinstance(record, dict) else None


def system_language() -> str | None:
    """The language of the system locale, if labkit speaks it (``C`` and ``POSIX`` are none)."""
    for variable in _SYSTEM_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:  # the first one set decides, as in gettext
            return known(value)
    try:
        return known(locale.getlocale()[0])
    except ValueError:  # an unparsable locale name
        return None


@lru_cache(maxsize=None)
def translation(lang: str) -> gettext.NullTranslations:
    """The catalogue of ``lang``; English (or a language with no compiled catalogue) translates nothing."""
    code = known(lang)
    if code is None or code == SOURCE_LANGUAGE:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[code], fallback=True)


def _(message: str) -> str:
    """``message`` in the learner's language (the English text itself when there is no translation)."""
    return translation(language()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    """The singular or plural form for ``count`` in the learner's language (Russian has three)."""
    return translation(language()).ngettext(singular, plural, count)


def N_(message: str) -> str:  # noqa: N802 (gettext's conventional name, which Babel extracts)
    """Mark ``message`` for extraction only: data translated later, where it is shown, with :func:`_`."""
    return message
