"""The computed memory figures beside the allocator's own count: do they agree?

Why: a profile's live bytes come from a liveness pass over the graph
(:func:`labkit.fx.memory.graph_memory`), a computation. A learner should not take
it on trust, so this runs the same graph again under ``torch.profiler``'s
``profile_memory`` (:func:`labkit.fx.memory.measured_live_bytes`) and compares
node by node. The result is a fact of the graph and the input shapes, like the
bytes themselves: the same on every run, so a notebook can print it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from labkit.core.copies import private_copy
from labkit.core.errors import LabkitValueError
from labkit.core.untouched import left_as_found
from labkit.fx.memory import graph_memory, measured_live_bytes
from labkit.fx.profile import capture_model
from labkit.fx.report import format_bytes
from labkit.i18n.messages import _

#: How far a computed live-bytes figure may be from the allocator's: 64 bytes or 1 %, whichever is larger.
#: Why not exact: an exported transformer keeps an 8-byte scalar the graph never names (a constant's copy).
TOLERANCE_BYTES, TOLERANCE_FRACTION = 64, 0.01


def tolerance(measured: int) -> float:
    """The gap allowed beside a measured figure of ``measured`` bytes."""
    return max(TOLERANCE_BYTES, TOLERANCE_FRACTION * measured)


@dataclass(frozen=True)
class MemoryAgreement:
    """The live bytes after each node, computed and measured, and the peak by both."""

    computed: Mapping[str, int]  # node name -> live bytes after it, from the liveness pass
    measured: Mapping[str, int]  # node name -> what the CPU allocator held after it
    computed_peak: tuple[str, int]  # (node, bytes)

    @property
    def gaps(self) -> dict[str, int]:
        return {node: abs(self.measured[node] - live) for node, live in self.computed.items()}

    @property
    def measured_peak(self) -> tuple[str, int]:
        node = max(self.measured, key=lambda name: self.measured[name])
        return node, self.measured[node]

    @property
    def agrees(self) -> bool:
        """Every node's gap, and the peaks' gap, within :func:`tolerance`."""
        peak_gap = abs(self.measured_peak[1] - self.computed_peak[1])
        return (all(gap <= tolerance(self.measured[node]) for node, gap in self.gaps.items())
                and peak_gap <= tolerance(self.measured_peak[1]))

    def __str__(self) -> str:
        gaps = self.gaps
        worst = max(gaps, key=lambda name: gaps[name])
        verdict = _("they agree") if self.agrees else _("they DISAGREE")
        return _("live bytes after each of {nodes} nodes, computed vs measured by torch.profiler (profile_memory): "
                 "{equal} equal, largest gap {gap} (after {worst}); peak computed {computed} after {computed_node}, "
                 "measured {measured} after {measured_node}: {verdict} (tolerance: {tolerance_bytes} B or "
                 "{tolerance_percent} %, the larger).").format(
            nodes=len(gaps), equal=sum(gap == 0 for gap in gaps.values()), gap=format_bytes(gaps[worst]), worst=worst,
            computed=format_bytes(self.computed_peak[1]), computed_node=self.computed_peak[0],
            measured=format_bytes(self.measured_peak[1]), measured_node=self.measured_peak[0], verdict=verdict,
            tolerance_bytes=TOLERANCE_BYTES, tolerance_percent=f"{TOLERANCE_FRACTION * 100:g}")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def compare_memory_with_allocator(
    model: Any, *inputs: Any, kwargs: Mapping[str, Any] | None = None, capture: str = "auto",
) -> MemoryAgreement:
    """Capture ``model`` as :func:`labkit.profile_model` does, then compare its computed live bytes per node
    with the CPU allocator's count over one run of the same graph. A model or inputs on another device are
    compared on a CPU copy (the bytes of a graph do not depend on the device); nothing of the user's changes."""
    with left_as_found():
        model, inputs, kwargs = _on_cpu(model, inputs, dict(kwargs or {}))
        captured = capture_model(model, *inputs, kwargs=kwargs, capture=capture, fallback=False, stacklevel=3)
        graph = captured.graph
        if graph is None:  # fallback=False: a graph or an error; kept for the type checker
            raise LabkitValueError("no graph of this model was captured; memory per node needs one.")
        try:
            computed = graph_memory(graph.graph_module, graph.inputs)
            measured = measured_live_bytes(graph.graph_module, graph.inputs)
        except Exception as exc:  # the recording interpreter cannot run every graph a profile times (its note says so)
            raise LabkitValueError(
                f"labkit could not run this model's graph node by node to count its memory ({type(exc).__name__}: "
                f"{(str(exc).splitlines() or [''])[0][:120]}); its profile has no memory figures either.") from exc
    live = {node: facts.live_bytes or 0 for node, facts in computed.nodes.items()}
    if set(measured) != set(live):
        raise LabkitValueError("the allocator's run did not label every node of the graph; report this model to labkit.")
    return MemoryAgreement(live, measured, (computed.peak_node, computed.peak_bytes))


def _on_cpu(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The model and inputs, or CPU copies of them where a tensor is elsewhere (the allocator counted is the CPU's)."""
    tensors = [leaf for leaf in tree_leaves((inputs, kwargs)) if isinstance(leaf, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += [*model.parameters(), *model.buffers()]
    if all(tensor.device.type == "cpu" for tensor in tensors):
        return model, inputs, kwargs
    moved = tree_map(lambda leaf: leaf.cpu() if isinstance(leaf, torch.Tensor) else leaf, (inputs, kwargs))
    # a private copy with parameters of its own (hooks and parametrizations kept): moving it moves nothing of the user's
    cpu_model = private_copy(model, share_parameters=False).cpu() if isinstance(model, torch.nn.Module) else model
    return cpu_model, *moved


__all__ = ["MemoryAgreement", "TOLERANCE_BYTES", "TOLERANCE_FRACTION", "compare_memory_with_allocator", "tolerance"]
