"""labkit.fx.fusion: the teaching pass and the library's fuse compute what the model computes."""
from collections import OrderedDict

import pytest
import torch
from torch import nn
from torch.fx.experimental.optimization import fuse
from torch.nn.utils import prune
from torch.nn.utils.fusion import fuse_conv_bn_eval

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.timing import RunStats, SideBySide
from labkit.fx.fusion import (
    FusionSkippedWarning,
    FusionTimings,
    UnsafeFusionError,
    count_nodes,
    fold_bn_into_conv,
    fuse_conv_bn_library,
    fuse_conv_bn_teaching,
    fuse_safely,
    fusion_timings,
    verify_fusion,
)

X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def conv_bn(bias: bool = True, affine: bool = True) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=bias), nn.BatchNorm2d(4, affine=affine), nn.ReLU())
    with torch.no_grad():  # non-trivial running statistics, as after training
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    return model.eval()


class SharedConv(nn.Module):
    """The conv output feeds the BatchNorm *and* the return value: it must not be folded."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


@pytest.mark.parametrize("fuser", [fuse_conv_bn_teaching, fuse_conv_bn_library])
def test_fused_model_matches_and_has_no_batchnorm(fuser):
    model = conv_bn()
    fused = fuser(model)
    verdict = verify_fusion(model, fused, X)
    assert verdict.allclose and verdict.max_abs_diff < 1e-5
    assert (verdict.nodes_before, verdict.nodes_after, verdict.batchnorms_left) == (5, 4, 0)
    assert "same outputs" in str(verdict) and "5 -&gt; 4" in verdict._repr_html_()


def test_the_original_model_is_left_unchanged():
    model = conv_bn()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fuse_conv_bn_teaching(model)
    fuse_conv_bn_library(model)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert count_nodes(model, nn.BatchNorm2d) == 1


@pytest.mark.parametrize(("bias", "affine"), [(True, True), (False, True), (True, False), (False, False)])
def test_fold_agrees_with_torch_fuse_conv_bn_eval(bias, affine):
    model = conv_bn(bias, affine)
    ours = fold_bn_into_conv(model[0], model[1])
    theirs = fuse_conv_bn_eval(model[0], model[1])
    torch.testing.assert_close(ours(X), theirs(X))
    torch.testing.assert_close(ours(X), model[1](model[0](X)))


def test_a_conv_with_other_users_is_not_folded():
    model = SharedConv().eval()
    with pytest.warns(FusionSkippedWarning, match="also used elsewhere"):
        fused = fuse_conv_bn_teaching(model)
    assert count_nodes(fused, nn.BatchNorm2d) == 1
    torch.testing.assert_close(fused(X), model(X))


def test_resnet18_fuses_all_twenty_batchnorms():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)
    for fuser in (fuse_conv_bn_teaching, fuse_conv_bn_library):
        verdict = verify_fusion(model, fuser(model), x)
        assert verdict.allclose and (verdict.nodes_before, verdict.nodes_after, verdict.batchnorms_left) == (71, 51, 0)


def test_training_mode_and_non_modules_are_refused():
    with pytest.raises(LabkitValueError, match="model.eval"):
        fuse_conv_bn_teaching(conv_bn().train())
    with pytest.raises(LabkitValueError, match="model.eval"):
        fuse_conv_bn_library(conv_bn().train())
    with pytest.raises(LabkitTypeError):
        fuse_conv_bn_teaching(lambda x: x)
    half_eval = conv_bn()
    half_eval[1].train()  # BatchNorm would use batch statistics: folding its running stats is wrong
    for fuser in (fuse_conv_bn_teaching, fuse_conv_bn_library, fuse_safely):
        with pytest.raises(LabkitValueError, match=r"In training mode: '1'\. Call model.eval"):
            fuser(half_eval)


def test_verify_fusion_refuses_different_shapes():
    with pytest.raises(LabkitValueError, match="shape"):
        verify_fusion(conv_bn(), nn.Identity(), X)


def test_fusion_timings_times_three_variants():
    timings = fusion_timings(conv_bn(), X, rounds=2, warmup=1)
    assert isinstance(timings, SideBySide) and timings.baseline == "original"
    assert list(timings.stats) == ["original", "teaching pass", "torch.fx fuse"]
    assert timings.speedup("original") == 1.0
    stats = timings.stats
    assert timings.speedup("teaching pass") == pytest.approx(stats["original"].median / stats["teaching pass"].median)
    assert timings.table().column("variant") == ["original", "teaching pass", "torch.fx fuse"]
    assert timings.table().headers == ["variant", "median", "IQR", "speedup", "note"]
    assert str(timings).startswith("Forward pass before and after Conv-BN fusion") and "<table>" in timings._repr_html_()


def test_fusion_timings_note_a_gain_inside_the_spread():
    def stats(median, iqr):
        return RunStats(mean=median, median=median, min=median, max=median, iqr=iqr, count=4)

    timings = FusionTimings({"original": stats(1.0, 0.02), "teaching pass": stats(0.97, 0.02), "torch.fx fuse": stats(0.5, 0.02)})
    assert timings.note("teaching pass") == "no clear change (speedup 1.03x ±0.04)"  # 3% faster, 4% spread
    assert timings.note("torch.fx fuse") == "" and timings.note("original") == "baseline"
    noisy = FusionTimings({"original": stats(1.0, 0.5), "teaching pass": stats(0.5, 0.5), "torch.fx fuse": stats(0.5, 0.02)})
    assert noisy.note("original") == "baseline, noisy (IQR 50% of median)"
    assert noisy.note("teaching pass") == "noisy (IQR 100% of median), no clear change (speedup 2.00x ±3.00)"
    assert noisy.table().column("note")[1] == noisy.note("teaching pass")


def test_no_check_names_outside_the_exercise_checker():
    import labkit.fx.fusion as fusion

    assert not [name for name in vars(fusion) if "check" in name.lower()], "'check' means the exercise checker only"


class ConvCalledTwice(nn.Module):
    """One Conv2d module, called twice; only the first call is followed by the BatchNorm."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.bn = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        return self.bn(self.conv(x)) + self.conv(x)


