"""labkit.fx.module_hooks: profiling without a trace, and the fallback of profile_model to it."""
import warnings

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitTypeError
from labkit.fx.module_hooks import OUTSIDE, WHOLE_MODEL, ModuleProfiler, hooked_leaves
from labkit.fx.profile import TraceFailedError, TraceFallbackWarning, TrainModeWarning, profile_model, require_profilable

X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


class Detector(nn.Module):
    """A detection-style model: a list of images in, so fx cannot trace it; a backbone that traces."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 1))
        self.head = nn.Linear(4, 2)

    def forward(self, images):
        features = [self.backbone(image.unsqueeze(0)).mean((2, 3)) for image in images]
        return self.head(torch.cat(features))


class SharedRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(self.relu(x))) * 2


def images() -> list[torch.Tensor]:
    return [torch.randn(3, 8, 8), torch.randn(3, 8, 8)]


def test_a_list_input_model_falls_back_to_modules_and_says_why():
    # capture="symbolic_trace": torch.export would capture this list input (tests/fx/test_export_capture.py)
    with pytest.warns(TraceFallbackWarning, match="Detector.forward.*for image in images.*model.backbone") as caught:
        report = profile_model(Detector().eval(), images(), warmup=1, runs=2, capture="symbolic_trace")
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert report.mode == "modules" and report.runs == 2
    assert "cannot be iterated" in report.fallback_reason and "generalized" not in report.fallback_reason
    assert report.traceable_children == (("backbone", 4),)
    # Each image runs the backbone once: four leaves twice, the head once, and the time between them.
    names = [row.name for row in report.rows]
    assert names == ["backbone.0", "backbone.1", "backbone.2", "backbone.3",
                     "backbone.0#2", "backbone.1#2", "backbone.2#2", "backbone.3#2", "head", OUTSIDE]
    assert report.by_op_type().rows[0][0] in {"Conv2d", "BatchNorm2d", "ReLU", "Linear", OUTSIDE}
    assert {r.op_type for r in report.rows} == {"Conv2d", "BatchNorm2d", "ReLU", "Linear", OUTSIDE}
    assert sum(r.stats.mean for r in report.rows) == pytest.approx(report.total.mean, rel=1e-6)
    assert "mode=modules (fx could not trace the model" in report.to_text()


def test_fallback_false_raises_the_trace_error_and_require_profilable_agrees():
    with pytest.raises(TraceFailedError, match="cannot be iterated"):
        profile_model(Detector().eval(), images(), fallback=False, capture="symbolic_trace")
    with pytest.raises(TraceFailedError):
        require_profilable(Detector().eval(), images(), fallback=False, capture="symbolic_trace")
    require_profilable(Detector().eval(), images())


def test_explicit_modules_mode_on_a_traceable_model_gives_one_row_per_call():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: nothing was traced
        report = profile_model(SharedRelu().eval(), X, warmup=0, runs=2, mode="modules")
    assert [r.name for r in report.rows] == ["relu", "conv", "relu#2", OUTSIDE]
    assert [r.target for r in report.rows][:3] == ["relu", "conv", "relu"]
    assert report.fallback_reason == "" and report.traceable_children == ()
    assert report.table().title.startswith("4 module calls, mode=modules, 2 runs")


def test_the_learners_model_keeps_no_hooks_and_its_buffers_even_in_train_mode():
    model = Detector()  # train mode: BatchNorm would update its running statistics
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.warns(TrainModeWarning):
        profile_model(model, images(), warmup=1, runs=2, mode="modules")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_rng_is_restored_after_a_profile_of_a_model_with_dropout():
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.Dropout(0.5))  # train mode: Dropout draws random numbers
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    with pytest.warns(TrainModeWarning):
        profile_model(model, X, warmup=1, runs=2, mode="modules")
    assert torch.equal(torch.rand(3), expected)


def test_hooked_leaves_stop_at_layers_and_at_named_leaves():
    class Conv(nn.Conv2d):  # a torch.nn layer subclass keeping its forward is a leaf
        pass

    model = nn.Sequential(nn.Sequential(Conv(3, 3, 1), nn.ReLU()), nn.Sequential(nn.Linear(2, 2)))
    assert [name for name, _ in hooked_leaves(model)] == ["0.0", "0.1", "1.0"]
    assert [name for name, _ in hooked_leaves(model, ["0"])] == ["0", "1.0"]
    assert [name for name, _ in hooked_leaves(model, [nn.Sequential])] == ["0", "1"]
    assert [name for name, _ in hooked_leaves(nn.Linear(2, 2))] == [WHOLE_MODEL]


def test_module_mode_needs_a_module():
    with pytest.raises(LabkitTypeError, match="wrap the function in a module"):
        ModuleProfiler(lambda x: x + 1, X)
