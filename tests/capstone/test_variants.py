import pytest
import torch
from torch import nn

from labkit.capstone.variants import (
    CHANNELS_LAST,
    EAGER,
    FUSED,
    FUSED_CHANNELS_LAST,
    build_variants,
    challenge_input,
    challenge_model,
    compare_variants,
)
from labkit.capstone.widgets import variant_bars
from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.plots import to_png
from tests.fx.test_fusion import ConvCalledTwice  # the model torch's fuse alone gets wrong


@pytest.fixture(scope="module")
def small():
    return challenge_model(), challenge_input(batch=2)


def test_variants_are_copies_with_the_right_layouts(small):
    model, x = small
    before = {k: v.clone() for k, v in model.state_dict().items()}
    variants = build_variants(model, x)
    assert [v.name for v in variants] == [EAGER, CHANNELS_LAST, FUSED, FUSED_CHANNELS_LAST]
    # eager runs a private copy of the model as it is (a forward writing its weights writes the copy's)
    assert variants[0].model is not model and variants[0].inputs[0] is not x
    assert all(torch.equal(before[k], v) for k, v in variants[0].model.state_dict().items())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), "the original model must not change"
    assert model[0].weight.is_contiguous()
    assert variants[1].model[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert variants[1].inputs[0].is_contiguous(memory_format=torch.channels_last)
    fused_types = {type(m) for m in variants[2].model.modules()}
    assert nn.BatchNorm2d not in fused_types


def test_compare_variants_checks_outputs_and_reports_speedups(small):
    model, x = small
    comparison = compare_variants(build_variants(model, x), rounds=2, warmup=1)
    assert comparison.all_close
    assert comparison[EAGER].speedup == pytest.approx(1.0)
    timings = comparison.timings
    assert timings.baseline == EAGER and timings.names == [EAGER, CHANNELS_LAST, FUSED, FUSED_CHANNELS_LAST]
    assert comparison[FUSED].speedup == pytest.approx(timings.speedup(FUSED))
    assert comparison[FUSED].speedup == pytest.approx(comparison[EAGER].stats.median / comparison[FUSED].stats.median)
    table = comparison.table()
    assert table.headers == ["variant", "median", "IQR", "speedup", "allclose", "setup", "note"]
    assert table.column("variant") == [EAGER, CHANNELS_LAST, FUSED, FUSED_CHANNELS_LAST]  # as built, not by time
    assert table.column("note")[0].startswith("baseline")
    assert all(r.stats.count == 2 and r.stats.median > 0 for r in comparison.results)
    assert "fused + channels_last" in comparison.to_text()
    assert comparison.correctness_table().column("allclose to eager (rtol=0.001)") == ["yes"] * 4
    assert to_png(variant_bars(comparison)).startswith(b"\x89PNG")


def test_a_wrong_variant_is_caught(small):
    model, x = small
    variants = build_variants(model, x)
    variants[2].model = nn.Sequential(model, nn.Hardtanh(-0.01, 0.01))  # computes something else
    comparison = compare_variants(variants, rounds=1, warmup=0)
    assert not comparison[FUSED].allclose and not comparison.all_close
    with pytest.raises(KeyError, match="no variant named"):
        comparison["nope"]


def test_bad_inputs_get_labkit_errors(small):
    model, x = small
    with pytest.raises(LabkitTypeError, match="needs an nn.Module"):
        build_variants(lambda t: t, x)
    with pytest.raises(LabkitValueError, match=r"model.eval\(\) first"):
        build_variants(nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)), x)
    with pytest.raises(LabkitValueError, match="at least one example input"):
        build_variants(model)
    with pytest.raises(LabkitValueError, match="at least one variant"):
        compare_variants([])


def test_two_variants_of_one_name_are_refused(small):
    model, x = small
    eager, channels_last = build_variants(model, x)[:2]
    channels_last.name = EAGER  # would be timed and checked as the baseline against itself
    with pytest.raises(LabkitValueError, match=r"more than one variant named 'eager'.*give each variant its own"):
        compare_variants([eager, channels_last], rounds=1, warmup=0)


