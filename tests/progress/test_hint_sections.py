"""Every "where to look" hint names its sections by anchor and reads, in each edition, the headings that edition has.

On the old main the hints quoted English headings, and 10 of the 11 level-2 hints in zh named headings the Chinese
notebook does not have ("*Shape and strides*" where it reads 形状与步幅).
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import nbformat
import pytest

from labkit.authoring.student_copy import student_notebook
from labkit.i18n import sections as generated
from labkit.labs import EXERCISES, NOTEBOOKS_DIR
from labkit.learner.tracks import HEADING, TRACKS, exercise_ids
from labkit.progress import sections
from labkit.progress.hints import HINTS, text

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

EDITIONS = ("en", "zh", "ru")
MARKUP = re.compile(r"[`*_]")


def _plain(words: str) -> str:
    return " ".join(MARKUP.sub("", words).lower().split())


def _notebook_path(lang: str, stem: str) -> Path:
    return NOTEBOOKS_DIR / f"{stem}.ipynb" if lang == "en" else NOTEBOOKS_DIR / lang / f"{stem}.ipynb"


@cache
def _headings(lang: str, stem: str, track: str | None = None) -> dict[str, str]:
    """cell id -> heading text of each heading cell of that edition (the learner edition of ``track``, if given)."""
    path = _notebook_path(lang, stem)
    notebook = student_notebook(path, track=track) if track else nbformat.read(path, as_version=4)
    found = {}
    for cell in notebook.cells:
        match = HEADING.match(cell.source.splitlines()[0]) if cell.cell_type == "markdown" and cell.source else None
        if match:
            found[cell.id] = match[2]
    return found


def _names(heading: str) -> list[str]:
    """How a text could quote ``heading``: whole, and each clause of two words or more (number dropped)."""
    plain = _plain(re.sub(r"^\d+\.\s*", "", heading))
    return [plain] + [clause.strip() for clause in re.split(r"[:,?]", plain) if len(clause.split()) >= 2]


def _quoted(message: str, headings: list[str]) -> list[str]:
    """The headings ``message`` quotes (an exercise's own title aside: "the Jacobian" is no pointer to a section)."""
    words = _plain(message)
    return [name for heading in headings if not heading.startswith("Exercise") for name in _names(heading)
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", words)]


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_hint_names_a_section_by_anchor_never_by_its_english_heading(exercise: str):
    stem = sections.notebook_of(exercise)
    english = list(_headings("en", stem).values())
    for message in HINTS[exercise]:
        assert _quoted(message, english) == [], f"write {{anchor}} (labkit.progress.sections.ANCHORS): {message}"
        for anchor in sections.anchors_in(message):
            assert anchor in sections.ANCHORS[stem], f"{exercise}: no anchor {anchor!r} in {stem}"


@pytest.mark.parametrize("lang", EDITIONS)
@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_hint_names_headings_its_edition_has_and_no_english_one(exercise: str, lang: str):
    stem = sections.notebook_of(exercise)
    headings = _headings(lang, stem)
    english = _headings("en", stem)
    for level, message in enumerate(HINTS[exercise], 1):
        shown = text(exercise, level, lang)
        assert "{" not in shown and "}" not in shown, shown
        for anchor in sections.anchors_in(message):
            cell = sections.ANCHORS[stem][anchor]
            assert cell in headings, f"{exercise}: anchor {anchor!r} names cell {cell}, no heading of {lang}/{stem}"
            assert f"*{headings[cell]}*" in shown, f"{exercise} [{lang}] should name {headings[cell]!r}: {shown}"
        if lang != "en":
            untranslated = [h for cell, h in english.items() if headings.get(cell) != h]
            assert _quoted(shown, untranslated) == [], f"{exercise} [{lang}] names an English heading: {shown}"


@pytest.mark.parametrize("track", TRACKS)
@pytest.mark.parametrize("lang", EDITIONS)
def test_every_hint_of_a_learner_edition_names_a_heading_that_edition_keeps(lang: str, track: str):
    for stem in sections.ANCHORS:
        path = _notebook_path(lang, stem)
        kept = exercise_ids(cell.source for cell in student_notebook(path, track=track).cells if cell.cell_type == "code")
        headings = _headings(lang, stem, track)
        assert kept, f"{stem}: no exercise in the {track} track?"
        for exercise in kept:
            for level, message in enumerate(HINTS[exercise], 1):
                shown = text(exercise, level, lang)
                for anchor in sections.anchors_in(message):
                    cell = sections.ANCHORS[stem][anchor]
                    assert cell in headings, f"{exercise} [{lang}, {track}]: {anchor!r} is left out of this edition"
                    assert f"*{headings[cell]}*" in shown


def test_the_generated_headings_are_current():
    assert generated.problems(NOTEBOOKS_DIR) == []


def test_an_anchor_on_a_cell_that_is_no_heading_is_named(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sections.ANCHORS, "02_memory_format", {"nowhere": "00000000"})
    assert any("anchor 'nowhere'" in problem for problem in generated.problems(NOTEBOOKS_DIR))
