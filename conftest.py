"""pytest configuration for the whole repository.

Why: a student copy written inside the tree (``python -m labkit student-copy
notebooks/handout``) holds stub notebooks whose exercises are unsolved; nbval
would run them as tests. Any folder that holds a student copy (its marker or
manifest) is never collected, wherever it is.

And the browser tests run after every other test of ``tests/``: their
Chromium is session-wide (see ``tests/ui/support.py``), and Playwright's sync
API keeps an event loop running in the main thread for as long as it lives, so
a test that starts an event loop of its own, or a Playwright of its own (the
hub's log-in attacks), must run before it.

And the tests run the solved labs: their verdicts are nobody's progress, so
``LABKIT_PROGRESS=off`` (for this process and every kernel it starts) unless a
test sets a file of its own. And labkit speaks English here (``LABKIT_LANG=en``): the
stored outputs nbval compares are English, whatever the machine's locale; a translated notebook
(``notebooks/zh/``, ``notebooks/ru/``) is compared in its own language, as ``labkit i18n build`` executed it,
so its kernel starts with ``LABKIT_LANG`` set to that language.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from labkit.authoring.student_copy import is_student_copy
from labkit.i18n import LANGS

ROOT = Path(__file__).resolve().parent
TRANSLATED = {ROOT / "notebooks" / lang: lang for lang in LANGS}  # folder -> the language of the notebooks in it


def pytest_configure(config: pytest.Config) -> None:
    os.environ["LABKIT_PROGRESS"] = "off"
    os.environ["LABKIT_LANG"] = "en"  # the stored outputs are English whatever this machine's locale (a test sets its own)


def notebook_language(path: Path) -> str:
    """The language labkit speaks in notebook ``path``'s stored outputs: its translation folder's, else English."""
    return TRANSLATED.get(Path(path).resolve().parent, "en") if Path(path).suffix == ".ipynb" else "en"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A translated notebook's kernel speaks its language: nbval starts the file's kernel in its first cell's setup.

    The kernel copies the environment when it starts, so ``LABKIT_LANG`` is set for the setup only, then restored.
    """
    lang = notebook_language(item.path)
    if lang == "en":
        yield
        return
    with mock.patch.dict(os.environ, {"LABKIT_LANG": lang}):
        yield


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip student copies; leave every other decision to pytest (``None``)."""
    if collection_path.is_dir() and is_student_copy(collection_path):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``tests/ui`` after the rest of ``tests/`` (and before the notebooks, as collected); otherwise the order stays."""
    ui = Path(config.rootpath, "tests", "ui")

    def group(item: pytest.Item) -> int:
        path = Path(item.path)
        if path.is_relative_to(ui):
            return 1
        return 2 if path.suffix == ".ipynb" else 0

    items.sort(key=group)  # a stable sort: the order inside each group is pytest's
