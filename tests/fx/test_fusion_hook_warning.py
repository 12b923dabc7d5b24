"""verify_fusion runs the model's hooks on its copy, so a hook holding the caller's object is named in a warning."""

import warnings

import pytest
import torch
from torch import nn

from labkit.core.copies import HookSideEffectWarning
from labkit.fx.fusion import fuse_conv_bn_library, verify_fusion

X = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def conv_bn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()


def test_verify_fusion_names_a_hook_that_holds_the_callers_object() -> None:
    model = conv_bn()
    seen: list[torch.Tensor] = []
    model[2].register_forward_hook(lambda _m, _i, output: seen.append(output))
    fused = fuse_conv_bn_library(model)
    with pytest.warns(HookSideEffectWarning, match=r"model\.2's forward hook .*closes over seen, a list"):
        assert verify_fusion(model, fused, X).allclose
    assert seen  # the hook is part of the model: it ran on the copy, and reached the caller's list


def test_verify_fusion_warns_of_no_hook_that_holds_nothing_of_the_callers() -> None:
    model = conv_bn()
    with warnings.catch_warnings():
        warnings.simplefilter("error", HookSideEffectWarning)
        assert verify_fusion(model, fuse_conv_bn_library(model), X).allclose
