"""labkit's timeline and torch.profiler's, in one trace-event file on one clock.

Why: the cross-check runs both instruments over the very same forward passes,
so one file can show labkit's run, module and node slices above torch.profiler's
ATen operators, and a learner sees which kernels each node became.

**How the clocks are aligned.** labkit stamps with ``time.perf_counter``
(``CLOCK_MONOTONIC`` on Linux); torch.profiler stamps its events on the unix
clock (``CLOCK_REALTIME``, read through its approximate TSC clock) and writes
``ts`` as microseconds after the trace's ``baseTimeNanoseconds``.
:func:`clock_offset_ns` reads ``time.time_ns`` between two ``perf_counter_ns``
reads, many times, and keeps the pair read closest together (a bracket well
under a microsecond): the offset between the two clocks. labkit's slices are
moved onto torch.profiler's ``ts`` scale with it; no marker's timing enters the
offset, so the run markers (``labkit.crosscheck.run``) remain an independent
check: each labkit run lies inside its marker. The stated tolerance is
:data:`ALIGNMENT_TOLERANCE_US`: torch.profiler converts its TSC reads to unix
time by a line fitted at start and stop, and each side rounds to a nanosecond.

Each top-level operator of a run gets an ``args["labkit node"]``: the node
(or hooked module) whose slice holds its start.
"""
from __future__ import annotations

import bisect
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.core.errors import LabkitValueError
from labkit.core.files import write_text
from labkit.fx.trace_events import check_trace, numbered_lanes, trace_document, trace_events

if TYPE_CHECKING:
    from labkit.fx.report import ProfileReport

#: How far (µs) an operator may sit outside its node's slice and a labkit run outside its marker (see the docstring).
ALIGNMENT_TOLERANCE_US = 5.0


def clock_offset_ns(reads: int = 50) -> int:
    """``CLOCK_REALTIME`` minus ``time.perf_counter``, in nanoseconds, from the tightest of ``reads`` brackets."""
    best: tuple[int, int] | None = None
    for _ in range(reads):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    assert best is not None
    return best[1]


def exported_trace(prof: Any) -> dict[str, Any]:
    """torch.profiler's own ``export_chrome_trace``, read back as a dict (it writes only to a file)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "torch_profiler.json"
        prof.export_chrome_trace(str(path))
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def combined_document(report: ProfileReport, torch_trace: dict[str, Any], offset_ns: int,
                      model_name: str = "") -> dict[str, Any]:
    """torch.profiler's trace with labkit's slices added on its clock, each top-level operator naming its node."""
    base_ns = int(torch_trace.get("baseTimeNanoseconds", 0))
    labkit = trace_events(report, origin=0.0, clock_offset=(offset_ns - base_ns) / 1e9, model_name=model_name)
    theirs = [dict(event) for event in torch_trace.get("traceEvents", [])]
    _name_nodes(theirs, labkit)
    other = {key: value for key, value in torch_trace.items() if key != "traceEvents"}
    document = {**other, **trace_document([*theirs, *labkit], capture=report.capture, mode=report.mode,
                                          clock="labkit's perf_counter moved onto torch.profiler's ts by a measured "
                                                f"offset; tolerance {ALIGNMENT_TOLERANCE_US} µs")}
    return document


def _name_nodes(theirs: list[dict[str, Any]], labkit: list[dict[str, Any]]) -> None:
    """Give each operator directly inside a run marker the labkit node (or hooked module) whose slice holds its start."""
    from labkit.fx.crosscheck import RUN_MARKER

    hooked = any(e["ph"] == "X" and e.get("cat") == "run" and "note" in e["args"] for e in labkit)
    kind = "module" if hooked else "node"  # a hooked profile has module slices only
    parts = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in labkit if e["ph"] == "X" and e.get("cat") == kind)
    starts = [part[0] for part in parts]
    for event in top_level_operators(theirs, RUN_MARKER):
        at = bisect.bisect_right(starts, event["ts"]) - 1  # the last slice starting at or before it
        if (at < 0 or parts[at][1] + ALIGNMENT_TOLERANCE_US < event["ts"]) and at + 1 < len(parts):
            at += 1  # none holds it: the next one, if it starts within the tolerance
        if 0 <= at and parts[at][0] - ALIGNMENT_TOLERANCE_US <= event["ts"] <= parts[at][1] + ALIGNMENT_TOLERANCE_US:
            event.setdefault("args", {})["labkit node"] = parts[at][2]


def top_level_operators(events: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    """The ``cpu_op`` slices directly inside each ``marker`` slice (none between), in time order."""
    out: list[dict[str, Any]] = []
    for lane_events in _by_lane(events).values():
        stack: list[dict[str, Any]] = []
        for event in sorted(lane_events, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= event["ts"]:
                stack.pop()
            if stack and stack[-1]["name"] == marker and event.get("cat") == "cpu_op":
                out.append(event)
            stack.append(event)
    return sorted(out, key=lambda e: e["ts"])


def _by_lane(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    lanes: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for event in events:
        if event.get("ph") == "X":
            lanes.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    return lanes


def write_combined(report: ProfileReport | None, torch_trace: dict[str, Any] | None, offset_ns: int,
                   path: str | Path, model_name: str = "") -> Path:
    """Write :func:`combined_document`, its lanes numbered (:func:`~labkit.fx.trace_events.numbered_lanes`), to
    ``path`` after :func:`~labkit.fx.trace_events.check_trace`; returns the path."""
    if report is None or torch_trace is None:
        raise LabkitValueError(
            "This cross-check kept no runs (one built by hand): run compare_with_torch_profiler(model, x) and call "
            "to_trace on what it returns."
        )
    document = numbered_lanes(combined_document(report, torch_trace, offset_ns, model_name))
    check_trace(document, strict=True)  # torch.profiler's string lanes numbered: speedscope opens it too
    return write_text(path, json.dumps(document, separators=(",", ":"), ensure_ascii=True, allow_nan=False))


__all__ = ["ALIGNMENT_TOLERANCE_US", "clock_offset_ns", "combined_document", "exported_trace",
           "top_level_operators", "write_combined"]
