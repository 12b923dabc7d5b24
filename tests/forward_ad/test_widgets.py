"""labkit.widgets.JacobianScaling, headless: controls drive the core sweep and the PNG."""
from __future__ import annotations

import pytest

import labkit.forward_ad.widgets as module
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.timing import RunStats
from labkit.forward_ad.jacobian_cost import JacobianCost, JacobianSweep
from labkit.widgets import JacobianScaling

PNG_MAGIC = b"\x89PNG"


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
    assert bytes(widget.image.value).startswith(PNG_MAGIC)
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
    original = module.to_png
    monkeypatch.setattr(module, "to_png", lambda fig: drawn.append(fig) or original(fig))
    widget = JacobianScaling(in_features=4, out_features=4, batch=None)
    assert widget.out_dims() == [1, 2, 4, 8, 16, 32]
    assert len(drawn) == 6  # one redraw per measured output size


def test_square_jacobian_says_either_can_win(fake_sweep):
    widget = JacobianScaling(in_features=16, out_features=16, batch=None, span=2)
    assert "either mode can win" in widget.status.value


def test_no_run_draws_nothing(fake_sweep):
    widget = JacobianScaling(run=False)
    assert fake_sweep == [] and bytes(widget.image.value) == b""


def test_real_core_small_sizes():
    widget = JacobianScaling(in_features=2, out_features=4, batch=None, span=2)
    assert widget.sweep.out_dims == [1, 2, 4]
    assert bytes(widget.image.value).startswith(PNG_MAGIC)


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
    """Skip matplotlib: these tests are about state, and a figure costs seconds on a busy machine."""
    monkeypatch.setattr(module, "sweep_figure", lambda sweep, selected=None: None)
    monkeypatch.setattr(module, "to_png", lambda figure: PNG_MAGIC)


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
