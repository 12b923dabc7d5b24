"""labkit.widgets.JacobianScaling, headless: controls drive the core sweep and the PNG."""
from __future__ import annotations

import pytest

import labkit.widgets.jacobian_scaling as module
from labkit.errors import LabkitValueError
from labkit.jacobian_cost import JacobianCost, JacobianSweep
from labkit.timing import RunStats
from labkit.widgets import JacobianScaling

PNG_MAGIC = b"\x89PNG"


def _stats(seconds):
    return RunStats(seconds, seconds, seconds, seconds, 0.0, 3)


@pytest.fixture
def fake_sweep(monkeypatch):
    """Replace the timing core by a deterministic one: jacrev cost grows with out, jacfwd with in."""
    calls = []

    def sweep(in_features, out_dims, *, batch=None, on_point=None):
        calls.append((in_features, list(out_dims), batch))
        result = JacobianSweep(in_features, batch)
        for out in out_dims:
            result.points.append(JacobianCost(in_features, out, batch, jacfwd=_stats(in_features * 1e-4), jacrev=_stats(out * 1e-4)))
            if on_point is not None:
                on_point(result)
        return result

    monkeypatch.setattr(module, "jacobian_sweep", sweep)
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
