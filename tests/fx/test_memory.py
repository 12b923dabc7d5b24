"""labkit.fx.memory: bytes per node from a liveness pass, checked against torch.profiler's allocator count."""
import pytest
import torch
import torchvision

from labkit.fx import hf_zoo
from labkit.fx.capture import capture_graph
from labkit.fx.memory import graph_memory, measured_live_bytes
from labkit.fx.profile import profile_model
from labkit.fx.report import LIVE_AFTER

#: How far a computed live-bytes figure may be from the allocator's: 64 bytes or 1 %, whichever is larger.
#: Why not exact: an exported transformer keeps an 8-byte scalar the graph never names (a constant's copy).
TOLERANCE_BYTES, TOLERANCE_FRACTION = 64, 0.01


def _agreement(name, graph):
    computed = graph_memory(graph.graph_module, graph.inputs)
    measured = measured_live_bytes(graph.graph_module, graph.inputs)
    assert set(measured) == set(computed.nodes)
    gaps = {node: abs(measured[node] - facts.live_bytes) for node, facts in computed.nodes.items()}
    worst = max(gaps, key=gaps.get)
    print(f"{name}: live bytes after each of {len(gaps)} nodes, computed vs torch.profiler's profile_memory: "
          f"{sum(g == 0 for g in gaps.values())} equal, largest gap {gaps[worst]} B (at {worst}); "
          f"peak {computed.peak_bytes} B after {computed.peak_node}, measured {max(measured.values())} B")
    for node, gap in gaps.items():
        assert gap <= max(TOLERANCE_BYTES, TOLERANCE_FRACTION * measured[node]), (node, gap)
    assert abs(max(measured.values()) - computed.peak_bytes) <= max(TOLERANCE_BYTES, TOLERANCE_FRACTION * computed.peak_bytes)
    return computed


def test_resnet18_live_bytes_agree_with_the_allocator():
    graph = capture_graph(torchvision.models.resnet18().eval(), (torch.randn(1, 3, 64, 64),), {})
    computed = _agreement("resnet18", graph)
    assert computed.peak_node == "conv1" and computed.peak_bytes == 64 * 32 * 32 * 4  # the stem's 64x32x32 float map
    held = (*graph.graph_module.parameters(), *graph.graph_module.buffers())
    assert computed.parameter_bytes == sum(t.numel() * t.element_size() for t in held)


def test_bert_live_bytes_agree_with_the_allocator():
    graph = capture_graph(hf_zoo.build_model("bert"), (), hf_zoo.example_inputs("bert"), capture="export")
    _agreement("bert", graph)


class _Views(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        y = x * 2  # new: 4x4 floats
        v = y.view(16)  # a view: nothing new
        w = self.weight.t()  # a view of a parameter: counted apart
        z = v.relu_()  # in place: nothing new
        return z.sum() + (y @ w).sum()


def test_views_share_storage_and_parameters_are_counted_apart():
    graph = capture_graph(_Views(), (torch.randn(4, 4),), {})
    memory = graph_memory(graph.graph_module, graph.inputs)
    made = {name: facts.output_bytes for name, facts in memory.nodes.items()}
    assert made["mul"] == 64 and made["view"] == 0 and made["relu_"] == 0 and made["t"] == 0
    assert memory.parameter_bytes == 64 and memory.input_bytes == 64
    assert memory.nodes["matmul"].input_shapes == ((4, 4), (4, 4))


def test_a_profile_shows_memory_in_its_table_and_sorts_modules_by_it():
    model, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32)
    first, second = profile_model(model, x, runs=1, warmup=0), profile_model(model, x, runs=1, warmup=0)
    assert [r.live_bytes for r in first.rows] == [r.live_bytes for r in second.rows]  # facts, not timings
    assert first.table().headers[-1] == LIVE_AFTER
    assert "peak" in first.to_text() and first.memory["peak_node"] == "conv1"
    by_memory = first.by_module(1, sort="memory")
    sizes = [row.output_bytes for row in by_memory.rows]
    assert sizes == sorted(sizes, reverse=True) and by_memory.top(1, key="memory").rows[0].path == by_memory.rows[0].path
    assert "output bytes" in by_memory.table().headers
    with pytest.raises(ValueError, match="time"):
        first.by_module(1, sort="bytes")
    hooked = profile_model(model, x, runs=1, warmup=0, mode="modules")
    assert hooked.memory is None and LIVE_AFTER not in hooked.table().headers
