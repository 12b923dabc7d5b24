"""labkit.widgets.JacobianScaling, headless: controls drive the core sweep and the SVG plot."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import labkit.forward_ad.widgets as module
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.timing import RunStats
from labkit.forward_ad.jacobian_cost import JacobianCost, JacobianSweep
from labkit.widgets import JacobianScaling

SVG_START = b"<svg"
SVG = "{http://www.w3.org/2000/svg}"


def _stats(seconds):
    return RunStats(seconds, seconds, seconds, seconds, 0.0, 3)


def _scaling_point(in_features, out, batch):
    """jacfwd's time grows with the input size, jacrev's with the output size."""
    return JacobianCost(in_features, out, batch, jacfwd=_stats(in_features * 1e-4), jacrev=_stats(out * 1e-4))


def _fake(calls):
    """A deterministic timing core: jacrev cost grows with out, jacfwd with in."""

    def sweep(in_features, out_dims, *, batch=None, on_point=None):
        calls.append((in_features, list(out_dims), batch))
        result = JacobianSweep(in_features, batch)
        for out in out_dims:
            result.points.append(_scaling_point(in_features, out, batch))
            if on_point is not None:
                on_point(result)
        return result

    return sweep


@pytest.fixture
def fake_sweep(monkeypatch):
    """Replace the timing core by :func:`_fake`; the fixture's value lists the calls."""
    calls = []
    monkeypatch.setattr(module, "jacobian_sweep", _fake(calls))
    return calls


def test_widget_draws_and_marks_the_crossover(fake_sweep):
    widget = JacobianScaling(in_features=8, out_features=32, batch=None)
    assert fake_sweep == [(8, [1, 2, 4, 8, 16, 32, 64], None)]
    assert widget.image.picture.startswith(SVG_START) and "data:image/svg+xml;base64," in widget.image.value
    assert widget.image.layout.align_self == "flex-start"  # never stretched to the box's width
    assert widget.image.alt.startswith("Log-log plot of the median time of jacfwd (circles) and jacrev (squares)")
    assert "output sizes 1, 2, 4, 8, 16, 32, 64" in widget.image.alt and "<details" in widget.image.value
    assert "<td" in widget.image.value  # the sweep's table, folded under the plot
    assert "labkit-jacobian-scaling" in widget._dom_classes
    assert widget.sweep.crossover == pytest.approx(8)  # jacrev's cost reaches jacfwd's at out == in
    assert "R^8 -&gt; R^32: jacfwd is 4.00x faster" in widget.status.value
    assert "as the rule of thumb predicts" in widget.status.value


def test_changing_controls_reruns_the_sweep(fake_sweep):
    widget = JacobianScaling(in_features=8, out_features=32, batch=None, span=2)
    first_png = widget.image.value
    widget.in_slider.value = 64
    assert fake_sweep[-1][0] == 64 and 32 in fake_sweep[-1][1]
    assert widget.image.value != first_png
    assert "jacrev is 2.00x faster" in widget.status.value
    widget.batch.value = 16
    assert fake_sweep[-1][2] == 16 and "batch 16" in widget.status.value
    widget.out_slider.value = 1024
    assert 1024 in fake_sweep[-1][1]


def test_redraws_while_the_sweep_runs(fake_sweep, monkeypatch):
    drawn = []
    original = module.sweep_svg
    monkeypatch.setattr(module, "sweep_svg", lambda *args: drawn.append(args) or original(*args))
    widget = JacobianScaling(in_features=4, out_features=4, batch=None)
    assert widget.out_dims() == [1, 2, 4, 8, 16, 32]
    assert len(drawn) == 6  # one redraw per measured output size


def test_square_jacobian_says_either_can_win(fake_sweep):
    widget = JacobianScaling(in_features=16, out_features=16, batch=None, span=2)
    assert "either mode can win" in widget.status.value


def test_no_run_draws_nothing(fake_sweep):
    widget = JacobianScaling(run=False)
    assert fake_sweep == [] and widget.image.value == ""  # nothing, not an empty (broken) image


def test_real_core_small_sizes():
    widget = JacobianScaling(in_features=2, out_features=4, batch=None, span=2)
    assert widget.sweep.out_dims == [1, 2, 4]
    assert widget.image.picture.startswith(SVG_START)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"in_features": 100}, "in_features"), ({"out_features": 3}, "out_features"), ({"batch": 32}, "batch")],
)
def test_choices_outside_the_controls_are_labkit_errors(fake_sweep, kwargs, named):
    with pytest.raises(LabkitValueError, match=rf"{named} must be one of .*\b16\b"):
        JacobianScaling(**kwargs)
    assert fake_sweep == []  # nothing was timed


# --- trust: argument ranges, interrupts, re-entrancy (issue 10) ---------------------
@pytest.fixture
def no_drawing(monkeypatch):
    """Skip drawing: these tests are about state."""
    monkeypatch.setattr(module, "sweep_svg", lambda *args: SVG_START + b"/>")


