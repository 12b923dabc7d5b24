"""A profile as trace-event JSON, the format ``torch.profiler``'s ``export_chrome_trace`` writes.

Why: Perfetto, ``chrome://tracing`` and speedscope read this format, and none
of them can show an eager model organised by modules; a labkit report knows each
node's module stack, source line and, run by run, its start and end
(:mod:`labkit.fx.timeline`). This is one writer from those recorded spans to the
viewer's format, as Kineto's ``output_json.cpp`` is for torch.profiler's:

- ``M`` (metadata) events name the process and its lanes;
- one ``X`` (complete) slice per timed run, holding one slice per module call
  (``layer1`` ⊃ ``layer1.0`` ⊃ ``layer1.0.conv1``), each holding its graph
  nodes' slices, all on one lane, so every slice nests in the one around it
  (Perfetto drops slices that overlap). ``ts`` and ``dur`` are microseconds from
  whole nanoseconds, on a 1/1024 µs grid (exact in binary: a parent's end is never a rounding short of its child's);
- the process id is a number, :data:`LABKIT_PID` (speedscope opens no file with a string one);
- each node's ``args``: op, target, op type, module path and class, input shapes,
  source line (``file:line``), the bytes its outputs hold and what is alive after it;
- ``C`` (counter) events: the live tensor bytes after each node, a curve under the slices;
- a hooked profile (no graph) has module slices only, and says so.

:func:`check_trace` checks a file against the rules the viewers rely on; the
tests run it on every trace labkit writes and on torch.profiler's own, and
``tests/ui/test_speedscope_ui.py`` opens them in speedscope. :func:`numbered_lanes`
makes the copy of torch.profiler's export that speedscope opens.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.core.errors import LabkitValueError
from labkit.core.files import write_text

if TYPE_CHECKING:
    from labkit.fx.report import NodeTiming, ProfileReport
    from labkit.fx.timeline import RunTimeline

#: The process id labkit's events are under: a number (speedscope opens no file with a string pid), above any
#: the OS hands out, so it stays clear of torch.profiler's (the OS's process id) in a combined file.
LABKIT_PID = 10_000_000
#: The lane (thread id) of the run, module and node slices; the memory counter has its own track by name.
LANE = 0
#: What a hooked profile's trace says about what it shows.
HOOKS_NOTE = "hooks tier (no graph): module slices only, one per hooked call"
#: The counter's name: live tensor bytes after each node.
LIVE_BYTES = "live tensor bytes"
#: labkit writes ``ts`` and ``dur`` as whole multiples of 1/GRID µs: exact in binary, so that ``ts + dur`` of a
#: child never comes out a rounding past its parent's end, in any reader.
GRID = 1024


class TraceFormatError(LabkitValueError):
    """A trace breaks a rule of the trace-event format that a viewer relies on (see :func:`check_trace`)."""


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _us(ns: int) -> float:
    """Whole nanoseconds as microseconds on the 1/:data:`GRID` µs grid (a monotonic map: order is kept)."""
    return round(ns * GRID / 1000) / GRID


def _span(start_ns: int, end_ns: int) -> dict[str, float]:
    """``ts`` and ``dur`` (µs, on the grid) of a slice; ``ts + dur`` is exactly the end's grid value."""
    ts = _us(start_ns)
    return {"ts": ts, "dur": max(_us(end_ns) - ts, 0.0)}


def _slice(name: str, start_ns: int, end_ns: int, pid: Any, args: Mapping[str, Any], cat: str) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": LANE, **_span(start_ns, end_ns), "args": dict(args)}


def _node_args(row: NodeTiming) -> dict[str, Any]:
    args: dict[str, Any] = {
        "op": row.op, "target": row.target, "op type": row.op_type, "module": row.module,
        "module class": row.module_class, "input shapes": [list(shape) for shape in row.input_shapes],
        "source": row.source,
    }
    if row.output_bytes is not None:
        args["output bytes"] = row.output_bytes
        args["live bytes after"] = row.live_bytes
    return args


