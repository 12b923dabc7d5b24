"""``solution("1.2")``: the reference solution of an exercise, shown after a try and recorded as seen.

Why a step of its own and not a fourth hint: hints help a learner find the answer themselves; the
reference is what they compare with once they have tried (solved or not), as Kaggle's ``q.solution()``.
So it is refused until a checker has judged one of their answers to that exercise, and each look is
an event: the learner's table and the room's board say the solution was seen.

Where it comes from: the workspace's own ``solutions/`` (where a room's hand-out puts them), else,
off a hub, the ``notebooks/solutions/`` of the checkout labkit runs from. On a hub nothing else is
read: the solutions stay with the instructor until handed out.
"""
from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitValueError
from labkit.i18n.messages import _
from labkit.labs import NOTEBOOKS_DIR
from labkit.progress import journal
from labkit.progress.hints import exercise_id
from labkit.progress.record import ATTEMPTS, learner_name, record_solution_seen, tried_here

SOLUTIONS = "solutions"


@dataclass(frozen=True)
class Solution:
    """The reference solution of one exercise (``code``), or why it is not shown (``refused``)."""

    exercise: str
    code: str = ""
    source: str = ""  # the file it was read from
    refused: str = ""

    def to_text(self) -> str:
        if self.refused:
            return self.refused
        return f"{self.heading()}\n\n{self.code}"

    def heading(self) -> str:
        return _("Reference solution of exercise {exercise} ({source}); yours may differ and still be right. "
                 "Your progress records that you looked.").format(exercise=self.exercise, source=self.source)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        if self.refused:
            return f'<p class="labkit-solution">{html.escape(self.refused)}</p>'
        return (f'<div class="labkit-solution"><p><strong>{html.escape(self.heading())}</strong></p>'
                f"<pre>{html.escape(self.code)}</pre></div>")


def solution(exercise: str) -> Solution:
    """The reference solution of ``exercise`` (``"1.2"``) once a checker has judged an answer of yours to it.

    Before that it is refused, with what to do; a look is recorded as a ``solution`` event.
    """
    exercise = exercise_id("solution", exercise)
    if not tried(exercise):
        return Solution(exercise, refused=_(
            "Try exercise {exercise} first: run its checker cell on your own answer (right or wrong). Then "
            "labkit.solution(\"{exercise}\") shows the reference solution to compare with. Stuck before that? "
            "labkit.hint(\"{exercise}\") gives the next hint.").format(exercise=exercise))
    found = solution_file(exercise)
    if found is None:
        return Solution(exercise, refused=_not_here(exercise))
    try:
        code = found.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Solution(exercise, refused=_("The reference solution of exercise {exercise} could not be read "
                                            "({file}: {error}).").format(exercise=exercise, file=found.name, error=exc))
    record_solution_seen(exercise)
    return Solution(exercise, code, found.name)


def tried(exercise: str) -> bool:
    """Whether a checker judged an answer of this learner to ``exercise``: in this kernel, or in their journal."""
    if tried_here(exercise):
        return True
    path = journal.journal_path()
    if path is None:
        return False
    try:
        events, _end = journal.read_events(path)
    except LabkitValueError:
        return False
    learner = learner_name()
    return any(event.learner == learner and event.kind == "check" and event.exercise == exercise
               and event.status in ATTEMPTS for event in events)


def solution_file(exercise: str) -> Path | None:
    """``0N_M_<slug>.py`` of ``exercise``: in the workspace's ``solutions/``, else (off a hub) the checkout's."""
    lab, number = exercise.split(".")
    pattern = f"{int(lab):02d}_{int(number)}_*.py"
    folders = []
    workspace = journal.workspace_folder()
    if workspace is not None:
        folders.append(workspace / SOLUTIONS)
    if not on_hub():
        folders.append(NOTEBOOKS_DIR / SOLUTIONS)
    for folder in folders:
        found = sorted(path for path in folder.glob(pattern) if path.is_file())
        if found:
            return found[0]
    return None


def on_hub() -> bool:
    """Whether this kernel runs on a JupyterHub (a room), where solutions come only with the hand-out."""
    return bool(os.environ.get("JUPYTERHUB_USER"))


def _not_here(exercise: str) -> str:
    if on_hub():
        return _("The solutions of this room are not handed out yet: your instructor hands them out when it is time, "
                 "and then labkit.solution(\"{exercise}\") shows exercise {exercise}'s.").format(exercise=exercise)
    return _("No reference solution of exercise {exercise} is within reach of this labkit (an installed labkit carries "
             "none): your workspace's README says where the solutions are.").format(exercise=exercise)
