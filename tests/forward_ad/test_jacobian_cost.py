"""labkit.forward_ad.jacobian_cost: result objects and sweeps (tiny sizes; no timed assertions)."""
from __future__ import annotations

import pytest
import torch

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.timing import RunStats
from labkit.forward_ad.jacobian_cost import (
    JacobianCost,
    JacobianSweep,
    JvpOverhead,
    default_out_dims,
    jacobian_cost,
    jacobian_problem,
    jacobian_sweep,
    jvp_overhead,
    relu_mlp,
)


def _stats(median):
    return RunStats(mean=median, median=median, min=median, max=median, iqr=0.0, count=3)


def _cost(out, fwd, rev, in_features=8):
    return JacobianCost(in_features, out, None, jacfwd=_stats(fwd), jacrev=_stats(rev))


def test_cost_reports_faster_mode_and_by_how_much():
    tall = _cost(64, fwd=1.0, rev=4.0)
    assert tall.faster == "jacfwd" and tall.faster_by == pytest.approx(4.0) and tall.predicted == "jacfwd"
    wide = _cost(2, fwd=3.0, rev=1.0)
    assert wide.faster == "jacrev" and wide.faster_by == pytest.approx(3.0) and wide.predicted == "jacrev"
    assert not hasattr(tall, "speedup"), "faster_by is always >= 1; a speedup has a fixed baseline"
    assert "jacfwd is 4.00x faster" in str(tall)
    assert "<table>" in tall._repr_html_()


def test_cost_timings_read_jacfwd_against_jacrev():
    wide = _cost(2, fwd=3.0, rev=1.0)
    assert wide.timings.baseline == "jacrev" and wide.timings.speedup("jacfwd") == pytest.approx(1 / 3)
    table = wide.table()
    assert table.headers == ["mode", "median", "IQR", "speedup", "note"]
    assert table.column("mode") == ["jacfwd", "jacrev"]  # fixed order, whichever is faster
    assert table.column("speedup") == ["0.33x", "1.00x"]
    assert table.title == wide.summary()


def test_sweep_crossover_is_log_interpolated():
    sweep = JacobianSweep(8, None, [_cost(4, 2.0, 1.0), _cost(16, 1.0, 2.0), _cost(64, 1.0, 8.0)])
    assert sweep.crossover == pytest.approx(8.0)  # log-ratios -log2 and +log2 meet halfway (in log space)
    assert "out ≈ 8" in sweep.summary()
    no_cross = JacobianSweep(8, None, [_cost(4, 2.0, 1.0), _cost(16, 2.0, 1.0)])
    assert no_cross.crossover is None and "not inside the sweep" in str(no_cross)


def test_default_out_dims():
    assert default_out_dims(32) == [4, 8, 16, 32, 64, 128, 256]
    assert default_out_dims(2) == [1, 2, 4, 8, 16]
    with pytest.raises(LabkitValueError):
        default_out_dims(8, span=0)


@pytest.mark.parametrize("batch", [None, 3])
def test_jacobian_problem_shapes(batch):
    fn, x = jacobian_problem(5, 7, batch=batch)
    assert fn.__name__ == "tanh_mlp"  # a plain function, not the nn.Module relu_mlp builds
    assert x.shape == ((5,) if batch is None else (3, 5))
    assert fn(x).shape[-1] == 7


def test_jacobian_problem_rejects_bad_sizes():
    with pytest.raises(LabkitValueError, match="in_features"):
        jacobian_problem(0, 3)
    with pytest.raises(LabkitValueError, match="batch"):
        jacobian_problem(3, 3, batch=0)


@pytest.mark.parametrize("batch", [None, 2])
def test_jacobian_cost_measures_both_modes(batch):
    cost = jacobian_cost(4, 6, batch=batch, rounds=3, budget=0.005)
    assert cost.jacfwd.count == 3 and cost.jacrev.count == 3  # one block per round, sized once: the budget is kept
    assert cost.jacfwd.median > 0 and cost.faster in ("jacfwd", "jacrev")


def test_summary_prints_the_spread_and_calls_a_gap_inside_it_no_winner():
    clear = _noisy_cost(64, 1.0, 4.0, iqr=0.1)
    assert clear.clear_winner == "jacfwd" and "jacfwd is 4.00x faster ±0.50 (jacfwd 1 s, jacrev 4 s)" in clear.summary()
    tie = _noisy_cost(64, 1.0, 1.05, iqr=0.1)  # IQRs of 0.1 s: first-order spread 1.05 * (0.1 / 1 + 0.1 / 1.05)
    assert tie.clear_winner is None and "is 1.05x faster" not in tie.summary()
    assert "no clear winner (jacfwd ahead by 1.05x ±0.21, inside the spread)" in tie.summary()


