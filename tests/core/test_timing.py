import math
import time

import pytest

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.timing import NOISY_IQR_FRACTION, RunStats, SideBySide, SyncTimer, benchmark, compare, format_seconds, measure


def test_run_stats_from_known_samples():
    stats = RunStats.from_samples([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (stats.mean, stats.median, stats.min, stats.max, stats.count) == (3.0, 3.0, 1.0, 5.0, 5)
    assert stats.iqr == pytest.approx(2.0)  # quartiles 2 and 4 (inclusive method)


def test_run_stats_single_sample_has_zero_iqr():
    stats = RunStats.from_samples([0.5])
    assert stats.iqr == 0.0 and stats.median == 0.5


def test_run_stats_needs_samples():
    with pytest.raises(LabkitValueError, match="at least one sample"):
        RunStats.from_samples([])


def test_ratio_to_is_gone():
    assert not hasattr(RunStats, "ratio_to"), "use SideBySide(...).speedup(name): baseline median / variant median"


def test_format_seconds_picks_a_readable_unit():
    assert format_seconds(1.5) == "1.5 s"
    assert format_seconds(0.00123) == "1.23 ms"
    assert format_seconds(4.56e-5) == "45.6 µs"
    assert format_seconds(2e-9) == "2 ns"


def test_sync_timer_measures_elapsed_time():
    with SyncTimer("cpu") as timer:
        time.sleep(0.01)
    assert 0.009 < timer.elapsed < 1.0


def test_measure_calls_warmup_plus_runs():
    calls = []
    stats = measure(lambda: calls.append(1), warmup=3, runs=4)
    assert len(calls) == 7 and stats.count == 4


@pytest.mark.parametrize(
    "kwargs, message", [({"runs": 0}, "runs must be at least 1"), ({"warmup": -1}, "warmup cannot be negative")]
)
def test_measure_rejects_bad_counts(kwargs, message):
    with pytest.raises(LabkitValueError, match=message):
        measure(lambda: None, **kwargs)


def test_compare_interleaves_and_sees_the_slower_candidate():
    order = []

    def fast():
        order.append("fast")

    def slow():
        order.append("slow")
        time.sleep(0.002)

    result = compare({"fast": fast, "slow": slow}, rounds=3, warmup=1)
    assert order == ["fast", "slow"] + ["fast", "slow"] * 3  # warm-up, then round robin
    assert result["slow"].median > result["fast"].median


def test_compare_names_its_own_parameter_in_errors():
    with pytest.raises(LabkitValueError, match="rounds must be at least 1"):
        compare({"a": lambda: None}, rounds=0)


def test_sync_timer_defaults_to_the_picked_device():
    from labkit.core.device import pick_device

    assert SyncTimer().device == pick_device()


def test_compare_needs_candidates():
    with pytest.raises(LabkitValueError, match="at least one candidate"):
        compare({})


def test_benchmark_wraps_torch_utils_benchmark(capfd):
    stats = benchmark(lambda: sum(range(100)), min_run_time=0.01)
    assert stats.count >= 1 and stats.median > 0 and math.isfinite(stats.iqr)
    assert "No CUDA runtime" not in capfd.readouterr().err


def test_compare_autorange_alternates_benchmark_blocks():
    from labkit.core.timing import compare_autorange

    calls = []
    result = compare_autorange({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=2, min_run_time=0.02)
    assert set(result) == {"a", "b"} and all(stats.count >= 2 and stats.median > 0 for stats in result.values())
    assert calls.index("b") < len(calls) - 1 - calls[::-1].index("a"), "rounds alternate: some 'a' runs after a 'b'"


def test_compare_autorange_rejects_bad_arguments():
    from labkit.core.timing import compare_autorange

    with pytest.raises(LabkitValueError, match="rounds >= 1"):
        compare_autorange({"a": lambda: None}, rounds=0)
    with pytest.raises(LabkitValueError, match="at least one candidate"):
        compare_autorange({})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("position", [0, -1])
def test_run_stats_rejects_non_finite_samples_wherever_they_sit(bad, position):
    samples = [1.0, 2.0, 3.0]
    samples.insert(position if position == 0 else len(samples), bad)
    with pytest.raises(LabkitValueError, match=r"samples must be finite.*index (0|3)"):
        RunStats.from_samples(samples)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runs": 2.5}, "runs must be a whole number"),
        ({"runs": "5"}, "runs must be a whole number"),
        ({"runs": True}, "runs must be a whole number"),
        ({"warmup": 1.5}, "warmup must be a whole number"),
    ],
)
def test_measure_rejects_non_integer_counts(kwargs, message):
    with pytest.raises(LabkitTypeError, match=message):
        measure(lambda: None, **kwargs)


@pytest.mark.parametrize("min_run_time", [math.nan, math.inf, -1.0, 0.0])
def test_run_time_must_be_finite_and_positive(min_run_time):
    from labkit.core.timing import compare_autorange

    with pytest.raises(LabkitValueError, match="min_run_time must be a finite number of seconds > 0"):
        compare_autorange({"a": lambda: None}, min_run_time=min_run_time)  # NaN used to loop forever
    with pytest.raises(LabkitValueError, match="min_run_time must be a finite number of seconds > 0"):
        benchmark(lambda: None, min_run_time=min_run_time)


def test_counts_and_threads_of_the_wrong_type_are_labkit_errors():
    from labkit.core.timing import compare_autorange

    with pytest.raises(LabkitTypeError, match="rounds must be a whole number"):
        compare_autorange({"a": lambda: None}, rounds=1.5)
    with pytest.raises(LabkitTypeError, match="number must be a whole number"):
        compare({"a": lambda: None}, number=2.5)
    with pytest.raises(LabkitValueError, match="num_threads must be at least 1"):
        benchmark(lambda: None, num_threads=-1)
    with pytest.raises(LabkitTypeError, match="min_run_time must be a finite number"):
        benchmark(lambda: None, min_run_time="0.2")


@pytest.mark.parametrize("samples", [["a"], None, [1.0, None]])
def test_run_stats_needs_numbers(samples):
    with pytest.raises(LabkitTypeError, match="samples must be a sequence of numbers"):
        RunStats.from_samples(samples)


def _stats(median, iqr=0.0):
    """RunStats with a given median and IQR (samples m - iqr/2, m, m + iqr/2 have inclusive quartiles m -+ iqr/4)."""
    return RunStats(mean=median, median=median, min=median - iqr / 2, max=median + iqr / 2, iqr=iqr, count=3)


def test_side_by_side_speedup_is_baseline_over_variant():
    timings = SideBySide({"eager": _stats(3.0), "fast": _stats(1.0), "slow": _stats(6.0)}, "eager")
    assert timings.speedup("fast") == pytest.approx(3.0)  # > 1: faster than the baseline
    assert timings.speedup("slow") == pytest.approx(0.5)  # < 1: slower
    assert timings.speedup("eager") == 1.0
    assert timings.slowdown("slow") == pytest.approx(2.0) and timings.slowdown("fast") == pytest.approx(1 / 3)


def test_side_by_side_spread_adds_both_relative_iqrs():
    timings = SideBySide({"base": _stats(2.0, iqr=0.2), "variant": _stats(1.0, iqr=0.05)}, "base")
    # speedup 2, relative IQRs 0.1 and 0.05: first-order spread 2 * (0.1 + 0.05)
    assert timings.spread("variant") == pytest.approx(0.3)
    assert timings.slowdown_spread("variant") == pytest.approx(0.5 * 0.15)
    assert timings.spread("base") == pytest.approx(2 * 0.1)  # the baseline against itself still carries its noise


def test_side_by_side_rebased_reads_the_same_timings_against_another_baseline():
    timings = SideBySide({"forward": _stats(1.0), "raw": _stats(4.0), "ours": _stats(3.0)}, "forward")
    assert timings.rebased("raw").slowdown("ours") == pytest.approx(0.75)
    assert timings.rebased("raw").stats == timings.stats


def test_side_by_side_flags_noisy_timings_like_torch_benchmark():
    assert NOISY_IQR_FRACTION == 0.1
    timings = SideBySide({"calm": _stats(1.0, iqr=0.05), "edge": _stats(1.0, iqr=0.1), "noisy": _stats(1.0, iqr=0.3)}, "calm")
    assert [timings.noisy(name) for name in timings.names] == [False, True, True]


def test_side_by_side_table_keeps_the_given_order_and_notes_noise():
    stats = {"slow": _stats(2e-3, iqr=5e-4), "fast": _stats(1e-3, iqr=1e-5), "middle": _stats(1.5e-3)}
    table = SideBySide(stats, "slow", title="three variants").table()
    assert table.headers == ["variant", "median", "IQR", "speedup", "note"]
    assert table.column("variant") == ["slow", "fast", "middle"]  # as given, never sorted by time
    assert table.column("median") == [format_seconds(2e-3), format_seconds(1e-3), format_seconds(1.5e-3)]
    assert table.column("speedup") == ["1.00x", "2.00x", "1.33x"]
    assert table.column("note") == ["baseline, noisy (IQR 25% of median)", "", ""]
    assert str(table).startswith("three variants\n")


def test_side_by_side_table_can_show_slowdowns_under_its_own_row_label():
    timings = SideBySide({"forward": _stats(1.0), "jvp": _stats(2.5)}, "forward", row_label="path", ratio_column="slowdown")
    assert timings.table().headers == ["path", "median", "IQR", "slowdown", "note"]
    assert timings.table().column("slowdown") == ["1.00x", "2.50x"]
    assert "<table>" in timings._repr_html_() and "jvp" in str(timings)


def test_side_by_side_rejects_a_baseline_it_does_not_hold():
    with pytest.raises(LabkitValueError, match=r"baseline 'eagre' is not one of the timings \['eager', 'fast'\]"):
        SideBySide({"eager": _stats(1.0), "fast": _stats(0.5)}, "eagre")


def test_side_by_side_rejects_bad_names_and_bad_timings():
    timings = SideBySide({"eager": _stats(1.0)}, "eager")
    with pytest.raises(LabkitValueError, match="No timing named 'fused'"):
        timings.speedup("fused")
    with pytest.raises(LabkitValueError, match="at least one timing"):
        SideBySide({}, "eager")
    with pytest.raises(LabkitValueError, match="median time of 0 s"):
        SideBySide({"eager": _stats(1.0), "instant": _stats(0.0)}, "eager")
    with pytest.raises(LabkitValueError, match="ratio_column must be"):
        SideBySide({"eager": _stats(1.0)}, "eager", ratio_column="ratio")


def test_side_by_side_accepts_compare_output_directly():
    stats = compare({"a": lambda: sum(range(100)), "b": lambda: sum(range(200))}, rounds=2, warmup=0)
    timings = SideBySide(stats, "a")
    assert timings.names == ["a", "b"] and timings.speedup("a") == 1.0


def test_benchmark_timings_wait_for_an_apple_gpu_which_the_timer_does_not(monkeypatch):
    import labkit.core.timing as timing

    waited = []
    monkeypatch.setattr(timing, "synchronize", lambda device: waited.append(str(device)))
    fn = lambda: "done"  # noqa: E731
    assert timing.waits_for_mps(fn, None) is fn and timing.waits_for_mps(fn, "cpu") is fn
    assert timing.waits_for_mps(fn, "cuda") is fn  # torch.utils.benchmark synchronizes CUDA itself
    on_mps = timing.waits_for_mps(fn, "mps")
    assert on_mps() == "done" and waited == ["mps"]
    timing.compare_autorange({"a": fn}, rounds=1, min_run_time=0.001, fixed_blocks=True, device="mps")
    timing.benchmark(fn, min_run_time=0.001, device="mps")
    assert len(waited) > 3  # every timed call waited, in both timers
