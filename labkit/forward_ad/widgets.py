"""Live plot of jacfwd vs jacrev time as the output size sweeps: ``JacobianScaling``.

Why: "forward mode wins when the Jacobian is tall" sticks once a learner drags
a slider and watches the jacrev curve climb past the flat jacfwd curve. The
timings come from :func:`labkit.forward_ad.jacobian_cost.jacobian_sweep`; this widget only
chooses the sizes and re-draws the PNG after every measured point, so the plot
grows while the sweep runs.
"""
from __future__ import annotations

import html
import numbers
import threading

import ipywidgets as widgets
from matplotlib.figure import Figure

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.plots import new_figure, to_png
from labkit.forward_ad.jacobian_cost import JacobianSweep, default_out_dims, jacobian_sweep

SIZES = [2**k for k in range(1, 11)]  # 2 .. 1024
BATCH_OPTIONS = [("none (one example)", None), ("16 (vmap)", 16), ("64 (vmap)", 64)]
# Output sizes run from in/span to in*span. Wider spans only add sizes far from the
# crossover, and the largest Jacobian (batch x in*span x in) grows with span: at
# span 4096 a sweep ran past 6 GB. 8 already reaches 2 GB at in = 1024, batch 64.
SPANS = (1, 2, 4, 8)


def sweep_figure(sweep: JacobianSweep, selected_out: int | None = None) -> Figure:
    """Median jacfwd and jacrev time against output size (log-log), crossover marked."""
    figure = new_figure(6.0, 3.4)
    axes = figure.add_subplot()
    outs = sweep.out_dims
    for name, color in (("jacfwd", "tab:blue"), ("jacrev", "tab:orange")):
        stats = [getattr(p, name) for p in sweep.points]
        medians = [s.median * 1e3 for s in stats]
        spread = [s.iqr / 2 * 1e3 for s in stats]
        _ = axes.errorbar(outs, medians, yerr=spread, marker="o", color=color, label=name, capsize=3)
    _ = axes.axvline(sweep.in_features, color="gray", linestyle=":", label=f"out = in = {sweep.in_features}")
    crossover = sweep.crossover
    if crossover is not None:
        _ = axes.axvline(crossover, color="tab:red", linestyle="--", label=f"crossover ≈ {crossover:.0f}")
    if selected_out is not None:
        _ = axes.axvline(selected_out, color="black", alpha=0.25, linewidth=6, label=f"selected out = {selected_out}")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("output dimension (input fixed)")
    axes.set_ylabel("median time (ms)")
    batch = "" if sweep.batch is None else f", batch {sweep.batch}"
    axes.set_title(f"Jacobian of an MLP R^{sweep.in_features} → R^out{batch}")
    axes.legend(fontsize="small", loc="best")
    return figure


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
    batches = [value for _, value in BATCH_OPTIONS]
    if batch not in batches:
        raise LabkitValueError(f"batch must be one of {batches}, got {batch!r}.")


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
            options=SIZES, value=in_features, description="input dim", continuous_update=False
        )
        self.out_slider = widgets.SelectionSlider(
            options=SIZES, value=out_features, description="output dim", continuous_update=False
        )
        self.batch = widgets.Dropdown(options=BATCH_OPTIONS, value=batch, description="batch")
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
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
        self.sweep = JacobianSweep(self.in_slider.value, self.batch.value)
        self.status.value = "<i>timing jacfwd and jacrev…</i>"
        try:
            self.sweep = jacobian_sweep(self.in_slider.value, self.out_dims(), batch=self.batch.value, on_point=self._draw)
        except KeyboardInterrupt:
            self.status.value = (
                f"<b>interrupted</b> after {len(self.sweep.points)} of {self._total} output sizes; the plot shows "
                "those. Move a control (or call .redraw()) to time again."
            )
            raise
        except Exception as exc:
            self.status.value = f"<b>stopped by an error</b>: {html.escape(type(exc).__name__)}: {html.escape(str(exc))}"
            raise
        self.status.value = self._summary(self.sweep)

    def _draw(self, sweep: JacobianSweep) -> None:
        self.sweep = sweep
        selected = self.out_slider.value if self.out_slider.value in sweep.out_dims else None
        self.image.value = to_png(sweep_figure(sweep, selected))
        self.status.value = f"<i>timing… {len(sweep.points)} of {self._total} output sizes done</i>"

    def _summary(self, sweep: JacobianSweep) -> str:
        point = next(p for p in sweep.points if p.out_features == self.out_slider.value)
        if point.in_features == point.out_features:
            verdict = "a square Jacobian, where either mode can win"
        elif point.faster == point.predicted:
            verdict = "as the rule of thumb predicts"
        else:
            verdict = "against the rule of thumb (fixed overheads dominate at this size)"
        return (
            f"<b>{html.escape(point.summary())}</b>, {verdict}.<br>"
            f"{html.escape(sweep.summary())}."
        )
