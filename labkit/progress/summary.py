"""One learner's events folded into where they stand on each exercise: the learner's table and the board's cells.

Why one fold for both: "solved" must mean the same on the learner's screen and on the instructor's
board. Rules: an exercise once solved stays solved (a later attempt, e.g. after editing the answer,
counts as an attempt but does not undo it); an attempt is a checker run that said "not solved" or
"checker error" (running it on the untouched stub is "not yet", no attempt); the latest mistake is the
last attempt's id; hints count the highest level shown.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from labkit.progress.events import PREFLIGHT, Event


@dataclass
class ExerciseProgress:
    """Where one learner stands on one exercise."""

    exercise: str
    state: str = "not started"  # not started / not yet / attempted / checker error / solved
    attempts: int = 0  # "not solved" and "checker error" verdicts (the stub's "not yet" is no attempt)
    attempts_since_solved: int = 0  # attempts after the last solve (all of them while never solved)
    latest_mistake: str = ""
    solved_at: float | None = None
    last_time: float | None = None
    hint_level: int = 0  # the highest hint shown

    def add(self, event: Event) -> None:
        self.last_time = max(self.last_time or event.time, event.time)
        if event.kind == "hint":
            self.hint_level = max(self.hint_level, event.hint_level)
            return
        if event.status == "solved":
            self.state, self.solved_at, self.attempts_since_solved = "solved", self.solved_at or event.time, 0
        elif event.status in ("not solved", "checker error"):
            self.attempts += 1
            self.attempts_since_solved += 1
            self.latest_mistake = event.mistake
            if self.state != "solved":
                self.state = "attempted" if event.status == "not solved" else "checker error"
        elif self.state == "not started":  # "not yet solved": the checker ran on the stub
            self.state = "not yet"


@dataclass
class PreflightProgress:
    """The learner's latest preflight: ready, not ready (and which probes failed), or not run."""

    state: str = "not run"
    failed_probes: tuple[str, ...] = ()
    last_time: float | None = None


@dataclass
class LearnerProgress:
    """One learner: each exercise, the preflight, and when they last did anything labkit records."""

    learner: str
    exercises: dict[str, ExerciseProgress] = field(default_factory=dict)
    preflight: PreflightProgress = field(default_factory=PreflightProgress)
    last_time: float | None = None

    def exercise(self, exercise: str) -> ExerciseProgress:
        return self.exercises.setdefault(exercise, ExerciseProgress(exercise))


def summarize(learner: str, events: Iterable[Event]) -> LearnerProgress:
    """Fold ``learner``'s events (any order) into their progress; other learners' events are ignored."""
    progress = LearnerProgress(learner)
    for event in sorted((event for event in events if event.learner == learner), key=lambda event: event.time):
        progress.last_time = event.time
        if event.exercise == PREFLIGHT:
            progress.preflight = PreflightProgress(event.status, event.failed_probes, event.time)
        else:
            progress.exercise(event.exercise).add(event)
    return progress
