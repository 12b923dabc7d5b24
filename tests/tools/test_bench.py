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
from labkit.tools.bench import REDRAW_GOALS_MS, REDRAW_PROBES, STEPS, machine_line, registered_widgets


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
    "widget.StrideExplorer_largest", "widget.JacobianScaling", "widget.variant_bars", "notebook.00_start_here",
    "import.labkit_over_torch",
]


@pytest.mark.slow
def test_every_figure_is_present_with_a_plausible_value(smoke_json):
    """Every figure is measured and well formed. No speed or ordering is asserted: a 3-round smoke
    run on a loaded machine gives any ratio (P5.raw_dual_over_forward reached 52 under nbval-stress)."""
    data, stdout = smoke_json
    figures = data["figures"]
    bf16 = [k for k in figures if k == "P4.channels_last_bf16"]  # present where the CPU runs bf16
    assert sorted(set(figures) - set(bf16)) == sorted(EXPECTED)
    assert figures["P1.interpreter"]["value"] > 0 and figures["P1.interpreter"]["spread"] >= 0
    for key in ("P1.fast", "P3.channels_last", "P3.fused", "P3.fused_channels_last", "P3.maxpool_collapse",
                "P4.channels_last_fp32", "P5.raw_dual_over_forward", "P5.labkit_over_raw", "notebook.00_start_here"):
        value = figures[key]["value"]
        assert value is not None and math.isfinite(value) and value > 0, key
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
    from labkit.tools.bench import run_bench

    result = run_bench("smoke", only=["import"], log=lambda _m: None)
    assert [f.key for f in result.figures] == ["import.labkit_over_torch"]
    assert set(STEPS) == {"P1", "P2", "P3", "P4", "P5", "widgets", "notebooks", "import"}


def test_ratio_figures_carry_a_spread_from_side_by_side():
    """P4 and P5 ratios come with SideBySide's first-order spread (no value or ordering is asserted)."""
    import labkit.tools.bench as bench
    from labkit.tools.bench import run_bench

    assert not hasattr(bench, "_ratio_spread"), "one spread formula: SideBySide.spread / slowdown_spread"
    result = run_bench("smoke", only=["P4", "P5"], log=lambda _m: None)
    ratios = [f for f in result.figures if f.unit == "x"]
    assert {f.key for f in ratios} >= {"P4.channels_last_fp32", "P5.raw_dual_over_forward", "P5.labkit_over_raw"}
    for figure in ratios:
        assert figure.spread is not None and math.isfinite(figure.spread) and figure.spread >= 0, figure.key


def test_to_json_writes_through_a_symlink_and_refuses_a_fifo(tmp_path):
    import os

    from labkit.core.errors import LabkitValueError
    from labkit.tools.bench import BenchFigure, BenchResult

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
    from labkit.tools.bench import run_bench

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
    import labkit.tools.bench as bench

    calls = []
    monkeypatch.setattr(bench, "REDRAW_PROBES", {"SliderPlot": ("a probe", lambda: lambda: calls.append(1))})
    result = bench.run_bench("smoke", only=["widgets"], log=lambda _m: None)
    assert len(calls) == 1 + bench.SMOKE.widget_redraws  # one untimed redraw, then the timed ones
    unprobed = [f for f in result.figures if f.value is None]
    assert {f.key for f in unprobed} == {f"widget.{name}" for name in registered_widgets()} - {"widget.SliderPlot"}
    assert all("no redraw probe" in f.label for f in unprobed)
