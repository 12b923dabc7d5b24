"""LiveProfile: press a button, watch the per-node timing table fill in run by run.

Why live: statistics settle as runs accumulate, and seeing the table reorder
after the first (cold) runs is the lesson. The widget only renders; every
number comes from :class:`labkit.fx_profile.NodeProfiler`, one run at a time.

Structure for tests and browser tests: the widget has the CSS class
``labkit-live-profile``; the table sits in ``<div class="labkit-live-profile-table">``
with one ``<tr>`` per shown row in its ``<tbody>``.
"""
from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from labkit.fx_profile import NodeProfiler, OpTypeBreakdown, ProfileReport
from labkit.plots import new_figure, to_png
from labkit.tables import Table

SORT_KEYS = ("mean", "median", "min", "iqr", "pct", "name")
TABLE_CLASS = "labkit-live-profile-table"


def bar_figure(labels: list[str], seconds: list[float], title: str) -> Figure:
    """Horizontal bars, largest on top, in milliseconds."""
    figure = new_figure(5.5, 0.6 + 0.28 * max(len(labels), 1))
    axes = figure.add_subplot()
    axes.barh(list(reversed(labels)), [s * 1e3 for s in reversed(seconds)], color="#4c72b0")
    axes.set_xlabel("mean time per run (ms)")
    axes.set_title(title, fontsize=10)
    axes.tick_params(axis="y", labelsize=8)
    return figure


class LiveProfile(widgets.VBox):
    """Profile ``model(*inputs)`` with a button; table and bar plot update after every run."""

    def __init__(self, model: Any, *inputs: Any, mode: str = "fast", runs: int = 5, warmup: int = 1, top_k: int = 10) -> None:
        NodeProfiler(model, *inputs, mode=mode)  # fail now, with labkit's message, not at the first click
        self.model, self.inputs, self.mode, self.warmup = model, inputs, mode, warmup
        self.report: ProfileReport | None = None
        self.runs = widgets.BoundedIntText(value=runs, min=1, max=200, description="runs")
        self.top_k = widgets.BoundedIntText(value=top_k, min=1, max=100, description="top k")
        self.sort_by = widgets.Dropdown(options=SORT_KEYS, value="mean", description="sort by")
        self.group_by_type = widgets.Checkbox(value=False, description="group by type")
        self.button = widgets.Button(description="Run profile", button_style="primary", icon="play")
        self.progress = widgets.IntProgress(value=0, min=0, max=runs, description="progress")
        self.status = widgets.HTML("Press <b>Run profile</b>.")
        self.table = widgets.HTML()
        self.image = widgets.Image(format="png")
        controls = widgets.HBox([self.runs, self.top_k, self.sort_by, self.group_by_type])
        super().__init__([controls, widgets.HBox([self.button, self.progress]), self.status, self.table, self.image])
        self.add_class("labkit-live-profile")
        self.button.on_click(lambda _button: self.run())
        for control in (self.top_k, self.sort_by, self.group_by_type):
            control.observe(lambda _change: self.redraw(), names="value")

    def run(self) -> None:
        """Warm up, then run ``self.runs.value`` times, redrawing after each run."""
        self.button.disabled = True
        try:
            profiler = NodeProfiler(self.model, *self.inputs, mode=self.mode)
            self.progress.max, self.progress.value = self.runs.value, 0
            self.status.value = f"warming up ({self.warmup} run{'s' if self.warmup != 1 else ''})..."
            profiler.warmup(self.warmup)
            for done in range(1, self.runs.value + 1):
                profiler.run_once()
                self.report = profiler.report()
                self.progress.value = done
                self.status.value = f"run {done} of {self.runs.value}: total {html.escape(str(self.report.total))}"
                self.redraw()
        except Exception as exc:  # noqa: BLE001 - in a button callback it would only reach the log
            self.status.value = f"<b>error:</b> {html.escape(f'{type(exc).__name__}: {exc}')}"
        finally:
            self.button.disabled = False

    def shown_table(self) -> Table | None:
        """The core's table for the current view (top-k, sort, grouping), or None before a run."""
        if self.report is None:
            return None
        k = self.top_k.value
        if self.group_by_type.value:
            rows = self.report.by_op_type().rows
            if self.sort_by.value == "name":
                rows = sorted(rows)
            return OpTypeBreakdown(rows[:k]).table()
        return self.report.top(k, self.sort_by.value).table()

    def redraw(self) -> None:
        """Re-render the table and the plot from the latest report (no new runs)."""
        table = self.shown_table()
        if table is None:
            return
        self.table.value = f'<div class="{TABLE_CLASS}">{table.to_html()}</div>'
        if self.group_by_type.value:
            groups = self.report.by_op_type().rows[: self.top_k.value]
            labels, seconds = [g[0] for g in groups], [g[2] for g in groups]
            title = "time per op type"
        else:
            shown = self.report.sorted("mean")[: self.top_k.value]
            labels, seconds = [r.name for r in shown], [r.stats.mean for r in shown]
            title = f"top {len(shown)} nodes after {self.report.runs} run(s)"
        self.image.value = to_png(bar_figure(labels, seconds, title))