def test_profile_variants_and_op_type_table(small):
    from labkit.capstone.variants import op_type_table, profile_variants

    model, x = small
    variants = build_variants(model, x)
    reports = profile_variants([variants[0], variants[2]], warmup=1, runs=1)
    table = op_type_table(reports, ["Conv2d", "BatchNorm2d", "MaxPool2d"])
    assert table.headers == ["op type", "eager", "fused"]
    assert table.column("op type") == ["Conv2d", "BatchNorm2d", "MaxPool2d"]
    assert table.column("fused")[1] == "-"  # fusion removed every BatchNorm2d
    assert table.column("eager")[2].endswith(("s", "ms", "µs", "ns"))  # formatted by format_seconds


def test_profile_variants_in_rounds_keeps_each_variants_fastest_round(small, monkeypatch):
    import labkit.fx.profile
    from labkit.capstone.variants import profile_variants

    model, x = small
    variants = build_variants(model, x)[:2]
    real = labkit.fx.profile.profile_model
    totals = []

    def recording(*args, **kwargs):
        report = real(*args, **kwargs)
        totals.append(report.total.mean)
        return report

    monkeypatch.setattr(labkit.fx.profile, "profile_model", recording)
    reports = profile_variants(variants, warmup=0, runs=1, rounds=3)
    assert list(reports) == ["eager", "channels_last"] and len(totals) == 6  # interleaved: eager, cl, eager, cl, ...
    assert reports["eager"].total.mean == min(totals[0::2])
    assert reports["channels_last"].total.mean == min(totals[1::2])
    with pytest.raises(LabkitValueError, match="rounds must be at least 1"):
        profile_variants(variants, rounds=0)


def test_break_even_runs():
    from labkit.capstone.variants import COMPILED, VariantComparison, VariantResult, break_even_runs
    from labkit.core.timing import RunStats

    def result(name, seconds, setup=0.0):
        return VariantResult(name, RunStats.from_samples([seconds]), 1.0, 0.0, True, setup)

    comparison = VariantComparison([result(FUSED_CHANNELS_LAST, 0.10), result(COMPILED, 0.08, setup=20.0)])
    assert break_even_runs(comparison, COMPILED) == pytest.approx(1000)
    slower = VariantComparison([result(FUSED_CHANNELS_LAST, 0.10), result(COMPILED, 0.12, setup=20.0)])
    assert break_even_runs(slower, COMPILED) is None


def test_optimize_for_inference_variant_matches_eager(small):
    from labkit.capstone.variants import OPTIMIZED_FOR_INFERENCE, optimize_for_inference_variant

    model, x = small
    variants = build_variants(model, x)
    variants.append(optimize_for_inference_variant(variants[0]))
    comparison = compare_variants(variants, rounds=1, warmup=0)
    assert comparison[OPTIMIZED_FOR_INFERENCE].allclose
    assert variants[0].model is not model and model[0].weight.is_contiguous()


def test_fused_variants_never_change_the_output_of_a_shared_conv():
    model = ConvCalledTwice().eval()
    x = torch.randn(2, 3, 8, 8)
    variants = build_variants(model, x)
    for variant in variants[2:]:
        torch.testing.assert_close(variant(), model(x))
        assert "left unfused" in variant.description
    assert compare_variants(variants, rounds=1, warmup=0).all_close


class Untraceable(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


def test_untraceable_model_and_empty_batch_get_labkit_errors(small):
    model, x = small
    with pytest.raises(LabkitError, match=r"build_variants.*torch.fx"):
        build_variants(Untraceable().eval(), x)
    with pytest.raises(LabkitValueError, match=r"inputs\[0\].*empty"):
        build_variants(model, x[:0])
    variants = build_variants(model, x)
    variants[0].inputs = (x[:0],)
    with pytest.raises(LabkitValueError, match=r"'eager'.*empty"):
        compare_variants(variants, rounds=1, warmup=0)


class TwoHeads(nn.Module):
    """Returns a dict, as torchvision's segmentation models do."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return {"out": y, "aux": y.mean((2, 3))}


def test_variants_of_a_model_with_a_dict_output_are_compared_leaf_by_leaf():
    model = TwoHeads().eval()
    variants = build_variants(model, torch.randn(2, 3, 8, 8))
    assert compare_variants(variants, rounds=1, warmup=0).all_close
    variants[2].model = nn.Identity()
    with pytest.raises(LabkitValueError, match="variant 'fused' Tensor of 1 value"):
        compare_variants(variants, rounds=1, warmup=0)


class _Profile:
    """Stands in for a ProfileReport: only by_op_type() is read."""

    def __init__(self, seconds):
        from labkit.fx.report import OpTypeBreakdown

        self.breakdown = OpTypeBreakdown([(t, 1, s, 0.0) for t, s in seconds.items()])

    def by_op_type(self):
        return self.breakdown


def test_time_saved_by_op_type_ranks_op_types_by_their_share_of_the_saving():
    from labkit.capstone.variants import EAGER, time_saved_by_op_type

    reports = {
        EAGER: _Profile({"Conv2d": 0.360, "MaxPool2d": 0.050, "BatchNorm2d": 0.030, "ReLU": 0.006}),
        FUSED_CHANNELS_LAST: _Profile({"Conv2d": 0.250, "MaxPool2d": 0.005, "ReLU": 0.007}),
    }
    saved = time_saved_by_op_type(reports, FUSED_CHANNELS_LAST)
    assert saved.ranking == ["Conv2d", "MaxPool2d", "BatchNorm2d"]  # ReLU got slower: not in the ranking
    assert saved.total_saved_seconds == pytest.approx(0.184)
    assert saved.share("Conv2d") == pytest.approx(0.110 / 0.184)
    assert saved.share("BatchNorm2d") == pytest.approx(0.030 / 0.184)  # fused away: all of its time saved
    assert saved.share("ReLU") < 0
    summary = saved.summary()
    assert "largest first: Conv2d 60%, MaxPool2d 24%, BatchNorm2d 16%;" in summary
    assert "slower: ReLU (by 1 ms)" in summary
    assert summary.endswith("Largest share: Conv2d.")
    table = saved.table()
    assert table.column("op type") == ["Conv2d", "MaxPool2d", "BatchNorm2d", "ReLU"]
    assert table.column(FUSED_CHANNELS_LAST)[2] == "0 ns"  # no BatchNorm2d left
    assert table.column("saved")[3].startswith("-")


def test_time_saved_by_op_type_when_nothing_was_saved_and_on_bad_names():
    from labkit.capstone.variants import EAGER, time_saved_by_op_type

    reports = {EAGER: _Profile({"Conv2d": 0.1}), FUSED_CHANNELS_LAST: _Profile({"Conv2d": 0.2})}
    saved = time_saved_by_op_type(reports, FUSED_CHANNELS_LAST)
    assert saved.ranking == [] and "saved no time over eager in these profiles (100 ms more" in saved.summary()
    assert saved.table().column("share of saved") == ["-"]
    with pytest.raises(LabkitValueError, match="No profile named 'fused'"):
        time_saved_by_op_type(reports, "fused")
    with pytest.raises(KeyError):
        saved.share("MaxPool2d")


def test_time_saved_summary_groups_the_op_types_under_one_percent():
    from labkit.capstone.variants import EAGER, time_saved_by_op_type

    reports = {EAGER: _Profile({"Conv2d": 1.0, "flatten": 0.001, "Linear": 0.002}),
               FUSED_CHANNELS_LAST: _Profile({"Conv2d": 0.5, "flatten": 0.0005, "Linear": 0.001})}
    summary = time_saved_by_op_type(reports, FUSED_CHANNELS_LAST).summary()
    assert "largest first: Conv2d 100%, 2 more under 1% each. Largest share: Conv2d." in summary


def _timed(median_s: dict[str, tuple[float, float]]):
    """A comparison from made-up timings: name -> (median, IQR), eager first."""
    from labkit.capstone.variants import VariantComparison, VariantResult
    from labkit.core.timing import RunStats

    def stats(median, iqr):  # five samples whose median and IQR (inclusive quartiles) are these
        return RunStats.from_samples([median - iqr, median - iqr / 2, median, median + iqr / 2, median + iqr])

    return VariantComparison([VariantResult(name, stats(*times), 1.0, 0.0, True, 0.0) for name, times in median_s.items()])


@pytest.mark.parametrize(("variant_s", "iqr_s", "outcome"), [
    (0.060, 0.001, "met"),  # 1.67x, spread about 0.05
    (0.080, 0.001, "not met on this machine"),  # 1.25x
    (0.066, 0.010, "too close to call in this run"),  # 1.52x, spread about 0.25
])
def test_the_goal_verdict_counts_the_spread_of_the_speedup(variant_s, iqr_s, outcome):
    from labkit.capstone.variants import goal_verdict

    comparison = _timed({EAGER: (0.100, 0.001), FUSED_CHANNELS_LAST: (variant_s, iqr_s)})
    verdict = goal_verdict(comparison, 1.5)
    assert verdict.speedup == pytest.approx(0.100 / variant_s)
    assert verdict.spread == pytest.approx(comparison.timings.spread(FUSED_CHANNELS_LAST))
    assert verdict.outcome.startswith(outcome) and verdict.met is (outcome == "met")
    line = str(verdict)
    assert line.startswith(f"fused + channels_last: {0.100 / variant_s:.2f}x over eager, spread ±")
    assert line.endswith(f"the lab's goal, set on a 2-core CPU, is 1.5x: {verdict.outcome}")


def test_the_goal_verdict_refuses_a_bad_goal_or_variant():
    from labkit.capstone.variants import FUSED_CHANNELS_LAST_GOALS, goal_verdict

    comparison = _timed({EAGER: (0.1, 0.001), FUSED_CHANNELS_LAST: (0.05, 0.001)})
    for goal in (0, -1.0, True, "1.5"):
        with pytest.raises(LabkitValueError, match="goal must be a speedup above 0"):
            goal_verdict(comparison, goal)
    with pytest.raises(LabkitValueError, match="No timing named 'compiled'"):
        goal_verdict(comparison, 1.5, variant="compiled")
    assert set(FUSED_CHANNELS_LAST_GOALS) == {2, 8}, "the core track's batch and the full size"


def test_the_challenge_input_is_small_and_seeded():
    from labkit.capstone.variants import CHALLENGE_SIZE

    x = challenge_input()
    assert x.shape == (8, 3, CHALLENGE_SIZE, CHALLENGE_SIZE) and torch.equal(x, challenge_input())
    assert challenge_input(batch=2).shape[0] == 2


def test_a_cold_compile_removes_the_cache_folders_of_killed_processes(tmp_path, monkeypatch):
    """A killed kernel never runs its atexit hook; the next cold compile removes what it left."""
    import os
    import subprocess
    import sys
    import tempfile

    from labkit.capstone import variants

    if os.name == "nt":
        pytest.skip("POSIX only: os.kill(pid, 0) would end the process on Windows")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"labkit-inductor-{ended.stdout.strip()}-abc"
    (orphan / "kernels").mkdir(parents=True)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            kept = [tmp_path / f"labkit-inductor-{alive.pid}-def", tmp_path / f"labkit-inductor-{os.getpid()}-ghi",
                    tmp_path / "labkit-inductor-notapid", tmp_path / "someone-elses-folder"]
            for folder in kept:
                folder.mkdir()
            monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
            monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
            with variants._empty_inductor_cache():
                cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
            assert not orphan.exists(), "the folder of a process that ended is removed"
            assert all(folder.is_dir() for folder in kept), "a live process's, our own and other folders stay"
            assert cache.startswith(str(tmp_path / f"labkit-inductor-{os.getpid()}-")) and os.path.isdir(cache)
            assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ, "the variable is put back as it was"
        finally:
            alive.kill()