def test_a_win_is_judged_on_the_printed_ratio_whichever_mode_is_ahead():
    # jacrev 4x ahead, IQRs of 1 s: the printed ratio's spread, 4 * (1 / 4 + 1 / 1) = ±5, reaches below 1: no winner
    # (read as jacfwd's speedup, 0.25 ± 0.31 stays below 1, and it used to be called one)
    noisy = _noisy_cost(2, 4.0, 1.0, iqr=1.0)
    assert noisy.faster == "jacrev" and noisy.clear_winner is None and "no clear winner" in noisy.summary()
    mirrored = _noisy_cost(64, 1.0, 4.0, iqr=1.0)
    assert mirrored.clear_winner is None


def test_sweep_calls_back_after_every_point():
    seen = []
    sweep = jacobian_sweep(4, [2, 8, 4], rounds=1, budget=0.002, on_point=lambda s: seen.append(len(s.points)))
    assert seen == [1, 2, 3]
    assert sweep.out_dims == [2, 4, 8]
    with pytest.raises(LabkitValueError, match="empty"):
        jacobian_sweep(4, [])


def test_jvp_overhead_reports_slowdowns_against_forward():
    torch.manual_seed(0)
    result = jvp_overhead(relu_mlp((8, 16, 4)), torch.randn(2, 8), rounds=2, number=1)
    assert list(result.stats) == [JvpOverhead.FORWARD, JvpOverhead.RAW, JvpOverhead.LABKIT, JvpOverhead.FUNC]
    assert result.baseline == JvpOverhead.FORWARD and result.slowdown(JvpOverhead.FORWARD) == 1.0
    assert result.labkit_over_raw > 0
    table = result.table()
    assert table.headers == ["path", "median", "IQR", "slowdown", "note"]
    assert table.column("path") == [JvpOverhead.FORWARD, JvpOverhead.RAW, JvpOverhead.LABKIT, JvpOverhead.FUNC]
    assert "labkit.jvp / raw dual" in table.title


def test_jvp_overhead_slowdown_is_time_over_the_forward_pass():
    result = JvpOverhead({JvpOverhead.FORWARD: _stats(1.0), JvpOverhead.RAW: _stats(2.0), JvpOverhead.LABKIT: _stats(2.1),
                          JvpOverhead.FUNC: _stats(3.0)})
    assert result.slowdown(JvpOverhead.RAW) == pytest.approx(2.0) and result.speedup(JvpOverhead.RAW) == pytest.approx(0.5)
    assert result.labkit_over_raw == pytest.approx(1.05)
    assert result.table().column("slowdown") == ["1.00x", "2.00x", "2.10x", "3.00x"]


def test_jvp_overhead_rejects_bad_input():
    with pytest.raises(LabkitTypeError):
        jvp_overhead(torch.sin, torch.zeros(2))
    with pytest.raises(LabkitTypeError):
        jvp_overhead(relu_mlp((2, 2)), torch.zeros(2, dtype=torch.long))


def test_relu_mlp_layers():
    model = relu_mlp((256, 512, 512, 10))
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    with pytest.raises(LabkitValueError):
        relu_mlp((3,))


def test_jvp_overhead_restores_the_thread_count():
    before = torch.get_num_threads()
    jvp_overhead(relu_mlp((4, 4)), torch.randn(1, 4), rounds=1, number=1, num_threads=1)
    assert torch.get_num_threads() == before
    with pytest.raises(LabkitValueError, match="num_threads"):
        jvp_overhead(relu_mlp((4, 4)), torch.randn(1, 4), num_threads=0)
    assert torch.get_num_threads() == before


def test_module_docstring_names_only_timing_helpers_it_uses():
    import re

    import labkit.forward_ad.jacobian_cost as module

    named = re.findall(r":func:`labkit\.core\.timing\.(\w+)`", module.__doc__)
    assert named, "the docstring should say how the module times"
    assert [name for name in named if not hasattr(module, name)] == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "named"),
    [
        ((True, 4), {}, LabkitTypeError, "in_features"),
        ((4, False), {}, LabkitTypeError, "out_features"),
        ((2.0, 4), {}, LabkitTypeError, "in_features"),
        (("3", 4), {}, LabkitTypeError, "in_features"),
        ((0, 4), {}, LabkitValueError, "in_features"),
        ((4, -1), {}, LabkitValueError, "out_features"),
        ((4, 4), {"hidden": True}, LabkitTypeError, "hidden"),
        ((4, 4), {"batch": True}, LabkitTypeError, "batch"),
        ((4, 4), {"batch": 2.0}, LabkitTypeError, "batch"),
    ],
)
def test_jacobian_problem_rejects_bools_floats_and_non_positive_sizes(args, kwargs, error, named):
    with pytest.raises(error, match=rf"{named} must be a positive integer.*got"):
        jacobian_problem(*args, **kwargs)


def test_jacobian_problem_takes_numpy_integers():
    np = pytest.importorskip("numpy")
    assert jacobian_problem(np.int64(3), 2)[1].shape == (3,)


