"""labkit.fx.memory: bytes per node from a liveness pass, checked against torch.profiler's allocator count."""
import pytest
import torch
import torchvision

from labkit.fx import hf_zoo
from labkit.fx.capture import capture_graph
from labkit.fx.memory import graph_memory
from labkit.fx.memory_agreement import MemoryAgreement, compare_memory_with_allocator
from labkit.fx.profile import profile_model
from labkit.fx.report import LIVE_AFTER


def _agreement(name, model, *inputs, **kwargs):
    agreement = compare_memory_with_allocator(model, *inputs, **kwargs)
    print(f"{name}: {agreement}")  # the figures, in the log of every run
    assert agreement.agrees, agreement
    return agreement


def test_resnet18_live_bytes_agree_with_the_allocator():
    model, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 64, 64)
    agreement = _agreement("resnet18", model, x)
    assert agreement.computed_peak == agreement.measured_peak == ("conv1", 64 * 32 * 32 * 4)  # the stem's 64x32x32 map
    graph = capture_graph(model, (x,), {})
    computed = graph_memory(graph.graph_module, graph.inputs)
    assert computed.peak_node == "conv1" and computed.peak_bytes == 64 * 32 * 32 * 4  # the stem's 64x32x32 float map
    held = (*graph.graph_module.parameters(), *graph.graph_module.buffers())
    assert computed.parameter_bytes == sum(t.numel() * t.element_size() for t in held)


def test_bert_live_bytes_agree_with_the_allocator():
    _agreement("bert", hf_zoo.build_model("bert"), kwargs=hf_zoo.example_inputs("bert"), capture="export")


def test_a_disagreement_is_said_and_a_gap_within_tolerance_is_not_one():
    agreeing = MemoryAgreement({"a": 1000, "b": 10_000}, {"a": 1000, "b": 10_064}, ("b", 10_000))
    assert agreeing.agrees and agreeing.gaps == {"a": 0, "b": 64}
    assert "1 equal, largest gap 64 B (after b)" in str(agreeing) and "they agree" in str(agreeing)
    apart = MemoryAgreement({"a": 1000, "b": 10_000}, {"a": 2000, "b": 10_000}, ("b", 10_000))
    assert not apart.agrees and "they DISAGREE" in str(apart)
    wrong_peak = MemoryAgreement({"a": 1000}, {"a": 1000}, ("a", 5000))
    assert not wrong_peak.agrees


def test_the_memory_table_lists_the_first_nodes_with_the_peak_marked():
    report = profile_model(torchvision.models.resnet18().eval(), torch.randn(1, 3, 64, 64), warmup=0, runs=1)
    table = report.memory_table(4)
    assert table.column("node") == ["conv1", "bn1", "relu", "maxpool"]
    assert table.column("peak") == ["<-", "", "", ""]
    assert table.column("input shapes")[0] == "1x3x64x64" and table.column("output bytes")[2] == "0 B"  # in-place ReLU
    assert len(report.memory_table().rows) == len(report.rows)
    assert "parameters 44.6 MiB" in table.title


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
