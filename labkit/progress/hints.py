"""``hint("1.2")``: up to three hints of growing help for an exercise, never its solution.

Why tiered: a learner who is stuck for a moment needs a nudge, not the answer, and one who is stuck
for long needs more than a nudge. Each call shows the next hint: (1) a nudge, (2) a pointer to the
API or the notebook's section, (3) the approach in words, without code. ``hint("1.2", level=1)``
shows one again. The level reached is kept in the learner's journal (:mod:`labkit.progress.journal`),
so it survives a kernel restart, and each hint shown is an event the room's board counts. A hint names what
the next one gives ("where to look", "the approach") rather than a count: counts ("hint 1 of 3") lead learners to
click through to the last one. The
solution itself is a step of its own, after a try: ``solution("1.2")`` (:mod:`labkit.progress.solutions`).
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from labkit.core.errors import LabkitValueError
from labkit.i18n.messages import N_, _, language, translation
from labkit.progress import journal
from labkit.progress.events import MAX_HINT_LEVEL
from labkit.progress.hints_01 import HINTS as LAB_01
from labkit.progress.hints_02 import HINTS as LAB_02
from labkit.progress.hints_03 import HINTS as LAB_03
from labkit.progress.hints_04 import HINTS as LAB_04
from labkit.progress.record import learner_name, record_hint
from labkit.progress.sections import notebook_of, render

HINTS: dict[str, tuple[str, str, str]] = {**LAB_01, **LAB_02, **LAB_03, **LAB_04}
KINDS = (N_("a nudge"), N_("where to look"), N_("the approach"))
_shown: dict[str, int] = {}  # this kernel's levels, for when the journal is off


@dataclass(frozen=True)
class Hint:
    """One hint of one exercise, shown as text and HTML."""

    exercise: str
    level: int
    text: str

    @property
    def last(self) -> bool:
        return self.level == MAX_HINT_LEVEL

    def footer(self) -> str:
        if self.last:
            return _("That was the last hint. Once you have tried, labkit.solution(\"{exercise}\") shows the "
                     "reference solution (your progress records that you looked).").format(exercise=self.exercise)
        return _("Still stuck? Run hint(\"{exercise}\") again: the next hint gives {kind}.").format(
            exercise=self.exercise, kind=_(KINDS[self.level]))

    def heading(self) -> str:
        return _("Hint for exercise {exercise}: {kind}").format(exercise=self.exercise, kind=_(KINDS[self.level - 1]))

    def to_text(self) -> str:
        return f"{self.heading()}: {self.text}\n{self.footer()}"

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return (f'<div class="labkit-hint" role="note"><p><strong>{html.escape(self.heading())}</strong></p>'
                f"<p>{html.escape(self.text)}</p><p><em>{html.escape(self.footer())}</em></p></div>")


def hint(exercise: str, level: int | None = None) -> Hint:
    """The next hint for ``exercise`` (``"1.2"``), or hint ``level`` (1 to 3); recorded as a hint event."""
    exercise = exercise_id("hint", exercise)
    if level is None:
        level = min(MAX_HINT_LEVEL, max(_shown.get(exercise, 0), _journal_level(exercise)) + 1)
    elif isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= MAX_HINT_LEVEL:
        raise LabkitValueError(_("hint({exercise!r}, level={level!r}): give a level from 1 to "
                                 "{levels}.").format(exercise=exercise, level=level, levels=MAX_HINT_LEVEL))
    _shown[exercise] = max(_shown.get(exercise, 0), level)
    record_hint(exercise, level)
    return Hint(exercise, level, text(exercise, level))


def text(exercise: str, level: int, lang: str | None = None) -> str:
    """Hint ``level`` of ``exercise`` in ``lang`` (default: labkit's language), each section it names by anchor shown
    with the heading of that language's notebook (:mod:`labkit.progress.sections`)."""
    lang = lang or language()
    message = HINTS[exercise][level - 1]
    translated = message if lang == "en" else translation(lang).gettext(message)
    return render(translated, notebook_of(exercise), lang)


def exercise_id(function: str, exercise: object) -> str:
    """``exercise`` when it names an exercise with hints; a :class:`LabkitValueError` that says what to type otherwise
    (``hint(1.2)``: a number, where the id is text)."""
    if isinstance(exercise, (int, float)) and not isinstance(exercise, bool):
        raise LabkitValueError(_("{function}({exercise!r}): write the exercise id as text, in quotes: "
                                 "{function}(\"{exercise}\").").format(function=function, exercise=exercise))
    if not isinstance(exercise, str) or exercise not in HINTS:
        known = ", ".join(sorted(HINTS))
        raise LabkitValueError(_("{function}({exercise!r}): there is no exercise {exercise!r}; give one of "
                                 "{known}.").format(function=function, exercise=exercise, known=known))
    return str(exercise)


def hint_pointer(exercise: str) -> str:
    """The sentence every "not solved" verdict ends with: how to ask for the next hint."""
    return _("Stuck? labkit.hint(\"{exercise}\") gives the next hint.").format(exercise=exercise) if exercise in HINTS else ""


def _journal_level(exercise: str) -> int:
    path = journal.journal_path()
    if path is None:
        return 0
    try:
        events, _end = journal.read_events(path)
    except LabkitValueError:
        return 0
    learner = learner_name()
    return max((event.hint_level for event in events
                if event.learner == learner and event.kind == "hint" and event.exercise == exercise), default=0)