@pytest.mark.parametrize(
    ("span", "error"),
    [(0, LabkitValueError), (3, LabkitValueError), (-2, LabkitValueError), (True, LabkitTypeError), (2.0, LabkitTypeError)],
)
def test_default_out_dims_rejects_a_span_that_is_not_a_power_of_two(span, error):
    with pytest.raises(error, match=r"span must be a power of two"):
        default_out_dims(8, span=span)


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"budget": float("nan")}, LabkitValueError, "budget"),  # hung forever in blocked_autorange
        ({"budget": float("inf")}, LabkitValueError, "budget"),
        ({"budget": 0}, LabkitValueError, "budget"),
        ({"budget": "0.1"}, LabkitTypeError, "budget"),
        ({"rounds": True}, LabkitTypeError, "rounds"),
        ({"rounds": 2.5}, LabkitTypeError, "rounds"),
    ],
)
def test_jacobian_cost_and_sweep_reject_bad_timing_arguments(kwargs, error, named):
    with pytest.raises(error, match=named):
        jacobian_cost(2, 2, **{"rounds": 1, "budget": 0.001, **kwargs})
    with pytest.raises(error, match=named):
        jacobian_sweep(2, [2], **{"rounds": 1, "budget": 0.001, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"num_threads": 1.5}, LabkitTypeError, "num_threads"),
        ({"rounds": 0}, LabkitValueError, "rounds"),
        ({"number": True}, LabkitTypeError, "number"),
    ],
)
def test_jvp_overhead_rejects_bad_counts(kwargs, error, named):
    before = torch.get_num_threads()
    with pytest.raises(error, match=named):
        jvp_overhead(relu_mlp((2, 2)), torch.zeros(1, 2), **{"rounds": 1, "number": 1, **kwargs})
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("sizes", "error"),
    [((3, 0), LabkitValueError), ((3, -1), LabkitValueError), ((3, 2.0), LabkitTypeError), ((True, 2), LabkitTypeError)],
)
def test_relu_mlp_rejects_sizes_that_are_not_positive_integers(sizes, error):
    with pytest.raises(error, match=r"sizes\[\d\] must be a positive integer"):
        relu_mlp(sizes)


def _noisy_cost(out, fwd, rev, iqr):
    def stats(median):
        return RunStats(mean=median, median=median, min=median, max=median, iqr=iqr, count=5)

    return JacobianCost(8, out, 16, jacfwd=stats(fwd), jacrev=stats(rev))


def test_sweep_crossover_ignores_a_lone_noisy_win_that_later_rows_contradict():
    # the stored notebook's sweep: jacfwd "wins" at 8, jacrev at 16 and 32, jacfwd from 64 on
    sweep = JacobianSweep(32, 16, [
        _cost(4, 1.05, 0.88), _cost(8, 1.15, 1.19), _cost(16, 1.11, 1.01), _cost(32, 1.62, 1.37),
        _cost(64, 1.62, 1.68), _cost(128, 2.18, 3.24), _cost(256, 1.44, 8.03),
    ])
    assert 32 < sweep.crossover < 64
    assert "out ≈ 7" not in sweep.summary() and "out ≈ 57 and stays faster" in sweep.summary()


def test_sweep_reports_no_stable_crossover_when_jacrev_wins_at_the_end():
    sweep = JacobianSweep(8, None, [_cost(4, 2.0, 1.0), _cost(8, 1.0, 2.0), _cost(16, 2.0, 1.0)])
    assert sweep.crossover is None
    assert "no stable crossover in the sweep" in sweep.summary() and "overtakes" not in sweep.summary()


def test_sweep_counts_points_within_their_spread_as_ties():
    tie = _noisy_cost(16, 1.0, 1.05, iqr=0.1)  # 5% apart, each IQR 10%: a tie
    assert tie.clear_winner is None and _noisy_cost(16, 1.0, 2.0, iqr=0.1).clear_winner == "jacfwd"
    trailing = JacobianSweep(8, 16, [_cost(4, 2.0, 1.0), tie])
    assert trailing.crossover is None
    assert "no stable crossover in the sweep (ties from out = 16)" in trailing.summary()
    assert trailing.table().column("faster") == ["jacrev", "tie"]
    then_wins = JacobianSweep(8, 16, [_cost(4, 2.0, 1.0), tie, _cost(64, 1.0, 8.0)])
    assert then_wins.crossover == 64
    assert "jacfwd stays faster from out = 64 (ties from out = 16)" in then_wins.summary()
    everywhere = JacobianSweep(8, None, [_cost(4, 1.0, 2.0), _cost(16, 1.0, 3.0)])
    assert everywhere.crossover is None and "jacfwd is faster at every output size" in everywhere.summary()


def test_the_timings_are_told_the_device_so_an_apple_gpu_is_waited_for(monkeypatch):
    """torch.utils.benchmark synchronizes CUDA only: labkit's compare_autorange waits for MPS when told the device."""
    import labkit.forward_ad.jacobian_cost as module

    told = []
    real = module.compare_autorange
    monkeypatch.setattr(module, "compare_autorange", lambda *a, **k: told.append(k.get("device")) or real(*a, **k))
    jacobian_cost(4, 4, rounds=1, budget=0.002, device="cpu")
    assert told == ["cpu"]
