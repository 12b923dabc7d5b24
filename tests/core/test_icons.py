"""Every icon labkit prints sits beside words that say the same, so a machine with no emoji font loses nothing.

Where no font has ✅ ❌ ⏳ 🔁 they show as empty boxes: the verdict must still read, in every language, from the words
beside them. On the old main the hub's show-password button was 👁 (then 🔑) alone, and the checker-error icon asked
for the emoji font (⚠ with U+FE0F).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from labkit.core.checks import ICONS, CheckResult, Status
from labkit.i18n import messages
from labkit.progress.summary import SOLVED, Cell

pytestmark = pytest.mark.torch_free  # builds verdicts, runs no torch op

LABKIT = Path(__file__).resolve().parents[2] / "labkit"
# pictographs, dingbats, miscellaneous symbols and technical signs, and the emoji presentation selector; not the
# arrows and mathematical signs (→ ≈ ⊃) that text fonts draw and prose uses as words
ICON = re.compile("[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\ufe0f\U0001f000-\U0001ffff]")
KNOWN = {"✅", "⏳", "❌", "⚠", "🔁", "✓"}  # the verdicts' icons, and the progress table's tick (tested below)
LANGS = ("en", "zh", "ru")


def _sources() -> list[Path]:
    return [path for pattern in ("*.py", "*.html", "*.js", "*.po") for path in LABKIT.rglob(pattern)]


@pytest.fixture(autouse=True)
def no_language_but_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("LABKIT_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(messages.locale, "getlocale", lambda *args: (None, None))


def test_every_icon_in_labkit_is_one_whose_words_are_tested_here():
    found = {(char, path.relative_to(LABKIT).as_posix()) for path in _sources()
             for char in ICON.findall(path.read_text(encoding="utf-8"))}
    assert {char for char, _ in found} <= KNOWN, sorted(pair for pair in found if pair[0] not in KNOWN)


def test_every_icon_outside_the_verdicts_is_followed_by_its_words():
    """A tick or a warning sign is written as the icon, a space, then the text (a literal, a message or a value)."""
    alone = []
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.startswith("ICONS = ") or line.lstrip().startswith("#"):
                continue
            for match in ICON.finditer(line):
                after = line[match.end():]
                if not re.match(r' (?:\{|" \+ _\(|\w)', after):
                    alone.append(f"{path.relative_to(LABKIT)}:{number}: {line.strip()}")
    assert alone == []


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("status", list(Status))
def test_a_verdict_reads_the_same_without_its_icon(monkeypatch: pytest.MonkeyPatch, lang: str, status: Status):
    monkeypatch.setenv("LABKIT_LANG", lang)
    catalogue = messages.translation(lang)
    result = CheckResult("2.1", status, "MESSAGE")
    words = catalogue.gettext("Exercise {exercise}: {status}.").format(
        exercise="2.1", status=catalogue.gettext(status.value))
    assert not ICON.search(words)
    assert str(result) == f"{ICONS[status]} {words} MESSAGE"
    assert result._repr_html_() == f"<p>{ICONS[status]} {html.escape(words)} MESSAGE</p>"
    if lang != "en":
        assert catalogue.gettext(status.value) != status.value  # the status word beside the icon is the learner's


@pytest.mark.parametrize("lang", LANGS)
def test_a_solved_cell_of_the_progress_table_says_solved_beside_its_tick(monkeypatch: pytest.MonkeyPatch, lang: str):
    monkeypatch.setenv("LABKIT_LANG", lang)
    assert Cell("1.1", state=SOLVED).text() == "✓ " + messages.translation(lang).gettext("solved")


def test_the_hubs_show_password_button_says_what_it_does():
    for path in (LABKIT / "workshop" / "templates").glob("*.html"):
        text = path.read_text(encoding="utf-8")
        if 'id="eye"' in text:
            # the words as they are, or through the room's language (`_()` in the template, labkit's catalogue)
            assert re.search(r'<button id="eye"[^>]*>(Show|\{\{ _\("Show"\) \}\})</button>', text), path.name
            for word in ("Hide", "Show"):
                assert (f'textContent = "{word}"' in text
                        or f'textContent = {{{{ _("{word}")|tojson }}}}' in text), (path.name, word)
