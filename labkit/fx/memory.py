"""Memory per node of a captured graph: the bytes each node's outputs hold, and what is alive after it.

Why a module of its own: time is half of a profile; the other half is which node
makes the model's memory peak. torch's CPU memory timeline
(``export_memory_timeline``) is deprecated and its replacement is CUDA-only, yet
a graph already says everything needed: which node made each tensor and which
node uses it last. So one untimed run of the graph (an ``fx.Interpreter``, on
fresh copies of the inputs) records each node's input shapes and output tensors,
and a liveness pass reads the bytes off it:

- a node's **output bytes** are the bytes of the storages its outputs created:
  a view (``x.view``, ``getitem`` of a tuple, an in-place op) shares its input's
  storage and adds nothing;
- the **live bytes after** a node are those of every storage the graph created
  that some later node still uses (or the graph returns): a tensor is freed after
  its last use, as fx's generated code does (``x = None``);
- **parameters and buffers** (and views of them) and the **inputs** are counted
  apart: they are alive before the run and after it.

The peak is the largest live-bytes-after figure and the node where it happens.
What a node allocates and frees while it runs (a convolution's workspace) is not in
it. :func:`measured_live_bytes` measures the same figure with ``torch.profiler``'s
``profile_memory`` (the allocator's own count), so the computed figures can be
checked against a measurement. Bytes are facts of the graph and the input
shapes, the same on every run.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from labkit.core.copies import fresh_inputs
from labkit.core.noise import filtered_native_stderr
from labkit.core.random_state import kept_random_state


@dataclass(frozen=True)
class NodeMemory:
    """One node's memory: the shapes it took, the bytes its outputs created, and what is alive after it."""

    input_shapes: tuple[tuple[int, ...], ...]
    output_bytes: int | None  # None: not known
    live_bytes: int | None


@dataclass(frozen=True)
class GraphMemory:
    """Memory per timed node (by node name, graph order), the peak, and what is counted apart."""

    nodes: Mapping[str, NodeMemory]
    peak_bytes: int
    peak_node: str  # the node after which the most bytes are alive ("" for a graph that makes no tensor)
    parameter_bytes: int  # parameters and buffers the graph reads
    input_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "peak_bytes": self.peak_bytes,
            "peak_node": self.peak_node,
            "parameter_bytes": self.parameter_bytes,
            "input_bytes": self.input_bytes,
        }


def _storages(value: Any) -> list[tuple[int, int]]:
    """``(data pointer, bytes)`` of each tensor storage in ``value`` (a tensor, or a tuple/list/dict of them)."""
    found = []
    for leaf in tree_leaves(value):
        if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided and not leaf.is_quantized:
            try:
                storage = leaf.untyped_storage()
                found.append((storage.data_ptr(), storage.nbytes()))
            except (NotImplementedError, RuntimeError):  # a tensor without a storage of its own (vmap's, a functional one)
                continue
    return found


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


class _Recorder(torch.fx.Interpreter):
    """Runs the graph once, keeping every node's value (so no storage's address is reused) and input shapes."""

    def __init__(self, graph_module: torch.fx.GraphModule) -> None:
        super().__init__(graph_module, garbage_collect_values=False)
        self.values: dict[str, Any] = {}
        self.shapes: dict[str, tuple[tuple[int, ...], ...]] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        shapes = [_shape(self.env[arg]) for arg in n.all_input_nodes if arg in self.env]
        self.shapes[n.name] = tuple(shape for shape in shapes if shape is not None)
        self.values[n.name] = result = super().run_node(n)
        return result


