"""Tests for labkit.memory_format.layout: describe, offsets, conversions, errors, and properties."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.memory_format import (
    FormatTracker,
    convert,
    describe,
    elements_in_memory_order,
    explain_conversion,
    format_name,
    memory_offsets,
    resolve_format,
)

CL = torch.channels_last


def test_classic_strides_and_order():
    x = torch.empty(10, 3, 32, 32)
    assert describe(x).strides == (3072, 1024, 32, 1)
    assert describe(x).memory_order == "NCHW"
    assert describe(x).formats == ("contiguous_format",)
    y = describe(x.to(memory_format=CL))
    assert y.strides == (3072, 1, 96, 3)
    assert (y.memory_order, y.format, y.ambiguous) == ("NHWC", "channels_last", False)


@pytest.mark.parametrize("shape", [(4, 1, 4, 4), (2, 3, 1, 1), (2, 1, 1, 1)])
def test_size_one_shapes_are_ambiguous(shape):
    layout = describe(torch.empty(shape))
    assert layout.ambiguous
    assert set(layout.formats) == {"contiguous_format", "channels_last"}
    assert "Ambiguous" in layout.to_text() and "labkit-warning" in layout.to_html()


def test_channels_last_3d_letters():
    layout = describe(torch.empty(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d))
    assert (layout.memory_order, layout.format) == ("NDHWC", "channels_last_3d")


def test_non_dense_tensor_satisfies_no_format():
    layout = describe(torch.empty(2, 3, 4, 4)[:, :, ::2])
    assert layout.formats == () and layout.format == "none"


def test_format_names():
    assert format_name("torch.channels_last") == "channels_last"
    assert format_name("contiguous") == "contiguous_format"
    assert resolve_format("channels_last_3d") is torch.channels_last_3d
    with pytest.raises(LabkitValueError, match="Unknown memory format 'chanels_last'.*channels_last"):
        format_name("chanels_last")
    with pytest.raises(LabkitValueError, match="use one of"):
        format_name(torch.preserve_format)
    with pytest.raises(LabkitTypeError):
        format_name(3)


def test_channels_last_on_5d_suggests_channels_last_3d():
    x = torch.empty(2, 3, 4, 4, 4)
    with pytest.raises(LabkitValueError, match="rank-4.*rank 5.*channels_last_3d"):
        convert(x, CL)
    with pytest.raises(LabkitValueError, match="rank-4.*rank 3"):
        explain_conversion(torch.empty(2, 3, 4), "channels_last")
    with pytest.raises(LabkitValueError, match="rank-5.*torch.channels_last\\b"):
        convert(torch.empty(2, 3, 4, 4), "channels_last_3d")
    with pytest.raises(LabkitValueError, match="Unknown conversion method"):
        convert(torch.empty(2, 3, 4, 4), CL, "reshape")


@pytest.mark.parametrize("method", [["to"], None, 1])
def test_convert_method_of_the_wrong_type_is_a_labkit_error(method):
    with pytest.raises(LabkitTypeError, match="Unknown conversion method.*use one of to, contiguous, permute"):
        convert(torch.empty(2, 3, 4, 4), CL, method)


def test_describe_rejects_non_tensors():
    with pytest.raises(LabkitTypeError, match="torch.Tensor"):
        describe([1, 2, 3])


def test_explain_conversion_agrees_on_ordinary_shapes():
    comparison = explain_conversion(torch.empty(2, 3, 4, 4), CL)
    assert not comparison.differ
    assert {row.layout.strides for row in comparison.rows} == {(48, 1, 12, 3)}
    assert "same strides" in str(comparison)


def test_explain_conversion_differs_on_n1hw():
    comparison = explain_conversion(torch.empty(4, 1, 4, 4), CL)
    assert comparison.differ
    assert comparison.row("to").layout.strides == (16, 1, 4, 1)
    assert comparison.row("to").copied
    assert comparison.row("contiguous").layout.strides == (16, 16, 4, 1)
    assert not comparison.row("contiguous").copied
    assert "disagree" in comparison._repr_html_()


def test_offsets_follow_strides_by_hand():
    x = torch.empty(2, 3, 2, 2).to(memory_format=CL)
    offsets = memory_offsets(x)
    assert offsets[1, 2, 1, 0].item() == 1 * 12 + 2 * 1 + 1 * 6 + 0 * 3
    assert sorted(offsets.flatten().tolist()) == list(range(24))


def test_elements_in_memory_order_channels_innermost():
    x = torch.empty(1, 2, 1, 2).to(memory_format=CL)
    assert elements_in_memory_order(x) == [(0, 0, 0, 0), (0, 1, 0, 0), (0, 0, 0, 1), (0, 1, 0, 1)]
    assert describe(x).elements_in_memory_order() == elements_in_memory_order(x)


def test_a_description_gives_the_offsets_and_element_count_of_its_tensor():
    x = torch.empty(2, 3, 2, 2).to(memory_format=CL)
    layout = describe(x)
    assert layout.numel == 24 and torch.equal(layout.memory_offsets(), memory_offsets(x))
    assert layout.memory_offsets().dtype == torch.int64 and layout.memory_offsets().shape == x.shape
    assert describe(torch.empty(1, 0, 2, 2)).numel == 0


def test_the_package_exports_its_tools_lazily():
    import labkit.memory_format as mf

    assert FormatTracker.__module__ == "labkit.memory_format.tracker"
    assert mf.benchmark_formats.__module__ == "labkit.memory_format.benchmark"
    with pytest.raises(AttributeError):
        mf.does_not_exist  # noqa: B018
    assert issubclass(LabkitValueError, LabkitError)


# --- properties over random shapes, size-1 dimensions included -------------------------

dims = st.integers(min_value=1, max_value=4)
shapes4 = st.tuples(dims, dims, dims, dims)
shapes5 = st.tuples(dims, dims, dims, dims, dims)
FORMAT_FOR_RANK = {4: CL, 5: torch.channels_last_3d}


def _make(shape, fmt_index, permuted):
    x = torch.empty(shape)
    if fmt_index:
        x = x.to(memory_format=FORMAT_FOR_RANK[len(shape)])
    if permuted:  # a non-standard but dense layout: swap the two last dims' storage order
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x


@settings(max_examples=60, deadline=None)
@given(shape=st.one_of(shapes4, shapes5), fmt_index=st.integers(0, 1), permuted=st.booleans())
def test_describe_agrees_with_torch(shape, fmt_index, permuted):
    x = _make(shape, fmt_index, permuted)
    layout = describe(x)
    special = FORMAT_FOR_RANK[x.dim()]
    assert ("contiguous_format" in layout.formats) == x.is_contiguous()
    special_name = "channels_last" if x.dim() == 4 else "channels_last_3d"
    assert (special_name in layout.formats) == x.is_contiguous(memory_format=special)
    assert layout.ambiguous == (x.is_contiguous() and x.is_contiguous(memory_format=special))
    assert layout.strides == x.stride() and layout.shape == tuple(x.shape)
    assert sorted(layout.dim_order) == list(range(x.dim()))


@settings(max_examples=60, deadline=None)
@given(shape=st.one_of(shapes4, shapes5), fmt_index=st.integers(0, 1), permuted=st.booleans(), offset=st.integers(0, 3))
def test_offsets_agree_with_strides(shape, fmt_index, permuted, offset):
    base = _make(shape, fmt_index, permuted)
    numel = base.numel()
    storage = torch.arange(numel + offset, dtype=torch.float64)
    x = storage.as_strided(base.shape, base.stride(), offset)  # element value = its storage index
    offsets = memory_offsets(x)
    assert torch.equal(offsets.double() + offset, x)
    assert sorted(offsets.flatten().tolist()) == list(range(numel))  # dense: each offset once
    order = elements_in_memory_order(x)
    assert [x[index].item() - offset for index in order] == list(range(numel))
    layout = describe(x)
    assert torch.equal(layout.memory_offsets(), offsets) and layout.elements_in_memory_order() == order


def test_result_objects_repr_as_readable_text():
    layout = describe(torch.empty(2, 3, 4, 4))
    assert repr(layout) == str(layout) and "memory order  NCHW" in repr(layout)
    comparison = explain_conversion(torch.empty(2, 3, 4, 4), CL)
    assert repr(comparison) == str(comparison)
