"""How many events a learner may post a minute: a token bucket per learner, kept in the board's memory.

Why: a flood from one learner (tens of thousands of events a minute, from a loop in a cell) must cost
the board little and leave the other learners' events and the instructor's grid on time, while an
honest learner (a few verdicts a minute) or a kernel sending its backlog at once is never refused. An
event refused here gets a 429, which the learner's sender retries later (:mod:`labkit.progress.sender`);
the bucket forgets nothing but is emptied by a board restart, which costs a flooder one burst more.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class EventRate:
    """At most ``per_minute`` events a minute for each learner, after a first ``burst``."""

    per_minute: int
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # learner -> (events left, when)

    def left(self, learner: str) -> float:
        """How many events ``learner`` may post now."""
        now = self.clock()
        left, then = self._buckets.get(learner, (float(self.burst), now))
        return min(float(self.burst), left + (now - then) * self.per_minute / 60)

    def take(self, learner: str, events: int) -> float:
        """Charge ``events`` to ``learner``: 0 when they may post them now, else the seconds until they may (nothing charged)."""
        left = self.left(learner)
        if events > left:
            return (events - left) * 60 / self.per_minute
        self._buckets[learner] = (left - events, self.clock())
        return 0.0
