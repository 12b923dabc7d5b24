"""The result of a profile: per-node timings, by-type breakdown, text/HTML/CSV/JSON.

Why a module of its own: every way of timing a model (the fx interpreter, the
instrumented graph, forward hooks on modules) fills the same :class:`ProfileReport`,
so tables, widgets, checkers and files never care how the numbers were taken.
"""
from __future__ import annotations

import csv
import dataclasses
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from labkit.core.errors import LabkitValueError, require_count
from labkit.core.files import write_file, write_text
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.timing import RunStats, format_seconds
from labkit.fx.timeline import RunTimeline
from labkit.i18n.messages import N_, _, ngettext


@dataclass(frozen=True)
class NodeTiming:
    """One graph node's timings."""

    op: str  # call_module, call_function, call_method, get_attr; in mode "modules" also "outside"
    name: str  # node name, e.g. "layer1_0_conv1"
    target: str  # "layer1.0.conv1", "add", or an exported graph's operator, "aten.linear.default"
    op_type: str  # torch.nn class ("Conv2d"), function/method name ("add"), ATen operator ("aten.linear"), "get_attr"
    stats: RunStats
    pct: float  # median as percent of the report's share_basis (medians: one disturbed run moves a mean)
    # call_module: the module's own class ("Conv3DSimple" where op_type is "Conv3d"); an exported node: the class of
    # the innermost module it ran in ("Linear" for an aten.linear)
    module_class: str = ""
    module: str = ""  # path of the innermost module the node ran in ("encoder.layer.0.attention.self.query")
    module_stack: tuple[tuple[str, str], ...] = ()  # (path, class) of each module it ran in, outermost first
    source: str = ""  # "resnet.py:268": the line of forward that made the node (its stack trace's innermost frame)
    input_shapes: tuple[tuple[int, ...], ...] = ()  # the shape of each tensor the node took, in argument order
    output_bytes: int | None = None  # bytes of the new storage its outputs hold (None: not known, a hooked call)
    live_bytes: int | None = None  # bytes of every tensor the graph made that is still alive after the node

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "name": self.name,
            "target": self.target,
            "op_type": self.op_type,
            "mean_s": self.stats.mean,
            "median_s": self.stats.median,
            "min_s": self.stats.min,
            "iqr_s": self.stats.iqr,
            "runs": self.stats.count,
            "pct_total": self.pct,
            "module_class": self.module_class,
            "module": self.module,
            "output_bytes": self.output_bytes,
            "live_bytes": self.live_bytes,
            "source": self.source,
        }


#: The keys :meth:`ProfileReport.sorted` and :meth:`ProfileReport.top` rank nodes by.
SORT_KEYS = ("mean", "median", "min", "iqr", "pct", "name")
#: The keys :meth:`ProfileReport.by_op_type` ranks op types by. A type's time is the sum of its nodes' medians, so
#: every time key ("median", the share "pct", and "mean", kept for older code) gives that one order; "name" is A-Z.
OP_TYPE_SORT_KEYS = ("median", "mean", "pct", "name")
REPORT_HEADERS = [N_("op"), N_("node"), N_("type"), N_("mean"), N_("median"), N_("min"), N_("IQR"), N_("% total")]
#: The memory column of a graph profile's table: the bytes of tensors alive after each node.
LIVE_AFTER = N_("live after")
# Columns of to_csv and keys of NodeTiming.as_dict, fixed so an empty report still writes a header.
# New columns go at the end, so readers of older files keep working.
NODE_FIELDS = (
    "op", "name", "target", "op_type", "mean_s", "median_s", "min_s", "iqr_s", "runs", "pct_total", "module_class",
    "module", "output_bytes", "live_bytes", "source",
)
#: What a report says its graph was captured by: torch.fx's symbolic_trace, torch.export, or none (forward hooks).
CAPTURE_KINDS = ("symbolic_trace", "export", "hooks")
#: What a report's shares are of (its JSON's ``share_basis["of"]``): the rows' medians and the outside's, summed
#: (a full report that knows its time outside the nodes), or the median whole run (a report built by hand).
SUMMED_MEDIANS, MEDIAN_TOTAL = "summed node and outside medians", "median total run"
#: The keys :meth:`ModuleBreakdown.sorted` (and ``by_module(sort=...)``) rank modules by.
MODULE_SORT_KEYS = ("time", "memory")
#: The name of the group of nodes that ran in no module but the model itself, in :meth:`ProfileReport.by_module`.
TOP_LEVEL = N_("(top level)")
#: Rows that are labkit's words, not a module's name: shown in the learner's language (module_hooks.OUTSIDE too).
_ROW_WORDS = (TOP_LEVEL, N_("(outside leaf modules)"))


