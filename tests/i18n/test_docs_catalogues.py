"""labkit.i18n.docs_check: the docs site's zh/ru catalogues follow the English pages, or the check names what did not."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from labkit.i18n import LANGS, docs_check

pytestmark = [pytest.mark.slow, pytest.mark.torch_free]  # sphinx-build -b gettext per check; torch_free: no torch op
ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "notebooks" / "i18n" / "glossary.csv"
OLD_SENTENCE = "The pages of this site are snapshots: the widgets do not move and no cell runs."
NEW_SENTENCE = "The pages of this site are pictures: the widgets stay still and no cell runs."


@pytest.fixture
def docs_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "docs"
    shutil.copytree(docs_check.DOCS_DIR, copy, ignore=shutil.ignore_patterns("_static", "api", "_build", "__pycache__", "*.mo"))
    return copy


def test_the_shipped_catalogues_are_finished_and_current() -> None:
    assert docs_check.problems(LANGS, glossary_path=GLOSSARY) == []


def test_a_changed_english_sentence_fails_the_check_naming_the_page_and_update_marks_it_fuzzy(docs_copy: Path) -> None:
    running = docs_copy / "running.md"
    assert OLD_SENTENCE in running.read_text(encoding="utf-8")
    running.write_text(running.read_text(encoding="utf-8").replace(OLD_SENTENCE, NEW_SENTENCE), encoding="utf-8")
    found = docs_check.problems(("zh",), docs_copy)
    assert any("page running.md: no translation" in line and NEW_SENTENCE in line for line in found), found
    assert any("page running.md: no longer in the English page" in line and OLD_SENTENCE in line for line in found), found
    assert all("running.md" in line for line in found), "only the changed page is named"

    docs_check.update(("zh",), docs_copy)
    found = docs_check.problems(("zh",), docs_copy)
    assert len(found) == 1 and "running.md: fuzzy" in found[0] and NEW_SENTENCE in found[0], found
    with docs_check.catalogue_path(docs_copy, "zh", "running").open("rb") as file:
        entry = next(message for message in read_po(file) if message.id and NEW_SENTENCE in message.id)
    assert entry.fuzzy and entry.string.startswith("本站的页面都是快照"), "the old translation is kept for the translator"


def test_a_missing_extension_word_and_a_missing_catalogue_are_named(docs_copy: Path) -> None:
    extension = docs_copy / "_ext" / "labkit_docs.py"
    extension.write_text(extension.read_text(encoding="utf-8").replace('_("Show solution")', '_("Show the solution")'),
                         encoding="utf-8")
    docs_check.catalogue_path(docs_copy, "ru", "index").unlink()
    found = docs_check.problems(("ru",), docs_copy)
    assert any("generated words (docs/_ext): no translation: 'Show the solution'" in line for line in found), found
    assert any("index.po: no catalogue for page index.md in ru" in line for line in found), found
