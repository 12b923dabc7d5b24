"""The result of a profile: per-node timings, by-type breakdown, text/HTML/CSV/JSON.

Why a module of its own: every way of timing a model (the fx interpreter, the
instrumented graph, forward hooks on modules) fills the same :class:`ProfileReport`,
so tables, widgets, checkers and files never care how the numbers were taken.
"""
from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from labkit.core.errors import LabkitValueError, require_count
from labkit.core.files import write_file, write_text
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.timing import RunStats, format_seconds


@dataclass(frozen=True)
class NodeTiming:
    """One graph node's timings."""

    op: str  # call_module, call_function, call_method, get_attr; in mode "modules" also "outside"
    name: str  # node name, e.g. "layer1_0_conv1"
    target: str  # "layer1.0.conv1" or "add"
    op_type: str  # torch.nn class ("Conv2d"), function/method name ("add"), or "get_attr"
    stats: RunStats
    pct: float  # mean as percent of the mean total run
    module_class: str = ""  # call_module: the module's own class ("Conv3DSimple" where op_type is "Conv3d")

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
        }


#: The keys :meth:`ProfileReport.sorted` and :meth:`ProfileReport.top` rank nodes by.
SORT_KEYS = ("mean", "median", "min", "iqr", "pct", "name")
#: The keys :meth:`ProfileReport.by_op_type` ranks op types by (a type's time is a sum of means).
OP_TYPE_SORT_KEYS = ("mean", "pct", "name")
REPORT_HEADERS = ["op", "node", "type", "mean", "median", "min", "IQR", "% total"]
# Columns of to_csv and keys of NodeTiming.as_dict, fixed so an empty report still writes a header.
# New columns go at the end, so readers of older files keep working.
NODE_FIELDS = (
    "op", "name", "target", "op_type", "mean_s", "median_s", "min_s", "iqr_s", "runs", "pct_total", "module_class",
)


@dataclass(frozen=True, repr=False)
class OpTypeBreakdown(ShowsAsTable):
    """Time per op type (module class or function name), slowest first."""

    rows: list[tuple[str, int, float, float]]  # (op_type, nodes, seconds, pct)

    @property
    def seconds(self) -> dict[str, float]:
        return {op_type: seconds for op_type, _, seconds, _ in self.rows}

    @property
    def pct(self) -> dict[str, float]:
        return {op_type: pct for op_type, _, _, pct in self.rows}

    def top(self, k: int) -> OpTypeBreakdown:
        """The first ``k`` types in this breakdown's order (the slowest, unless sorted by name)."""
        return OpTypeBreakdown(self.rows[: require_count("k", k, 1, "e.g. top(5) for the five slowest types")])

    def table(self) -> Table:
        return Table(
            ["type", "nodes", "mean per run", "% total"],
            [[t, n, format_seconds(s), f"{p:.1f}"] for t, n, s, p in self.rows],
            title="Time by op type",
        )


