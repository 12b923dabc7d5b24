"""Every timed run of a profile, kept as it happened: each part's start and end within its run.

Why a module of its own: a report's statistics (median, IQR) cannot be turned
back into a timeline, and a timeline is what the field's viewers (Perfetto,
``chrome://tracing``, speedscope) show. So each timed run is kept as plain
values, on the clock the profiler already reads (``time.perf_counter``), and
every view (the trace-event JSON of :mod:`labkit.fx.trace_events`, the widgets)
is a writer over them. Nothing here reads a clock: the profilers record the
stamps they take anyway, and the spans are computed after the run's clock stopped.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """One timed part of one run: a graph node, or a hooked module's call (``key`` is its report row's name,
    or for a hooked module with no row of its own, its path). Seconds from the run's start."""

    key: str
    start: float
    end: float


@dataclass(frozen=True)
class RunTimeline:
    """One timed run: where it started on ``time.perf_counter``'s clock (to line it up with another instrument),
    how long it took, and its :class:`Span` s in the order they started."""

    clock_start: float
    total: float
    spans: tuple[Span, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "clock_start_s": self.clock_start,
            "total_s": self.total,
            "spans": [[span.key, span.start, span.end] for span in self.spans],
        }


def from_stamps(keys: Sequence[str], clock_start: float, stamps: Sequence[float], end: float) -> RunTimeline:
    """A graph run from the clock stamps the instrumented graph took: node ``i`` ran from stamp ``i`` to ``i + 1``.

    Why from stamps: fast mode already reads the clock once between nodes, so the
    timeline costs it nothing per node; ``clock_start`` and ``end`` are the run's own reads.
    """
    spans = tuple(
        Span(key, stamps[index] - clock_start, stamps[index + 1] - clock_start) for index, key in enumerate(keys)
    )
    return RunTimeline(clock_start, end - clock_start, spans)


__all__ = ["RunTimeline", "Span", "from_stamps"]
