"""Cross-check labkit's per-node timings against ``torch.profiler``.

Why: a profiler that times itself could be fooling itself (the interpreter's
overhead is the cautionary tale). ``torch.profiler`` measures the same forward
pass independently, at the level of aten operators. Each FX node of a model
like ResNet18 issues one top-level aten operator (``self.conv1(x)`` ->
``aten::conv2d``), so the two can be compared as *shares* of the time per op
type. If they agree within a few percentage points, the FX numbers are honest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labkit.core.errors import LabkitValueError
from labkit.core.noise import filtered_native_stderr, silence_known_warnings
from labkit.core.tables import ShowsAsTable, Table
from labkit.fx.profile import NodeProfiler, require_count

# Top-level aten operator -> the op type labkit reports for the node that issued it.
ATEN_TO_OP_TYPE = {
    "aten::conv2d": "Conv2d",
    "aten::batch_norm": "BatchNorm2d",
    "aten::max_pool2d": "MaxPool2d",
    "aten::relu": "ReLU",
    "aten::relu_": "ReLU",
    "aten::add": "add",
    "aten::add_": "add",
    "aten::adaptive_avg_pool2d": "AdaptiveAvgPool2d",
    "aten::linear": "Linear",
    "aten::flatten": "flatten",
}


@dataclass(frozen=True, repr=False)
class CrossCheck(ShowsAsTable):
    """Per-op-type shares of the forward time (percent), labkit and torch.profiler side by side."""

    rows: list[tuple[str, float, float]]  # (op_type, labkit_pct, profiler_pct), largest labkit share first

    @property
    def labkit_pct(self) -> dict[str, float]:
        return {t: a for t, a, _ in self.rows}

    @property
    def profiler_pct(self) -> dict[str, float]:
        return {t: b for t, _, b in self.rows}

    def difference(self, op_type: str) -> float:
        """Absolute difference of the two shares, in percentage points."""
        for name, a, b in self.rows:
            if name == op_type:
                return abs(a - b)
        raise LabkitValueError(f"No op type {op_type!r} in this cross-check; known: {[r[0] for r in self.rows]}.")

    @property
    def max_difference(self) -> float:
        """Largest disagreement over all op types, in percentage points."""
        if not self.rows:
            raise LabkitValueError(
                "This cross-check has no op types, so there is no difference to take: neither labkit nor "
                "torch.profiler recorded an operator. Build it with compare_with_torch_profiler(model, x) "
                "on a model that runs at least one operator."
            )
        return max(abs(a - b) for _, a, b in self.rows)

    def table(self) -> Table:
        return Table(
            ["op type", "labkit %", "torch.profiler %", "difference (points)"],
            [[t, f"{a:.1f}", f"{b:.1f}", f"{abs(a - b):.1f}"] for t, a, b in self.rows],
            title="Share of forward time per op type",
        )


def _shares(seconds: dict[str, float]) -> dict[str, float]:
    total = sum(seconds.values())
    return {k: v / total * 100 for k, v in seconds.items()}


def seconds_by_op_type(events: Any, *, use_device_time: bool = False) -> dict[str, float]:
    """Sum the top-level aten operators of ``torch.profiler`` events per op type.

    Operators missing from :data:`ATEN_TO_OP_TYPE` keep their aten name.
    """
    seconds: dict[str, float] = {}
    for event in events:
        if event.cpu_parent is not None:
            continue
        op_type = ATEN_TO_OP_TYPE.get(event.name, event.name)
        micros = event.device_time_total if use_device_time else event.cpu_time_total
        seconds[op_type] = seconds.get(op_type, 0.0) + micros * 1e-6
    return seconds


def compare_with_torch_profiler(
    model: Any, *inputs: Any, warmup: int = 2, runs: int = 5, mode: str = "fast"
) -> CrossCheck:
    """Time the same runs with labkit and with ``torch.profiler``; compare shares per op type.

    Both instruments watch the very same forward passes (labkit's timed runs
    happen inside the profiler's window), so a burst of background load hits
    both alike. ``warmup`` untimed passes come first, so cold-start costs
    (allocation, kernel selection) distort neither side.
    """
    from torch.profiler import ProfilerActivity, profile

    runs = require_count("runs", runs, 1, "e.g. runs=5")
    silence_known_warnings()
    profiler = NodeProfiler(model, *inputs, mode=mode)
    use_cuda = profiler.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    with profiler.session(stacklevel=4):  # a train-mode model: warn once, leave the global RNG as it was
        profiler.warmup(warmup)
        with filtered_native_stderr(), profile(activities=activities) as prof:
            for _ in range(runs):
                profiler.run_once()
    ours = _shares(profiler.report().by_op_type().seconds)
    theirs = _shares(seconds_by_op_type(prof.events(), use_device_time=use_cuda))
    names = sorted(set(ours) | set(theirs), key=lambda n: -ours.get(n, 0.0))
    return CrossCheck([(n, ours.get(n, 0.0), theirs.get(n, 0.0)) for n in names])
