"""Tests for labkit.memory_format.tracker.FormatTracker: records, nesting, and leaving torch untouched."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import _get_current_function_mode_stack

from labkit.core.errors import LabkitError
from labkit.memory_format.tracker import LAYOUT_OPERATORS, FormatTracker, FormatTrackerError

CL = torch.channels_last


def _x():
    return torch.randn(2, 4, 3, 3).to(memory_format=CL)


def _torch_surface():
    """Identities of the attributes a monkeypatching checker would replace."""
    names = ("layer_norm", "softmax", "relu", "conv2d", "max_pool2d")
    tensor_names = ("add", "__add__", "relu", "softmax", "contiguous", "to")
    return (
        {n: id(getattr(F, n)) for n in names},
        {n: id(getattr(torch, n)) for n in ("conv2d", "relu", "softmax", "layer_norm", "add")},
        {n: id(getattr(torch.Tensor, n)) for n in tensor_names},
        list(_get_current_function_mode_stack()),
        torch._C._is_torch_function_mode_enabled(),
    )


def test_records_lost_and_kept():
    x = _x()
    with FormatTracker() as tracker:
        y = F.relu(x)
        F.layer_norm(y, (3,))
        F.softmax(y, dim=1)
    assert [r.short_name for r in tracker.kept()] == ["relu"]
    assert [r.short_name for r in tracker.lost()] == ["layer_norm", "softmax"]
    assert tracker.lost() == tracker.dropped() and tracker.layout_ops() == []
    lost = tracker.lost()[0]
    assert lost.input_strides == (36, 1, 12, 4) and lost.output_strides == (36, 9, 3, 1)
    assert (lost.kind, lost.reason, lost.mixed_inputs) == ("dropped", "", False)
    table = tracker.report()
    assert table.column("operator") == [  # real drops first
        "torch.nn.functional.layer_norm", "torch.nn.functional.softmax", "torch.nn.functional.relu"
    ]
    assert table.column("#") == [2, 3, 1]
    assert table.column("channels_last") == ["DROPPED", "DROPPED", "kept"]
    assert "3 calls with a channels_last input: 2 dropped the format, 0 changed the layout on purpose, 1 kept it" in str(table)


def test_permute_is_a_layout_op_not_a_drop():
    with FormatTracker() as tracker:
        nhwc = _x().permute(0, 2, 3, 1)
    (record,) = tracker.records
    assert not nhwc.is_contiguous(memory_format=CL) and not record.kept  # torch's view: plain NHWC-contiguous
    assert (record.operator, record.kind, record.reason) == ("torch.Tensor.permute", "layout op", "reorders the dimensions")
    assert tracker.layout_ops() == tracker.lost() == [record]
    assert tracker.dropped() == []


def test_convnext_layer_norm_pattern_is_one_layout_op_and_keeps_the_format():
    """ConvNeXt normalises channels by permuting to NHWC, layer_norm over C, permuting back."""
    x = _x()
    with FormatTracker() as tracker:
        nhwc = x.permute(0, 2, 3, 1)
        out = F.layer_norm(nhwc, (4,)).permute(0, 3, 1, 2)
    assert out.is_contiguous(memory_format=CL)  # the round trip lands back in channels_last
    # layer_norm and the second permute take a plain contiguous NHWC tensor: not channels_last, not recorded
    assert [(r.short_name, r.kind) for r in tracker.records] == [("permute", "layout op")]


@pytest.mark.parametrize("first_is_channels_last", [True, False])
def test_cat_with_a_contiguous_input_is_a_drop_with_mixed_inputs(first_is_channels_last):
    x, contiguous = _x(), torch.randn(2, 4, 3, 3)
    pair = [x, contiguous] if first_is_channels_last else [contiguous, x]
    with FormatTracker() as tracker:
        out = torch.cat(pair, dim=1)
        torch.cat([x, x], dim=1)
    assert out.is_contiguous() and not out.is_contiguous(memory_format=CL)  # torch 2.14 falls back to NCHW
    mixed, same = tracker.records
    assert (mixed.short_name, mixed.kind, mixed.mixed_inputs, mixed.reason) == ("cat", "dropped", True, "mixed-format inputs")
    assert (same.kind, same.mixed_inputs) == ("kept", False)
    assert tracker.report().rows[0][-2:] == ["DROPPED", "mixed-format inputs"]


def test_add_follows_its_first_input():
    """torch 2.14: channels_last + NCHW stays channels_last, NCHW + channels_last drops to NCHW."""
    x, contiguous = _x(), torch.randn(2, 4, 3, 3)
    with FormatTracker() as tracker:
        x + contiguous
        contiguous + x
    assert [(r.kind, r.mixed_inputs, r.reason) for r in tracker.records] == [
        ("kept", True, ""), ("dropped", True, "mixed-format inputs")
    ]


def test_an_ambiguous_second_input_is_not_mixed():
    bias = torch.randn(1, 4, 1, 1)  # N C 1 1: contiguous and channels_last at once
    with FormatTracker() as tracker:
        bias + _x()
        F.softmax(_x(), dim=1)
    assert [(r.kind, r.mixed_inputs) for r in tracker.records] == [("kept", False), ("dropped", False)]


def test_views_reshapes_splits_and_explicit_formats_are_layout_ops():
    x = torch.randn(2, 6, 4, 4).to(memory_format=CL)
    with FormatTracker() as tracker:
        x.transpose(2, 3)
        x.reshape(2, 3, 8, 4)  # not viewable: copied in NCHW order
        torch.split(x, 3, dim=1)
        x.chunk(2, dim=1)
        x.narrow(1, 0, 2)
        x[:, :3]  # basic slicing: a view, not in the name list
        x.contiguous()
        x.to(memory_format=torch.contiguous_format)
        x.clone(memory_format=torch.contiguous_format)
    assert [(r.short_name, r.reason) for r in tracker.records] == [
        ("transpose", "reorders the dimensions"),
        ("reshape", "asks for a new shape"),
        ("split", "splits into views"),
        ("chunk", "splits into views"),
        ("narrow", "splits into views"),
        ("__getitem__", "returns a view of its input"),
        ("contiguous", "asks for a memory format"),
        ("to", "asks for a memory format"),
        ("clone", "asks for a memory format"),
    ]
    assert {r.kind for r in tracker.records} == {"layout op"}
    assert tracker.records[2].operator == "torch.functional.split"  # torch.split's real name
    assert "torch.functional.split" in LAYOUT_OPERATORS and "torch.Tensor.permute" in LAYOUT_OPERATORS


def test_a_copy_that_selects_channels_is_a_drop_and_asked_for_formats_keep():
    x = torch.randn(2, 6, 4, 4).to(memory_format=CL)
    with FormatTracker() as tracker:
        x[:, [0, 2, 4]]  # advanced indexing copies, and torch allocates the copy NCHW
        x.to(memory_format=torch.channels_last)
        x.clone(memory_format=torch.preserve_format)
    assert [(r.short_name, r.kind) for r in tracker.records] == [("__getitem__", "dropped"), ("to", "kept"), ("clone", "kept")]


def test_roi_align_goes_through_torch_function_and_drops_the_format():
    from torchvision.ops import roi_align

    features = torch.randn(1, 8, 16, 16).to(memory_format=CL)
    boxes = torch.tensor([[0, 1.0, 1.0, 8.0, 8.0], [0, 2.0, 2.0, 12.0, 12.0]])
    with FormatTracker() as tracker:
        pooled = roi_align(features, boxes, output_size=(4, 4), sampling_ratio=2, aligned=True)
    (record,) = [r for r in tracker.records if r.short_name == "roi_align"]
    assert record.operator == "torchvision.roi_align"  # torch.ops.torchvision.roi_align
    assert record.output_shape == (2, 8, 4, 4) and pooled.is_contiguous()
    assert (record.kind, record.mixed_inputs) == ("dropped", False)
    assert tracker.dropped() == [record]


def test_records_kind_covers_all_three():
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 1), torch.nn.Softmax(dim=1))
    x = _x()
    with FormatTracker() as tracker:
        y = model(x)  # softmax over channels: NCHW
        torch.cat([x.permute(0, 1, 3, 2), y], dim=1)
    assert [(r.short_name, r.kind) for r in tracker.records] == [
        ("conv2d", "kept"), ("softmax", "dropped"), ("permute", "layout op"),
    ]
    assert tracker.report().column("channels_last") == ["DROPPED", "layout op", "kept"]
    assert tracker.report().column("#") == [2, 3, 1]


def test_ignores_contiguous_and_ambiguous_inputs_and_non_4d_outputs():
    with FormatTracker() as tracker:
        F.layer_norm(torch.randn(2, 4, 3, 3), (3,))  # contiguous input
        F.layer_norm(torch.randn(2, 1, 3, 3).to(memory_format=CL), (3,))  # N1HW: ambiguous input
        _x().flatten(1)  # 2-D output
    assert tracker.records == []


def test_records_module_calls():
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 1), torch.nn.GroupNorm(2, 4), torch.nn.Softmax(dim=1))
    with FormatTracker() as tracker:
        model(_x())
    assert [r.short_name for r in tracker.records] == ["conv2d", "group_norm", "softmax"]
    assert [r.short_name for r in tracker.lost()] == ["softmax"]


def test_nesting_both_trackers_record():
    with FormatTracker() as outer:
        F.relu(_x())
        with FormatTracker() as inner:
            F.softmax(_x(), dim=1)
        F.gelu(_x())
    assert [r.short_name for r in inner.records] == ["softmax"]
    assert [r.short_name for r in outer.records] == ["relu", "softmax", "gelu"]


def test_torch_untouched_after_an_exception():
    before = _torch_surface()
    with pytest.raises(ZeroDivisionError):
        with FormatTracker() as tracker:
            F.softmax(_x(), dim=1)
            assert _get_current_function_mode_stack(), "the mode is active inside the block"
            1 / 0
    assert _torch_surface() == before
    assert [r.short_name for r in tracker.lost()] == ["softmax"]
    # torch still works and nothing records any more
    F.softmax(_x(), dim=1)
    assert len(tracker.records) == 1


def test_torch_untouched_after_nested_exception():
    before = _torch_surface()
    with pytest.raises(RuntimeError):
        with FormatTracker():
            with FormatTracker():
                torch.ones(2) @ torch.ones(3)  # shape error raised by torch inside both modes
    assert _torch_surface() == before


def test_use_outside_with_raises_labkit_error():
    tracker = FormatTracker()
    for method in (tracker.report, tracker.lost, tracker.kept, tracker.dropped, tracker.layout_ops):
        with pytest.raises(FormatTrackerError, match="with FormatTracker"):
            method()
    assert issubclass(FormatTrackerError, LabkitError)


def test_entering_twice_raises_and_leaves_first_active():
    before = _torch_surface()
    with FormatTracker() as tracker:
        with pytest.raises(FormatTrackerError, match="already active"):
            tracker.__enter__()
        F.softmax(_x(), dim=1)
        assert tracker.active
    assert not tracker.active
    assert len(tracker.records) == 1
    assert _torch_surface() == before


def test_reuse_starts_fresh():
    tracker = FormatTracker()
    with tracker:
        F.softmax(_x(), dim=1)
    with tracker:
        F.relu(_x())
    assert [r.short_name for r in tracker.records] == ["relu"]


def test_exiting_the_outer_tracker_first_raises_and_keeps_the_mode_stack():
    before = _torch_surface()
    outer, inner = FormatTracker(), FormatTracker()
    outer.__enter__()
    inner.__enter__()
    stack = list(_get_current_function_mode_stack())
    with pytest.raises(FormatTrackerError, match=r"inner.*still active.*exit.*first"):
        outer.__exit__(None, None, None)
    assert list(_get_current_function_mode_stack()) == stack
    assert outer.active and inner.active
    F.softmax(_x(), dim=1)  # both still record
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    assert [r.short_name for r in inner.records] == ["softmax"]
    assert [r.short_name for r in outer.records] == ["softmax"]
    assert _torch_surface() == before


def test_records_channels_last_3d_calls():
    before = _torch_surface()
    torch.manual_seed(0)
    x = torch.randn(2, 4, 2, 3, 3).to(memory_format=torch.channels_last_3d)
    conv = torch.nn.Conv3d(4, 4, 1)
    with FormatTracker() as tracker:
        y = F.relu(x)
        F.layer_norm(y, (3,))
        z = conv(y)
        F.relu(torch.randn(2, 4, 2, 3, 3))  # contiguous 5-D input: not recorded
    assert [r.short_name for r in tracker.records] == ["relu", "layer_norm", "conv3d"]
    assert [r.short_name for r in tracker.lost()][0] == "layer_norm"
    assert tracker.records[2].kept == z.is_contiguous(memory_format=torch.channels_last_3d)  # torch's own answer
    lost = tracker.lost()[0]
    assert lost.input_strides == (72, 1, 36, 12, 4) and lost.output_strides == (72, 18, 9, 3, 1)
    assert {r.memory_format for r in tracker.records} == {"channels_last_3d"}
    assert _torch_surface() == before


def test_four_d_records_name_channels_last():
    with FormatTracker() as tracker:
        F.relu(_x())
    assert tracker.records[0].memory_format == "channels_last"


@pytest.mark.parametrize("make", [
    lambda x: x.new_zeros(2, 4, 3, 3), lambda x: x.new_empty((2, 4, 3, 3)), lambda x: x.new_ones(2, 4, 3, 3),
    lambda x: x.new_full((2, 4, 3, 3), 1.0), lambda x: x.new_empty_strided((2, 4, 3, 3), (36, 9, 3, 1)),
], ids=["new_zeros", "new_empty", "new_ones", "new_full", "new_empty_strided"])
def test_a_fresh_tensor_is_not_recorded(make):
    with FormatTracker() as tracker:
        fresh = make(_x())
    assert not fresh.is_contiguous(memory_format=CL)  # NCHW, but it never had a format to keep
    assert tracker.records == [] and tracker.dropped() == []


def test_writes_into_the_callers_tensor_take_its_layout_and_are_not_drops():
    x, buffer, channels_last_buffer = _x(), torch.empty(2, 4, 3, 3), torch.empty_like(_x())
    with FormatTracker() as tracker:
        torch.add(x, x, out=buffer)
        buffer.copy_(x)
        buffer.add_(x)
        torch.add(x, x, out=channels_last_buffer)  # a channels_last destination keeps it
    assert tracker.dropped() == []
    assert [(r.short_name, r.kind, r.reason) for r in tracker.records] == [
        ("add", "layout op", "writes into the caller's out= tensor"),
        ("copy_", "layout op", "writes into the caller's tensor"),
        ("add_", "layout op", "writes into the caller's tensor"),
        ("add", "kept", ""),
    ]
    assert tracker.layout_ops() == tracker.records[:3]


def test_a_recording_error_stops_the_tracker_and_leaves_torch_untouched(monkeypatch):
    import labkit.memory_format.tracker as tracker_module

    def broken_record(*args, **kwargs):
        raise RuntimeError("cannot describe this tensor")

    before = _torch_surface()
    with FormatTracker() as tracker:
        F.relu(_x())
        monkeypatch.setattr(tracker_module, "_record", broken_record)
        with pytest.raises(FormatTrackerError, match=r"could not record the call to torch.nn.functional.softmax.*"
                                                     r"cannot describe this tensor.*stopped recording") as caught:
            F.softmax(_x(), dim=1)
        assert isinstance(caught.value.__cause__, RuntimeError)
        assert not tracker.active
        F.softmax(_x(), dim=1)  # untracked from here on: no second error, no record
        monkeypatch.undo()
        F.relu(_x())
    assert _torch_surface() == before
    assert [r.short_name for r in tracker.records] == ["relu"]
    F.relu(_x())  # outside the block: not tracked
    assert [r.short_name for r in tracker.records] == ["relu"]


def test_a_recording_error_that_leaves_the_block_pops_the_mode(monkeypatch):
    import labkit.memory_format.tracker as tracker_module

    def broken_record(*args, **kwargs):
        raise RuntimeError("cannot describe this tensor")

    before = _torch_surface()
    monkeypatch.setattr(tracker_module, "_record", broken_record)
    with pytest.raises(FormatTrackerError, match="could not record"):
        with FormatTracker() as tracker:
            F.softmax(_x(), dim=1)
    monkeypatch.undo()
    assert _torch_surface() == before and not tracker.active
    F.softmax(_x(), dim=1)
    assert tracker.records == []
