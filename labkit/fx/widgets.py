"""LiveProfile: press a button, watch the per-node timing table fill in run by run.

Why live: statistics settle as runs accumulate, and seeing the table reorder
after the first (cold) runs is the lesson. The widget only renders: one press
is one :func:`labkit.fx.profile.profile_model` call, whose ``on_run`` callback
hands over the report after every run; sorting, top-k and grouping by op type
are the report's own (:meth:`ProfileReport.top`, :meth:`ProfileReport.by_op_type`).
The table and the bar plot always show the same rows in the same order.

Structure for tests and browser tests: the widget has the CSS class
``labkit-live-profile``; the table sits in ``<div class="labkit-live-profile-table">``
with one ``<tr>`` per shown row in its ``<tbody>``.

A kernel interrupt (KeyboardInterrupt) stops a profile: the status then says
"interrupted" and how many runs the table holds, and the interrupt goes on to
the caller. A click while a profile runs is ignored with a note, never a second
profile writing into the same widget.
"""
from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from labkit.core.errors import LabkitValueError
from labkit.core.plots import new_figure, to_png
from labkit.core.tables import Table
from labkit.fx.profile import SORT_KEYS, NodeTiming, ProfileReport, profile_model, require_count, require_profilable

TABLE_CLASS = "labkit-live-profile-table"
MAX_RUNS, MAX_TOP_K = 200, 100  # the ranges of the runs and top k boxes
#: What the bars show for each "sort by" key: the statistic the nodes are ranked by (name: A-Z, bars show the mean).
BAR_AXIS_LABELS = {
    "mean": "mean time per run (ms)",
    "median": "median time per run (ms)",
    "min": "fastest run's time (ms)",
    "iqr": "spread of the run times, IQR (ms)",
    "pct": "% of the whole run (mean)",
    "name": "mean time per run (ms)",
}


def _check_box_value(name: str, value: Any, maximum: int) -> int:
    """A value for a box that takes 1 to ``maximum``: refused outside it, since the box would clamp it."""
    takes = f"LiveProfile takes 1 to {maximum}"
    value = require_count(name, value, 1, takes)
    if value > maximum:
        raise LabkitValueError(f"{name} must be at most {maximum} (got {value}); {takes}.")
    return value


def bar_values(rows: list[NodeTiming], key: str) -> list[float]:
    """Each row's value on the bar plot for the ``key`` it is ranked by (see :data:`BAR_AXIS_LABELS`)."""
    if key == "pct":
        return [row.pct for row in rows]
    statistic = "mean" if key == "name" else key
    return [getattr(row.stats, statistic) * 1e3 for row in rows]


def bar_figure(labels: list[str], values: list[float], title: str, xlabel: str) -> Figure:
    """Horizontal bars in the order given, the first on top."""
    figure = new_figure(5.5, 0.6 + 0.28 * max(len(labels), 1))
    axes = figure.add_subplot()
    axes.barh(list(reversed(labels)), list(reversed(values)), color="#4c72b0")
    axes.set_xlabel(xlabel)
    axes.set_title(title, fontsize=10)
    axes.tick_params(axis="y", labelsize=8)
    return figure


