"""Headless tests for StrideExplorer and the two layout pictures: set controls, check strides and plotted data."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.plots import NUMBERS_NOTE, TAB10, Picture, picture_html
from labkit.memory_format.layout import LayoutDescription, describe, memory_offsets
from labkit.memory_format.widgets import (
    CELL_PX,
    MAX_DRAWN_ELEMENTS,
    layout_alt,
    layout_figure,
    layout_numbers,
    layout_picture,
    layout_svg,
    memory_alt,
    memory_figure,
    memory_numbers,
    memory_picture,
    memory_svg,
    offset_palette,
)
from labkit.widgets import StrideExplorer

SVG = {"svg": "http://www.w3.org/2000/svg"}
PICTURES = [layout_figure, memory_figure, layout_svg, memory_svg, layout_alt, memory_alt, layout_numbers, memory_numbers,
            layout_picture, memory_picture]


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
        assert image.picture.startswith(b"<svg") and "data:image/svg+xml;base64," in image.value
        assert image.layout.align_self == "flex-start"  # its own size, never stretched to the box's width
    assert len(_svg_cells(explorer.layout_image.picture)) == len(_svg_cells(explorer.memory_image.picture)) == 24


def test_each_picture_has_alt_text_and_its_numbers_folded_under_it(explorer):
    layout = explorer.layout_description
    assert explorer.layout_image.alt == layout_alt(layout) and explorer.memory_image.alt == memory_alt(layout)
    for view in (explorer.layout_image, explorer.memory_image):
        assert f'alt="{view.alt}{NUMBERS_NOTE}"' in view.value and "<details" in view.value  # the alt says where they are
    assert "shape (2, 3, 2, 2), format channels_last, strides (12, 1, 6, 3), memory order NHWC" in explorer.layout_image.alt
    assert "channels 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0" in explorer.memory_image.alt


def test_every_control_has_a_label_that_names_it(explorer):
    controls = [explorer.n, explorer.c, explorer.h, explorer.w, explorer.d, explorer.five_d, explorer.format, explorer.method]
    assert [control.description for control in controls] == ["N", "C", "H", "W", "D", "5-D (add D)", "format", "method"]


def test_sliders_update_strides_and_pictures(explorer):
    before = explorer.layout_image.picture
    explorer.c.value = 4
    explorer.h.value = 3
    assert explorer.shape == (2, 4, 3, 2)
    assert "(24, 1, 8, 4)" in explorer.strides.value
    assert explorer.layout_image.picture != before
    explorer.format.value = "contiguous_format"
    assert "(24, 6, 2, 1)" in explorer.strides.value
    assert "NCHW" in explorer.description.value
    cells = _svg_cells(explorer.layout_image.picture)
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
    # the message only: no picture at all, never an empty image (a browser draws that as a broken-image icon)
    assert explorer.layout_image.value == explorer.memory_image.value == "" and explorer.layout_image.picture == b""
    explorer.format.value = "channels_last_3d"
    assert explorer.shape == (2, 3, 2, 2, 2)
    assert "(24, 1, 12, 6, 3)" in explorer.strides.value
    grid = np.asarray(layout_figure(explorer.layout_description).axes[0].images[0].get_array())
    assert grid.shape == (2 * 2 * 3 - 1, 3 * 3 - 1)  # block rows per (n, d), block columns per c
    assert grid[3, 0] == 12  # n=0, d=1, h=0, w=0 sits one D step (stride 12) into memory
    assert _svg_cells(explorer.layout_image.picture)[(3, 0)][0] == 12
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
    numel, palette = layout.numel, offset_palette()
    svg_cells = _svg_cells(layout_svg(layout))
    figure = layout_figure(layout)
    assert {place: cell[0] for place, cell in svg_cells.items()} == _figure_cells(figure)
    figure_inks = {int(t.get_text()): to_hex(t.get_color()) for t in figure.axes[0].texts if t.get_text().isdigit()}
    for number, fill, text_colour in svg_cells.values():
        index = round(number / max(numel - 1, 1) * (len(palette) - 1))
        assert (fill, text_colour) == (palette.fills[index], palette.inks[index]) and figure_inks[number] == text_colour
    assert to_hex(figure.axes[0].images[0].cmap(1.0)) == palette.fills[-1]
    memory_cells = _svg_cells(memory_svg(layout))
    assert {place: cell[0] for place, cell in memory_cells.items()} == _figure_cells(memory_figure(layout))
    assert all((fill, ink) == (TAB10.fills[min(channel, 9)], TAB10.inks[min(channel, 9)])
               for channel, fill, ink in memory_cells.values())


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


def test_the_numbers_tables_hold_every_offset_and_every_memory_slot():
    layout = describe(torch.zeros(1, 2, 2, 3).to(memory_format=torch.channels_last))
    numbers = layout_numbers(layout)
    assert list(numbers.headers) == ["n", "c", "h", "offset at w=0", "offset at w=1", "offset at w=2"]
    offsets = memory_offsets(torch.zeros(1, 2, 2, 3).to(memory_format=torch.channels_last))
    assert [row[3:] for row in numbers.rows] == [offsets[0, c, h].tolist() for c in range(2) for h in range(2)]
    slots = memory_numbers(layout)
    assert slots.column("offset") == list(range(12)) and slots.column("channel c")[:4] == [0, 1, 0, 1]
    assert slots.rows[1][1] == "(0, 1, 0, 0)"  # offset 1 holds n=0, c=1, h=0, w=0 in channels_last
    five_d = layout_numbers(describe(torch.zeros(1, 1, 2, 1, 1)))
    assert list(five_d.headers)[:4] == ["n", "c", "d", "h"] and len(five_d.rows) == 2


def test_the_notebook_pictures_carry_alt_text_and_numbers():
    layout = describe(torch.zeros(2, 3, 2, 2).to(memory_format=torch.channels_last))
    picture = layout_picture(layout, "channels_last: number = offset in memory")
    assert isinstance(picture, Picture) and picture.data == layout_svg(layout, "channels_last: number = offset in memory")
    assert picture.alt.startswith("channels_last: number = offset in memory: a tensor of shape (2, 3, 2, 2)")
    assert picture.numbers is not None and "offset at w=1" in picture._repr_html_()
    assert memory_picture(layout).data == memory_svg(layout) and memory_picture(layout).alt == memory_alt(layout)
    assert layout_figure(layout).get_label() == layout_alt(layout)  # figure_image's alt text


@pytest.mark.parametrize(("shape", "memory_format"), [((2, 3, 2, 2), "channels_last"), ((2, 4, 2, 4, 4), "channels_last_3d"),
                                                      ((1, 2, 3, 1), "contiguous_format")])
def test_a_redraw_shows_exactly_what_the_picture_functions_draw(shape, memory_format):
    """The redraw works out the memory order once for three views: each view is still what its function gives."""
    explorer = StrideExplorer(shape=shape, memory_format=memory_format)
    for letter in "cw":
        getattr(explorer, letter).value = max(1, getattr(explorer, letter).value - 1)
        layout = explorer.layout_description
        assert explorer.memory_image.value == picture_html(memory_svg(layout), memory_alt(layout), numbers=memory_numbers(layout))
        assert explorer.layout_image.value == picture_html(layout_svg(layout), layout_alt(layout), numbers=layout_numbers(layout))


def test_the_number_tables_render_as_tabulate_renders_them_without_it():
    """The largest picture's tables (1,300 cells) take labkit's quick HTML, the same bytes as tabulate's."""
    from tabulate import tabulate

    from labkit.core.tables import _plain_html

    layout = describe(torch.zeros(2, 4, 2, 4, 4).to(memory_format=torch.channels_last_3d))
    for table in (layout_numbers(layout), memory_numbers(layout)):
        assert _plain_html(list(table.rows), table.headers) is not None
        assert table.to_html().endswith(str(tabulate(table.rows, headers=list(table.headers), tablefmt="html")) + "\n</div>")
