"""Live plot of jacfwd vs jacrev time as the output size sweeps: ``JacobianScaling``.

Why: "forward mode wins when the Jacobian is tall" sticks once a learner drags
a slider and watches the jacrev curve climb past the flat jacfwd curve. The
timings come from :func:`labkit.forward_ad.jacobian_cost.jacobian_sweep`; this widget only
chooses the sizes and re-draws the plot after every measured point, so the plot
grows while the sweep runs.

The plot is SVG drawn here (:func:`sweep_svg`), not a matplotlib figure: laying out
log-log axes in matplotlib took 300-500 ms a redraw on a 2-core machine, longer than a
small sweep point; the SVG takes a few milliseconds and is sharp at any zoom. Its colours
read on a light and a dark page (:mod:`labkit.core.plots`), the two modes differ in marker
as well as colour (circles for jacfwd, squares for jacrev), and it comes with alt text and
the sweep's table folded under it (:meth:`JacobianSweep.table`).
"""
from __future__ import annotations

import html
import math
import numbers
import threading

import ipywidgets as widgets

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.plots import INK, TAB10, svg_document, svg_text, text_width
from labkit.core.widgets import PictureView, show_picture
from labkit.forward_ad.jacobian_cost import JacobianSweep, default_out_dims, jacobian_sweep
from labkit.i18n.messages import N_, _

SIZES = [2**k for k in range(1, 11)]  # 2 .. 1024
BATCHES = [None, 16, 64]  # what ``batch`` takes: None is one example, no vmap
# The dropdown's choices: "none" is 0 there, since ipywidgets reads a None value as "nothing selected" (a blank box).
BATCH_OPTIONS = [(N_("none (one example)"), 0), ("16 (vmap)", 16), ("64 (vmap)", 64)]
# Output sizes run from in/span to in*span. Wider spans only add sizes far from the
# crossover, and the largest Jacobian (batch x in*span x in) grows with span: at
# span 4096 a sweep ran past 6 GB. 8 already reaches 2 GB at in = 1024, batch 64.
SPANS = (1, 2, 4, 8)

# ---------------------------------------------------------------- the plot

MODE_COLOURS = {"jacfwd": TAB10.fills[0], "jacrev": TAB10.fills[1]}  # tab:blue and tab:orange, legible on light and dark
CROSSOVER_COLOUR, IN_COLOUR = TAB10.fills[3], TAB10.fills[7]  # tab:red and tab:gray
MARKER_RADIUS = 3.5


def _marker(mode: str, x: float, y: float, colour: str) -> str:
    """A measured point: a circle for jacfwd, a square for jacrev, so the curves differ without colour too."""
    if mode == "jacfwd":
        return f'<circle class="point {mode}" cx="{x:.1f}" cy="{y:.1f}" r="{MARKER_RADIUS}" fill="{colour}"/>'
    side = 2 * MARKER_RADIUS
    return (f'<rect class="point {mode}" x="{x - MARKER_RADIUS:.1f}" y="{y - MARKER_RADIUS:.1f}" width="{side:g}" '
            f'height="{side:g}" fill="{colour}"/>')
PLOT_WIDTH, PLOT_HEIGHT = 420, 220  # the axes box, in CSS pixels
TITLE_PX, X_AXIS_PX, GAP_PX, LEGEND_LINE_PX = 30, 44, 8, 18
X_PAD = 1.5  # the x range reaches this factor beyond the smallest and largest size


def _whole_decades(low: float, high: float) -> tuple[int, int]:
    """The exponents of the powers of ten around ``[low, high]``: the y range, with a labelled tick at each end."""
    bottom, top = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return bottom, max(top, bottom + 1)


def _spread_ms(sweep: JacobianSweep, mode: str) -> list[tuple[float, float, float]]:
    """(median, low, high) in ms of ``mode`` at every point: the median and the IQR around it (low kept above 0)."""
    spread = []
    for point in sweep.points:
        stats = getattr(point, mode)
        median, half = stats.median * 1e3, stats.iqr / 2 * 1e3
        spread.append((median, median - half if median - half > 0 else median, median + half))
    return spread