@pytest.mark.parametrize("span", [4096, 16, 0, -2, 3])
def test_span_outside_the_allowed_range_is_refused(fake_sweep, span):
    with pytest.raises(LabkitValueError, match=r"span must be one of \(1, 2, 4, 8\)"):
        JacobianScaling(span=span)
    assert fake_sweep == []  # nothing was timed


@pytest.mark.parametrize("span", [True, 8.0, "8", None])
def test_span_of_the_wrong_type_is_refused(fake_sweep, span):
    with pytest.raises(LabkitTypeError, match=r"span must be one of \(1, 2, 4, 8\)"):
        JacobianScaling(span=span)
    assert fake_sweep == []


def test_span_set_later_is_checked_too(fake_sweep):
    widget = JacobianScaling(run=False)
    with pytest.raises(LabkitValueError, match="span"):
        widget.span = 4096
    assert widget.span == 8
    widget.span = 2
    assert widget.out_dims() == [16, 32, 64]


def test_run_must_be_a_bool(fake_sweep):
    with pytest.raises(LabkitTypeError, match="run must be True or False"):
        JacobianScaling(run="no")


def _interrupting_sweep(after_points):
    """A sweep that measures ``after_points`` sizes, then gets Ctrl-C."""

    def sweep(in_features, out_dims, *, batch=None, on_point=None):
        result = JacobianSweep(in_features, batch)
        for out in list(out_dims)[:after_points]:
            result.points.append(JacobianCost(in_features, out, batch, jacfwd=_stats(1e-4), jacrev=_stats(2e-4)))
            on_point(result)
        raise KeyboardInterrupt

    return sweep


@pytest.mark.parametrize("after_points", [0, 1])
def test_an_interrupt_shows_interrupted_and_leaves_the_widget_usable(fake_sweep, no_drawing, monkeypatch, after_points):
    widget = JacobianScaling(in_features=8, out_features=32, batch=None, run=False)
    monkeypatch.setattr(module, "jacobian_sweep", _interrupting_sweep(after_points))
    with pytest.raises(KeyboardInterrupt):  # re-raised: a running cell still stops
        widget.redraw()
    assert "interrupted" in widget.status.value and f"{after_points} of 7" in widget.status.value
    assert "timing" not in widget.status.value
    assert len(widget.sweep.points) == after_points  # what was measured before Ctrl-C
    monkeypatch.setattr(module, "jacobian_sweep", _fake(fake_sweep))
    widget.out_slider.value = 64  # usable again: the next change times afresh
    assert "interrupted" not in widget.status.value and "R^8 -&gt; R^64" in widget.status.value


