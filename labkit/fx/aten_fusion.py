"""Fold Conv/Linear + BatchNorm in the ATen graph ``torch.export`` captures.

Why: a model ``symbolic_trace`` cannot trace (most Hugging Face models, a forward
that branches on its inputs' structure) is profiled by ``torch.export``, and a
learner who fuses what they profiled needs the same graph. There a BatchNorm is
one ``aten.batch_norm`` node whose weights are parameter reads (``get_attr``), so
the fold is a graph rewrite: torch's own arithmetic
(``torch.nn.utils.fusion.fuse_conv_bn_weights`` / ``fuse_linear_bn_weights``)
gives the new weights, the layer node reads them, the BatchNorm node goes. The
result is ``ExportedProgram.module()``: called like the model, checked against
the model as the user runs it before it is returned.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import operator
import warnings
from collections.abc import Mapping
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.fx.experimental.symbolic_shapes import is_concrete_int
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights
from torch.utils._pytree import tree_map

from labkit.core.errors import LabkitError
from labkit.core.random_state import kept_random_state
from labkit.core.untouched import left_as_found
from labkit.fx.fusion import FusionSkippedWarning, as_the_user_runs_it, require_eval_module, verify_fusion
from labkit.i18n.messages import _

_aten = torch.ops.aten
#: ATen layers a BatchNorm can fold into: conv{1,2,3}d (channels in dim 1) and linear (2-D output only).
_CONVS = {_aten.conv1d.default, _aten.conv2d.default, _aten.conv3d.default}
_LINEAR = _aten.linear.default
#: eval-mode BatchNorm as export writes it: ``aten.batch_norm`` (torch >= 2.5), or the older op's first output.
_BATCH_NORM = _aten.batch_norm.default
_NO_TRAINING = _aten._native_batch_norm_legit_no_training.default


class ExportFusionError(LabkitError):
    """The model has no ATen graph to fuse in (torch.export failed), or the fused graph differs from the model."""


def _tensor(graph_module: torch.fx.GraphModule, node: Any) -> torch.Tensor | None:
    """The parameter or buffer a ``get_attr`` node reads (None for a missing argument or a computed value)."""
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    value = graph_module
    for part in str(node.target).split("."):
        value = getattr(value, part)
    return value if isinstance(value, torch.Tensor) else None


def _batch_norm_parts(node: torch.fx.Node) -> tuple[Any, ...] | None:
    """``(input, weight, bias, mean, var, eps, the node to replace)`` of an eval-mode BatchNorm node, else None."""
    if node.target is _BATCH_NORM and node.args[5] is False:
        x, weight, bias, mean, var, _, _, eps = node.args[:8]
        return x, weight, bias, mean, var, eps, node
    if node.target is _NO_TRAINING and len(node.users) == 1:
        (user,) = node.users
        if user.target is operator.getitem and user.args[1] == 0:
            x, weight, bias, mean, var, _, eps = node.args[:7]
            return x, weight, bias, mean, var, eps, user
    return None


def _where(node: torch.fx.Node) -> str:
    """The module path a node ran in (``nn_module_stack``), else its name."""
    stack = node.meta.get("nn_module_stack")
    return repr(list(stack.values())[-1][0]) if stack else node.name


def _skip_reason(graph_module: torch.fx.GraphModule, layer: Any, parts: tuple[Any, ...]) -> str | None:
    """Why this BatchNorm stays, or None when it folds into ``layer``."""
    if not isinstance(layer, torch.fx.Node) or layer.target not in _CONVS | {_LINEAR}:
        return "it does not follow a convolution or a linear layer"
    if len(layer.users) > 1:
        return f"the output of {_where(layer)} is also used elsewhere"
    weight = layer.args[1]
    if not isinstance(weight, torch.fx.Node) or _tensor(graph_module, weight) is None or len(weight.users) > 1:
        return f"{_where(layer)}'s weight is computed in forward (a hook or a parametrization) or shared"
    if len(layer.args) > 2 and layer.args[2] is not None and _tensor(graph_module, layer.args[2]) is None:
        return f"{_where(layer)}'s bias is computed in forward"
    if _tensor(graph_module, parts[3]) is None or _tensor(graph_module, parts[4]) is None:
        return "it has no running statistics (track_running_stats=False)"
    if any(p is not None and _tensor(graph_module, p) is None for p in parts[1:3]):
        return "its weight or bias is computed in forward"
    if layer.target is _LINEAR and getattr(layer.meta.get("val"), "ndim", None) != 2:
        return "a BatchNorm1d after a linear layer folds only on a 2-D (batch, features) output"
    return None


def _fold(graph_module: torch.fx.GraphModule, layer: torch.fx.Node, parts: tuple[Any, ...], index: int) -> None:
    """Point ``layer`` at the folded weight and bias, and the BatchNorm's users at ``layer``."""
    weight, bias = _tensor(graph_module, layer.args[1]), _tensor(graph_module, layer.args[2] if len(layer.args) > 2 else None)
    bn_weight, bn_bias, mean, var = (_tensor(graph_module, p) for p in parts[1:5])
    fold = fuse_linear_bn_weights if layer.target is _LINEAR else fuse_conv_bn_weights
    assert weight is not None and mean is not None and var is not None  # _skip_reason checked them
    if bn_weight is None:
        bn_weight = torch.ones_like(mean)
    if bn_bias is None:
        bn_bias = torch.zeros_like(mean)
    with torch.no_grad():
        new_weight, new_bias = fold(weight, bias, mean, var, float(parts[5]), bn_weight, bn_bias)
    names = (f"_fused_{index}_weight", f"_fused_{index}_bias")
    graph_module.register_parameter(names[0], new_weight)
    graph_module.register_parameter(names[1], new_bias)
    with graph_module.graph.inserting_before(layer):
        reads = [graph_module.graph.get_attr(name) for name in names]
    old_reads = [arg for arg in layer.args[1:3] if isinstance(arg, torch.fx.Node)]
    args = list(layer.args) + [None] * (3 - len(layer.args))
    args[1], args[2] = reads
    layer.args = tuple(args)
    replaced = parts[6]
    # torch < 2.5 writes BatchNorm as _native_batch_norm_legit_no_training and a getitem of it: that node goes too
    bn_node = replaced.args[0] if replaced.target is operator.getitem else None
    replaced.replace_all_uses_with(layer)
    graph_module.graph.erase_node(replaced)
    for node in [bn_node, *parts[1:5], *old_reads]:
        if isinstance(node, torch.fx.Node) and node.graph is graph_module.graph and not node.users:
            graph_module.graph.erase_node(node)


