"""A saved report says what its percentages are shares of, and what its parameter reads took (issue 34)."""
import json

from labkit.core.timing import RunStats
from labkit.fx.report import MEDIAN_TOTAL, SUMMED_MEDIANS, NodeTiming, ProfileReport


def _row(op: str, name: str, seconds: float) -> NodeTiming:
    return NodeTiming(op, name, name, "get_attr" if op == "get_attr" else "linear", RunStats.from_samples([seconds]), 0.0)


def _full_report() -> ProfileReport:
    rows = [_row("get_attr", "weight", 3.0), _row("call_function", "linear", 1.0)]
    return ProfileReport(rows, RunStats.from_samples([10.0]), "fast", 0, graph_nodes=2, capture="export",
                         outside=RunStats.from_samples([4.0]))


def test_the_json_says_what_the_shares_are_of_and_what_the_parameter_reads_took(tmp_path):
    payload = json.loads(_full_report().to_json(tmp_path / "p.json").read_text())
    assert payload["share_basis"] == {"seconds": 8.0, "of": SUMMED_MEDIANS}  # 3 + 1 + 4 outside, not the 10 s run
    assert payload["parameter_reads"] == {"nodes": 1, "median_s": 3.0, "pct": 37.5}
    assert [node["pct_total"] for node in payload["nodes"]] == [37.5, 12.5]


def test_a_hand_built_reports_shares_are_of_the_median_run(tmp_path):
    report = ProfileReport([_row("call_function", "linear", 1.0)], RunStats.from_samples([2.0]), "fast", 0, graph_nodes=1)
    payload = json.loads(report.to_json(tmp_path / "p.json").read_text())
    assert payload["share_basis"] == {"seconds": 2.0, "of": MEDIAN_TOTAL}
    assert payload["parameter_reads"] == {"nodes": 0, "median_s": 0.0, "pct": 0.0}
