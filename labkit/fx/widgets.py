"""LiveProfile: press a button, watch the per-node timing table fill in run by run.

Why live: statistics settle as runs accumulate, and seeing the table reorder
after the first (cold) runs is the lesson. The widget only renders; every
number comes from :class:`labkit.fx.profile.NodeProfiler`, one run at a time.

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
from labkit.fx.profile import NodeProfiler, OpTypeBreakdown, ProfileReport, check_count

SORT_KEYS = ("mean", "median", "min", "iqr", "pct", "name")
TABLE_CLASS = "labkit-live-profile-table"
MAX_RUNS, MAX_TOP_K = 200, 100  # the ranges of the runs and top k boxes


def _check_box_value(name: str, value: Any, maximum: int) -> int:
    """A value for a box that takes 1 to ``maximum``: refused outside it, since the box would clamp it."""
    takes = f"LiveProfile takes 1 to {maximum}"
    value = check_count(name, value, 1, takes)
    if value > maximum:
        raise LabkitValueError(f"{name} must be at most {maximum} (got {value}); {takes}.")
    return value


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
        runs = _check_box_value("runs", runs, MAX_RUNS)
        top_k = _check_box_value("top_k", top_k, MAX_TOP_K)
        warmup = check_count("warmup", warmup, 0, "use warmup=0 to skip it")
        NodeProfiler(model, *inputs, mode=mode)  # fail now, with labkit's message, not at the first click
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
        The global RNG is restored afterwards (see :meth:`NodeProfiler.session`).
        """
        if self.running:
            self.status.value += " <i>(already running: that click was ignored)</i>"
            return
        self.running, self.button.disabled = True, True
        total_runs, profiler = self.runs.value, None
        self.progress.bar_style = ""
        try:
            profiler = NodeProfiler(self.model, *self.inputs, mode=self.mode)
            self.progress.max, self.progress.value = total_runs, 0
            self.status.value = f"warming up ({self.warmup} run{'s' if self.warmup != 1 else ''})..."
            with profiler.session():
                profiler.warmup(self.warmup)
                for done in range(1, total_runs + 1):
                    profiler.run_once()
                    self.report = profiler.report()
                    self.progress.value = done
                    self.status.value = f"run {done} of {total_runs}: total {html.escape(str(self.report.total))}"
                    self.redraw()
        except KeyboardInterrupt:
            self.progress.bar_style = "warning"
            self.status.value = self._interrupted(profiler, total_runs)
            raise
        except Exception as exc:  # noqa: BLE001 - in a button callback it would only reach the log
            self.progress.bar_style = "danger"
            self.status.value = f"<b>error:</b> {html.escape(f'{type(exc).__name__}: {exc}')}"
        finally:
            self.running, self.button.disabled = False, False

    def _interrupted(self, profiler: NodeProfiler | None, total_runs: int) -> str:
        """The status after an interrupt, with table and progress matching it: a partial profile never looks complete."""
        timed = len(profiler.totals) if profiler is not None else 0
        if timed == 0:
            warming = profiler is None or profiler.warmup_runs < self.warmup
            where = "during warm-up" if warming else "before the first timed run finished"
            previous = " The table still shows the previous profile." if self.report is not None else ""
            return f"<b>interrupted</b> {where}: no runs were timed.{previous} Press <b>Run profile</b> to start again."
        self.report = profiler.report()  # the interrupt may have come between a run and its redraw
        self.progress.value = timed
        self.redraw()
        return (
            f"<b>interrupted</b> after {timed} of {total_runs} runs: the table holds those {timed} runs only. "
            "Press <b>Run profile</b> for a full profile."
        )

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