def shown_name(name: str) -> str:
    """A module path or row name as a table cell shows it: a newline, tab or other unprintable character escaped.

    Why: a module may be named anything (``model.add_module("a\\nb", ...)``); in a table a raw newline would
    split one row in two. The report's values (``rows``, CSV, JSON, trace) keep the name as it is.
    """
    if name in _ROW_WORDS:
        return _(name)
    if name.isprintable():
        return name
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in name)


def format_bytes(count: int | None) -> str:
    """``"1.5 MiB"``, ``"640 B"``; ``"-"`` where the bytes are not known (a hooked call)."""
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _median_sums(groups: Iterable[tuple[str, list[NodeTiming]]], basis: float) -> list[tuple[str, int, float, float, float]]:
    """``(key, nodes, summed medians, their percent of ``basis`` seconds, summed IQRs)`` per group."""
    rows = []
    for key, members in groups:
        seconds = sum(r.stats.median for r in members)
        pct = seconds / basis * 100 if basis > 0 else 0.0
        rows.append((key, len(members), seconds, pct, sum(r.stats.iqr for r in members)))
    return rows


@dataclass(frozen=True, repr=False)
class OpTypeBreakdown(ShowsAsTable):
    """Time per op type (module class, function name or ATen operator), slowest first.

    A type's ``seconds`` are the sum of its nodes' medians, its ``pct`` their share
    of the median total run, and its ``spread`` the sum of its nodes' IQRs: how
    much the runs disagreed about it.
    """

    rows: list[tuple[str, int, float, float]]  # (op_type, nodes, seconds, pct)
    spread: dict[str, float] = field(default_factory=dict)  # op_type -> the sum of its nodes' IQRs, in seconds
    # parameter reads (get_attr nodes), the run's bookkeeping and no op type: (nodes, summed medians, pct)
    parameter_reads: tuple[int, float, float] = (0, 0.0, 0.0)

    @property
    def seconds(self) -> dict[str, float]:
        return {op_type: seconds for op_type, _, seconds, _ in self.rows}

    @property
    def pct(self) -> dict[str, float]:
        return {op_type: pct for op_type, _, _, pct in self.rows}

    def top(self, k: int) -> OpTypeBreakdown:
        """The first ``k`` types in this breakdown's order (the slowest, unless sorted by name)."""
        rows = self.rows[: require_count("k", k, 1, "e.g. top(5) for the five slowest types")]
        return OpTypeBreakdown(rows, {t: self.spread[t] for t, *_ in rows if t in self.spread}, self.parameter_reads)

    def table(self) -> Table:
        return Table(
            [_("type"), _("nodes"), _("median per run"), _("spread (IQR)"), _("% total")],
            [[shown_name(t), n, format_seconds(s), _spread_text(self.spread.get(t)), f"{p:.1f}"] for t, n, s, p in self.rows],
            title=_("Time by op type (sums of node medians)") + _reads_text(self.parameter_reads, "; "),
        )


def _reads_text(reads: tuple[int, float, float], lead: str) -> str:
    """Where parameter reads' time went, or "" when the graph reads none."""
    nodes, seconds, pct = reads
    if not nodes:
        return ""
    return lead + ngettext(
        "parameter reads ({nodes} get_attr node, {seconds}, {pct}%) are the run's bookkeeping, not an op type",
        "parameter reads ({nodes} get_attr nodes, {seconds}, {pct}%) are the run's bookkeeping, not an op type", nodes,
    ).format(nodes=nodes, seconds=format_seconds(seconds), pct=f"{pct:.1f}")


def _spread_text(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)


@dataclass(frozen=True)
class ModuleTime:
    """The nodes that ran inside one module (at the depth asked for), and their time."""

    path: str  # "encoder.layer.0", or TOP_LEVEL
    module_class: str  # "BertLayer" ("" where the profile does not know it)
    nodes: int
    seconds: float  # the sum of the nodes' medians
    pct: float  # of the median total run
    spread: float  # the sum of the nodes' IQRs, in seconds
    output_bytes: int | None = None  # the bytes its nodes' outputs created (None: not known, a hooked profile)

    @property
    def label(self) -> str:
        return f"{self.path} ({self.module_class})" if self.module_class else self.path


@dataclass(frozen=True, repr=False)
class ModuleBreakdown(ShowsAsTable):
    """Time per module at one depth of the model, in the order the modules first ran (parameter reads aside).

    Depth counts the modules a node ran *in* (its module stack, the model itself
    not counted): on BERT, depth 1 is ``embeddings``, ``encoder`` and ``pooler``,
    depth 2 ``encoder.layer.0``, ``encoder.layer.1``..., depth 3 each layer's
    ``attention``, ``intermediate`` and ``output``. A node whose stack is shorter
    counts under its innermost module, one that ran in no module under
    :data:`TOP_LEVEL`, so the rows share out every node's time once.
    """

    rows: list[ModuleTime]
    depth: int

    @property
    def seconds(self) -> dict[str, float]:
        return {row.path: row.seconds for row in self.rows}

    @property
    def pct(self) -> dict[str, float]:
        return {row.path: row.pct for row in self.rows}

    def top(self, k: int, key: str = "time") -> ModuleBreakdown:
        """The ``k`` slowest modules, slowest first; ``key="memory"``: the ``k`` whose nodes' outputs hold the most bytes."""
        k = require_count("k", k, 1, "e.g. top(5) for the five slowest modules")
        return ModuleBreakdown(self.sorted(key)[:k], self.depth)

    def sorted(self, key: str = "time") -> list[ModuleTime]:
        """The rows by ``"time"`` (summed medians) or ``"memory"`` (their nodes' output bytes), largest first."""
        if key not in MODULE_SORT_KEYS:
            raise LabkitValueError(f"Cannot sort modules by {key!r}; use {' or '.join(map(repr, MODULE_SORT_KEYS))}.")
        if key == "memory":
            return sorted(self.rows, key=lambda row: row.output_bytes or 0, reverse=True)
        return sorted(self.rows, key=lambda row: row.seconds, reverse=True)

    def table(self) -> Table:
        memory = any(r.output_bytes is not None for r in self.rows)
        return Table(
            [_("module"), _("nodes"), _("median per run"), _("spread (IQR)"), _("% total"),
             *([_("output bytes")] if memory else [])],
            [[shown_name(r.label), r.nodes, format_seconds(r.seconds), _spread_text(r.spread), f"{r.pct:.1f}",
              *([format_bytes(r.output_bytes)] if memory else [])] for r in self.rows],
            title=_("Time by module at depth {depth} (sums of node medians)").format(depth=self.depth),
        )


def _summed_bytes(rows: Iterable[NodeTiming]) -> int | None:
    known = [row.output_bytes for row in rows if row.output_bytes is not None]
    return sum(known) if known else None


