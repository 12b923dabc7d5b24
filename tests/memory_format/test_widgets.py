"""Headless tests for StrideExplorer and the two layout pictures: set controls, check strides and plotted data."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.memory_format.layout import LayoutDescription, describe, memory_offsets
from labkit.memory_format.widgets import MAX_DRAWN_ELEMENTS, layout_figure, memory_figure
from labkit.widgets import StrideExplorer


@pytest.fixture
def explorer():
    return StrideExplorer(shape=(2, 3, 2, 2), memory_format="channels_last", method="to")


def _cell_numbers(figure):
    return sorted(int(t.get_text()) for t in figure.axes[0].texts if t.get_text().isdigit())


def test_initial_state(explorer):
    assert "labkit-stride-explorer" in explorer._dom_classes
    assert "labkit-strides" in explorer.strides._dom_classes
    assert "(12, 1, 6, 3)" in explorer.strides.value
    assert "NHWC" in explorer.description.value
    assert bytes(explorer.layout_image.value).startswith(b"\x89PNG")
    assert bytes(explorer.memory_image.value).startswith(b"\x89PNG")


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
    assert bytes(explorer.layout_image.value) == b""
    explorer.format.value = "channels_last_3d"
    assert explorer.shape == (2, 3, 2, 2, 2)
    assert "(24, 1, 12, 6, 3)" in explorer.strides.value
    grid = np.asarray(layout_figure(explorer.layout_description).axes[0].images[0].get_array())
    assert grid.shape == (2 * 2 * 3 - 1, 3 * 3 - 1)  # block rows per (n, d), block columns per c
    assert grid[3, 0] == 12  # n=0, d=1, h=0, w=0 sits one D step (stride 12) into memory
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


@pytest.mark.parametrize("figure", [layout_figure, memory_figure])
@pytest.mark.parametrize("tensor", [torch.arange(6.0), torch.zeros(2, 3), torch.zeros(1, 2, 3), torch.zeros(1, 1, 1, 1, 1, 1)])
def test_figures_need_a_4d_or_5d_tensor(figure, tensor):
    with pytest.raises(LabkitValueError, match=rf"{figure.__name__} draws 4-D \(N, C, H, W\) or 5-D .*got shape"):
        figure(describe(tensor))


@pytest.mark.parametrize("figure", [layout_figure, memory_figure])
def test_figures_refuse_empty_and_huge_layouts(figure):
    with pytest.raises(LabkitValueError, match=r"no elements \(shape \(1, 0, 2, 2\)\)"):
        figure(describe(torch.zeros(1, 0, 2, 2)))
    with pytest.raises(LabkitValueError, match=rf"at most {MAX_DRAWN_ELEMENTS} elements; got 12288 \(shape \(1, 3, 64, 64\)\)"):
        figure(describe(torch.zeros(1, 3, 64, 64)))


@pytest.mark.parametrize("figure", [layout_figure, memory_figure])
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
    monkeypatch.setattr(mf_widgets, "layout_figure", lambda layout: drawn.append(layout) or layout_figure(layout))
    explorer.c.value = 2
    assert drawn == [explorer.layout_description] and drawn[0].strides == explorer.tensor.stride()
    assert torch.equal(drawn[0].memory_offsets(), memory_offsets(explorer.tensor))