class LiveProfile(widgets.VBox):
    """Profile ``model(*inputs)`` with a button; table and bar plot update after every run."""

    def __init__(self, model: Any, *inputs: Any, mode: str = "fast", runs: int = 5, warmup: int = 1, top_k: int = 10) -> None:
        runs = _check_box_value("runs", runs, MAX_RUNS)
        top_k = _check_box_value("top_k", top_k, MAX_TOP_K)
        warmup = require_count("warmup", warmup, 0, "use warmup=0 to skip it")
        require_profilable(model, *inputs, mode=mode)  # fail now, with labkit's message, not at the first click
        self.model, self.inputs, self.mode, self.warmup = model, inputs, mode, warmup
        self.report: ProfileReport | None = None
        self.running = False
        self.runs = widgets.BoundedIntText(value=runs, min=1, max=MAX_RUNS, description="runs")
        self.top_k = widgets.BoundedIntText(value=top_k, min=1, max=MAX_TOP_K, description="top k")
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
        """Warm up, then run ``self.runs.value`` times, redrawing after each run.

        Ignored (with a note in the status) while a profile is already running.
        The global RNG is restored afterwards (see :func:`labkit.fx.profile.profile_model`).
        """
        if self.running:
            self.status.value += " <i>(already running: that click was ignored)</i>"
            return
        self.running, self.button.disabled = True, True
        total_runs, timed = self.runs.value, 0
        self.progress.bar_style = ""
        self.progress.max, self.progress.value = total_runs, 0
        self.status.value = f"warming up ({self.warmup} run{'s' if self.warmup != 1 else ''})..."

        def show(report: ProfileReport) -> None:
            nonlocal timed
            self.report, timed = report, report.runs
            self.progress.value = timed
            self.status.value = f"run {timed} of {total_runs}: total {html.escape(str(report.total))}"
            self.redraw()

        try:
            profile_model(self.model, *self.inputs, warmup=self.warmup, runs=total_runs, mode=self.mode, on_run=show)
        except KeyboardInterrupt:
            self.progress.bar_style = "warning"
            self.status.value = self._interrupted(timed, total_runs)
            raise
        except Exception as exc:  # noqa: BLE001 - in a button callback it would only reach the log
            self.progress.bar_style = "danger"
            self.status.value = f"<b>error:</b> {html.escape(f'{type(exc).__name__}: {exc}')}"
        finally:
            self.running, self.button.disabled = False, False

    def _interrupted(self, timed: int, total_runs: int) -> str:
        """The status after an interrupt, with table and progress matching it: a partial profile never looks complete.

        ``timed`` is the run count of the last report this profile showed (0: none yet).
        """
        if timed == 0:
            previous = " The table still shows the previous profile." if self.report is not None else ""
            return (
                f"<b>interrupted</b> before the first timed run finished: no runs were timed.{previous} "
                "Press <b>Run profile</b> to start again."
            )
        self.progress.value = timed
        self.redraw()  # the interrupt may have come between a report and its redraw
        return (
            f"<b>interrupted</b> after {timed} of {total_runs} runs: the table holds those {timed} runs only. "
            "Press <b>Run profile</b> for a full profile."
        )

    def _op_type_key(self) -> str:
        """The sort key for op types: a type's time is a sum of means, so any time key ranks by it."""
        return "name" if self.sort_by.value == "name" else "mean"

    def shown_table(self) -> Table | None:
        """The core's table for the current view (top-k, sort, grouping), or None before a run."""
        if self.report is None:
            return None
        k = self.top_k.value
        if self.group_by_type.value:
            return self.report.by_op_type(self._op_type_key()).top(k).table()
        return self.report.top(k, self.sort_by.value).table()

    def shown_bars(self) -> tuple[list[str], list[float], str, str] | None:
        """Labels, values, title and axis label of the bar plot: the table's rows, in the table's order."""
        report, k = self.report, self.top_k.value
        if report is None:
            return None
        if self.group_by_type.value:
            groups = report.by_op_type(self._op_type_key()).top(k).rows
            order = "A-Z" if self._op_type_key() == "name" else "slowest first"
            return [g[0] for g in groups], [g[2] * 1e3 for g in groups], f"time per op type, {order}", BAR_AXIS_LABELS["mean"]
        key = self.sort_by.value
        shown = report.top(k, key).rows
        order = "A-Z" if key == "name" else f"slowest first by {key}"
        title = f"{len(shown)} of {report.graph_nodes} nodes, {order}, after {report.runs} run(s)"
        return [r.name for r in shown], bar_values(shown, key), title, BAR_AXIS_LABELS[key]

    def redraw(self) -> None:
        """Re-render the table and the plot from the latest report (no new runs)."""
        table, bars = self.shown_table(), self.shown_bars()
        if table is None or bars is None:
            return
        self.table.value = f'<div class="{TABLE_CLASS}">{table.to_html()}</div>'
        self.image.value = to_png(bar_figure(*bars))