def trace_events(report: ProfileReport, *, pid: Any = LABKIT_PID, origin: float | None = None,
                 clock_offset: float = 0.0, model_name: str = "") -> list[dict[str, Any]]:
    """The report's timeline as trace events (``M``, ``X`` and ``C``), runs where they happened on its clock.

    ``origin`` is the clock reading put at ``ts`` 0 (the first run's start by default);
    ``clock_offset`` is added to every clock reading first: the cross-check puts
    labkit's slices on torch.profiler's clock with it. Raises when the report kept no timeline.
    """
    if not report.timeline:
        raise LabkitValueError(
            "This report kept no timeline (a report built by hand, or saved before labkit kept one): profile the "
            "model again with profile_model(...), then call to_trace."
        )
    hooks = report.capture == "hooks"
    model = model_name or "model"
    process = f"labkit profile of {model} ({report.capture}, mode={report.mode})"
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": LANE, "args": {"name": process}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": LANE,
         "args": {"labels": HOOKS_NOTE if hooks else "graph nodes inside their modules"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": LANE, "args": {"name": "runs, modules and nodes"}},
        {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": LANE, "args": {"sort_index": 0}},
    ]
    rows = {row.name: row for row in report.rows}
    zero = (report.timeline[0].clock_start if origin is None else origin) - clock_offset
    for index, run in enumerate(report.timeline):
        base = _ns(run.clock_start - zero)
        run_args = {"run": index, "capture": report.capture, "mode": report.mode, "warm-up runs": report.warmup}
        if hooks:
            run_args["note"] = HOOKS_NOTE
        events.append(_slice(f"run {index}", base, base + _ns(run.total), pid, run_args, "run"))
        spans = _hook_slices(run, rows, base, pid) if hooks else _graph_slices(run, rows, base, pid, model)
        events.extend(spans)
        if not hooks:
            events.extend(_counters(run, rows, base, pid))
    return events


def _graph_slices(run: RunTimeline, rows: Mapping[str, NodeTiming], base: int, pid: Any, model: str) -> list[dict[str, Any]]:
    """Node slices, each inside a slice per module call (opened and closed as the nodes' module stacks change)."""
    out: list[dict[str, Any]] = []
    spans = [(rows[span.key], base + _ns(span.start), base + _ns(span.end)) for span in run.spans if span.key in rows]
    if not spans:
        return out
    root = {"ph": "X", "name": model, "cat": "module", "pid": pid, "tid": LANE, "args": {"module": "", "class": model}}
    open_modules: list[tuple[tuple[str, str], dict[str, Any], list[int]]] = []  # (module, its slice, [start, end])

    def close(keep: int) -> None:
        while len(open_modules) > keep:
            _, event, (began, ended) = open_modules.pop()
            event.update(_span(began, ended))

    for row, start, end in spans:
        stack = tuple(row.module_stack)
        common = 0
        while common < min(len(stack), len(open_modules)) and open_modules[common][0] == stack[common]:
            common += 1
        close(common)
        for path, cls in stack[common:]:
            event = {"ph": "X", "name": path, "cat": "module", "pid": pid, "tid": LANE,
                     "args": {"module": path, "class": cls}}
            out.append(event)
            open_modules.append(((path, cls), event, [start, end]))
        out.append(_slice(row.name, start, end, pid, _node_args(row), "node"))
        for _, _, bounds in open_modules:  # a module's slice ends where its last node ends
            bounds[1] = end
    close(0)
    root.update(_span(spans[0][1], spans[-1][2]))
    return [root, *out]


def _hook_slices(run: RunTimeline, rows: Mapping[str, NodeTiming], base: int, pid: Any) -> list[dict[str, Any]]:
    """One slice per hooked call: a row's (a leaf, a unit, a split unit's own code) or a child of the model's."""
    out = []
    for span in run.spans:
        row = rows.get(span.key)
        args: dict[str, Any] = {"module": span.key.removesuffix(" (own code)").split("#")[0]}
        if row is not None:
            args.update({"op type": row.op_type, "module class": row.module_class})
        out.append(_slice(span.key, base + _ns(span.start), base + _ns(span.end), pid, args, "module"))
    return out


def _counters(run: RunTimeline, rows: Mapping[str, NodeTiming], base: int, pid: Any) -> list[dict[str, Any]]:
    """The live-bytes curve: one ``C`` event at each node's end (what is alive after it), and 0 at the run's start."""
    points: list[tuple[int, int]] = [(base, 0)]
    for span in run.spans:
        live = rows[span.key].live_bytes if span.key in rows else None
        if live is not None:
            points.append((base + _ns(span.end), live))
    if len(points) == 1:
        return []
    return [{"ph": "C", "name": LIVE_BYTES, "pid": pid, "tid": LANE, "ts": _us(ts), "args": {"bytes": value}}
            for ts, value in points]


def trace_document(events: Iterable[dict[str, Any]], **other: Any) -> dict[str, Any]:
    """``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``, as torch.profiler writes it."""
    return {"traceEvents": list(events), "displayTimeUnit": "ms", "otherData": {"writer": "labkit", **other}}


def write_trace(report: ProfileReport, path: str | Path, *, model_name: str = "") -> Path:
    """Write ``report``'s timeline to ``path`` as trace-event JSON (see the module docstring); returns the path."""
    document = trace_document(trace_events(report, model_name=model_name), capture=report.capture, mode=report.mode)
    check_trace(document, strict=True, grid=True)
    return write_text(path, json.dumps(document, separators=(",", ":"), ensure_ascii=True, allow_nan=False))


# ------------------------------------------------------------------------------------ the rules

_PHASES = {"X", "M", "C", "i", "I", "B", "E", "s", "t", "f", "b", "e", "n", "P", "O", "N", "D", "R"}


def _refuse_constant(name: str) -> float:
    raise TraceFormatError(f"A trace is strict JSON: {name} is not a JSON number (Python's json writes it, viewers refuse it).")


def _read(document: Any) -> Any:
    """The document itself, or the file's, parsed as strict JSON; a dict is checked to dump as strict JSON."""
    if isinstance(document, (str, Path)):
        return json.loads(Path(document).read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    try:
        json.dumps(document, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TraceFormatError(f"A trace is strict JSON (no NaN or Infinity, only JSON types): {error}") from None
    return document


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")


def check_trace(document: Any, *, strict: bool = False, grid: bool = False) -> dict[str, int]:
    """Check a trace-event document (a dict, or a path to one) against the rules viewers rely on; counts by phase.

    The rules: strict JSON (no ``NaN``, no ``Infinity``); a ``traceEvents`` list; every
    event has a known ``ph``, a ``pid`` and a string ``name``; ``X`` events have finite
    ``ts >= 0`` and ``dur >= 0`` (microseconds); ``C`` events numeric ``args``; ``M``
    events name what they name in ``args``; every process with slices or counters has an
    ``M`` event (its ``process_name``, or torch.profiler's sort index); and on each lane
    (``pid``, ``tid``) the ``X`` slices nest: one that starts inside another ends inside it
    (to the nanosecond).

    ``strict``: also what speedscope needs (jlfwong/speedscope#470): integer ``pid`` and
    ``tid`` on every event, a ``process_name`` for every process with slices and a
    ``thread_name`` for every lane with slices; torch.profiler's own export breaks it,
    :func:`numbered_lanes` mends a copy. ``grid``: every ``ts`` and ``dur`` is a whole
    multiple of 1/:data:`GRID` µs, as labkit writes them. Raises
    :class:`TraceFormatError` naming the first event that breaks a rule.
    """
    document = _read(document)
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceFormatError("A trace needs a 'traceEvents' list.")
    counts: dict[str, int] = {}
    lanes: dict[tuple[Any, Any], list[tuple[int, int, str]]] = {}
    named, used, process_names, thread_names = set(), set(), set(), set()
    for event in events:
        phase = event.get("ph") if isinstance(event, dict) else None
        if phase not in _PHASES or "pid" not in event or not isinstance(event.get("name", ""), str):
            raise TraceFormatError(f"Not a trace event (a known 'ph', a 'pid', a string 'name'): {str(event)[:200]}")
        counts[phase] = counts.get(phase, 0) + 1
        lane = (event["pid"], event.get("tid"))
        if strict and not all(isinstance(v, int) and not isinstance(v, bool) for v in lane):
            raise TraceFormatError(f"speedscope reads integer 'pid' and 'tid' only (numbered_lanes mends a copy): "
                                   f"{str(event)[:200]}")
        if phase == "M":
            if not isinstance(event.get("args"), dict):
                raise TraceFormatError(f"An M event names its value in 'args': {event}")
            named.add(event["pid"])
            if event["name"] == "process_name":
                process_names.add(event["pid"])
            elif event["name"] == "thread_name":
                thread_names.add(lane)
            continue
        if phase in ("X", "C"):  # a global instant (torch.profiler's "Record Window End") has no process
            used.add(event["pid"])
        if phase == "C" and not all(_finite(v) for v in event.get("args", {}).values()):
            raise TraceFormatError(f"A C event's args are numbers: {event}")
        if phase == "X":
            ts, dur = event.get("ts"), event.get("dur")
            if not (_finite(ts) and _finite(dur)) or ts < 0 or dur < 0:
                raise TraceFormatError(f"An X slice has a finite 'ts' >= 0 and a 'dur' >= 0, in microseconds: {event}")
            lanes.setdefault(lane, []).append((round(ts * 1000), round((ts + dur) * 1000), event["name"]))
        if grid and phase in ("X", "C") and not all(
                _finite(event.get(key, 0)) and float(event.get(key, 0) * GRID).is_integer() for key in ("ts", "dur")):
            raise TraceFormatError(f"labkit writes 'ts' and 'dur' on a 1/{GRID} µs grid: {str(event)[:200]}")
    missing = used - (process_names if strict else named)
    if missing:
        raise TraceFormatError(f"No M event names or places pid {sorted(map(str, missing))[0]} (process_name).")
    unnamed = set(lanes) - thread_names if strict else set()
    if unnamed:
        raise TraceFormatError(f"No thread_name M event names lane {sorted(map(str, unnamed))[0]} (pid, tid).")
    for lane, slices in lanes.items():
        _check_nesting(lane, slices)
    return counts


def numbered_lanes(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` whose every ``pid`` and ``tid`` is an integer, each lane named: what speedscope opens.

    Why: torch.profiler's ``export_chrome_trace`` puts its spans under string ids
    (``"Spans"``, ``"PyTorch Profiler"``), and speedscope then opens nothing ("Could not
    find events for key", jlfwong/speedscope#470, #480). Integer ids are kept; each string
    one gets a fresh integer, and its old name becomes the ``process_name`` or
    ``thread_name`` where none was given. ``document`` itself is never changed.
    """
    events = [json.loads(json.dumps(event)) for event in document.get("traceEvents", [])]
    ints = [v for e in events for v in (e.get("pid"), e.get("tid")) if isinstance(v, int) and not isinstance(v, bool)]
    fresh = iter(range(max(ints, default=0) + 1, 2**62))
    numbers: dict[Any, int] = {}

    def number(value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if value not in numbers:
            numbers[value] = next(fresh)
        return numbers[value]

    processes: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    named_processes, named_threads = set(), set()
    for event in events:
        pid, tid = event.get("pid"), event.get("tid", 0)
        event["pid"], event["tid"] = number(pid), number(tid)
        lane = (event["pid"], event["tid"])
        processes.setdefault(event["pid"], str(pid))
        if event.get("ph") == "X":
            threads.setdefault(lane, str(tid))
        if event.get("ph") == "M" and event.get("name") == "process_name":
            named_processes.add(event["pid"])
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            named_threads.add(lane)
    names = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
             for pid, name in processes.items() if pid not in named_processes]
    names += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
              for (pid, tid), name in threads.items() if (pid, tid) not in named_threads]
    return {**document, "traceEvents": [*names, *events]}


def _check_nesting(lane: tuple[Any, Any], slices: list[tuple[int, int, str]]) -> None:
    stack: list[tuple[int, int, str]] = []
    for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack and end > stack[-1][1]:
            raise TraceFormatError(
                f"Slices overlap on lane {lane}: {name!r} ({start / 1000} to {end / 1000} µs) starts inside "
                f"{stack[-1][2]!r} but ends after it ({stack[-1][1] / 1000} µs); a viewer drops one of them."
            )
        stack.append((start, end, name))


__all__ = [
    "HOOKS_NOTE",
    "LABKIT_PID",
    "LANE",
    "GRID",
    "LIVE_BYTES",
    "TraceFormatError",
    "check_trace",
    "numbered_lanes",
    "trace_document",
    "trace_events",
    "write_trace",
]
