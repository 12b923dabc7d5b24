"""Tests for labkit.memory_format.tracker.FormatTracker: records, nesting, and leaving torch untouched."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import _get_current_function_mode_stack

from labkit.core.errors import LabkitError
from labkit.memory_format.tracker import FormatTracker, FormatTrackerError

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
    lost = tracker.lost()[0]
    assert lost.input_strides == (36, 1, 12, 4) and lost.output_strides == (36, 9, 3, 1)
    table = tracker.report()
    assert table.column("operator") == [
        "torch.nn.functional.relu", "torch.nn.functional.layer_norm", "torch.nn.functional.softmax"
    ]
    assert table.column("channels_last") == ["kept", "LOST", "LOST"]
    assert "2 lost the format" in str(table)


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
    for method in (tracker.report, tracker.lost, tracker.kept):
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
