"""The report's shares are of the summed medians: its outside share is the cross-check's, parameter reads are apart."""

import itertools
import time

import pytest
import torch
from torch import nn

from labkit.fx.crosscheck import _median_seconds_by_type
from labkit.fx.module_hooks import OUTSIDE
from labkit.fx.profile import make_profiler, profile_model
from tests.fx.support import needs_export

LEAVES = 4
STALL_S = 0.02
_calls = itertools.count()


class Leaf(nn.Module):
    """A leaf module; in each run exactly one of the model's leaves stalls, a different one each run."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        call = next(_calls)
        if call % LEAVES == (call // LEAVES) % LEAVES:
            time.sleep(STALL_S)  # a busy machine: every run is disturbed somewhere, no leaf in most runs
        return x + 1


class Outside(nn.Module):
    """Real work in the model's own forward, between its leaf modules (each leaf a type of its own)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.leaves = nn.ModuleList(type(f"Leaf{i}", (Leaf,), {})() for i in range(LEAVES))
        self.weight = nn.Parameter(torch.randn(96, 96) / 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for leaf in self.leaves:
            for _ in range(8):
                x = torch.tanh(x @ self.weight)
            x = leaf(x)
        return x


def test_the_reports_outside_share_is_the_cross_checks_when_every_run_is_disturbed_somewhere():
    profiler = make_profiler(Outside().eval(), torch.randn(96, 96), mode="modules")
    with profiler.session():
        profiler.warmup(1)
        for _ in range(5):
            profiler.prepare_run()
            profiler.run_once()
    report = profiler.report()
    by_type = _median_seconds_by_type(report, profiler.samples)  # the cross-check's labkit side, same runs
    cross_check_share = by_type[OUTSIDE][1] / sum(seconds for _, seconds in by_type.values()) * 100
    # each leaf's median drops its stall, the median run keeps one (the old share, of the total, was ~20 points low)
    assert report.total.median >= STALL_S
    assert report.outside_pct == pytest.approx(cross_check_share, abs=2.0)
    assert sum(row.pct for row in report.rows) == pytest.approx(100.0)
    assert sum(pct for *_, pct in report.by_op_type().rows) == pytest.approx(100.0)


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@needs_export
def test_parameter_reads_of_an_exported_model_are_bookkeeping_not_an_op_type_or_a_node_row():
    report = profile_model(Small().eval(), torch.randn(2, 8), runs=3, capture="export")
    reads = [row for row in report.rows if row.op == "get_attr"]
    assert len(reads) == 4  # two weights, two biases: still in the rows, CSV and JSON
    nodes, seconds, pct = report.parameter_reads
    assert nodes == 4 and seconds == pytest.approx(sum(r.stats.median for r in reads))
    breakdown = report.by_op_type()
    assert "get_attr" not in breakdown.seconds and breakdown.parameter_reads == report.parameter_reads
    assert "parameter reads (4 get_attr nodes" in breakdown.table().title
    assert sum(p for *_, p in breakdown.rows) + pct + report.outside_pct == pytest.approx(100.0)
    text = report.to_text()
    assert "get_attr" not in report.table().to_text().split("\n", 1)[1]  # no row of the node table
    assert "Not shown as nodes: parameter reads (4 get_attr nodes" in text
    assert breakdown.top(1).parameter_reads == report.parameter_reads


def test_profile_model_and_compare_with_torch_profiler_agree_on_the_outside_share_within_15_points():
    from labkit.fx.crosscheck import compare_with_torch_profiler

    x = torch.randn(96, 96)
    check = compare_with_torch_profiler(Outside().eval(), x, warmup=1, runs=5, mode="modules")
    report = profile_model(Outside().eval(), x, warmup=1, runs=5, mode="modules")
    assert check.compared_pct == (100, 100)  # so its shares are of all of labkit's time, as the report's
    # two separate timed runs: on a loaded machine they differ by several points (91.8 vs 97.0 seen); the old
    # report was ~80 points off (~11 vs ~95), so 15 still tells the two definitions apart
    assert report.outside_pct == pytest.approx(check.labkit_pct[OUTSIDE], abs=15.0)
