"""labkit.fx_fusion: the teaching pass and the library's fuse compute what the model computes."""
import pytest
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from labkit.errors import LabkitTypeError, LabkitValueError
from labkit.fx_fusion import (
    check_fusion,
    count_nodes,
    fold_bn_into_conv,
    fuse_conv_bn_library,
    fuse_conv_bn_teaching,
    fusion_timings,
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
    check = check_fusion(model, fused, X)
    assert check.allclose and check.max_abs_diff < 1e-5
    assert (check.nodes_before, check.nodes_after, check.batchnorms_left) == (5, 4, 0)
    assert "same outputs" in str(check) and "5 -> 4" in check._repr_html_()


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
    fused = fuse_conv_bn_teaching(model)
    assert count_nodes(fused, nn.BatchNorm2d) == 1
    torch.testing.assert_close(fused(X), model(X))


def test_resnet18_fuses_all_twenty_batchnorms():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)
    for fuser in (fuse_conv_bn_teaching, fuse_conv_bn_library):
        check = check_fusion(model, fuser(model), x)
        assert check.allclose and (check.nodes_before, check.nodes_after, check.batchnorms_left) == (71, 51, 0)


def test_training_mode_and_non_modules_are_refused():
    with pytest.raises(LabkitValueError, match="model.eval"):
        fuse_conv_bn_teaching(conv_bn().train())
    with pytest.raises(LabkitValueError, match="model.eval"):
        fuse_conv_bn_library(conv_bn().train())
    with pytest.raises(LabkitTypeError):
        fuse_conv_bn_teaching(lambda x: x)


def test_check_fusion_refuses_different_shapes():
    with pytest.raises(LabkitValueError, match="shape"):
        check_fusion(conv_bn(), nn.Identity(), X)


def test_fusion_timings_times_three_variants():
    timings = fusion_timings(conv_bn(), X, rounds=2, warmup=1)
    assert list(timings.stats) == ["original", "teaching pass", "torch.fx fuse"]
    assert timings.speedup("original") == 1.0
    assert "speed-up" in str(timings) and "<table>" in timings._repr_html_()
