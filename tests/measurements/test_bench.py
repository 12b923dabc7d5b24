"""Smoke test of `python -m labkit bench`: tiny sizes, every field present and plausible.

This is not a performance test: the figures of a tiny run mean nothing, and no
speed goal is asserted here.
"""
import json
import math
import subprocess
import sys

import pytest

from labkit.labs import LABS
from labkit.measurements.bench import (
    HF_MODELS,
    REDRAW_GOALS_MS,
    REDRAW_PROBES,
    STEPS,
    hf_skip_reason,
    machine_line,
    registered_widgets,
)


@pytest.fixture(scope="module")
def smoke_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    result = subprocess.run([sys.executable, "-m", "labkit", "bench", "--smoke", "--json", str(path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "JSON written to" in result.stdout
    return json.loads(path.read_text()), result.stdout


EXPECTED = [
    "P1.interpreter", "P1.fast", "P2.max_difference", "P2.max_difference_all", "P3.channels_last", "P3.fused",
    "P3.fused_channels_last", "P3.maxpool_collapse", "P3.optimize_for_inference", "P4.channels_last_fp32",
    "P5.raw_dual_over_forward", "P5.func_jvp_over_forward", "P5.labkit_over_raw",
    "P5.crossover_out", "widget.SliderPlot", "widget.LiveProfile", "widget.StrideExplorer",
    "widget.StrideExplorer_largest", "widget.MemoryTimeline",
    "widget.JacobianScaling", "widget.variant_bars", "notebook.00_start_here",
    "import.labkit_over_torch",
]
# P6 and P7 where transformers and torch.export run here, else one skip note each
HF_EXPECTED = (["P6.labkit", "P6.labkit_over_graph", "P6.torch_profiler", "P6.difference"]
               + [f"P7.{name}.{figure}" for name in HF_MODELS for figure in ("over_eager", "outside")])


@pytest.mark.slow
def test_every_figure_is_present_with_a_plausible_value(smoke_json):
    """Every figure is measured and well formed. No speed or ordering is asserted: a 3-round smoke
    run on a loaded machine gives any ratio (P5.raw_dual_over_forward reached 52 under nbval-stress)."""
    data, stdout = smoke_json
    figures = data["figures"]
    bf16 = [k for k in figures if k == "P4.channels_last_bf16"]  # present where the CPU runs bf16
    assert sorted(set(figures) - set(bf16)) == sorted(EXPECTED + (["P6", "P7"] if hf_skip_reason() else HF_EXPECTED))
    assert figures["P1.interpreter"]["value"] > 0 and figures["P1.interpreter"]["spread"] >= 0
    for key in ("P3.channels_last", "P3.fused", "P3.fused_channels_last", "P3.maxpool_collapse",
                "P4.channels_last_fp32", "P5.raw_dual_over_forward", "P5.labkit_over_raw", "notebook.00_start_here"):
        value = figures[key]["value"]
        assert value is not None and math.isfinite(value) and value > 0, key  # ratios and durations
    # a difference of two timings: on a loaded machine the fast mode's added time can come out below zero (seen: -0.46)
    assert math.isfinite(figures["P1.fast"]["value"])
    for key in ("P1.fast", "P2.max_difference", "P3.fused_channels_last", "P5.labkit_over_raw", "import.labkit_over_torch"):
        assert figures[key]["goal"] and isinstance(figures[key]["meets"], bool), key
    assert machine_line(data["machine"]) in stdout


@pytest.mark.slow
def test_shares_sum_to_100_and_variants_are_correct(smoke_json):
    data, _ = smoke_json
    assert math.isclose(data["details"]["P2"]["labkit_pct_sum"], 100, abs_tol=0.5)
    assert math.isclose(data["details"]["P2"]["profiler_pct_sum"], 100, abs_tol=0.5)
    assert data["details"]["P3"]["all_close"] is True
    machine = data["machine"]
    assert machine["threads"] >= 1 and machine["torch"] and machine["cpu"] and machine["device"]


def test_only_runs_the_named_steps():
    from labkit.measurements.bench import run_bench

    result = run_bench("smoke", only=["import"], log=lambda _m: None)
    assert [f.key for f in result.figures] == ["import.labkit_over_torch"]
    assert set(STEPS) == {"P1", "P2", "P3", "P4", "P5", "P6", "P7", "widgets", "notebooks", "import"}


def test_quick_leaves_out_the_hugging_face_steps_unless_named(monkeypatch):
    """--quick runs no P6 or P7 (model builds and exports: 16-70 s on a loaded 2-core machine); --only still does."""
    import labkit.measurements.bench as bench

    ran = []
    monkeypatch.setattr(bench, "STEPS", {name: lambda _c, _r, name=name: ran.append(name) for name in ("P5", "P6", "P7")})
    bench.run_bench("quick", log=lambda _m: None)
    assert ran == ["P5"]
    bench.run_bench("quick", only=["P6", "P7"], log=lambda _m: None)
    bench.run_bench("full", log=lambda _m: None)
    assert ran == ["P5", "P6", "P7", "P5", "P6", "P7"]


def test_hf_steps_are_skipped_with_a_note_where_they_cannot_run(monkeypatch):
    """Without a transformers that runs on this torch (transformers 5 needs 2.6), P6 and P7 each leave one
    figure that says why."""
    import labkit.measurements.bench as bench

    monkeypatch.setattr(bench, "hf_skip_reason", lambda: "Hugging Face models need the transformers package")
    result = bench.run_bench("smoke", only=["P6", "P7"], log=lambda _m: None)
    assert [(f.key, f.value, f.meets) for f in result.figures] == [("P6", None, None), ("P7", None, None)]
    for figure in result.figures:
        assert figure.skipped == "Hugging Face models need the transformers package"
        assert figure.label == f"{figure.key} skipped: {figure.skipped}"
    assert "skipped" in result.to_text() and "not found" not in result.to_text()


def test_hf_skip_reason_says_what_is_missing():
    """Empty where P6 and P7 run; otherwise it names torch.export's torch or the transformers package."""
    import torch

    from labkit.fx.capture import EXPORT_MIN_TORCH

    try:
        import transformers

        runs = torch.__version__ >= EXPORT_MIN_TORCH and transformers.utils.is_torch_available()
    except ImportError:
        runs = False
    reason = hf_skip_reason()
    assert (reason == "") == runs
    if not runs:
        assert f"torch {EXPORT_MIN_TORCH}" in reason or "transformers" in reason


def test_hf_figures_have_their_keys_and_goals(transformers, monkeypatch):
    """A tiny P6 and P7 on BERT alone: every figure, unit and goal (no value is asserted: 2 calls mean nothing)."""
    import torch

    import labkit.measurements.bench as bench
    from labkit.fx.capture import EXPORT_MIN_TORCH

    if torch.__version__ < EXPORT_MIN_TORCH:
        pytest.skip(f"P6 and P7 capture by torch.export, which labkit needs torch {EXPORT_MIN_TORCH} for")
    monkeypatch.setattr(bench, "HF_MODELS", ("bert",))
    result = bench.run_bench("smoke", only=["P6", "P7"], log=lambda _m: None)
    figures = {f.key: f for f in result.figures}
    assert list(figures) == ["P6.labkit", "P6.labkit_over_graph", "P6.torch_profiler", "P6.difference",
                             "P7.bert.over_eager", "P7.bert.outside"]
    assert [f.unit for f in figures.values()] == ["µs/node", "µs/node", "µs/op", "µs", "x", "%"]
    assert [f.goal for f in figures.values()] == ["<= P6.torch_profiler", "", "", "<= 0", "<= 1.15", "<= 5"]
    for figure in figures.values():
        assert not figure.skipped and figure.value is not None and math.isfinite(figure.value), figure.key
        assert figure.spread is not None and figure.spread >= 0, figure.key
        assert isinstance(figure.meets, bool) == bool(figure.goal), figure.key
    assert figures["P6.labkit"].meets == figures["P6.difference"].meets == (figures["P6.difference"].value <= 0)
    p6 = result.details["P6"]
    assert p6["rounds"] == 1 and len(p6["per_round_us"]["difference"]) == 1  # smoke: one round, no more
    assert p6["capture"] == "export" and p6["nodes"] > 0 and p6["aten_ops"] >= p6["top_level_aten_ops"] > 0
    assert set(p6["min_ms"]) == set(p6["median_ms"]) == {bench.EAGER, bench.PROFILED, bench.GRAPH, bench.TORCH_PROFILER}
    assert result.details["P7"]["bert"]["capture"] == "export"


def test_ratio_figures_carry_a_spread_from_side_by_side():
    """P4 and P5 ratios come with SideBySide's first-order spread (no value or ordering is asserted)."""
    import labkit.measurements.bench as bench
    from labkit.measurements.bench import run_bench

    assert not hasattr(bench, "_ratio_spread"), "one spread formula: SideBySide.spread / slowdown_spread"
    result = run_bench("smoke", only=["P4", "P5"], log=lambda _m: None)
    ratios = [f for f in result.figures if f.unit == "x"]
    assert {f.key for f in ratios} >= {"P4.channels_last_fp32", "P5.raw_dual_over_forward", "P5.labkit_over_raw"}
    for figure in ratios:
        assert figure.spread is not None and math.isfinite(figure.spread) and figure.spread >= 0, figure.key


def test_to_json_writes_through_a_symlink_and_refuses_a_fifo(tmp_path):
    import os

    from labkit.core.errors import LabkitValueError
    from labkit.measurements.bench import BenchFigure, BenchResult

    result = BenchResult({"cpu": "test"}, "smoke", [BenchFigure("P1.fast", "fast mode", 1.0, "µs")])
    real, link = tmp_path / "real.json", tmp_path / "bench.json"
    real.write_text("old")
    link.symlink_to(real)
    assert result.to_json(link) == link
    assert link.is_symlink() and json.loads(real.read_text())["figures"]["P1.fast"]["value"] == 1.0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(LabkitValueError, match="special file"):
        result.to_json(fifo)
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["bench.json", "fifo", "real.json"]
    assert result.to_json(tmp_path / "new" / "bench.json").exists()  # its own output folder is created


def test_every_registered_widget_has_a_redraw_probe():
    """A widget added to labkit.labs without a probe in bench.REDRAW_PROBES fails here, not silently in the bench."""
    names = registered_widgets()
    assert names == [name for lab in LABS for name in lab.widgets]
    assert {"SliderPlot", "LiveProfile", "StrideExplorer", "JacobianScaling"} <= set(names)
    assert set(names) <= set(REDRAW_PROBES), f"no redraw probe for {set(names) - set(REDRAW_PROBES)}"


def test_every_redraw_probe_has_a_goal_and_every_widget_the_drag_goal():
    """A slider drag feels smooth at about 60 ms a step; variant_bars, drawn once, has a looser goal of its own."""
    assert set(REDRAW_GOALS_MS) == set(REDRAW_PROBES)
    assert {REDRAW_GOALS_MS[name] for name in registered_widgets()} == {60.0}
    assert REDRAW_GOALS_MS["StrideExplorer_largest"] == 60.0 and REDRAW_GOALS_MS["variant_bars"] > 60.0


def test_widget_redraw_figure_reports_every_registered_widget():
    """A smoke run of the widget figure: one median (ms) per widget, with its spread; no speed is asserted."""
    from labkit.measurements.bench import run_bench

    result = run_bench("smoke", only=["widgets"], log=lambda _m: None)
    figures = {f.key: f for f in result.figures}
    assert list(figures) == [f"widget.{key}" for key in REDRAW_PROBES]
    assert {f"widget.{name}" for name in registered_widgets()} <= set(figures)
    for figure in figures.values():
        assert figure.unit == "ms" and figure.value is not None and math.isfinite(figure.value) and figure.value > 0
        assert figure.spread is not None and figure.spread >= 0, figure.key
    for key in REDRAW_PROBES:
        assert figures[f"widget.{key}"].goal == f"<= {REDRAW_GOALS_MS[key]:g}", key
        assert isinstance(figures[f"widget.{key}"].meets, bool), key
    low, high = result.details["widgets"]["min_max_ms"]["StrideExplorer"]
    assert 0 < low <= figures["widget.StrideExplorer"].value <= high
    assert result.details["widgets"]["redraws"] == 2


def test_a_registered_widget_without_a_probe_is_reported_not_skipped(monkeypatch):
    import labkit.measurements.bench as bench

    calls = []
    monkeypatch.setattr(bench, "REDRAW_PROBES", {"SliderPlot": ("a probe", lambda: lambda: calls.append(1))})
    result = bench.run_bench("smoke", only=["widgets"], log=lambda _m: None)
    assert len(calls) == 1 + bench.SMOKE.widget_redraws  # one untimed redraw, then the timed ones
    unprobed = [f for f in result.figures if f.value is None]
    assert {f.key for f in unprobed} == {f"widget.{name}" for name in registered_widgets()} - {"widget.SliderPlot"}
    assert all("no redraw probe" in f.label for f in unprobed)


def test_a_goal_within_the_spread_is_called_too_close_not_met():
    """P7 once read "1.14x ± 0.21, <= 1.15: met": a margin smaller than the noise is no verdict."""
    from labkit.measurements.bench import BenchFigure, BenchResult, machine_info, too_close

    assert too_close(1.14, 0.21, 1.15) and not too_close(0.5, 0.21, 1.15) and not too_close(1.14, None, 1.15)
    close = BenchFigure("P7.llama.over_eager", "profile over eager", 1.14, "x", 0.21, "<= 1.15", True, too_close=True)
    clear = BenchFigure("P7.bert.outside", "outside", 1.0, "%", 0.1, "<= 5", True)
    table = BenchResult(machine_info(), "smoke", [close, clear]).table()
    assert table.column("verdict") == ["met, within the spread: too close to call", "met"]


def test_the_interval_of_a_median_narrows_with_rounds_where_the_iqr_does_not():
    """P6 read -0.31 µs/node ± 13.7 (IQRs) against 0.92: an IQR stays as wide however long one measures."""
    from labkit.core.timing import RunStats
    from labkit.measurements.bench import decided, median_interval

    noise = [(-1) ** i * (i % 7) for i in range(700)]  # a fixed spread of -6..6 around 0
    few, many = [10.0 + n for n in noise[:20]], [10.0 + n for n in noise]
    assert RunStats.from_samples(few).iqr == pytest.approx(RunStats.from_samples(many).iqr, rel=0.5)
    assert median_interval(many)[1] < median_interval(few)[1] / 2
    assert decided(many, 11.0) and not decided(few, 11.0)
    assert median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0)  # under 6 values: half the range


def test_rounds_are_added_until_settled_or_bounded(transformers, monkeypatch):
    """measure_hf_model runs batches of hf_rounds until the caller's verdicts are decided, or the bounds."""
    import dataclasses

    import torch

    import labkit.measurements.bench as bench
    from labkit.fx.capture import EXPORT_MIN_TORCH

    if torch.__version__ < EXPORT_MIN_TORCH:
        pytest.skip(f"P6 and P7 capture by torch.export, which labkit needs torch {EXPORT_MIN_TORCH} for")
    config = dataclasses.replace(bench.SMOKE, hf_rounds=2, hf_max_rounds=6, hf_budget_s=600.0)
    asked = []
    run = bench.measure_hf_model("bert", config, settled=lambda m: asked.append(len(m.rounds[bench.EAGER])) or False)
    assert asked == [2, 4] and len(run.rounds[bench.EAGER]) == len(run.rounds[bench.PROFILED]) == 6
    assert len(run.outside_pct) == 6 * config.hf_calls and all(0 <= p < 100 for p in run.outside_pct)
    settled = bench.measure_hf_model("bert", config, settled=lambda m: True)
    assert len(settled.rounds[bench.EAGER]) == 2


def test_p1s_paired_rounds_resolve_a_small_cost_on_a_clock_other_work_interrupts():
    """P1's estimator on a simulated clock: a plain call costs 0.5 ms, fast mode 0.03 ms more (0.3 µs on each of 100
    nodes), and other work interrupts half the calls for up to 8 ms. Five runs give fast mode's cost within 0.05 µs
    and the same decided verdict on the 1 µs goal; the old spread (the two modes' IQRs per node) spans the goal."""
    import random
    import statistics

    from labkit.measurements.bench import decided, fastest_in_turn, median_interval

    nodes, goal_us = 100, 1.0
    for seed in range(5):
        rng, now, every = random.Random(seed), [0.0], {"plain": [], "fast": []}

        def mode(name, cost, rng=rng, now=now, every=every):
            def call():
                taken = cost + (rng.uniform(0, 8e-3) if rng.random() < 0.5 else 0.0)
                now[0] += taken
                every[name].append(taken)
            return call

        calls = {"plain": mode("plain", 5e-4), "fast": mode("fast", 5.3e-4)}
        fast_us = []
        for _ in range(20):
            fastest = fastest_in_turn(calls, 20, clock=lambda now=now: now[0])
            fast_us.append((fastest["fast"] - fastest["plain"]) / nodes * 1e6)
        median, half = median_interval(fast_us)
        assert abs(median - 0.3) < 0.05 and decided(fast_us, goal_us) and median + half < goal_us, (seed, median, half)
        iqr = [statistics.quantiles(every[name], n=4) for name in ("plain", "fast")]
        old_spread_us = sum(q[2] - q[0] for q in iqr) / nodes * 1e6
        assert old_spread_us > goal_us - 0.3  # the old P1 could not tell 0.3 from 1.0 on this clock


def test_the_quick_help_says_what_quick_runs_and_promises_no_time_it_cannot_keep():
    """`--quick` took 292 s on a loaded 2-core machine where its help said "under 2 minutes"."""
    import argparse

    from labkit.measurements.bench import QUICK, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    quick = next(action.help for action in parser._actions if "--quick" in action.option_strings)
    assert f"batch {QUICK.resnet_batch}, {QUICK.image_size} px" in quick and "no notebooks" in quick
    assert (QUICK.resnet_batch, QUICK.image_size) < (8, 224) and not QUICK.notebooks and set(QUICK.left_out) == {"P6", "P7"}
    assert "under 2 minutes" not in quick and "with other work beside it" in quick
