"""LiveProfile: press a button, watch the per-node timing table fill in run by run.

Why live: statistics settle as runs accumulate, and seeing the table reorder
after the first (cold) runs is the lesson. The widget only renders: one press
is one :func:`labkit.fx.profile.profile_model` call, whose ``on_run`` callback
hands over the report after every run; sorting, top-k and grouping by op type
are the report's own (:meth:`ProfileReport.top`, :meth:`ProfileReport.by_op_type`).
The table and the bar plot always show the same rows in the same order.

Structure for tests and browser tests: the widget has the CSS class
``labkit-live-profile``; the table sits in ``<div class="labkit-live-profile-table">``
with one ``<tr>`` per shown row in its ``<tbody>``. The bar plot's alt text says it
draws that table's rows; its colours read on a light and a dark page (:mod:`labkit.core.plots`).

A kernel interrupt (KeyboardInterrupt) stops a profile: the status then says
"interrupted" and how many runs the table holds, and the interrupt goes on to
the caller. A click while a profile runs is ignored with a note, never a second
profile writing into the same widget.
"""
from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.ticker import MaxNLocator

from labkit.core.errors import LabkitValueError
from labkit.core.plots import INK, TAB10, Picture, svg_document, svg_text, text_width
from labkit.core.tables import Table
from labkit.core.widgets import PictureView, show_picture
from labkit.fx.profile import SORT_KEYS, NodeTiming, ProfileReport, profile_model, require_count, require_profilable
from labkit.fx.report import format_bytes
from labkit.fx.timeline_plot import timeline_alt, timeline_drawing, timeline_rows
from labkit.i18n.messages import N_, _, ngettext

TABLE_CLASS = "labkit-live-profile-table"
MAX_RUNS, MAX_TOP_K = 200, 100  # the ranges of the runs and top k boxes
#: What the bars show for each "sort by" key: the statistic the nodes are ranked by (name: A-Z, bars show the mean).
BAR_AXIS_LABELS = {
    "mean": N_("mean time per run (ms)"),
    "median": N_("median time per run (ms)"),
    "min": N_("fastest run's time (ms)"),
    "iqr": N_("spread of the run times, IQR (ms)"),
    "pct": "% of the whole run (mean)",  # not marked: Babel takes "% o" for a %-format and refuses any translation
    "name": N_("mean time per run (ms)"),
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
    statistic = "median" if key == "name" else key
    return [getattr(row.stats, statistic) * 1e3 for row in rows]


BAR_COLOUR = TAB10.fills[0]  # tab:blue, legible on a light and a dark page
ROW_PX, BAR_PX, PLOT_PX = 20, 14, 340  # one bar's row and bar height, and the longest bar, in CSS pixels
TITLE_PX, AXIS_PX, GAP_PX = 24, 44, 8  # the title line, the axis with its ticks and label, the space around labels


def bar_svg(labels: list[str], values: list[float], title: str, xlabel: str) -> bytes:
    """Horizontal bars in the order given, the first on top, each with its value: SVG bytes.

    Why SVG and not matplotlib: a "sort by" or "top k" change redraws the chart, and a matplotlib
    figure took 200-500 ms to lay out; this takes a few milliseconds, is sharp at any zoom, and
    sizes itself from the measured width of every label, so none is cut.
    """
    top = max(values, default=0.0)
    ticks = [tick for tick in MaxNLocator(nbins=5).tick_values(0.0, top if top > 0 else 1.0) if tick >= 0]
    scale_max = max(ticks)
    value_texts = [f"{value:.3g}" for value in values]
    left = GAP_PX + max((text_width(label) for label in labels), default=0.0) + GAP_PX
    right = GAP_PX + max([text_width(text) for text in value_texts] + [text_width(f"{scale_max:g}") / 2])
    axis_y = TITLE_PX + ROW_PX * len(labels) + 4
    tick_xs = [(tick, left + PLOT_PX * tick / scale_max) for tick in ticks]
    parts = [f'<line x1="{x:.1f}" y1="{TITLE_PX}" x2="{x:.1f}" y2="{axis_y}" stroke="{INK}" stroke-opacity="0.15"/>'
             for _, x in tick_xs]
    for row, (label, value, text) in enumerate(zip(labels, values, value_texts, strict=True)):
        middle = TITLE_PX + ROW_PX * row + ROW_PX / 2
        length = PLOT_PX * max(value, 0.0) / scale_max
        parts += [
            f'<rect class="bar" x="{left:.1f}" y="{middle - BAR_PX / 2:g}" width="{length:.1f}" height="{BAR_PX}" '
            f'fill="{BAR_COLOUR}"/>',
            svg_text(left - GAP_PX / 2, middle, label, anchor="end"),
            svg_text(left + length + GAP_PX / 2, middle, text, anchor="start"),
        ]
    parts.append(f'<line x1="{left:.1f}" y1="{axis_y}" x2="{left + PLOT_PX:.1f}" y2="{axis_y}" stroke="{INK}"/>')
    for tick, x in tick_xs:
        parts += [f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 4}" stroke="{INK}"/>',
                  svg_text(x, axis_y + 12, f"{tick:g}", size=10)]
    parts += [svg_text(left + PLOT_PX / 2, axis_y + 31, xlabel), svg_text(GAP_PX / 2, TITLE_PX / 2, title, anchor="start")]
    width = max(left + PLOT_PX + right, GAP_PX + text_width(title), left + PLOT_PX / 2 + text_width(xlabel) / 2 + GAP_PX)
    return svg_document(round(width), axis_y + AXIS_PX, title, parts)