@dataclass(frozen=True, repr=False)
class ProfileReport(ShowsAsTable):
    """Per-node timings of repeated runs; renders as text, HTML, CSV and JSON.

    ``mode`` is how the nodes were timed: ``"fast"`` or ``"interpreter"`` on the
    fx graph, or ``"modules"`` (forward hooks, one row per call of a leaf module).
    ``fallback_reason`` says why a profile asked for a graph mode ran in
    ``"modules"`` (fx could not trace the model; empty otherwise), and
    ``traceable_children`` lists the largest parts that fx can trace,
    ``(qualified name, nodes)``, to profile for node-level detail.
    """

    rows: list[NodeTiming]  # graph order (mode "modules": order of the first call)
    total: RunStats  # whole runs
    mode: str
    warmup: int
    graph_nodes: int = 0  # timed nodes in the whole graph (``top`` keeps fewer rows)
    fallback_reason: str = ""
    traceable_children: tuple[tuple[str, int], ...] = ()

    @property
    def runs(self) -> int:
        return self.total.count

    def sorted(self, key: str = "mean", descending: bool = True) -> list[NodeTiming]:
        """Rows sorted by ``mean``, ``median``, ``min``, ``iqr``, ``pct`` or ``name``."""
        if key == "name":
            return sorted(self.rows, key=lambda r: r.name, reverse=descending)
        if key == "pct":
            return sorted(self.rows, key=lambda r: r.pct, reverse=descending)
        if key not in SORT_KEYS:
            raise LabkitValueError(f"Cannot sort by {key!r}; use mean, median, min, iqr, pct or name.")
        return sorted(self.rows, key=lambda r: getattr(r.stats, key), reverse=descending)

    def top(self, k: int = 10, key: str = "mean") -> ProfileReport:
        """A report with only the first ``k`` nodes by ``key``: the slowest, or A-Z for ``"name"``.

        Percentages stay those of the whole run.
        """
        k = require_count("k", k, 1, "e.g. top(10) for the ten slowest nodes")
        return dataclasses.replace(self, rows=self.sorted(key, descending=key != "name")[:k])

    def by_op_type(self, key: str = "mean") -> OpTypeBreakdown:
        """Sum of mean node times per module class / function name: slowest first, or A-Z for ``key="name"``.

        A type's time is the sum of its nodes' means, so it can be ranked by that
        time (``"mean"``, or its share ``"pct"``: the same order) or by name only.
        """
        if key not in OP_TYPE_SORT_KEYS:
            raise LabkitValueError(
                f"Cannot sort op types by {key!r}: a type's time is the sum of its nodes' means; use mean, pct or name."
            )
        groups: dict[str, list[NodeTiming]] = {}
        for row in self.rows:
            groups.setdefault(row.op_type, []).append(row)
        rows = [
            (op_type, len(members), sum(r.stats.mean for r in members), sum(r.pct for r in members))
            for op_type, members in groups.items()
        ]
        if key == "name":
            return OpTypeBreakdown(sorted(rows))
        return OpTypeBreakdown(sorted(rows, key=lambda r: r[2], reverse=True))

    def table(self) -> Table:
        rows: list[Sequence[Any]] = [
            [
                r.op,
                r.name,
                _shown_type(r),
                format_seconds(r.stats.mean),
                format_seconds(r.stats.median),
                format_seconds(r.stats.min),
                format_seconds(r.stats.iqr),
                f"{r.pct:.1f}",
            ]
            for r in self.rows
        ]
        unit = "module calls" if self.mode == "modules" else "nodes"
        shown = f"{len(self.rows)} {unit}" if len(self.rows) == self.graph_nodes else (
            f"top {len(self.rows)} of {self.graph_nodes} {unit}"
        )
        fallback = " (fx could not trace the model: see fallback_reason)" if self.fallback_reason else ""
        title = f"{shown}, mode={self.mode}{fallback}, {self.runs} runs after {self.warmup} warm-up; total {self.total}"
        return Table(REPORT_HEADERS, rows, title=title)

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

    def to_json(self, path: str | Path) -> Path:
        """``{"mode", "warmup", "total": {...}, "nodes": [...], "fallback_reason", "traceable_children"}``.

        Returns the path written (as :meth:`to_csv`).
        """
        payload = {
            "mode": self.mode,
            "warmup": self.warmup,
            "total": self.total.as_dict(),
            "nodes": self.to_dicts(),
            "fallback_reason": self.fallback_reason,
            "traceable_children": [list(child) for child in self.traceable_children],
        }
        return write_text(path, json.dumps(payload, indent=2))



def _shown_type(row: NodeTiming) -> str:
    """``Conv3d (Conv3DSimple)`` when the module's class is not the type it is counted as."""
    if row.module_class and row.module_class != row.op_type:
        return f"{row.op_type} ({row.module_class})"
    return row.op_type



__all__ = [
    "NODE_FIELDS",
    "OP_TYPE_SORT_KEYS",
    "REPORT_HEADERS",
    "SORT_KEYS",
    "NodeTiming",
    "OpTypeBreakdown",
    "ProfileReport",
]