class ConvWeightReadElsewhere(nn.Module):
    """The conv is called once, but its weight is also read directly: folding would change that read."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)
        with torch.no_grad():
            self.bn.running_var.fill_(4.0)

    def forward(self, x):
        return self.bn(self.conv(x)) + self.conv.weight.sum()


def test_a_conv_called_twice_is_not_folded_by_the_teaching_pass():
    model = ConvCalledTwice().eval()
    with pytest.warns(FusionSkippedWarning, match="'conv' is used by 2 nodes"):
        fused = fuse_conv_bn_teaching(model)
    torch.testing.assert_close(fused(X), model(X))
    assert count_nodes(fused, nn.BatchNorm2d) == 1
    other = ConvWeightReadElsewhere().eval()
    with pytest.warns(FusionSkippedWarning, match="weights read directly"):
        torch.testing.assert_close(fuse_conv_bn_teaching(other)(X), other(X))
    with pytest.raises(UnsafeFusionError):
        fuse_conv_bn_library(other)


def test_the_library_pass_refuses_what_torch_fuse_gets_wrong():
    model = ConvCalledTwice().eval()
    with pytest.raises(UnsafeFusionError, match=r"'conv'.*fuse_conv_bn_teaching"):
        fuse_conv_bn_library(model)


def test_fuse_safely_falls_back_to_the_safe_rule():
    model = ConvCalledTwice().eval()
    fused, note = fuse_safely(model)
    torch.testing.assert_close(fused(X), model(X))
    assert "torch's fuse not used" in note and "'conv' is used by 2 nodes" in note
    plain, none = fuse_safely(conv_bn())
    assert none == "" and count_nodes(plain, nn.BatchNorm2d) == 0


def test_verify_fusion_reports_torch_fuse_getting_a_shared_conv_wrong():
    model = ConvCalledTwice().eval()
    verdict = verify_fusion(model, fuse(model, inplace=False), X)  # torch's own fuse, unguarded
    assert not verdict.allclose and verdict.max_abs_diff > 0.1
    assert "DIFFERENT outputs" in str(verdict)


class NoRunningStats(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False)

    def forward(self, x):
        return self.bn(self.conv(x))


@pytest.mark.parametrize("fuser", [fuse_conv_bn_teaching, fuse_conv_bn_library])
def test_batchnorm_without_running_stats_is_left_unfused_with_a_note(fuser):
    model = NoRunningStats().eval()
    with pytest.warns(FusionSkippedWarning, match=r"'bn'.*track_running_stats=False"):
        fused = fuser(model)
    assert count_nodes(fused, nn.BatchNorm2d) == 1
    torch.testing.assert_close(fused(X), model(X))


def test_folding_a_batchnorm_without_running_stats_is_a_labkit_error():
    model = NoRunningStats().eval()
    with pytest.raises(LabkitValueError, match="track_running_stats"):
        fold_bn_into_conv(model.conv, model.bn)


class Huge(nn.Module):
    """Activations around 1e8, as in a deep ResNet with random weights."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.Conv2d(16, 16, 3, padding=1),
                                  nn.BatchNorm2d(16), nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
        with torch.no_grad():
            for m in self.body:
                if isinstance(m, nn.BatchNorm2d):
                    m.running_var.fill_(1e-6)
                    m.running_mean.uniform_(-1, 1)

    def forward(self, x):
        return self.body(x)


