"""labkit.fx.aten_fusion: BatchNorms folded in the graph torch.export captures, checked against the model."""

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitValueError
from labkit.fx.aten_fusion import ExportFusionError, fold_batch_norms, fuse_exported
from labkit.fx.fusion import FusionSkippedWarning, fuse_safely, verify_fusion
from labkit.fx.tracing import TraceFailedError

X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def _trained(*batch_norms: nn.Module) -> None:
    """Running statistics and affine weights as after training, so a fold that ignores them shows."""
    with torch.no_grad():
        for bn in batch_norms:
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 2)
            bn.bias.uniform_(-1, 1)


class BranchesOnShape(nn.Module):
    """Conv+BN and Linear+BN behind an ``if`` on a shape: symbolic_trace fails, torch.export captures it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.bn = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4)
        self.linear, self.bn1 = nn.Linear(144, 8), nn.BatchNorm1d(8)
        _trained(self.bn, self.bn1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x)).relu()
        if x.shape[0] > 1:
            y = y * 2
        return self.bn1(self.linear(y.flatten(1)))


def _batch_norms(graph_module: torch.fx.GraphModule) -> int:
    return sum("batch_norm" in str(node.target) for node in graph_module.graph.nodes)


def test_an_untraceable_model_is_fused_in_its_exported_graph():
    model = BranchesOnShape().eval()
    expected = model(X)
    fused, note = fuse_safely(model, X)
    assert "torch.export" in note and _batch_norms(fused) == 0
    torch.testing.assert_close(fused(X), expected)
    assert verify_fusion(model, fused, X).allclose
    torch.testing.assert_close(model(X), expected)  # the model is left as it was


def test_without_inputs_an_untraceable_model_says_to_pass_them():
    with pytest.raises(TraceFailedError, match=r"fuse_safely\(model, x\)"):
        fuse_safely(BranchesOnShape().eval())


class ReadsValues(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x)) if x.sum() > 0 else x


def test_a_model_that_profiles_by_hooks_gets_a_clear_error():
    with pytest.raises(ExportFusionError, match="profiles by module hooks.*traceable_children"):
        fuse_safely(ReadsValues().eval(), X)


class SpectralConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.bn = nn.utils.spectral_norm(nn.Conv2d(3, 4, 3)), nn.BatchNorm2d(4)
        self.head, self.bn2 = nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)
        _trained(self.bn, self.bn2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.head(self.bn(self.conv(x))))


def test_a_layer_whose_weight_a_hook_computes_keeps_its_batchnorm():
    model = SpectralConv().eval()
    with pytest.warns(FusionSkippedWarning, match="'conv'.*computed in forward"):
        fused = fuse_exported(model, X)
    assert _batch_norms(fused) == 1  # the head's folded, the spectral-norm conv's kept
    torch.testing.assert_close(fused(X), model(X))


def test_a_hook_that_changes_an_output_is_part_of_the_fused_graph():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    _trained(model[1])
    model[2].register_forward_hook(lambda module, args, output: output * 3)
    fused = fuse_exported(model, X)
    torch.testing.assert_close(fused(X), model(X))


def test_train_mode_is_refused():
    with pytest.raises(LabkitValueError, match="eval"):
        fuse_exported(BranchesOnShape(), X)


def test_fold_batch_norms_counts_what_it_folded():
    model = BranchesOnShape().eval()
    graph_module = torch.export.export(model, (X,), strict=False).module()
    assert fold_batch_norms(graph_module) == 2
    torch.testing.assert_close(graph_module(X), model(X))
