"""torch.compile'd and TorchScript models (labkit.fx.model_kinds): the first profiled as what it wraps, the second refused."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitTypeError
from labkit.fx import CompiledModelWarning, compare_with_torch_profiler, profile_model


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()


def test_a_compiled_module_is_profiled_node_by_node_as_the_module_it_wraps():
    model = _model()
    with pytest.warns(CompiledModelWarning, match="compiled with torch.compile"):
        report = profile_model(torch.compile(model), torch.randn(2, 8), warmup=1, runs=2)
    assert report.mode == "fast" and {row.name for row in report.rows} >= {"_0", "_1", "_2"}


def test_a_compiled_function_is_profiled_as_the_function():
    def double_relu(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2

    with pytest.warns(CompiledModelWarning):
        report = profile_model(torch.compile(double_relu), torch.randn(4), warmup=1, runs=2)
    assert {row.op for row in report.rows} >= {"call_function"}


def test_a_scripted_module_is_refused_with_what_to_do():
    with pytest.raises(LabkitTypeError, match="TorchScript .* Profile the Python module you scripted"):
        profile_model(torch.jit.script(_model()), torch.randn(2, 8))


def test_the_crosscheck_unwraps_a_compiled_module_too():
    with pytest.warns(CompiledModelWarning):
        check = compare_with_torch_profiler(torch.compile(_model()), torch.randn(2, 8), warmup=1, runs=2)
    assert check.rows