def bars_alt(title: str, xlabel: str) -> str:
    """The bar plot in words: it draws the rows of the table above it, in the table's order."""
    return _("Horizontal bar chart of the table above, one bar per row in the table's order: {title}; bar length: "
             "{xlabel}.").format(title=title, xlabel=xlabel)


class LiveProfile(widgets.VBox):
    """Profile ``model(*inputs, **kwargs)`` with a button; table and bar plot update after every run.

    ``kwargs`` are the model's keyword inputs, as :func:`labkit.profile_model` takes them.
    """

    def __init__(
        self, model: Any, *inputs: Any, kwargs: Mapping[str, Any] | None = None, mode: str = "fast", runs: int = 5,
        warmup: int = 1, top_k: int = 10,
    ) -> None:
        runs = _check_box_value("runs", runs, MAX_RUNS)
        top_k = _check_box_value("top_k", top_k, MAX_TOP_K)
        warmup = require_count("warmup", warmup, 0, "use warmup=0 to skip it")
        # fail now, with labkit's message, not at the first click
        require_profilable(model, *inputs, kwargs=kwargs, mode=mode)
        self.model, self.inputs, self.kwargs, self.mode, self.warmup = model, inputs, dict(kwargs or {}), mode, warmup
        self.report: ProfileReport | None = None
        self.running = False
        self.runs = widgets.BoundedIntText(value=runs, min=1, max=MAX_RUNS, description=_("runs"))
        self.top_k = widgets.BoundedIntText(value=top_k, min=1, max=MAX_TOP_K, description=_("top k"))
        self.sort_by = widgets.Dropdown(options=SORT_KEYS, value="median", description=_("sort by"))
        self.group_by_type = widgets.Checkbox(value=False, description=_("group by type"))
        self.button = widgets.Button(description=_("Run profile"), button_style="primary", icon="play")
        self.progress = widgets.IntProgress(value=0, min=0, max=runs, description=_("progress"))
        self.status = widgets.HTML(_("Press <b>Run profile</b>."))
        self.table = widgets.HTML()
        self.image = PictureView()
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
            self.status.value += " " + _("<i>(already running: that click was ignored)</i>")
            return
        self.running, self.button.disabled = True, True
        total_runs, timed = self.runs.value, 0
        self.progress.bar_style = ""
        self.progress.max, self.progress.value = total_runs, 0
        self.status.value = ngettext("warming up ({count} run)...", "warming up ({count} runs)...", self.warmup).format(
            count=self.warmup)

        def show(report: ProfileReport) -> None:
            nonlocal timed
            self.report, timed = report, report.runs
            self.progress.value = timed
            self.status.value = _("run {timed} of {runs}: total {total}").format(
                timed=timed, runs=total_runs, total=html.escape(str(report.total)))
            self.redraw()

        try:
            profile_model(
                self.model, *self.inputs, kwargs=self.kwargs, warmup=self.warmup, runs=total_runs, mode=self.mode,
                on_run=show,
            )
        except KeyboardInterrupt:
            self.progress.bar_style = "warning"
            self.status.value = self._interrupted(timed, total_runs)
            raise
        except Exception as exc:  # noqa: BLE001 - in a button callback it would only reach the log
            self.progress.bar_style = "danger"
            self.status.value = _("<b>error:</b> {error}").format(error=html.escape(f"{type(exc).__name__}: {exc}"))
        finally:
            self.running, self.button.disabled = False, False

    def _interrupted(self, timed: int, total_runs: int) -> str:
        """The status after an interrupt, with table and progress matching it: a partial profile never looks complete.

        ``timed`` is the run count of the last report this profile showed (0: none yet).
        """
        if timed == 0:
            previous = " " + _("The table still shows the previous profile.") if self.report is not None else ""
            return _("<b>interrupted</b> before the first timed run finished: no runs were timed.{previous} "
                     "Press <b>Run profile</b> to start again.").format(previous=previous)
        self.progress.value = timed
        self.redraw()  # the interrupt may have come between a report and its redraw
        return _("<b>interrupted</b> after {timed} of {runs} runs: the table holds those {timed} runs only. "
                 "Press <b>Run profile</b> for a full profile.").format(timed=timed, runs=total_runs)

    def _op_type_key(self) -> str:
        """The sort key for op types: a type's time is a sum of its nodes' medians, so any time key ranks by it."""
        return "name" if self.sort_by.value == "name" else "median"

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
            order = _("A-Z") if self._op_type_key() == "name" else _("slowest first")
            axis = _("summed median time per run (ms)")
            title = _("time per op type, {order}").format(order=order)
            return [g[0] for g in groups], [g[2] * 1e3 for g in groups], title, axis
        key = self.sort_by.value
        shown = report.top(k, key).rows
        order = _("A-Z") if key == "name" else _("slowest first by {key}").format(key=key)
        title = _("{shown} of {nodes} nodes, {order}, after {runs} run(s)").format(
            shown=len(shown), nodes=report.graph_nodes, order=order, runs=report.runs)
        return [r.name for r in shown], bar_values(shown, key), title, _(BAR_AXIS_LABELS[key])

    def redraw(self) -> None:
        """Re-render the table and the plot from the latest report (no new runs)."""
        table, bars = self.shown_table(), self.shown_bars()
        if table is None or bars is None:
            return
        self.table.value = f'<div class="{TABLE_CLASS}">{table.to_html()}</div>'
        labels, values, title, xlabel = bars
        show_picture(self.image, bar_svg(labels, values, title, xlabel), bars_alt(title, xlabel))


