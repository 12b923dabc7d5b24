"""What profiling costs: the per-node overhead of each mode of :mod:`labkit.fx.profile`.

Why: a profiler that adds more time per node than a small op costs would point
the learner at the wrong layer. This study times a chain of tiny additions three
ways, interleaved in one process so machine noise hits all of them alike: the
plain ``GraphModule``, the interpreter mode and the fast (instrumented) mode.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.timing import RunStats, SideBySide, compare
from labkit.fx.profile import InstrumentedModule, ProfilingInterpreter, trace
from labkit.i18n.messages import N_, _


class TinyOpsChain(torch.nn.Module):
    """``num_ops`` additions on a tiny tensor: a model where per-node overhead dominates."""

    def __init__(self, num_ops: int = 1000) -> None:
        super().__init__()
        self.num_ops = num_ops

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _op in range(self.num_ops):
            x = x + 1.0
        return x


PLAIN, INTERPRETER, FAST = N_("plain GraphModule"), N_("interpreter mode"), N_("fast mode")


@dataclass(frozen=True, repr=False)
class OverheadResult(ShowsAsTable):
    """What each profiling mode adds per node over the plain GraphModule.

    ``timings`` is the side-by-side measurement (baseline: the plain
    GraphModule); this result reads it per node. Added cost is computed from
    the *fastest* round of each variant: machine noise only ever adds time, so
    the minimum is the best estimate of the cost itself (the advice of
    Python's ``timeit``). The spread reported next to it is the two variants'
    IQRs per node, a measure of how noisy the machine was.
    """

    num_nodes: int
    timings: SideBySide  # seconds per call of the whole chain

    @property
    def plain(self) -> RunStats:
        return self.timings.stats[PLAIN]

    @property
    def interpreter(self) -> RunStats:
        return self.timings.stats[INTERPRETER]

    @property
    def fast(self) -> RunStats:
        return self.timings.stats[FAST]

    def _added_us(self, stats: RunStats) -> float:
        return (stats.min - self.plain.min) / self.num_nodes * 1e6

    def _spread_us(self, stats: RunStats) -> float:
        return (stats.iqr + self.plain.iqr) / self.num_nodes * 1e6

    @property
    def plain_us_per_node(self) -> float:
        return self.plain.min / self.num_nodes * 1e6

    @property
    def interpreter_us_per_node(self) -> float:
        return self._added_us(self.interpreter)

    @property
    def fast_us_per_node(self) -> float:
        return self._added_us(self.fast)

    @property
    def interpreter_spread_us(self) -> float:
        return self._spread_us(self.interpreter)

    @property
    def fast_spread_us(self) -> float:
        return self._spread_us(self.fast)

    def verdict(self) -> str:
        """Each mode's added time per node against what a node of the plain graph costs, from this measurement.

        Why computed: whether a profiler's overhead exceeds the ops it times is
        a measurement of this machine, so the notebook prints it, never states it.
        """
        op = self.plain_us_per_node
        lines = [_("One node of the plain graph costs {cost} µs here.").format(cost=f"{op:.2f}")]
        for name, added, spread in ((INTERPRETER, self.interpreter_us_per_node, self.interpreter_spread_us),
                                    (FAST, self.fast_us_per_node, self.fast_spread_us)):
            ratio = f"{added / op:.1f}x"
            if abs(added - op) <= spread:
                compared = _("about as much as a node costs (within the spread)")
            elif added > op:
                compared = _("more than a node costs ({ratio} its cost)").format(ratio=ratio)
            else:
                compared = _("less than a node costs ({ratio} its cost)").format(ratio=ratio)
            lines.append(_("{mode} adds {added} ± {spread} µs per node: {compared}.").format(
                mode=_(name), added=f"{added:.2f}", spread=f"{spread:.2f}", compared=compared))
        return "\n".join(lines)

    def table(self) -> Table:
        return Table(
            [_("variant"), _("µs per node"), _("added µs per node"), "± (IQR)"],
            [
                [_(PLAIN), f"{self.plain_us_per_node:.2f}", "-", "-"],
                [_(INTERPRETER), f"{self.plain_us_per_node + self.interpreter_us_per_node:.2f}",
                 f"{self.interpreter_us_per_node:.2f}", f"{self.interpreter_spread_us:.2f}"],
                [_(FAST), f"{self.plain_us_per_node + self.fast_us_per_node:.2f}",
                 f"{self.fast_us_per_node:.2f}", f"{self.fast_spread_us:.2f}"],
            ],
            title=_("Profiling overhead on {nodes} tiny ops (fastest of interleaved rounds)").format(nodes=self.num_nodes),
        )


def measure_overhead(num_ops: int = 1000, *, rounds: int = 20, warmup: int = 2, size: int = 16) -> OverheadResult:
    """Time the plain GraphModule, the interpreter mode and the fast mode interleaved.

    The model is :class:`TinyOpsChain` (``num_ops`` additions on ``size`` floats),
    where each op costs about a microsecond, so any per-node overhead shows.
    """
    if num_ops < 1:
        raise LabkitValueError(f"num_ops must be at least 1 (got {num_ops}).")
    graph_module = trace(TinyOpsChain(num_ops))
    x = torch.zeros(size)
    interpreter = ProfilingInterpreter(graph_module)
    instrumented = InstrumentedModule(graph_module)

    def run_interpreter() -> None:
        interpreter.run(x)
        interpreter.total_runtime_sec.clear()  # keep memory flat over many rounds
        interpreter.runtimes_sec.clear()

    with torch.no_grad():
        stats = compare(
            {PLAIN: lambda: graph_module(x), INTERPRETER: run_interpreter, FAST: lambda: instrumented(x)},
            rounds=rounds,
            warmup=warmup,
        )
    timings = SideBySide(stats, PLAIN, title=f"{num_ops} tiny ops, whole chain per call", row_label="mode")
    return OverheadResult(num_ops, timings)


__all__ = ["FAST", "INTERPRETER", "PLAIN", "OverheadResult", "TinyOpsChain", "measure_overhead"]