def graph_memory(graph_module: torch.fx.GraphModule, inputs: Sequence[Any]) -> GraphMemory:
    """The :class:`GraphMemory` of one untimed run of ``graph_module`` on fresh copies of ``inputs``."""
    recorder = _Recorder(graph_module)
    with kept_random_state(), torch.no_grad():
        recorder.run(*fresh_inputs(tuple(inputs)))
    nodes = list(graph_module.graph.nodes)
    index = {node.name: position for position, node in enumerate(nodes)}
    held_apart: dict[int, int] = {}
    for tensor in (*graph_module.parameters(), *graph_module.buffers()):
        held_apart.update(_storages(tensor))
    parameter_pointers = set(held_apart)
    input_pointers: dict[int, int] = {}
    created: dict[int, tuple[int, int]] = {}  # data pointer -> (index of the node that created it, bytes)
    dies: dict[int, int] = {}  # data pointer -> index of the last node that uses a tensor in it
    made: dict[str, int] = {}
    for position, node in enumerate(nodes):
        storages = _storages(recorder.values.get(node.name))
        if node.op == "placeholder":
            input_pointers.update(storages)
            continue
        last_use = max((index[user.name] for user in node.users), default=position)
        own = 0
        for pointer, size in storages:
            if node.op == "get_attr" or pointer in parameter_pointers:
                held_apart.setdefault(pointer, size)
                parameter_pointers.add(pointer)
                continue
            if pointer in input_pointers or pointer == 0:
                continue
            if pointer not in created:
                created[pointer] = (position, size)
                own += size
            dies[pointer] = max(dies.get(pointer, position), last_use)
        made[node.name] = own
    memories: dict[str, NodeMemory] = {}
    peak_bytes, peak_node = 0, ""
    for position, node in enumerate(nodes):
        if node.op in ("placeholder", "output"):
            continue
        live = sum(size for pointer, (born, size) in created.items() if born <= position < dies[pointer])
        memories[node.name] = NodeMemory(recorder.shapes.get(node.name, ()), made.get(node.name, 0), live)
        if live > peak_bytes:
            peak_bytes, peak_node = live, node.name
    parameters = sum(size for pointer, size in held_apart.items() if pointer in parameter_pointers)
    return GraphMemory(memories, peak_bytes, peak_node, parameters, sum(input_pointers.values()))


#: The label around each node in :func:`measured_live_bytes`' run.
_LABEL = "labkit.memory.node:"


class _Labelled(torch.fx.Interpreter):
    """Runs the graph with each timed node inside a ``record_function`` label; values freed after their last use."""

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op in ("placeholder", "output"):
            return super().run_node(n)
        with torch.profiler.record_function(_LABEL + n.name):
            return super().run_node(n)


def measured_live_bytes(graph_module: torch.fx.GraphModule, inputs: Sequence[Any]) -> dict[str, int]:
    """Node name -> bytes the CPU allocator holds after the node (and the frees that follow it), over the run's start.

    Measured with ``torch.profiler``'s ``profile_memory``: every allocation and free
    is an event carrying the allocator's running total. A node's figure is that total
    just before the next node starts (the interpreter has freed what the node used
    last by then), less the total before the first node, when the inputs and
    parameters already existed.
    """
    from torch.profiler import ProfilerActivity, profile

    args = fresh_inputs(tuple(inputs))
    with kept_random_state(), torch.no_grad(), filtered_native_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            output = _Labelled(graph_module).run(*args)  # held: the output is alive after the last node
    del output
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as file:
            events = json.load(file)["traceEvents"]
    finally:
        os.unlink(path)
    labels = sorted(
        (event["ts"], event["name"].removeprefix(_LABEL)) for event in events
        if event.get("ph") == "X" and str(event.get("name", "")).startswith(_LABEL)
    )
    # (when, the allocator's total after it, the bytes it allocated (+) or freed (-)), CPU allocations only
    changes = sorted(
        (event["ts"], int(event["args"]["Total Allocated"]), int(event["args"]["Bytes"])) for event in events
        if event.get("name") == "[memory]" and event.get("args", {}).get("Device Type", 0) == 0
    )
    if not labels:
        return {}
    initial = changes[0][1] - changes[0][2] if changes else 0

    def total_before(moment: float) -> int:
        return next((total for ts, total, _ in reversed(changes) if ts < moment), initial)

    baseline = total_before(labels[0][0])
    ends = [ts for ts, _ in labels[1:]] + [float("inf")]
    return {name: total_before(end) - baseline for (_, name), end in zip(labels, ends, strict=True)}


__all__ = ["GraphMemory", "NodeMemory", "graph_memory", "measured_live_bytes"]