# ---------------------------------------------------------------- the timeline and its memory


def timeline_svg(report: ProfileReport, selected: str | None = None) -> bytes:
    """:func:`labkit.fx.timeline_plot.timeline_drawing` as labkit's themed SVG: the same bytes for the same report."""
    drawing = timeline_drawing(report, selected)
    return svg_document(drawing.width, drawing.height, drawing.title, list(drawing.parts))


def timeline_picture(report: ProfileReport) -> Picture:
    """The timeline of ``report`` for a notebook cell, with its alt text (no timings in it: nbval compares it)."""
    return Picture(timeline_svg(report), timeline_alt(report))


class MemoryTimeline(widgets.VBox):
    """A profile's timeline with a slider over its nodes: the picture outlines the node picked, the caption names
    its op, its module, the bytes its outputs created and the bytes alive after it.

    Why a slider over a picture: the curve says where memory peaks, the caption says what each node holds,
    and moving along the columns connects the two. It renders a report it is given and measures nothing.
    """

    def __init__(self, report: ProfileReport) -> None:
        self.rows = timeline_rows(report)
        self.report = report
        peak = str((report.memory or {}).get("peak_node", ""))
        names = [row.name for row in self.rows]
        start = names.index(peak) if peak in names else 0
        self.slider = widgets.IntSlider(value=start, min=0, max=len(self.rows) - 1, description=_("node"),
                                        continuous_update=True)
        self.caption = widgets.HTML()
        self.image = PictureView()
        super().__init__([self.slider, self.caption, self.image])
        self.add_class("labkit-memory-timeline")
        self.slider.observe(lambda _change: self.redraw(), names="value")
        self.redraw()

    @property
    def selected(self) -> NodeTiming:
        """The node the slider picks."""
        return self.rows[self.slider.value]

    def caption_text(self) -> str:
        """The picked node in words (plain text; the widget shows it escaped)."""
        row = self.selected
        return _("node {number} of {nodes}: {name} ({op_type}) in module {module}; its outputs created {output}, "
                 "alive after it: {live}").format(
            number=self.slider.value + 1, nodes=len(self.rows), name=row.name, op_type=row.op_type,
            module=row.module or "-", output=format_bytes(row.output_bytes), live=format_bytes(row.live_bytes))

    def redraw(self) -> None:
        """Outline the picked node and caption it (no new measurement)."""
        self.caption.value = html.escape(self.caption_text())
        show_picture(self.image, timeline_svg(self.report, self.selected.name), timeline_alt(self.report))
