"""Tests for labkit.memory_format.conversion: per-layer conversion (Conv3d) and the conversion report."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitTypeError
from labkit.memory_format.conversion import conversion_report, convert_model_per_layer
from labkit.memory_format.layout import describe


def _mixed_model():
    return nn.ModuleDict({
        "conv2d": nn.Conv2d(3, 4, 3),
        "deconv": nn.ConvTranspose2d(4, 4, 2),
        "conv3d": nn.Conv3d(2, 3, 3),
        "fc": nn.Linear(5, 2),
    })


def test_model_to_fails_on_conv3d_but_per_layer_converts():
    model = _mixed_model()
    with pytest.raises(RuntimeError, match="rank 4"):
        _mixed_model().to(memory_format=torch.channels_last)
    assert convert_model_per_layer(model) is model
    assert describe(model["conv2d"].weight).memory_order == "NHWC"
    assert describe(model["deconv"].weight).memory_order == "NHWC"
    assert describe(model["conv3d"].weight).memory_order == "NDHWC"
    assert model["fc"].weight.is_contiguous()


def test_per_layer_conversion_keeps_values_and_outputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv3d(2, 3, 3), nn.Flatten(1, 2), nn.Conv2d(6, 4, 1))
    x = torch.randn(1, 2, 4, 4, 4)
    expected = model(x)
    weights = [p.detach().clone() for p in model.parameters()]
    convert_model_per_layer(model)
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters()))
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())
    torch.testing.assert_close(model(x), expected)


def test_buffers_are_converted_too():
    module = nn.Module()
    module.register_buffer("table", torch.randn(2, 3, 4, 4))
    convert_model_per_layer(module)
    assert describe(module.table).format == "channels_last"


def test_report_compares_methods_and_leaves_model_untouched():
    model = _mixed_model()
    before = {name: p.stride() for name, p in model.named_parameters()}
    report = conversion_report(model)
    assert {name: p.stride() for name, p in model.named_parameters()} == before
    assert report.column("layer") == ["conv2d", "deconv", "conv3d", "fc"]
    assert report.column("model.to(channels_last)") == ["failed"] * 4
    assert "rank 4" in report.errors["model.to(channels_last)"]
    assert report.column("convert_conv2d_weight_memory_format") == [
        "NHWC (channels_last)", "NHWC (channels_last)", "NCDHW (contiguous_format)", "2-D, unchanged"]
    assert report.column("convert_model_per_layer")[2] == "NDHWC (channels_last_3d)"
    assert "model.to(channels_last) failed" in str(report)
    assert "<table>" in report._repr_html_()


def test_report_on_2d_model_shows_model_to_converting_every_4d_weight():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4, 2))
    report = conversion_report(model)
    assert report.errors == {}
    assert report.column("model.to(channels_last)") == ["NHWC (channels_last)", "1-D, unchanged", "2-D, unchanged"]


def test_bad_input():
    with pytest.raises(LabkitTypeError, match="nn.Module"):
        convert_model_per_layer(torch.randn(2, 2))
    with pytest.raises(LabkitTypeError):
        conversion_report("resnet18")