def test_verify_fusion_compares_relative_to_the_output_scale():
    model = Huge().eval()
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    assert model(x).abs().max() > 1e7
    verdict = verify_fusion(model, fuse_conv_bn_teaching(model), x)
    assert verdict.allclose, verdict
    assert verdict.max_abs_diff > 1e-4  # far above an absolute tolerance: only the scale makes it "same"
    assert "same outputs" in str(verdict) and "max|original|" in str(verdict)
    assert "rtol=0.0001" in str(verdict) and "atol=1e-05" in str(verdict)


class DictAndTuple(nn.Module):
    """Returns an OrderedDict, as torchvision's segmentation models do; the traced copy returns a dict."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return OrderedDict(out=y, aux=(y.mean(), y.flatten(1)))


def test_verify_fusion_compares_every_tensor_of_a_dict_or_tuple_output():
    model = DictAndTuple().eval()
    verdict = verify_fusion(model, fuse_conv_bn_teaching(model), X)
    assert verdict.allclose and verdict.batchnorms_left == 0
    with pytest.raises(LabkitValueError, match="structure"):
        verify_fusion(model, conv_bn(), X)


def test_verify_fusion_rejects_bad_tolerances():
    for bad in (-1.0, float("nan"), "1e-4"):
        with pytest.raises((LabkitValueError, LabkitTypeError), match="rtol"):
            verify_fusion(conv_bn(), conv_bn(), X, rtol=bad)


def _doubling_hook(module, args, output):
    return output * 2


def test_a_hook_that_changes_an_output_is_kept_in_the_fused_model():
    model = conv_bn()
    model[2].register_forward_hook(_doubling_hook)  # an adapter on the ReLU: part of what model(x) computes
    for fuser in (fuse_conv_bn_teaching, fuse_conv_bn_library, lambda m: fuse_safely(m)[0]):
        fused = fuser(model)
        torch.testing.assert_close(fused(X), model(X), rtol=1e-4, atol=1e-5)
        assert verify_fusion(model, fused, X).allclose


def test_verify_fusion_compares_with_the_model_as_the_user_runs_it():
    model = conv_bn()
    fused = fuse(conv_bn())  # fused before the user added the hook
    model[2].register_forward_hook(_doubling_hook)
    verdict = verify_fusion(model, fused, X)
    assert not verdict.allclose and verdict.max_abs_diff > 0.1
    assert verdict.differs_at == "output"
    assert "DIFFERENT outputs: output differs by" in str(verdict) and "'2'" in str(verdict)


def test_a_pair_with_spectral_norm_or_pruning_is_left_unfused_and_computes_what_the_model_does():
    for wrap in (nn.utils.spectral_norm, lambda conv: prune.l1_unstructured(conv, "weight", amount=0.5)):
        model = conv_bn()
        wrap(model[0])
        if hasattr(model[0], "weight_orig"):
            with torch.no_grad():
                model[0].weight_orig.mul_(3)  # changed since its last forward: only the pre-hook gives the weight used
        fused, note = fuse_safely(model)  # fuse_safely puts what it left unfused in its note
        assert "'0' has forward pre hooks, which the folded layer would lose" in note
        torch.testing.assert_close(fused(X), model(X))
        assert verify_fusion(model, fused, X).allclose


def test_hooks_on_the_model_itself_are_refused_with_what_to_do():
    model = conv_bn()
    model.register_forward_hook(_doubling_hook)
    with pytest.raises(LabkitValueError, match=r"nn.Sequential\(model\)"):
        fuse_conv_bn_teaching(model)
    fused = fuse_conv_bn_teaching(nn.Sequential(model))
    torch.testing.assert_close(fused(X), model(X))


class DrawsRandomNumbers(nn.Module):
    def forward(self, x):
        import random

        import numpy as np

        return x + random.random() * 0 + float(np.random.rand()) * 0 + torch.rand(()) * 0


def test_verify_fusion_leaves_every_random_state_as_it_was():
    import random

    import numpy as np

    model = DrawsRandomNumbers()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    verify_fusion(model, DrawsRandomNumbers(), X)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected
