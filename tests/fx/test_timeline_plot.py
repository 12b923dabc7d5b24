"""The timeline picture: the same report gives the same bytes, lanes nest, names are escaped, the peak is marked."""
from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import labkit
from labkit.core.errors import LabkitValueError
from labkit.fx.timeline_plot import lanes, timeline_drawing, timeline_rows

ODD = "<b>&odd</b>"  # fx's code generator breaks on a quote in a module name (a separate labkit issue)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stage = nn.Sequential(Block())
        self.add_module(ODD, nn.Conv2d(8, 4, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(getattr(self, ODD)(self.stage(x)))


@pytest.fixture(scope="module")
def report():
    return labkit.profile_model(Net().eval(), torch.randn(1, 3, 16, 16), warmup=0, runs=1)


def _svg(report, selected=None) -> str:
    drawing = timeline_drawing(report, selected)
    return "\n".join(drawing.parts)


def test_the_same_report_draws_the_same_bytes(report):
    from labkit.fx.widgets import timeline_svg

    assert timeline_svg(report) == timeline_svg(report)
    assert timeline_svg(report, "pool") == timeline_svg(report, "pool")


def test_lanes_nest_outer_modules_around_inner_ones(report):
    found = {(level, path): (first, last) for level, first, last, path in lanes(timeline_rows(report))}
    assert found[(0, "stage")] == (0, 1)
    assert found[(1, "stage.0")] == (0, 1)
    assert found[(2, "stage.0.conv")] == (0, 0)
    assert found[(2, "stage.0.act")] == (1, 1)


def test_an_odd_module_name_is_escaped(report):
    svg = _svg(report)
    assert ODD not in svg
    assert "&lt;b&gt;&amp;odd&lt;/b&gt;" in svg


def test_the_peak_node_is_marked(report):
    names = [row.name for row in report.rows]
    peak = report.memory["peak_node"]
    svg = _svg(report)
    x = float(re.search(r'class="peak" x1="([0-9.]+)"', svg)[1])
    assert int((x - 8) // 10) == names.index(peak)
    assert f"after {peak}" in svg


def test_the_selected_node_is_outlined_and_an_unknown_one_refused(report):
    assert 'class="selected"' not in _svg(report)
    svg = _svg(report, "pool")
    x = float(re.search(r'class="selected" x="([0-9.]+)"', svg)[1])
    assert int((x - 8) // 10) == [row.name for row in report.rows].index("pool")
    with pytest.raises(LabkitValueError, match="no node"):
        timeline_drawing(report, "nowhere")


def test_a_profile_without_memory_is_refused_with_what_to_do():
    hooked = labkit.profile_model(Net().eval(), torch.randn(1, 3, 8, 8), warmup=0, runs=1, mode="modules")
    with pytest.raises(LabkitValueError, match="mode 'fast'"):
        timeline_drawing(hooked)
    with pytest.raises(LabkitValueError, match="ProfileReport"):
        timeline_drawing("not a report")  # type: ignore[arg-type]
