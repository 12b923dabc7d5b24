"""Headless tests for StrideExplorer and the two layout pictures: set controls, check strides and plotted data."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from matplotlib.colors import to_hex

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.memory_format.layout import LayoutDescription, describe, memory_offsets
from labkit.memory_format.widgets import (
    CELL_PX,
    MAX_DRAWN_ELEMENTS,
    layout_figure,
    layout_svg,
    memory_figure,
    memory_svg,
)
from labkit.widgets import StrideExplorer

SVG = {"svg": "http://www.w3.org/2000/svg"}
PICTURES = [layout_figure, memory_figure, layout_svg, memory_svg]


@pytest.fixture
def explorer():
    return StrideExplorer(shape=(2, 3, 2, 2), memory_format="channels_last", method="to")


def _cell_numbers(figure):
    return sorted(int(t.get_text()) for t in figure.axes[0].texts if t.get_text().isdigit())


def _figure_cells(figure) -> dict[tuple[int, int], int]:
    """(row, column) -> number of every numbered cell of a layout or memory figure."""
    grid = np.asarray(figure.axes[0].images[0].get_array())
    return {(row, col): int(value) for (row, col), value in np.ndenumerate(grid) if not np.isnan(value)}


def _svg_cells(svg: bytes) -> dict[tuple[int, int], tuple[int, str, str]]:
    """(row, column) -> (number, fill, text colour) of every cell of a layout or memory SVG, counted from the first cell."""
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0
    found = []
    for element in root.iterfind("svg:g[@class='element']", SVG):
        rect, text = element.find("svg:rect", SVG), element.find("svg:text", SVG)
        found.append((float(rect.get("x")), float(rect.get("y")), int(text.text), rect.get("fill"), text.get("fill")))
    left, top = min(x for x, *_ in found), min(y for _, y, *_ in found)
    return {(round((y - top) / CELL_PX), round((x - left) / CELL_PX)): rest for x, y, *rest in found}


def test_initial_state(explorer):
    assert "labkit-stride-explorer" in explorer._dom_classes
    assert "labkit-strides" in explorer.strides._dom_classes
    assert "(12, 1, 6, 3)" in explorer.strides.value
    assert "NHWC" in explorer.description.value
    for image in (explorer.layout_image, explorer.memory_image):
        assert image.format == "svg+xml" and bytes(image.value).startswith(b"<svg")
        assert image.layout.align_self == "flex-start"  # its own size, never stretched to the box's width
    assert len(_svg_cells(explorer.layout_image.value)) == len(_svg_cells(explorer.memory_image.value)) == 24


def test_sliders_update_strides_and_pictures(explorer):
    before = explorer.layout_image.value
    explorer.c.value = 4
    explorer.h.value = 3
    assert explorer.shape == (2, 4, 3, 2)
    assert "(24, 1, 8, 4)" in explorer.strides.value
    assert explorer.layout_image.value != before
    explorer.format.value = "contiguous_format"
    assert "(24, 6, 2, 1)" in explorer.strides.value
    assert "NCHW" in explorer.description.value
    cells = _svg_cells(explorer.layout_image.value)
    assert cells[(0, 0)][0] == 0 and cells[(0, 1)][0] == 1 and cells[(1, 0)][0] == 2  # NCHW: w is the densest dim
    assert [cells[(0, col)][0] for col in (3, 6, 9)] == [6, 12, 18]  # each channel's block starts one channel on


def test_ambiguity_warning_and_methods(explorer):
    explorer.c.value = 1
    assert "Ambiguous" in explorer.description.value
    assert "(4, 1, 2, 1)" in explorer.strides.value  # .to re-strides N1HW
    explorer.method.value = "contiguous"
    assert "(4, 4, 2, 1)" in explorer.strides.value  # .contiguous keeps it
    explorer.method.value = "permute"
    assert "(4, 4, 2, 1)" in explorer.strides.value


def test_five_d_with_channels_last_shows_the_error_then_channels_last_3d(explorer):
    explorer.five_d.value = True
    assert explorer.tensor is None
    assert "channels_last_3d" in explorer.description.value and "labkit-error" in explorer.description.value
    assert bytes(explorer.layout_image.value) == b"" and bytes(explorer.memory_image.value) == b""
    explorer.format.value = "channels_last_3d"
    assert explorer.shape == (2, 3, 2, 2, 2)
    assert "(24, 1, 12, 6, 3)" in explorer.strides.value
    grid = np.asarray(layout_figure(explorer.layout_description).axes[0].images[0].get_array())
    assert grid.shape == (2 * 2 * 3 - 1, 3 * 3 - 1)  # block rows per (n, d), block columns per c
    assert grid[3, 0] == 12  # n=0, d=1, h=0, w=0 sits one D step (stride 12) into memory
    assert _svg_cells(explorer.layout_image.value)[(3, 0)][0] == 12
    assert not explorer.d.disabled
    explorer.five_d.value = False
    assert explorer.d.disabled


def test_plotted_data_are_the_memory_offsets(explorer):
    explorer.n.value = 1
    tensor = explorer.tensor
    figure = layout_figure(describe(tensor))
    grid = figure.axes[0].images[0].get_array()
    # block of channel 1 starts after channel 0's block and a one-cell gap
    assert grid[0, 0] == 0 and grid[0, 3] == 1 and grid[0, 1] == 3  # w=1 in channel 0 is 3 cells on
    assert _cell_numbers(figure) == list(range(tensor.numel()))
    strip = memory_figure(describe(tensor)).axes[0].images[0].get_array()
    assert np.asarray(strip).flatten()[:6].tolist() == [0, 1, 2, 0, 1, 2]  # channels interleave


def test_contiguous_memory_strip_keeps_channels_together():
    explorer = StrideExplorer(shape=(1, 2, 2, 2), memory_format="contiguous_format")
    strip = np.asarray(memory_figure(explorer.layout_description).axes[0].images[0].get_array())
    assert strip.flatten()[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert torch.equal(explorer.tensor, torch.arange(8.0).reshape(1, 2, 2, 2))


@pytest.mark.parametrize("memory_format", [torch.channels_last, "torch.channels_last", "channels_last"])
def test_memory_format_as_torch_object_or_name(memory_format):
    explorer = StrideExplorer(memory_format=memory_format)
    assert explorer.format.value == "channels_last"
    assert "(12, 1, 6, 3)" in explorer.strides.value


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shape": (2, 3, 4)}, r"shape must be \(N, C, H, W\) or \(N, C, D, H, W\)"),
        ({"shape": (2, 3, 9, 2)}, r"H 1\.\.4"),
        ({"memory_format": "nhwc"}, "channels_last"),
        ({"memory_format": torch.preserve_format}, "channels_last_3d"),
        ({"method": "copy"}, "to, contiguous, permute"),
    ],
)
def test_bad_arguments_are_labkit_errors_naming_the_choices(kwargs, message):
    with pytest.raises(LabkitValueError, match=message):
        StrideExplorer(**kwargs)


@pytest.mark.parametrize("shape", [5, "2,3,2,2", None, 2.0, {"N": 2}])
def test_shape_that_is_not_a_tuple_is_a_type_error(shape):
    with pytest.raises(LabkitTypeError, match=r"shape must be a tuple.*shape=\(2, 3, 2, 2\)"):
        StrideExplorer(shape=shape)


@pytest.mark.parametrize(
    "shape",
    [(0, 3, 2, 2), (-1, 3, 2, 2), (2, 3, 2, 2, 2, 2), (2, 3, 10**9, 2), (2, 3, 2.0, 2), (True, 3, 2, 2), (), (2, 3, 2, -2, 2)],
)
def test_bad_sizes_are_value_errors_naming_the_limits(shape):
    with pytest.raises(LabkitValueError, match=r"shape must be .*N 1\.\.2, C 1\.\.4"):
        StrideExplorer(shape=shape)


def test_shape_may_be_a_list_or_torch_size():
    assert StrideExplorer(shape=[1, 2, 2, 2]).shape == (1, 2, 2, 2)
    assert StrideExplorer(shape=torch.Size([1, 2, 2, 2])).shape == (1, 2, 2, 2)


@pytest.mark.parametrize("method", [["to"], None, 1])
def test_method_of_the_wrong_type_is_a_labkit_error(method):
    with pytest.raises(LabkitTypeError, match="method must be one of"):
        StrideExplorer(method=method)


@pytest.mark.parametrize("figure", PICTURES)
@pytest.mark.parametrize("tensor", [torch.arange(6.0), torch.zeros(2, 3), torch.zeros(1, 2, 3), torch.zeros(1, 1, 1, 1, 1, 1)])
def test_figures_need_a_4d_or_5d_tensor(figure, tensor):
    with pytest.raises(LabkitValueError, match=rf"{figure.__name__} draws 4-D \(N, C, H, W\) or 5-D .*got shape"):
        figure(describe(tensor))


@pytest.mark.parametrize("figure", PICTURES)
def test_figures_refuse_empty_and_huge_layouts(figure):
    with pytest.raises(LabkitValueError, match=r"no elements \(shape \(1, 0, 2, 2\)\)"):
        figure(describe(torch.zeros(1, 0, 2, 2)))
    with pytest.raises(LabkitValueError, match=rf"at most {MAX_DRAWN_ELEMENTS} elements; got 12288 \(shape \(1, 3, 64, 64\)\)"):
        figure(describe(torch.zeros(1, 3, 64, 64)))


@pytest.mark.parametrize("figure", PICTURES)
def test_figures_take_the_description_not_the_tensor(figure):
    message = rf"not a tensor \(got a tensor of shape \(1, 2, 2, 2\)\); .*{figure.__name__}\(describe\(x\)\)"
    with pytest.raises(LabkitTypeError, match=message):
        figure(torch.zeros(1, 2, 2, 2))
    with pytest.raises(LabkitTypeError, match=r"draws a LayoutDescription, got list; .*describe\(x\)"):
        figure([[1, 2], [3, 4]])


def test_the_figures_draw_the_description_alone():
    """A description built by hand (no tensor at all) draws the offsets its strides give."""
    layout = LayoutDescription(shape=(1, 2, 1, 2), strides=(4, 1, 4, 2), formats=("channels_last",), dim_order=(0, 2, 3, 1),
                               dim_names="NCHW")
    grid = np.asarray(layout_figure(layout).axes[0].images[0].get_array())
    assert grid.tolist()[0][:2] == [0, 2] and grid.tolist()[0][3:] == [1, 3]  # channel 0: w=0, w=1; gap; channel 1
    strip = np.asarray(memory_figure(layout).axes[0].images[0].get_array()).flatten()
    assert strip[:4].tolist() == [0, 1, 0, 1]  # memory holds c=0, c=1, c=0, c=1


def test_the_explorer_draws_the_description_it_shows(explorer, monkeypatch):
    import labkit.memory_format.widgets as mf_widgets

    drawn = []
    monkeypatch.setattr(mf_widgets, "layout_svg", lambda layout: drawn.append(layout) or layout_svg(layout))
    explorer.c.value = 2
    assert drawn == [explorer.layout_description] and drawn[0].strides == explorer.tensor.stride()
    assert torch.equal(drawn[0].memory_offsets(), memory_offsets(explorer.tensor))


@pytest.mark.parametrize(
    "tensor",
    [
        torch.zeros(2, 3, 2, 2).to(memory_format=torch.channels_last),
        torch.zeros(1, 4, 3, 2),
        torch.zeros(2, 3, 2, 2, 2).to(memory_format=torch.channels_last_3d),
        torch.zeros(1, 1, 1, 1),
        torch.zeros(2, 12, 1, 1),  # more channels than tab10 has colours
        torch.zeros(1, 3, 4, 4).permute(0, 1, 3, 2),  # strides of no format
    ],
)
def test_svg_pictures_draw_the_cells_of_the_figures(tensor):
    """The widget's SVG and the notebook's figure show the same number in the same cell, coloured the same way."""
    layout = describe(tensor)
    numel, viridis, tab10 = layout.numel, colormaps["viridis"], colormaps["tab10"]
    svg_cells = _svg_cells(layout_svg(layout))
    assert {place: cell[0] for place, cell in svg_cells.items()} == _figure_cells(layout_figure(layout))
    for number, fill, text_colour in svg_cells.values():
        assert fill == to_hex(viridis(number / max(numel - 1, 1)))
        assert text_colour == ("white" if number < 0.6 * numel else "black")
    memory_cells = _svg_cells(memory_svg(layout))
    assert {place: cell[0] for place, cell in memory_cells.items()} == _figure_cells(memory_figure(layout))
    assert all(fill == to_hex(tab10(min(channel, 9))) for channel, fill, _ in memory_cells.values())


def test_svg_pictures_label_blocks_and_memory_rows():
    layout = describe(torch.zeros(2, 3, 2, 2, 2).to(memory_format=torch.channels_last_3d))
    layout_texts = [t.text for t in ET.fromstring(layout_svg(layout, title="a <b> title")).iterfind(".//svg:text", SVG)]
    assert {"c=0", "c=2", "n=0, d=0", "n=1, d=1", "offset in memory", "47", "a <b> title"} <= set(layout_texts)
    memory_root = ET.fromstring(memory_svg(layout))
    labels = [t.text for t in memory_root.iterfind("svg:text", SVG)]
    assert labels[:16] == [str(col) for col in range(16)] and labels[16:19] == ["0", "16", "32"]  # 48 elements, 3 rows
    assert memory_root.find("svg:title", SVG).text.startswith("flat memory")


def test_svg_pictures_change_with_the_layout_only():
    """Same layout, same bytes: the stored widget state does not churn when a notebook is re-run."""
    channels_last = describe(torch.zeros(1, 2, 2, 2).to(memory_format=torch.channels_last))
    assert layout_svg(channels_last) == layout_svg(describe(torch.zeros(1, 2, 2, 2).to(memory_format=torch.channels_last)))
    assert layout_svg(channels_last) != layout_svg(describe(torch.zeros(1, 2, 2, 2)))
    assert memory_svg(channels_last) != memory_svg(describe(torch.zeros(1, 2, 2, 2)))