def fold_batch_norms(graph_module: torch.fx.GraphModule) -> int:
    """Fold every eval-mode BatchNorm of an exported ``graph_module`` into the conv or linear node before it, in place.

    Returns how many were folded; each one left gets a :class:`FusionSkippedWarning` saying why.
    """
    folded = 0
    for node in list(graph_module.graph.nodes):
        parts = _batch_norm_parts(node) if node.op == "call_function" else None
        if parts is None:
            continue
        layer = parts[0]
        reason = _skip_reason(graph_module, layer, parts)
        if reason is not None:
            warnings.warn(f"BatchNorm {_where(node)} left unfused: {reason}.", FusionSkippedWarning, stacklevel=2)
            continue
        _fold(graph_module, layer, parts, folded)
        folded += 1
    for node in list(graph_module.graph.nodes):  # reads of what the folded BatchNorms kept (num_batches_tracked)
        if node.op == "get_attr" and not node.users and folded:
            graph_module.graph.erase_node(node)
    graph_module.graph.lint()
    graph_module.recompile()
    return folded


def batch_dimensions(model: nn.Module, inputs: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``dynamic_shapes`` for ``torch.export``: dimension 0 of every tensor input left to export to keep dynamic.

    ``Dim.AUTO`` (torch 2.6 and newer) keeps a dimension dynamic where the model allows it and specialises it
    where the model needs that size (a reshape to the example's batch), without failing; None on an older torch
    or a forward whose signature the inputs do not fit (export then says so itself).
    """
    auto = getattr(getattr(torch.export, "Dim", None), "AUTO", None)
    if auto is None:
        return None
    try:
        bound = inspect.signature(model.forward).bind(*inputs, **kwargs)
    except (TypeError, ValueError):
        return None
    return {
        name: tree_map(lambda value: {0: auto} if isinstance(value, torch.Tensor) and value.dim() else None, value)
        for name, value in bound.arguments.items()
    }


def _export(model: nn.Module, inputs: tuple[Any, ...], keywords: dict[str, Any]) -> torch.export.ExportedProgram:
    """``torch.export`` of a copy that keeps the model's hooks, with a dynamic batch where it can, else as the example."""
    dynamic = batch_dimensions(model, inputs, keywords)
    with kept_random_state(), warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        if dynamic is not None:
            try:
                return torch.export.export(
                    as_the_user_runs_it(model), inputs, keywords, dynamic_shapes=dynamic, strict=False
                )
            except Exception:  # noqa: BLE001 - the static capture below says what fails, if anything does
                pass
        return torch.export.export(as_the_user_runs_it(model), inputs, keywords, strict=False)


def exported_input_shapes(graph_module: torch.fx.GraphModule) -> str:
    """Which input shapes an exported graph takes, as a sentence: a batch kept dynamic, or the example's only.

    Why: ``torch.export`` specialises every dimension it cannot keep symbolic, and the exported module then
    refuses any other size with "Guard failed: x.size()[0] == 2"; a fused model must say so when it is made.
    """
    shapes, fixed = [], False
    for node in graph_module.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor):
            dims = [str(int(d)) if is_concrete_int(d) else "B" for d in value.shape]  # int(): a specialised SymInt
            fixed = fixed or (value.dim() > 0 and is_concrete_int(value.shape[0]))
            shapes.append(f"{node.name}: ({', '.join(dims)})")
    if not shapes:
        return ""
    if fixed:
        return _("the fused graph takes only inputs of these shapes ({shapes}): torch.export fixed them to the "
                 "example's; to run another batch size, fuse again with an input of that size").format(
                     shapes="; ".join(shapes))
    return _("the fused graph takes inputs of shapes {shapes}, for any batch size B").format(shapes="; ".join(shapes))


def fuse_exported(model: nn.Module, *inputs: Any, kwargs: Mapping[str, Any] | None = None) -> torch.fx.GraphModule:
    """Capture ``model(*inputs, **kwargs)`` with ``torch.export`` and fold its BatchNorms (:func:`fold_batch_norms`).

    The capture is of a copy that keeps the model's hooks (:func:`~labkit.fx.fusion.as_the_user_runs_it`);
    the fused module is checked against the model as the user runs it on the same inputs
    (:func:`~labkit.fx.fusion.verify_fusion`), and a difference raises :class:`ExportFusionError` naming the
    output. A model export cannot capture (one that profiles by module hooks) raises it too, saying what to do.
    The batch dimension is kept dynamic where the model allows it (:func:`batch_dimensions`);
    :func:`exported_input_shapes` says which shapes the result takes.
    """
    with left_as_found():
        require_eval_module(model)
        keywords = dict(kwargs or {})
        try:
            program = _export(model, tuple(inputs), keywords)
        except Exception as exc:  # noqa: BLE001 - export raises many types; the message says which
            raise ExportFusionError(_(
                "Fusion rewrites a graph, and neither symbolic_trace nor torch.export captured {model} "
                "(torch.export: {error}). Such a model profiles by module hooks, which time modules but give no "
                "graph to rewrite: fuse a submodule that traces (labkit.fx.tracing.traceable_children(model) lists "
                "them), or fold a pair by hand with torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn).").format(
                    model=type(model).__name__,
                    error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            ) from exc
        graph_module = program.module()
        # torch.export's own pre-hook checks each call's inputs against the captured ones; a copy loses the flag it reads.
        graph_module._forward_pre_hooks.clear()
        graph_module._forward_pre_hooks_with_kwargs.clear()
        fold_batch_norms(graph_module)
        verdict = verify_fusion(model, graph_module, *inputs, kwargs=keywords)
        if not verdict.allclose:
            raise ExportFusionError(_(
                "The exported graph with its BatchNorms folded does not compute what the model does: {verdict}. "
                "Report this with the model; meanwhile fuse with torch.nn.utils.fusion.fuse_conv_bn_eval by hand."
            ).format(verdict=verdict))
        return graph_module


__all__ = ["ExportFusionError", "batch_dimensions", "exported_input_shapes", "fold_batch_norms", "fuse_exported"]