def test_an_error_during_the_sweep_is_shown_not_left_as_timing(fake_sweep, monkeypatch):
    widget = JacobianScaling(run=False)

    def broken(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr(module, "jacobian_sweep", broken)
    with pytest.raises(MemoryError):
        widget.redraw()
    assert "MemoryError: out of memory" in widget.status.value and "timing" not in widget.status.value


def test_a_change_during_a_sweep_does_not_start_a_second_one(no_drawing, monkeypatch):
    calls, depth = [], []
    widget = None

    def sweep(in_features, out_dims, *, batch=None, on_point=None):
        depth.append(sum(c[1] == "start" for c in calls) - sum(c[1] == "done" for c in calls))
        calls.append((in_features, "start"))
        result = JacobianSweep(in_features, batch)
        for out in out_dims:
            result.points.append(_scaling_point(in_features, out, batch))
            on_point(result)
            if len(calls) == 1 and len(result.points) == 1:
                widget.in_slider.value = 16  # a second click while the first sweep runs
        calls.append((in_features, "done"))
        return result

    monkeypatch.setattr(module, "jacobian_sweep", sweep)
    widget = JacobianScaling(in_features=8, out_features=32, batch=None, run=False)
    widget.redraw()
    assert calls == [(8, "start"), (8, "done"), (16, "start"), (16, "done")]  # one after the other
    assert max(depth) == 0  # never two sweeps at once
    assert widget.sweep.in_features == 16 and "R^16 -&gt; R^32" in widget.status.value


# --- the plot ---------------------------------------------------------------------
def _points(svg: bytes, mode: str) -> list[tuple[float, float]]:
    root = ET.fromstring(svg)
    centres = []
    for marker in root.iter():
        if marker.get("class") == f"point {mode}":
            if marker.tag == f"{SVG}circle":
                centres.append((float(marker.get("cx")), float(marker.get("cy"))))
            else:  # a square: jacrev's marker
                half = float(marker.get("width")) / 2
                centres.append((float(marker.get("x")) + half, float(marker.get("y")) + half))
    return centres


def test_the_two_modes_differ_in_marker_not_only_in_colour():
    root = ET.fromstring(module.sweep_svg(_sweep(8, [2, 4, 8])))
    markers = [m for m in root.iter() if (m.get("class") or "").startswith(("point", "key"))]
    kinds = {(m.tag.removeprefix(SVG), m.get("class")) for m in markers}
    assert kinds == {("circle", "point jacfwd"), ("rect", "point jacrev"), ("circle", "key jacfwd"), ("rect", "key jacrev")}


def _mark_x(svg: bytes, name: str) -> float | None:
    root = ET.fromstring(svg)
    return next((float(line.get("x1")) for line in root.iter(f"{SVG}line") if line.get("class") == f"mark {name}"), None)


def _sweep(in_features, outs, batch=None):
    return JacobianSweep(in_features, batch, [_scaling_point(in_features, out, batch) for out in outs])


def test_the_plot_puts_each_point_where_its_size_and_time_say():
    svg = module.sweep_svg(_sweep(8, [2, 4, 8, 16, 32]))
    jacrev, jacfwd = _points(svg, "jacrev"), _points(svg, "jacfwd")
    assert len(jacrev) == len(jacfwd) == 5
    xs = [x for x, _ in jacrev]
    steps = [b - a for a, b in zip(xs, xs[1:])]
    assert all(step > 0 for step in steps) and max(steps) - min(steps) < 0.2  # log2 axis: doubling is one step
    assert [y for _, y in jacrev] == sorted((y for _, y in jacrev), reverse=True)  # slower (higher) as out grows
    assert len({round(y, 1) for _, y in jacfwd}) == 1  # jacfwd's time is flat
    assert _mark_x(svg, "crossover") == pytest.approx(xs[2], abs=0.2)  # at out == in == 8
    assert _mark_x(svg, "in") == pytest.approx(xs[2], abs=0.2)


def test_the_planned_sizes_fix_the_x_axis_while_the_sweep_grows():
    planned = [2, 4, 8, 16, 32]
    first = module.sweep_svg(_sweep(8, [2]), None, planned)
    full = module.sweep_svg(_sweep(8, planned), 16, planned)
    assert _points(first, "jacfwd")[0][0] == _points(full, "jacfwd")[0][0]
    assert _mark_x(first, "crossover") is None and _mark_x(first, "selected") is None
    assert _mark_x(full, "selected") == pytest.approx(_points(full, "jacfwd")[3][0], abs=0.2)


def test_every_label_fits_inside_the_picture():
    root = ET.fromstring(module.sweep_svg(_sweep(1024, [128, 256, 512, 1024, 2048, 4096, 8192], batch=64), 8192))
    width = float(root.get("width"))
    for text in root.iter(f"{SVG}text"):
        if text.get("transform"):
            continue  # the rotated y label sits at the left edge
        x, size = float(text.get("x")), module.text_width(text.text, float(text.get("font-size")))
        start = {"start": x, "middle": x - size / 2, "end": x - size}[text.get("text-anchor")]
        assert 0 <= start and start + size <= width, text.text


def test_a_sweep_without_points_is_refused_with_a_labkit_error():
    with pytest.raises(LabkitValueError, match="has none yet"):
        module.sweep_svg(JacobianSweep(8, None))


def test_summary_and_mark_use_the_stable_crossover(monkeypatch):
    """A lone noisy jacfwd win at out = 2 is contradicted by out = 4: neither the status nor the plot names it."""
    medians = {1: (2.0, 1.0), 2: (1.0, 1.1), 4: (2.0, 1.0), 8: (1.0, 1.05), 16: (1.0, 4.0), 32: (1.0, 8.0)}
    spread = RunStats(1.0, 1.0, 0.9, 1.1, 0.1, 5)  # out = 8: 5% apart, IQRs of 10%: a tie

    def sweep(in_features, out_dims, *, batch=None, on_point=None):
        result = JacobianSweep(in_features, batch)
        for out in out_dims:
            fwd, rev = medians[out]
            jacfwd = spread if out == 8 else _stats(fwd)
            result.points.append(JacobianCost(in_features, out, batch, jacfwd=jacfwd, jacrev=_stats(rev)))
            if on_point is not None:
                on_point(result)
        return result

    monkeypatch.setattr(module, "jacobian_sweep", sweep)
    widget = JacobianScaling(in_features=4, out_features=8, batch=None)
    assert widget.sweep.crossover == 16  # out = 8 is a tie, jacfwd wins from 16 on
    assert "jacfwd stays faster from out = 16 (ties from out = 8)" in widget.status.value
    assert "a tie: the two timings overlap" in widget.status.value
    assert "crossover ≈ 16" in widget.image.picture.decode() and "jacfwd stays faster from out = 16" in widget.image.alt


def test_every_control_has_a_label_that_names_it(fake_sweep):
    widget = JacobianScaling(run=False)
    assert [widget.in_slider.description, widget.out_slider.description, widget.batch.description] == [
        "input dim", "output dim", "batch"]


def test_no_batch_shows_as_a_chosen_option_and_sweeps_one_example(fake_sweep):
    """ipywidgets shows a None value as a blank dropdown; "none (one example)" must be visibly chosen."""
    widget = JacobianScaling(in_features=8, out_features=16, batch=None, span=2)
    assert widget.batch.label == "none (one example)" and widget.batch.index == 0
    assert widget.batch_size is None and fake_sweep[-1][2] is None and widget.sweep.batch is None
    widget.batch.value = 64
    assert widget.batch_size == 64 and fake_sweep[-1][2] == 64
    with pytest.raises(LabkitValueError, match=r"batch must be one of \[None, 16, 64\], got 0"):
        JacobianScaling(batch=0, run=False)
