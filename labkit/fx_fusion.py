"""Fold each BatchNorm2d into the Conv2d before it, with torch.fx.

Why: in inference a BatchNorm is an affine map per channel, so it can be folded
into the preceding convolution's weights and bias; the graph loses a node per
pair and the model one memory pass per pair. :func:`fuse_conv_bn_teaching` is a
short pass written by hand to show the two halves of the idea, the graph
rewrite and the arithmetic; :func:`fuse_conv_bn_library` is the library's
``torch.fx.experimental.optimization.fuse``, which is what to use in practice.
:func:`check_fusion` proves a fused model computes the same thing and
:func:`fusion_timings` measures both variants against the original side by side.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.fx.experimental.optimization import fuse

from labkit.errors import LabkitTypeError, LabkitValueError
from labkit.fx_profile import trace
from labkit.tables import ShowsAsTable, Table
from labkit.timing import RunStats, compare


def _require_eval_module(model: Any) -> None:
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(f"Fusion needs a torch.nn.Module, got {type(model).__name__}.")
    if model.training:
        raise LabkitValueError(
            "Conv-BN fusion is only valid in inference: BatchNorm in training mode uses batch statistics. "
            "Call model.eval() first."
        )


def fold_bn_into_conv(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A new Conv2d computing ``bn(conv(x))`` in eval mode.

    BatchNorm computes ``(y - mean) / sqrt(var + eps) * gamma + beta`` per output
    channel. With ``scale = gamma / sqrt(var + eps)`` that is ``y * scale + shift``,
    so scale the conv's weights per output channel and fix up its bias.
    """
    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_mean)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    fused = copy.deepcopy(conv)
    with torch.no_grad():
        scale = gamma / torch.sqrt(bn.running_var + bn.eps)
        fused.weight = nn.Parameter(conv.weight * scale.reshape(-1, 1, 1, 1))
        fused.bias = nn.Parameter((bias - bn.running_mean) * scale + beta)
    return fused


def fuse_conv_bn_teaching(model: nn.Module) -> torch.fx.GraphModule:
    """Trace a copy of ``model`` and fold every ``Conv2d -> BatchNorm2d`` pair.

    The graph rewrite: find a BatchNorm2d node whose only input is a Conv2d node
    used by nobody else, swap in the folded conv, point the BatchNorm's users at
    the conv node, and erase the BatchNorm node. ``model`` is left unchanged.
    """
    _require_eval_module(model)
    graph_module = trace(copy.deepcopy(model))
    for node in list(graph_module.graph.nodes):
        if node.op != "call_module" or not isinstance(graph_module.get_submodule(node.target), nn.BatchNorm2d):
            continue
        conv_node = node.args[0]
        if not (
            isinstance(conv_node, torch.fx.Node)
            and conv_node.op == "call_module"
            and isinstance(graph_module.get_submodule(conv_node.target), nn.Conv2d)
            and len(conv_node.users) == 1
        ):
            continue
        conv = graph_module.get_submodule(conv_node.target)
        bn = graph_module.get_submodule(node.target)
        graph_module.add_submodule(conv_node.target, fold_bn_into_conv(conv, bn))
        node.replace_all_uses_with(conv_node)
        graph_module.graph.erase_node(node)
    graph_module.graph.lint()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return graph_module


def fuse_conv_bn_library(model: nn.Module) -> torch.fx.GraphModule:
    """``torch.fx.experimental.optimization.fuse`` on a copy of ``model`` (Conv+BN, Linear+BN)."""
    _require_eval_module(model)
    trace(model)  # a clear labkit error if the model cannot be traced
    return fuse(model, inplace=False)


def count_nodes(model: nn.Module, op_type: type[nn.Module] | None = None) -> int:
    """Nodes of the traced model; with ``op_type``, only call_module nodes of that class."""
    graph_module = trace(model)
    if op_type is None:
        return len(graph_module.graph.nodes)
    return sum(
        1
        for n in graph_module.graph.nodes
        if n.op == "call_module" and isinstance(graph_module.get_submodule(n.target), op_type)
    )


@dataclass(frozen=True)
class FusionCheck:
    """Does a fused model compute what the original does?"""

    nodes_before: int
    nodes_after: int
    batchnorms_left: int
    max_abs_diff: float
    allclose: bool
    rtol: float
    atol: float

    def to_text(self) -> str:
        verdict = "same outputs" if self.allclose else "DIFFERENT outputs"
        return (
            f"{verdict} (allclose rtol={self.rtol:g}, atol={self.atol:g}); "
            f"nodes {self.nodes_before} -> {self.nodes_after}, BatchNorm2d left: {self.batchnorms_left}"
        )

    def __str__(self) -> str:
        return self.to_text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.to_text())

    def _repr_html_(self) -> str:
        return f"<p>{self.to_text()}</p>"


def check_fusion(
    original: nn.Module, fused: nn.Module, *inputs: Any, rtol: float = 1e-4, atol: float = 1e-4
) -> FusionCheck:
    """Run both models on ``inputs`` and compare outputs with ``torch.allclose``."""
    with torch.no_grad():
        expected = original(*inputs)
        actual = fused(*inputs)
    if expected.shape != actual.shape:
        raise LabkitValueError(f"The fused model returns shape {tuple(actual.shape)}, the original {tuple(expected.shape)}.")
    return FusionCheck(
        nodes_before=count_nodes(original),
        nodes_after=count_nodes(fused),
        batchnorms_left=count_nodes(fused, nn.BatchNorm2d),
        max_abs_diff=float((expected - actual).abs().max()),
        allclose=bool(torch.allclose(expected, actual, rtol=rtol, atol=atol)),
        rtol=rtol,
        atol=atol,
    )


@dataclass(frozen=True, repr=False)
class FusionTimings(ShowsAsTable):
    """Forward-pass times of the original and the fused variants, measured interleaved."""

    stats: dict[str, RunStats]

    def speedup(self, variant: str) -> float:
        """How many times faster ``variant`` is than ``"original"`` (by median)."""
        return self.stats[variant].ratio_to(self.stats["original"])

    def table(self) -> Table:
        return Table(
            ["variant", "median", "IQR", "speed-up"],
            [[name, f"{s.median * 1e3:.2f} ms", f"{s.iqr * 1e3:.2f} ms", f"{self.speedup(name):.2f}x"]
             for name, s in self.stats.items()],
            title="Forward pass before and after Conv-BN fusion",
        )


def fusion_timings(model: nn.Module, *inputs: Any, rounds: int = 10, warmup: int = 2) -> FusionTimings:
    """Time ``model``, its teaching-fused and its library-fused versions side by side."""
    variants = {
        "original": model,
        "teaching pass": fuse_conv_bn_teaching(model),
        "torch.fx fuse": fuse_conv_bn_library(model),
    }
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    with torch.no_grad():
        stats = compare(
            {name: (lambda m=m: m(*inputs)) for name, m in variants.items()},
            rounds=rounds,
            warmup=warmup,
            device=device,
        )
    return FusionTimings(stats)
