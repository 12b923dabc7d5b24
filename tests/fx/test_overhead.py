"""labkit.fx.overhead: what each profiling mode adds per node, read from one side-by-side measurement."""
import pytest

from labkit.core.errors import LabkitValueError
from labkit.core.timing import RunStats, SideBySide
from labkit.fx.overhead import FAST, INTERPRETER, PLAIN, OverheadResult, TinyOpsChain, measure_overhead
from labkit.fx.profile import trace


def test_measure_overhead_reports_per_node_costs():
    result = measure_overhead(num_ops=50, rounds=3, warmup=1)
    assert result.num_nodes == 50
    assert isinstance(result.timings, SideBySide) and result.timings.baseline == PLAIN
    assert result.timings.names == [PLAIN, INTERPRETER, FAST]
    assert result.plain.count == result.interpreter.count == result.fast.count == 3
    assert result.interpreter_us_per_node == pytest.approx(
        (result.interpreter.min - result.plain.min) / 50 * 1e6
    )
    assert result.fast_spread_us >= 0 and result.plain_us_per_node > 0
    assert "fast mode" in str(result) and "<table>" in result._repr_html_()
    with pytest.raises(LabkitValueError):
        measure_overhead(num_ops=0)


def _stats(minimum, iqr):
    return RunStats(mean=minimum, median=minimum, min=minimum, max=minimum + iqr, iqr=iqr, count=3)


def test_added_cost_per_node_comes_from_the_fastest_rounds():
    timings = SideBySide({PLAIN: _stats(1e-3, 1e-5), INTERPRETER: _stats(3e-3, 2e-5), FAST: _stats(1.5e-3, 4e-5)}, PLAIN)
    result = OverheadResult(100, timings)
    assert result.plain_us_per_node == pytest.approx(10.0)
    assert result.interpreter_us_per_node == pytest.approx(20.0)
    assert result.fast_us_per_node == pytest.approx(5.0)
    assert result.interpreter_spread_us == pytest.approx(0.3) and result.fast_spread_us == pytest.approx(0.5)
    table = result.table()
    assert table.column("variant") == [PLAIN, INTERPRETER, FAST]
    assert table.column("added µs per node") == ["-", "20.00", "5.00"]


def test_tiny_ops_chain_traces_to_one_node_per_op():
    assert len(trace(TinyOpsChain(7)).graph.nodes) == 9


def test_the_verdict_compares_each_modes_overhead_with_a_nodes_cost():
    timings = SideBySide({PLAIN: _stats(1e-3, 1e-5), INTERPRETER: _stats(3e-3, 2e-5), FAST: _stats(1.5e-3, 4e-5)}, PLAIN)
    lines = OverheadResult(100, timings).verdict().splitlines()
    assert lines[0] == "One node of the plain graph costs 10.00 µs here."
    assert lines[1].startswith(f"{INTERPRETER} adds 20.00 ± 0.30 µs per node: more than a node costs (2.0x")
    assert lines[2].startswith(f"{FAST} adds 5.00 ± 0.50 µs per node: less than a node costs (0.5x")
    tie = SideBySide({PLAIN: _stats(1e-3, 5e-4), INTERPRETER: _stats(2e-3, 5e-4), FAST: _stats(2e-3, 5e-4)}, PLAIN)
    assert "about as much as a node costs" in OverheadResult(100, tie).verdict()