def _stack(row: NodeTiming) -> tuple[tuple[str, str], ...]:
    """A row's modules; a hooked module call (which records no stack) is placed by its path."""
    if row.module_stack or row.op != "call_module" or not row.target:
        return row.module_stack
    parts = row.target.split(".")
    return tuple((".".join(parts[: i + 1]), row.module_class if i == len(parts) - 1 else "") for i in range(len(parts)))


@dataclass(frozen=True, repr=False)
class ProfileReport(ShowsAsTable):
    """Per-node timings of repeated runs; renders as text, HTML, CSV and JSON.

    ``mode`` is how the nodes were timed: ``"fast"`` or ``"interpreter"`` on the
    fx graph, or ``"modules"`` (forward hooks, one row per call of a leaf module).
    ``capture`` is what made the graph: ``"symbolic_trace"`` (nodes are modules and
    functions), ``"export"`` (torch.export: nodes are ATen operators, each with
    its module) or ``"hooks"`` (no graph: mode ``"modules"``); a report built
    without it is taken as captured the way its mode implies. ``fallback_reason``
    says why the earlier captures failed: why symbolic_trace could not trace an
    exported model, or why neither captured a model that a graph mode profiled
    in ``"modules"`` (empty when the first capture tried worked), and
    ``traceable_children`` lists the largest parts that fx can trace,
    ``(qualified name, nodes)``, to profile for node-level detail. A hooked
    profile's ``largest_children`` are the model's children (``encoder``,
    ``embeddings``...) by the whole time each one ran, its hooked rows and its own
    code, the largest first: where the "(outside leaf modules)" time was spent.
    """

    rows: list[NodeTiming]  # graph order (mode "modules": order of the first call)
    total: RunStats  # whole runs
    mode: str
    warmup: int
    graph_nodes: int = 0  # timed nodes in the whole graph (``top`` keeps fewer rows)
    fallback_reason: str = ""
    traceable_children: tuple[tuple[str, int], ...] = ()
    capture: str = ""
    outside: RunStats | None = None  # a graph profile's time outside its nodes, run by run
    # a hooked profile: the model's largest children by their whole time, (name, class, median seconds, % of total)
    largest_children: tuple[tuple[str, str, float, float], ...] = ()
    notes: tuple[str, ...] = ()  # what labkit chose for the learner: use_cache=False, the copy's own parameters
    # the seconds every share is of: the sum of the rows' medians and the outside's (0: the median total run)
    share_basis: float = 0.0
    #: every timed run as it happened: each node's (or hooked call's) start and end (:mod:`labkit.fx.timeline`)
    timeline: tuple[RunTimeline, ...] = ()
    model: str = ""  # the profiled model's class ("ResNet"): the trace's outermost module slice
    #: the graph's memory: ``{"peak_bytes", "peak_node", "parameter_bytes", "input_bytes"}`` (None: a hooked profile)
    memory: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        """A profiler's full report shares each median out of the summed medians, so its shares add up to 100.

        Why not of the median total run: nearly every run of a model with many nodes is
        disturbed somewhere, so the total carries a disturbance each row's median drops (a
        hooked GPT-2: 16.5 % outside by the total, 57 % of the summed medians, as the
        cross-check counts). Only a full report that knows its time outside the nodes (its
        :attr:`outside`, or a hooked profile's outside row) is shared out so; one built by
        hand keeps the shares it was given, and :meth:`top` keeps the full report's.
        """
        if not self.capture:  # a report built by hand, or by a profiler that does not say
            object.__setattr__(self, "capture", "hooks" if self.mode == "modules" else "symbolic_trace")
        if self.capture not in CAPTURE_KINDS:
            raise LabkitValueError(f"capture must be one of {CAPTURE_KINDS}, got {self.capture!r}.")
        knows_outside = self.outside is not None or any(r.op == "outside" for r in self.rows)
        if knows_outside and len(self.rows) == self.graph_nodes:
            basis = sum(r.stats.median for r in self.rows) + (self.outside.median if self.outside else 0.0)
            object.__setattr__(self, "share_basis", basis)
            shared = [dataclasses.replace(r, pct=r.stats.median / basis * 100 if basis > 0 else 0.0) for r in self.rows]
            object.__setattr__(self, "rows", shared)

    @property
    def _basis(self) -> float:
        return self.share_basis or self.total.median

    @property
    def runs(self) -> int:
        return self.total.count

    @property
    def outside_pct(self) -> float:
        """Percent of the run spent outside every timed node, a share of :attr:`share_basis` as the rows' are.

        A graph profile records it run by run (:attr:`outside`: each run's total
        minus its nodes' times: the timing's own bookkeeping around the nodes); a
        hooked one has its ``(outside leaf modules)`` row (the model's Python
        between leaf modules). A report with neither (built by hand) falls back to
        its rows' shares: the total minus the nodes.
        """
        if self.outside is not None:
            return self.outside.median / self._basis * 100 if self._basis > 0 else 0.0
        outside_rows = [r for r in self.rows if r.op == "outside"]
        if outside_rows and self._basis > 0:
            return sum(r.stats.median for r in outside_rows) / self._basis * 100
        if len(self.rows) < self.graph_nodes:
            raise LabkitValueError(
                f"This report keeps {len(self.rows)} of {self.graph_nodes} nodes (top()), so the time outside them is "
                "unknown here: ask the full report."
            )
        return max(0.0, 100.0 - sum(r.pct for r in self.rows))

    def sorted(self, key: str = "median", descending: bool = True) -> list[NodeTiming]:
        """Rows sorted by ``mean``, ``median``, ``min``, ``iqr``, ``pct`` or ``name``."""
        if key == "name":
            return sorted(self.rows, key=lambda r: r.name, reverse=descending)
        if key == "pct":
            return sorted(self.rows, key=lambda r: r.pct, reverse=descending)
        if key not in SORT_KEYS:
            raise LabkitValueError(f"Cannot sort by {key!r}; use mean, median, min, iqr, pct or name.")
        return sorted(self.rows, key=lambda r: getattr(r.stats, key), reverse=descending)

    def top(self, k: int = 10, key: str = "median") -> ProfileReport:
        """A report with only the first ``k`` nodes by ``key``: the slowest, or A-Z for ``"name"``.

        Percentages stay those of the whole run.
        """
        k = require_count("k", k, 1, "e.g. top(10) for the ten slowest nodes")
        return dataclasses.replace(self, rows=self.sorted(key, descending=key != "name")[:k])

    def by_op_type(self, key: str = "median") -> OpTypeBreakdown:
        """Sum of node medians per op type (module class, function name, ATen operator): slowest first, or A-Z.

        A type's time is the sum of its nodes' medians, so it can be ranked by that
        time (``"median"``, its share ``"pct"`` or ``"mean"``: the same order) or by
        name only (``"name"``). Medians, because one disturbed run moves a mean.
        """
        if key not in OP_TYPE_SORT_KEYS:
            raise LabkitValueError(
                f"Cannot sort op types by {key!r}: a type's time is the sum of its nodes' medians; "
                "use median, pct or name."
            )
        groups: dict[str, list[NodeTiming]] = {}
        for row in self.rows:
            if row.op != "get_attr":  # a parameter read computes nothing: bookkeeping (parameter_reads)
                groups.setdefault(row.op_type, []).append(row)
        sums = _median_sums(groups.items(), self._basis)
        rows = [(op_type, nodes, seconds, pct) for op_type, nodes, seconds, pct, _ in sums]
        spread = {op_type: iqr for op_type, *_, iqr in sums}
        ordered = sorted(rows) if key == "name" else sorted(rows, key=lambda r: r[2], reverse=True)
        return OpTypeBreakdown(ordered, spread, self.parameter_reads)

    @property
    def parameter_reads(self) -> tuple[int, float, float]:
        """``(nodes, summed medians, pct)`` of the get_attr nodes: reads of parameters, the run's bookkeeping.

        Why apart: a read computes nothing and issues no operator, yet on an exported
        graph (every parameter read first) reads took up to 86 % of a small model's time.
        """
        reads = [r for r in self.rows if r.op == "get_attr"]
        seconds = sum(r.stats.median for r in reads)
        return len(reads), seconds, (seconds / self._basis * 100 if self._basis > 0 else 0.0)

    def by_module(self, depth: int = 1, sort: str | None = None) -> ModuleBreakdown:
        """Sum of node medians per module at ``depth`` (see :class:`ModuleBreakdown`), in the order they first ran.

        On an exported transformer, ``by_module(2)`` gives each layer's time and
        ``by_module(3)`` its attention and MLP blocks. A symbolic_trace profile
        groups its nodes the same way (fx records their modules too); a hooked
        profile by each leaf module's path (every prefix of it a level). ``sort="time"`` or
        ``"memory"`` (the bytes its nodes' outputs created) orders them largest first instead.
        """
        depth = require_count("depth", depth, 1, "e.g. by_module(2) for a transformer's layers")
        groups: dict[tuple[str, str], list[NodeTiming]] = {}
        # An exported graph reads every parameter first: a module's place is that of its first node that computes.
        for row in sorted(self.rows, key=lambda r: r.op == "get_attr"):
            stack = _stack(row)
            key = stack[min(depth, len(stack)) - 1] if stack else (row.name if row.op == "outside" else TOP_LEVEL, "")
            groups.setdefault(key, []).append(row)
        sums = _median_sums(((path, members) for (path, _), members in groups.items()), self._basis)
        classes = [cls for _, cls in groups]
        sizes = [_summed_bytes(members) for members in groups.values()]
        rows = [
            ModuleTime(path, cls, nodes, seconds, pct, iqr, size)
            for (path, nodes, seconds, pct, iqr), cls, size in zip(sums, classes, sizes, strict=True)
        ]
        breakdown = ModuleBreakdown(rows, depth)
        return breakdown if sort is None else ModuleBreakdown(breakdown.sorted(sort), depth)

    def table(self) -> Table:
        """One row per node; an exported profile adds each node's module (its node names say nothing of it)."""
        exported = self.capture == "export"
        rows: list[Sequence[Any]] = [
            [
                r.op,
                shown_name(r.name),
                _shown_type(r),
                *([shown_name(r.module) or TOP_LEVEL] if exported else []),
                format_seconds(r.stats.mean),
                format_seconds(r.stats.median),
                format_seconds(r.stats.min),
                format_seconds(r.stats.iqr),
                f"{r.pct:.1f}",
                *([format_bytes(r.live_bytes)] if self.memory is not None else []),
            ]
            for r in self.rows
            if r.op != "get_attr"
        ]
        shown = self._shown_rows(len(rows), complete=len(self.rows) == self.graph_nodes)
        title = _("{shown}, mode={mode}{capture}, {runs}; total {total}").format(
            shown=shown, mode=self.mode, capture=self._capture_note(),
            runs=ngettext("{runs} run after {warmup} warm-up", "{runs} runs after {warmup} warm-up", self.runs).format(
                runs=self.runs, warmup=self.warmup), total=self.total)
        headers = [*REPORT_HEADERS[:3], N_("module"), *REPORT_HEADERS[3:]] if exported else list(REPORT_HEADERS)
        if self.memory is not None:
            headers.append(LIVE_AFTER)
        return Table([_(header) for header in headers], rows, title=title)

    def _shown_rows(self, shown: int, complete: bool) -> str:
        """How many rows the table shows: "71 nodes", or "top 10 of 71 nodes" ("module calls" for a hooked profile)."""
        if self.mode == "modules":
            if complete:
                return ngettext("{count} module call", "{count} module calls", shown).format(count=shown)
            return _("top {shown} of {total} module calls").format(shown=shown, total=self.graph_nodes)
        if complete:
            return ngettext("{count} node", "{count} nodes", shown).format(count=shown)
        return _("top {shown} of {total} nodes").format(shown=shown, total=self.graph_nodes)

    def memory_table(self, k: int | None = None) -> Table:
        """The first ``k`` nodes (every node: ``None``) in execution order with their memory: the shapes each took,
        the bytes its outputs created and the bytes alive after it. Why apart from :meth:`table`: bytes are facts of
        the graph and the input shapes, the same on every run, so a notebook can store this table and nbval compare it.
        """
        if self.memory is None:
            raise LabkitValueError(_("this profile has no memory per node (a hooked profile, mode='modules'); profile "
                                     "the model in mode 'fast' or 'faithful' to see its memory."))
        rows = self.rows if k is None else self.rows[:require_count("k", k, 1, "memory_table(k) shows the first k nodes")]
        peak = self.memory["peak_node"]
        return Table(
            [_("node"), _("type"), _("input shapes"), _("output bytes"), _("alive after"), _("peak")],
            [[shown_name(r.name), _shown_type(r), " ".join("x".join(map(str, shape)) for shape in r.input_shapes),
              format_bytes(r.output_bytes), format_bytes(r.live_bytes), "<-" if r.name == peak else ""] for r in rows],
            title=_("Memory per node of {model}, in execution order (parameters {parameters} and inputs {inputs} "
                    "counted apart)").format(model=self.model or "model",
                                             parameters=format_bytes(self.memory["parameter_bytes"]),
                                             inputs=format_bytes(self.memory["input_bytes"])),
        )

    def memory_note(self) -> str:
        """The line under the table: the peak of live bytes, the node where it happens, what is counted apart."""
        if self.memory is None:
            return ""
        return _("Memory: peak {peak} of tensors alive, after node {node}; parameters and buffers {parameters} and "
                 "inputs {inputs} counted apart").format(
            peak=format_bytes(self.memory["peak_bytes"]), node=self.memory["peak_node"],
            parameters=format_bytes(self.memory["parameter_bytes"]), inputs=format_bytes(self.memory["input_bytes"]))

    def children_note(self) -> str:
        """The line under a hooked profile's table: its largest children by whole time ("" if it has none)."""
        if not self.largest_children:
            return ""
        listed = ", ".join(f"{shown_name(name)} ({cls}) {format_seconds(seconds)} {pct:.1f}%"
                           for name, cls, seconds, pct in self.largest_children)
        return f"Largest children of the model (whole time, median per run): {listed}"

    def _notes(self) -> list[str]:
        reads = _reads_text(self.parameter_reads, "Not shown as nodes: ") if len(self.rows) == self.graph_nodes else ""
        notes = (reads, self.memory_note(), self.children_note(), *(f"Note: {note}" for note in self.notes))
        return [note for note in notes if note]

    def to_text(self) -> str:
        return "\n".join([self.table().to_text(), *self._notes()])

    def _repr_html_(self) -> str:
        return "\n".join([self.table().to_html(), *(f"<p>{html.escape(note)}</p>" for note in self._notes())])

    def _capture_note(self) -> str:
        if self.capture == "export":
            failed = ": symbolic_trace could not, see fallback_reason" if self.fallback_reason else ""
            return f" (graph by torch.export{failed})"
        if not self.fallback_reason:
            return ""
        if "torch.export" in self.fallback_reason:
            return " (neither fx nor torch.export captured the model: see fallback_reason)"
        return " (fx could not trace the model: see fallback_reason)"

    def to_trace(self, path: str | Path) -> Path:
        """Write the timed runs as trace-event JSON for Perfetto, ``chrome://tracing`` or speedscope; returns the path.

        Each run is a slice holding a slice per module call, each holding its nodes
        (``args``: op, target, input shapes, module, source line, bytes), with the live
        bytes as a counter; see :mod:`labkit.fx.trace_events`. Open it at
        https://ui.perfetto.dev or https://www.speedscope.app (both read the file in the browser).
        """
        from labkit.fx.trace_events import write_trace

        return write_trace(self, path, model_name=self.model)

    def to_dicts(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.rows]

    def to_csv(self, path: str | Path) -> Path:
        """One line per node (columns :data:`NODE_FIELDS`); seconds as floats. Returns the path written.

        Written atomically through :func:`labkit.core.files.write_file`: a symlink is
        followed, a folder or special file is refused, a missing folder is an error.
        """

        def write(handle: TextIO) -> None:
            writer = csv.DictWriter(handle, fieldnames=NODE_FIELDS)
            writer.writeheader()
            writer.writerows(self.to_dicts())

        return write_file(path, write)

    def share_basis_json(self) -> dict[str, Any]:
        """What every ``pct`` is a share of, as the saved report says it: the seconds, and which sum they are.

        Why in the file: a saved report's percentages are read without the code, and a full
        report's (summed medians and the outside) differ from a hand-built one's (the median run).
        """
        of = SUMMED_MEDIANS if self.share_basis else MEDIAN_TOTAL
        return {"seconds": self._basis, "of": of}

    def to_json(self, path: str | Path) -> Path:
        """``{"mode", "capture", "warmup", "total", "share_basis", "parameter_reads", "nodes": [...],
        "fallback_reason", "traceable_children", "outside", "largest_children", "notes", "memory", "timeline"}``.

        ``timeline`` is every timed run, ``{"clock_start_s", "total_s", "spans": [[node, start_s, end_s], ...]}``.

        ``share_basis`` (``{"seconds", "of"}``) says what every ``pct_total`` is a share of;
        ``parameter_reads`` (``{"nodes", "median_s", "pct"}``) the get_attr nodes, which the
        op-type table leaves out. Returns the path written (as :meth:`to_csv`).
        """
        reads, read_seconds, read_pct = self.parameter_reads
        payload = {
            "mode": self.mode,
            "capture": self.capture,
            "warmup": self.warmup,
            "total": self.total.as_dict(),
            "share_basis": self.share_basis_json(),
            "parameter_reads": {"nodes": reads, "median_s": read_seconds, "pct": read_pct},
            "nodes": self.to_dicts(),
            "fallback_reason": self.fallback_reason,
            "traceable_children": [list(child) for child in self.traceable_children],
            "outside": self.outside.as_dict() if self.outside is not None else None,
            "largest_children": [
                {"name": name, "class": cls, "median_s": seconds, "pct_total": pct}
                for name, cls, seconds, pct in self.largest_children
            ],
            "notes": list(self.notes),
            "memory": dict(self.memory) if self.memory is not None else None,
            "timeline": [run.as_dict() for run in self.timeline],
        }
        return write_text(path, json.dumps(payload, indent=2))



def _shown_type(row: NodeTiming) -> str:
    """``Conv3d (Conv3DSimple)`` when the module's class is not the type it is counted as."""
    if row.module_class and row.module_class != row.op_type:
        return f"{row.op_type} ({row.module_class})"
    return row.op_type



__all__ = [
    "CAPTURE_KINDS",
    "LIVE_AFTER",
    "MEDIAN_TOTAL",
    "MODULE_SORT_KEYS",
    "NODE_FIELDS",
    "OP_TYPE_SORT_KEYS",
    "REPORT_HEADERS",
    "SORT_KEYS",
    "SUMMED_MEDIANS",
    "TOP_LEVEL",
    "format_bytes",
    "shown_name",
    "ModuleBreakdown",
    "ModuleTime",
    "NodeTiming",
    "OpTypeBreakdown",
    "ProfileReport",
]
