import math
import time

import pytest

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.timing import RunStats, SyncTimer, benchmark, compare, format_seconds, measure


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


def test_ratio_uses_medians():
    fast, slow = RunStats.from_samples([1.0, 1.0]), RunStats.from_samples([3.0, 3.0])
    assert fast.ratio_to(slow) == pytest.approx(3.0)


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


@pytest.mark.parametrize("kwargs, message", [({"runs": 0}, "runs must be at least 1"), ({"warmup": -1}, "warmup cannot be negative")])
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
    assert result["fast"].ratio_to(result["slow"]) > 1


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
