"""labkit.fx.crosscheck: labkit's shares next to torch.profiler's, with a clean stderr."""
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.fx.crosscheck import CrossCheck, compare_with_torch_profiler, seconds_by_op_type


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)).eval()


def test_shares_side_by_side_and_nothing_on_stderr(capfd):
    check = compare_with_torch_profiler(small_cnn(), torch.randn(2, 3, 32, 32), warmup=1, runs=2)
    assert {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"} <= set(check.labkit_pct)
    assert sum(check.labkit_pct.values()) == pytest.approx(100)
    assert sum(check.profiler_pct.values()) == pytest.approx(100)
    assert check.max_difference == max(check.difference(t) for t in check.labkit_pct)
    assert "torch.profiler %" in str(check) and "<table>" in check._repr_html_()
    assert capfd.readouterr().err == ""


def test_top_level_events_are_mapped_and_children_skipped():
    conv = SimpleNamespace(name="aten::conv2d", cpu_parent=None, cpu_time_total=30.0, device_time_total=0.0)
    child = SimpleNamespace(name="aten::convolution", cpu_parent=conv, cpu_time_total=29.0, device_time_total=0.0)
    relu = SimpleNamespace(name="aten::relu_", cpu_parent=None, cpu_time_total=10.0, device_time_total=0.0)
    other = SimpleNamespace(name="aten::gelu", cpu_parent=None, cpu_time_total=5.0, device_time_total=0.0)
    seconds = seconds_by_op_type([conv, child, relu, other])
    assert seconds == pytest.approx({"Conv2d": 30e-6, "ReLU": 10e-6, "aten::gelu": 5e-6})


def test_difference_and_errors():
    check = CrossCheck([("Conv2d", 70.0, 72.5), ("ReLU", 30.0, 27.5)])
    assert check.difference("Conv2d") == 2.5 and check.max_difference == 2.5
    with pytest.raises(LabkitValueError, match="No op type"):
        check.difference("Linear")
    with pytest.raises(LabkitValueError, match="runs"):
        compare_with_torch_profiler(small_cnn(), torch.randn(1, 3, 8, 8), runs=0)


def test_an_empty_cross_check_says_so():
    with pytest.raises(LabkitValueError, match="no op types"):
        CrossCheck([]).max_difference
    with pytest.raises(LabkitTypeError, match="runs must be a whole number"):
        compare_with_torch_profiler(small_cnn(), torch.randn(1, 3, 8, 8), runs=2.5)


def test_a_train_mode_model_leaves_the_global_rng_as_it_was_and_warns():
    from labkit.fx.profile import TrainModeWarning

    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.ReLU())  # train mode: Dropout draws numbers
    x = torch.randn(4, 8)
    before = torch.random.get_rng_state()
    with pytest.warns(TrainModeWarning, match="model.eval"):
        compare_with_torch_profiler(model, x, warmup=1, runs=2)
    assert torch.equal(torch.random.get_rng_state(), before)