def sweep_svg(sweep: JacobianSweep, selected_out: int | None = None, planned_out_dims: list[int] | None = None) -> bytes:
    """Median jacfwd and jacrev time against output size (log-log), IQR as error bars, crossover marked: SVG bytes.

    ``planned_out_dims`` (every size the sweep will time) fixes the x range while the sweep
    runs, so the axes do not jump with each point.
    """
    if not sweep.points:
        raise LabkitValueError("sweep_svg draws measured points, and this sweep has none yet; draw it after its first point.")
    spreads = {mode: _spread_ms(sweep, mode) for mode in MODE_COLOURS}
    sizes = [*(planned_out_dims or []), *sweep.out_dims, sweep.in_features]
    x_low, x_high = math.log2(min(sizes) / X_PAD), math.log2(max(sizes) * X_PAD)
    y_low, y_high = _whole_decades(min(low for s in spreads.values() for _, low, _ in s),
                                   max(high for s in spreads.values() for _, _, high in s))
    y_labels = [f"{10.0**e:g}" for e in range(y_low, y_high + 1)]
    left = GAP_PX + LEGEND_LINE_PX + max(text_width(label, 10) for label in y_labels) + GAP_PX
    top = TITLE_PX

    def x_at(size: float) -> float:
        return left + (math.log2(size) - x_low) / (x_high - x_low) * PLOT_WIDTH

    def y_at(ms: float) -> float:
        return top + (y_high - math.log10(ms)) / (y_high - y_low) * PLOT_HEIGHT

    bottom, right = top + PLOT_HEIGHT, left + PLOT_WIDTH
    parts = []
    for exponent, label in zip(range(y_low, y_high + 1), y_labels, strict=True):  # decades: grid line, tick, label
        y = y_at(10.0**exponent)
        parts += [f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" stroke="{INK}" stroke-opacity="0.12"/>',
                  svg_text(left - GAP_PX / 2, y, label, anchor="end", size=10)]
        if exponent < y_high:  # minor ticks at 2..9 times the decade
            parts += [f'<line x1="{left:.1f}" y1="{y_at(k * 10.0**exponent):.1f}" x2="{left + 3:.1f}" '
                      f'y2="{y_at(k * 10.0**exponent):.1f}" stroke="{INK}"/>' for k in range(2, 10)]
    for exponent in range(math.ceil(x_low), math.floor(x_high) + 1):  # powers of two on x
        x = x_at(2.0**exponent)
        parts += [f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="{INK}"/>',
                  svg_text(x, bottom + 13, f"{2**exponent}", size=10)]
    marks: list[tuple[str, float, str, str]] = [
        ("in", sweep.in_features, f"out = in = {sweep.in_features}", f'stroke="{IN_COLOUR}" stroke-dasharray="2 3"')
    ]
    if sweep.crossover is not None:
        marks.append(("crossover", sweep.crossover, f"crossover ≈ {sweep.crossover:.0f}",
                      f'stroke="{CROSSOVER_COLOUR}" stroke-dasharray="6 4" stroke-width="1.5"'))
    if selected_out is not None:
        marks.append(("selected", selected_out, f"selected out = {selected_out}",
                      f'stroke="{INK}" stroke-opacity="0.25" stroke-width="6"'))
    for name, size, _label, style in marks:
        parts.append(f'<line class="mark {name}" x1="{x_at(size):.1f}" y1="{top}" x2="{x_at(size):.1f}" y2="{bottom}" {style}/>')
    for mode, colour in MODE_COLOURS.items():
        places = [(x_at(size), y_at(median), y_at(low), y_at(high))
                  for size, (median, low, high) in zip(sweep.out_dims, spreads[mode], strict=True)]
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in places)
        parts.append(f'<polyline class="curve {mode}" points="{line}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for x, y, y_lowest, y_highest in places:
            parts += [f'<path class="spread {mode}" d="M{x - 3:.1f},{y_lowest:.1f}h6M{x:.1f},{y_lowest:.1f}V{y_highest:.1f}'
                      f'M{x - 3:.1f},{y_highest:.1f}h6" stroke="{colour}"/>',
                      _marker(mode, x, y, colour)]
    parts.append(f'<rect x="{left}" y="{top}" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" fill="none" stroke="{INK}"/>')
    legend = [(mode, f'stroke="{colour}" stroke-width="1.5"') for mode, colour in MODE_COLOURS.items()]
    legend += [(label, style) for _, _, label, style in marks]
    legend_x = right + 2 * GAP_PX
    for row, (label, style) in enumerate(legend):
        y = top + GAP_PX + row * LEGEND_LINE_PX
        parts += [f'<line x1="{legend_x}" y1="{y}" x2="{legend_x + 22}" y2="{y}" {style}/>',
                  svg_text(legend_x + 28, y, label, anchor="start", size=10)]
        if label in MODE_COLOURS:
            parts.append(_marker(label, legend_x + 11, y, MODE_COLOURS[label]).replace('class="point', 'class="key', 1))
    batch = "" if sweep.batch is None else f", batch {sweep.batch}"
    title = f"Jacobian of an MLP R^{sweep.in_features} → R^out{batch}"
    parts += [svg_text(left + PLOT_WIDTH / 2, TITLE_PX / 2, title, size=12),
              svg_text(left + PLOT_WIDTH / 2, bottom + 31, _("output dimension (input fixed)")),
              svg_text(0, 0, _("median time (ms)"), size=11).replace(
                  "<text ", f'<text transform="translate({GAP_PX + 4},{top + PLOT_HEIGHT / 2:.1f}) rotate(-90)" ', 1)]
    legend_width = 28 + max(text_width(label, 10) for label, _ in legend)
    width = max(legend_x + legend_width + GAP_PX, left + PLOT_WIDTH / 2 + text_width(title, 12) / 2 + GAP_PX)
    return svg_document(round(width), bottom + X_AXIS_PX, title, parts)


def sweep_alt(sweep: JacobianSweep) -> str:
    """The plot in words: what it draws, where jacfwd overtakes jacrev, and where its numbers are."""
    batch = "" if sweep.batch is None else f", batch {sweep.batch}"
    return (f"Log-log plot of the median time of jacfwd (circles) and jacrev (squares) for the Jacobian of an MLP "
            f"with input size {sweep.in_features}{batch}, against output sizes {', '.join(map(str, sweep.out_dims))}; "
            f"{sweep.summary()}.")


def _check_span(span: int) -> None:
    wanted = f"span must be one of {SPANS} (output sizes run from in/span to in*span)"
    if isinstance(span, bool) or not isinstance(span, numbers.Integral):
        raise LabkitTypeError(f"{wanted}, got {span!r} ({type(span).__name__}).")
    if span not in SPANS:
        why = "; larger spans time Jacobians of several GB" if span > max(SPANS) else ""
        raise LabkitValueError(f"{wanted}, got {span!r}{why}.")


def _check_choices(in_features: int, out_features: int, batch: int | None) -> None:
    """The sliders and the dropdown offer fixed choices; say which, before building them."""
    for name, value in (("in_features", in_features), ("out_features", out_features)):
        if value not in SIZES:
            raise LabkitValueError(f"{name} must be one of the slider sizes {SIZES}, got {value!r}.")
    if batch not in BATCHES:
        raise LabkitValueError(f"batch must be one of {BATCHES}, got {batch!r}.")


class JacobianScaling(widgets.VBox):
    """Sliders for input and output size, a batch option, and a live jacfwd/jacrev plot."""

    def __init__(
        self,
        in_features: int = 32,
        out_features: int = 64,
        batch: int | None = 16,
        *,
        span: int = 8,
        run: bool = True,
    ) -> None:
        _check_choices(in_features, out_features, batch)
        _check_span(span)
        if not isinstance(run, bool):
            raise LabkitTypeError(f"run must be True or False, got {run!r}.")
        self._span = span
        self.in_slider = widgets.SelectionSlider(
            options=SIZES, value=in_features, description=_("input dim"), continuous_update=False
        )
        self.out_slider = widgets.SelectionSlider(
            options=SIZES, value=out_features, description=_("output dim"), continuous_update=False
        )
        self.batch = widgets.Dropdown(options=[(_(label), size) for label, size in BATCH_OPTIONS], value=batch or 0,
                                      description=_("batch"))
        self.status = widgets.HTML()
        self.image = PictureView()
        self.sweep: JacobianSweep | None = None
        self._busy = threading.Lock()
        self._pending = False
        self._total = 0
        super().__init__([widgets.HBox([self.in_slider, self.out_slider, self.batch]), self.status, self.image])
        self.add_class("labkit-jacobian-scaling")
        for control in (self.in_slider, self.out_slider, self.batch):
            control.observe(self._on_change, names="value")
        if run:
            self.redraw()

    @property
    def batch_size(self) -> int | None:
        """The batch the dropdown chose: None for one example (the dropdown's 0), else the vmapped batch."""
        return self.batch.value or None

    @property
    def span(self) -> int:
        """Output sizes run from ``in/span`` to ``in*span``; one of :data:`SPANS`."""
        return self._span

    @span.setter
    def span(self, value: int) -> None:
        _check_span(value)
        self._span = value

    def out_dims(self) -> list[int]:
        """The output sizes swept: ``in/span .. in*span`` plus the selected output size."""
        return sorted(set(default_out_dims(self.in_slider.value, self.span)) | {self.out_slider.value})

    def _on_change(self, _change: dict) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Run the sweep for the current controls, re-drawing after every point.

        A change that arrives while a sweep runs (from inside it, or from another
        kernel thread) never starts a second sweep into the same plot: it is
        remembered, and one more sweep with the latest values follows this one.
        Ctrl-C (a kernel interrupt) stops the sweep with an "interrupted" status,
        keeps the points measured so far in ``self.sweep``, and leaves the widget
        usable. The KeyboardInterrupt is re-raised so that a running cell stops;
        from a slider callback ipykernel catches it and the kernel carries on.
        """
        if not self._busy.acquire(blocking=False):
            self._pending = True
            return
        try:
            self._pending = True
            while self._pending:
                self._pending = False
                self._sweep_once()
        finally:
            self._pending = False  # after an interrupt or error, a queued change is not run either
            self._busy.release()

    def _sweep_once(self) -> None:
        self._total = len(self.out_dims())
        self.sweep = JacobianSweep(self.in_slider.value, self.batch_size)
        self.status.value = _("<i>timing jacfwd and jacrev…</i>")
        try:
            self.sweep = jacobian_sweep(self.in_slider.value, self.out_dims(), batch=self.batch_size, on_point=self.show_sweep)
        except KeyboardInterrupt:
            self.status.value = _(
                "<b>interrupted</b> after {done} of {total} output sizes; the plot shows "
                "those. Move a control (or call .redraw()) to time again."
            ).format(done=len(self.sweep.points), total=self._total)
            raise
        except Exception as exc:
            self.status.value = _("<b>stopped by an error</b>: {error}").format(
                error=f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}")
            raise
        self.status.value = self._summary(self.sweep)

    def show_sweep(self, sweep: JacobianSweep) -> None:
        """Draw ``sweep`` as it stands: what the kernel runs after every measured point."""
        self.sweep = sweep
        selected = self.out_slider.value if self.out_slider.value in sweep.out_dims else None
        show_picture(self.image, sweep_svg(sweep, selected, self.out_dims()), sweep_alt(sweep), numbers=sweep.table())
        self.status.value = _("<i>timing… {done} of {total} output sizes done</i>").format(
            done=len(sweep.points), total=self._total)

    def _summary(self, sweep: JacobianSweep) -> str:
        point = next(p for p in sweep.points if p.out_features == self.out_slider.value)
        if point.in_features == point.out_features:
            verdict = _("a square Jacobian, where either mode can win")
        elif point.clear_winner is None:
            verdict = _("a tie: the two timings overlap within their spread")
        elif point.faster == point.predicted:
            verdict = _("as the rule of thumb predicts")
        else:
            verdict = _("against the rule of thumb (fixed overheads dominate at this size)")
        return (
            f"<b>{html.escape(point.summary())}</b>, {verdict}.<br>"
            f"{html.escape(sweep.summary())}."
        )
