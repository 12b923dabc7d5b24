"""Fusion says what it fused for, and verify_fusion raises no false alarm (issue 42, items 4 and 5).

- ``forward(x, mask=None)``: the None reaches fusion as it reaches the model (the fused graph took the
  mask branch and then multiplied by None);
- a graph fused from ``torch.export`` takes other batch sizes where the model allows, and says which
  shapes it takes where it does not;
- a train-mode Dropout: both models draw the same mask, so a correct fusion is "same outputs";
- NaN and Inf at the same positions on both sides are equal, and the verdict says how many there were.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from labkit.fx.fusion import fuse_conv_bn_library, fuse_conv_bn_teaching, fuse_safely, verify_fusion
from tests.fx.support import needs_export
from tests.hostile_models import Dropping, LinearBN, OptionalMask

X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


def _with_statistics(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm1d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
    return model.eval()


@pytest.mark.parametrize("fuse", [fuse_conv_bn_library, fuse_conv_bn_teaching, lambda m: fuse_safely(m, X)[0],
                                  lambda m: fuse_safely(m)[0]], ids=["library", "teaching", "safely(x)", "safely"])
def test_a_none_argument_reaches_fusion_as_it_reaches_the_model(fuse) -> None:
    torch.manual_seed(0)
    model = _with_statistics(OptionalMask())
    fused = fuse(model)
    with torch.no_grad():
        assert torch.allclose(fused(X), model(X), atol=1e-6)
        assert torch.allclose(fused(X, mask=None), model(X), atol=1e-6)  # the parameter keeps its name
    assert verify_fusion(model, fused, X).allclose


class ShapeBranch(LinearBN):
    """Branches on a shape: symbolic_trace cannot follow it, torch.export can (so fusion goes to the ATen graph)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) if x.shape[-1] == 4 else x


class FixedBatch(ShapeBranch):
    """Reshapes to the example's batch: torch.export must keep the batch size, and the note must say so."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).reshape(2, 4)


@needs_export
@pytest.mark.skipif(not hasattr(getattr(torch.export, "Dim", None), "AUTO"), reason="Dim.AUTO needs torch 2.6")
def test_a_graph_fused_from_torch_export_takes_other_batch_sizes_and_says_so() -> None:
    torch.manual_seed(0)
    model = _with_statistics(ShapeBranch())
    fused, note = fuse_safely(model, X)
    assert "torch.export" in note and "for any batch size B" in note and "x: (B, 4)" in note
    bigger = torch.randn(5, 4)
    assert verify_fusion(model, fused, bigger).allclose  # was: "Guard failed: x.size()[0] == 2"


@needs_export
def test_a_graph_fused_for_the_examples_batch_only_says_so_when_it_is_made() -> None:
    torch.manual_seed(0)
    _, note = fuse_safely(_with_statistics(FixedBatch()), X)
    assert "takes only inputs of these shapes (x: (2, 4))" in note and "fuse again" in note


def test_verify_fusion_compares_train_mode_dropout_under_the_same_random_state() -> None:
    torch.manual_seed(0)
    model = Dropping()  # train mode, no BatchNorm: fusion is allowed and changes nothing
    fused, _ = fuse_safely(model)
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    state = torch.get_rng_state()
    verdict = verify_fusion(model, fused, torch.randn(8, 4))
    assert verdict.allclose and verdict.max_abs_diff == 0.0, verdict  # was: "DIFFERENT outputs ... 0.606"
    assert not torch.equal(state, torch.get_rng_state())  # torch.randn(8, 4) above drew; verify_fusion did not
    after_randn = torch.get_rng_state()
    verify_fusion(model, fused, X)
    assert torch.equal(after_randn, torch.get_rng_state())


def test_verify_fusion_counts_nan_and_inf_at_the_same_positions_as_equal_and_says_so() -> None:
    torch.manual_seed(0)
    model = _with_statistics(LinearBN())
    fused = fuse_conv_bn_library(model)
    x = X.clone()
    x[0, 0] = float("nan")
    x[1, 1] = float("inf")
    verdict = verify_fusion(model, fused, x)
    assert verdict.allclose, verdict  # was: allclose=False, max_abs_diff=nan
    assert verdict.both_not_finite > 0 and np.isfinite(verdict.max_abs_diff)
    assert f"{verdict.both_not_finite} positions are NaN or infinite in both outputs" in verdict.to_text()


def test_nan_on_one_side_only_still_differs() -> None:
    torch.manual_seed(0)
    model = _with_statistics(LinearBN())

    class NanOnce(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = model(x).clone()
            y[0, 0] = float("nan")
            return y

    verdict = verify_fusion(model, NanOnce(), X)
    assert not verdict.allclose and verdict.differs_at == "output"
