"""Fold each BatchNorm2d into the Conv2d before it, with torch.fx.

Why: in inference a BatchNorm is an affine map per channel, so it can be folded
into the preceding convolution's weights and bias; the graph loses a node per
pair and the model one memory pass per pair. :func:`fuse_conv_bn_teaching` is a
short pass written by hand to show the two halves of the idea, the graph
rewrite and the arithmetic; :func:`fuse_conv_bn_library` is the library's
``torch.fx.experimental.optimization.fuse``, which is what to use in practice.
:func:`verify_fusion` shows a fused model computes the same thing and
:func:`fusion_timings` measures both variants against the original side by side.
"""
from __future__ import annotations

import copy
import html
import inspect
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import torch
import torch.fx
from torch import nn
from torch.fx.experimental.optimization import fuse, matches_module_pattern
from torch.utils._pytree import keystr, tree_flatten_with_path

from labkit.core.copies import fresh_call, private_copy, warn_hooks_reaching_out
from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.tables import Table
from labkit.core.timing import SideBySide, compare
from labkit.core.untouched import left_as_found, replayed_random_state
from labkit.fx.model_inputs import keyword_inputs, refuse_unknown_keywords
from labkit.fx.profile import trace
from labkit.fx.tracing import TraceFailedError
from labkit.i18n.messages import N_, _

# The (layer, BatchNorm) pairs torch.fx.experimental.optimization.fuse folds, exact types as it matches them.
TORCH_FUSE_PATTERNS = (
    (nn.Conv1d, nn.BatchNorm1d),
    (nn.Conv2d, nn.BatchNorm2d),
    (nn.Conv3d, nn.BatchNorm3d),
    (nn.Linear, nn.BatchNorm1d),
)


class FusionSkippedWarning(UserWarning):
    """A layer-BatchNorm pair was left unfused; the message says which and why."""


FUSED_MODEL = N_("the fused model")  # what compare_outputs calls the second model by default, in its messages


class UnsafeFusionError(LabkitValueError):
    """torch's ``fuse`` would silently change the model's output (a layer used by more than one node)."""


def require_eval_module(model: Any) -> None:
    """Refuse a model with a BatchNorm in training mode: only there would folding change what the model computes.

    Why only BatchNorms: a ``GraphModule``'s containers, or a model's own
    modules, may be in train mode without changing what fusion folds.
    """
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(_("Fusion needs a torch.nn.Module, got {type}.").format(type=type(model).__name__))
    training = [
        repr(name) if name else _("the model")
        for name, module in model.named_modules()
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.training
    ]
    if training:
        raise LabkitValueError(_(
            "Conv-BN fusion is only valid in inference: BatchNorm in training mode uses batch statistics. "
            "In training mode: {modules}. Call model.eval() first.").format(
                modules=", ".join(training[:3]) + (" ..." if len(training) > 3 else ""))
        )


def _path_uses(graph_module: torch.fx.GraphModule, target: str) -> int:
    """Graph nodes that reach the submodule at ``target``: calls to it or to a module holding it, reads of its attributes.

    Fusion replaces the module at that path, so every one of these nodes would see the folded layer.
    """
    return sum(
        1
        for n in graph_module.graph.nodes
        if n.op in ("call_module", "get_attr")
        and (n.target == target or n.target.startswith(target + ".") or target.startswith(n.target + "."))
    )


def _module_path(node: torch.fx.Node) -> str:
    """The submodule path a ``call_module`` node calls (fx types ``target`` as a path or a function)."""
    return str(node.target)


def _layer_node(bn_node: torch.fx.Node) -> torch.fx.Node:
    """The layer node feeding a BatchNorm node; ``matches_module_pattern`` has made sure it is a node."""
    return cast(torch.fx.Node, bn_node.args[0])


def _torch_fuse_skips(graph_module: torch.fx.GraphModule, bn_node: torch.fx.Node) -> str | None:
    """Why torch's ``fuse`` (and the teaching pass) leaves this pair alone, or None if it folds it."""
    bn = graph_module.get_submodule(_module_path(bn_node))
    if not bn.track_running_stats or bn.running_mean is None:
        return "it has no running statistics (track_running_stats=False): it normalises with each batch's statistics"
    if len(_layer_node(bn_node).users) > 1:
        return f"the output of {_module_path(_layer_node(bn_node))!r} is also used elsewhere"
    return None


def _shared_layer(graph_module: torch.fx.GraphModule, bn_node: torch.fx.Node) -> str | None:
    """Why folding would change another use of the layer (torch's ``fuse`` misses this), or None."""
    layer = _module_path(_layer_node(bn_node))
    uses = _path_uses(graph_module, layer)
    if uses > 1:
        return (
            f"{layer!r} is used by {uses} nodes (called twice, or its weights read directly), "
            "and folding would change every use"
        )
    return None


def _shared_batchnorm(graph_module: torch.fx.GraphModule, bn_node: torch.fx.Node) -> str | None:
    """The safe rule also keeps a BatchNorm that more than one node uses (torch's ``fuse`` gets this case right)."""
    return "it is used by more than one node" if _path_uses(graph_module, _module_path(bn_node)) > 1 else None


def _note_unfused(bn_node: torch.fx.Node, reason: str, stacklevel: int = 3) -> None:
    warnings.warn(f"BatchNorm {bn_node.target!r} left unfused: {reason}.", FusionSkippedWarning, stacklevel=stacklevel)


#: The hook dictionaries of a module: forward and backward hooks, with and without keyword inputs.
HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
)


def as_the_user_runs_it(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with its own parameters, buffers and attributes that keeps its hooks.

    Why: a forward hook that changes an output, ``spectral_norm``'s and ``prune``'s
    pre-hooks that recompute a weight are part of what ``model(x)`` computes, so a
    fused model must be built from, and compared with, the model with them. The
    hooks are the user's own functions, put on the copy's modules; the copy's
    parameters are its own, so a forward writing them in place changes the copy.
    """
    copied = private_copy(model, share_parameters=False)
    copies = dict(copied.named_modules(remove_duplicate=False))
    for name, module in model.named_modules(remove_duplicate=False):
        for hooks in HOOK_DICTS:
            value = getattr(module, hooks, None)
            if value:
                setattr(copies[name], hooks, type(value)(value))
    return copied


def hooked_modules(model: nn.Module) -> dict[str, str]:
    """``{module path: what it has}`` for every module with a hook or a parametrization ("" is the model itself)."""
    found = {}
    for name, module in model.named_modules():
        kinds = [hooks.strip("_").replace("_", " ") for hooks in HOOK_DICTS if getattr(module, hooks, None)]
        if nn.utils.parametrize.is_parametrized(module):
            kinds.append("parametrizations")
        if kinds:
            found[name] = ", ".join(kinds)
    return found


def _hooked_pair(graph_module: torch.fx.GraphModule, bn_node: torch.fx.Node) -> str | None:
    """Why folding would drop a hook or a parametrization of the layer or its BatchNorm, or None."""
    for path in (_module_path(_layer_node(bn_node)), _module_path(bn_node)):
        kinds = hooked_modules(graph_module.get_submodule(path)).get("")
        if kinds:
            return f"{path!r} has {kinds}, which the folded layer would lose"
    return None


def _refuse_root_hooks(model: nn.Module) -> None:
    """symbolic_trace traces the model's ``forward``, not its ``__call__``: hooks on the model itself would be lost."""
    kinds = hooked_modules(model).get("")
    if kinds:
        raise LabkitValueError(_(
            "The model itself has {kinds}, and a traced graph holds only its forward, so the fused model would "
            "compute something else. Fuse the model without its hooks, or wrap it: "
            "fuse_safely(nn.Sequential(model)) traces through the hooks of a submodule.").format(kinds=kinds)
        )


def fold_bn_into_conv(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A new Conv2d computing ``bn(conv(x))`` in eval mode.

    BatchNorm computes ``(y - mean) / sqrt(var + eps) * gamma + beta`` per output
    channel. With ``scale = gamma / sqrt(var + eps)`` that is ``y * scale + shift``,
    so scale the conv's weights per output channel and fix up its bias.
    """
    if not isinstance(conv, nn.Conv2d) or not isinstance(bn, nn.BatchNorm2d):
        raise LabkitTypeError(_(
            "fold_bn_into_conv(conv, bn) needs an nn.Conv2d and an nn.BatchNorm2d, got {conv} and {bn}. For other "
            "layer types use torch.fx.experimental.optimization.fuse.").format(
                conv=type(conv).__name__, bn=type(bn).__name__)
        )
    if bn.num_features != conv.out_channels:
        raise LabkitValueError(_(
            "bn has {features} features but conv has {channels} output channels: "
            "pass the BatchNorm that directly follows this conv.").format(
                features=bn.num_features, channels=conv.out_channels)
        )
    if bn.running_mean is None or bn.running_var is None:
        raise LabkitValueError(_(
            "bn has no running statistics (track_running_stats=False), so there is nothing to fold: "
            "it normalises with each batch's statistics even in eval mode. Keep that BatchNorm unfused."
        ))
    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_mean)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    fused = copy.deepcopy(conv)
    with torch.no_grad():
        scale = gamma / torch.sqrt(bn.running_var + bn.eps)
        fused.weight = nn.Parameter(conv.weight * scale.reshape(-1, 1, 1, 1))
        fused.bias = nn.Parameter((bias - bn.running_mean) * scale + beta)
    return fused


def none_arguments(model: nn.Module, inputs: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> dict[str, None]:
    """``{name: None}`` for each parameter of ``forward`` that is None in this call (given so, or by its default).

    Why: ``symbolic_trace`` passes a Proxy for every parameter, so ``if mask is not None`` takes the mask
    branch and the fused graph multiplies by ``None`` when called as the model is, ``fused(x)``. Fixed to
    None, as the profiler's capture does, the graph takes the branch the model takes.
    """
    try:
        signature = inspect.signature(model.forward)  # not a module: require_eval_module refuses it next
        bound = signature.bind_partial(*inputs, **(kwargs or {}))
    except (AttributeError, TypeError, ValueError):  # no signature, or inputs that do not fit: the trace or the call says so
        return {}
    return {
        p.name: None for p in signature.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and bound.arguments.get(p.name, p.default) is None
    }


def trace_for_fusion(model: nn.Module, nones: Mapping[str, None]) -> torch.fx.GraphModule:
    """:func:`~labkit.fx.tracing.trace` with the arguments in ``nones`` fixed to None, keeping their names.

    fx renames a fixed parameter (``mask_1``); the fused model is called as the model is, so
    ``fused(x, mask=None)`` must work too: each placeholder gets its parameter's name back.
    """
    graph_module = trace(model, dict(nones) or None)
    if nones:
        placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
        for node, name in zip(placeholders, inspect.signature(model.forward).parameters, strict=False):
            if name in nones:
                node.target = name
        graph_module.recompile()
    return graph_module


def fuse_conv_bn_teaching(model: nn.Module) -> torch.fx.GraphModule:
    """Trace a copy of ``model`` and fold every ``Conv2d -> BatchNorm2d`` pair that is safe to fold.

    Safe: the conv and the BatchNorm are each used by one node only, the conv's
    output feeds only the BatchNorm, and the BatchNorm has running statistics.
    Folding replaces the conv module itself, so a second call of it would
    silently compute ``bn(conv(x))`` too. Other pairs stay, with a
    :class:`FusionSkippedWarning`. The rewrite: swap in the folded conv, point
    the BatchNorm's users at the conv node, erase the BatchNorm node.
    ``model`` is left unchanged: the trace is of a copy with its own weights
    (:func:`as_the_user_runs_it`), with the model's hooks: a pair with a hook or a
    parametrization stays unfused, and hooks on the model itself are refused
    (a traced graph would drop them). A parameter whose default is None is traced as None
    (:func:`none_arguments`).
    """
    with left_as_found():
        return _fuse_teaching(model, none_arguments(model))


def _fuse_teaching(model: nn.Module, nones: Mapping[str, None]) -> torch.fx.GraphModule:
    require_eval_module(model)
    _refuse_root_hooks(model)
    graph_module = trace_for_fusion(as_the_user_runs_it(model), nones)
    modules = dict(graph_module.named_modules())
    for node in list(graph_module.graph.nodes):
        if not matches_module_pattern((nn.Conv2d, nn.BatchNorm2d), node, modules):
            continue
        reason = (
            _torch_fuse_skips(graph_module, node) or _shared_layer(graph_module, node)
            or _shared_batchnorm(graph_module, node) or _hooked_pair(graph_module, node)
        )
        if reason is not None:
            _note_unfused(node, reason, stacklevel=4)
            continue
        conv_node = _layer_node(node)
        conv = cast(nn.Conv2d, graph_module.get_submodule(_module_path(conv_node)))
        bn = cast(nn.BatchNorm2d, graph_module.get_submodule(_module_path(node)))
        graph_module.add_submodule(_module_path(conv_node), fold_bn_into_conv(conv, bn))
        node.replace_all_uses_with(conv_node)
        graph_module.graph.erase_node(node)
    graph_module.graph.lint()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return graph_module


def fuse_conv_bn_library(model: nn.Module) -> torch.fx.GraphModule:
    """``torch.fx.experimental.optimization.fuse`` on a copy of ``model`` (Conv+BN, Linear+BN).

    torch's ``fuse`` replaces a layer module even when another node also uses
    it, which silently changes that other use, and drops the hooks and parametrizations
    of a pair it folds; such a model raises :class:`UnsafeFusionError` instead (:func:`fuse_safely` falls back to the
    teaching pass's safe rule). Pairs ``fuse`` leaves alone get a
    :class:`FusionSkippedWarning`. Both the check and ``fuse`` work on the same traced copy
    (:func:`as_the_user_runs_it`, hooks kept; a parameter whose default is None traced as None):
    ``model``, its caches and hooks are left alone.
    """
    with left_as_found():
        return _fuse_library(model, none_arguments(model))


def _fuse_library(model: nn.Module, nones: Mapping[str, None]) -> torch.fx.GraphModule:
    require_eval_module(model)
    _refuse_root_hooks(model)
    graph_module = trace_for_fusion(as_the_user_runs_it(model), nones)  # a clear labkit error if it cannot be traced
    modules = dict(graph_module.named_modules())
    unsafe = []
    for node in graph_module.graph.nodes:
        if not any(matches_module_pattern(pattern, node, modules) for pattern in TORCH_FUSE_PATTERNS):
            continue
        skipped = _torch_fuse_skips(graph_module, node)
        if skipped is not None:
            _note_unfused(node, skipped, stacklevel=4)
        elif (shared := _shared_layer(graph_module, node)) is not None:
            unsafe.append(f"BatchNorm {node.target!r} after {shared}")
        elif (hooked := _hooked_pair(graph_module, node)) is not None:
            unsafe.append(f"BatchNorm {node.target!r}: {hooked}")
    if unsafe:
        raise UnsafeFusionError(_(
            "torch.fx.experimental.optimization.fuse would silently change this model's output: {pairs}. Use "
            "labkit.fx.fusion.fuse_conv_bn_teaching(model) (or fuse_safely), which leaves such pairs unfused."
        ).format(pairs="; ".join(unsafe)))
    return cast(torch.fx.GraphModule, fuse(graph_module, inplace=True, no_trace=True))  # the graph checked above


def fuse_safely(
    model: nn.Module, *inputs: Any, kwargs: Mapping[str, Any] | None = None
) -> tuple[torch.fx.GraphModule, str]:
    """Fuse with torch's ``fuse`` where that is safe, else with the teaching pass's safe rule.

    A model ``symbolic_trace`` cannot trace is fused in the ATen graph ``torch.export``
    captures (:func:`labkit.fx.aten_fusion.fuse_exported`), which needs the example
    ``inputs`` (and ``kwargs``). With example inputs, the traced graph is traced with the
    arguments that are None in that call fixed to None, and the fused graph is checked against
    the model as the user runs it: one that fails or differs there is fused in the exported
    graph instead, as the profiler's capture does. Returns the fused copy and a note naming what was
    left unfused and which inputs an exported graph takes ("" when there is nothing to say), so a
    caller can show it instead of a warning.
    """
    with left_as_found():
        notes: list[str] = []
        nones = none_arguments(model, inputs, kwargs) if isinstance(model, nn.Module) else {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FusionSkippedWarning)
            try:
                fused = _traced_fusion(model, nones, notes)
                if inputs or kwargs:
                    _verify_against_eager(model, fused, inputs, kwargs)
            except (TraceFailedError, _TracedGraphDiffers) as exc:
                if not inputs and not kwargs:
                    raise TraceFailedError(  # the same type: callers catch a failed trace as such
                        f"{exc}\n" + _("To fuse in the graph torch.export captures instead, pass example inputs: "
                                       "fuse_safely(model, x).")
                    ) from exc
                from labkit.fx.aten_fusion import exported_input_shapes, fuse_exported  # they build on this module

                caught.clear()
                notes[:] = [
                    "symbolic_trace failed: fused in the graph torch.export captured" if isinstance(exc, TraceFailedError)
                    else f"the traced graph {exc}: fused in the graph torch.export captured"
                ]
                fused = fuse_exported(model, *inputs, kwargs=kwargs)
                notes.append(exported_input_shapes(fused))
        notes += [str(w.message).removesuffix(".") for w in caught if issubclass(w.category, FusionSkippedWarning)]
        for w in caught:  # anything else is not ours to swallow
            if not issubclass(w.category, FusionSkippedWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return fused, "; ".join(notes)


class _TracedGraphDiffers(Exception):
    """The fused traced graph fails or differs from the model on the example inputs; the message says how."""


def _traced_fusion(model: nn.Module, nones: Mapping[str, None], notes: list[str]) -> torch.fx.GraphModule:
    """torch's ``fuse`` where it is safe, else the teaching pass (noted in ``notes``)."""
    try:
        return _fuse_library(model, nones)
    except UnsafeFusionError:
        notes.append(
            "torch's fuse not used (it would change a layer used twice or drop a hook): "
            "only safe Conv2d+BatchNorm2d pairs folded"
        )
        return _fuse_teaching(model, nones)


def _verify_against_eager(
    model: nn.Module, fused: nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any] | None
) -> None:
    """Raise :class:`_TracedGraphDiffers` when the fused graph fails or differs from the model on these inputs."""
    try:
        verdict = verify_fusion(model, fused, *inputs, kwargs=kwargs)
    except LabkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - the graph fails where the model runs: a branch traced the wrong way
        raise _TracedGraphDiffers(f"fails on the example inputs ({type(exc).__name__}: {exc})") from exc
    if not verdict.allclose:
        raise _TracedGraphDiffers(f"differs from the model on the example inputs ({verdict.differs_at})")


def count_nodes(model: nn.Module, op_type: type[nn.Module] | None = None) -> int:
    """Nodes of the traced model (a copy: tracing runs ``forward``); with ``op_type``, only call_module nodes of that class."""
    with left_as_found():
        if not isinstance(model, nn.Module):
            raise LabkitTypeError(_("count_nodes needs a torch.nn.Module, got {type}.").format(type=type(model).__name__))
        graph_module = model if isinstance(model, torch.fx.GraphModule) else trace(private_copy(model, share_parameters=False))
        if op_type is None:
            return len(graph_module.graph.nodes)
        return sum(
            1
            for n in graph_module.graph.nodes
            if n.op == "call_module" and isinstance(graph_module.get_submodule(n.target), op_type)
        )


@dataclass(frozen=True)
class FusionVerification:
    """Does a fused model compute what the original does, as the user runs it (hooks included)?

    ``allclose`` holds when, for every tensor in the output (a tensor, tuple or
    dict), ``max|fused - original| <= rtol * max|original| + atol``: relative to
    the output's scale, since float32 rounding grows with the activations.
    ``differs_at`` names the first output that differs ("" when none does);
    ``hooked`` the original's modules with hooks or parametrizations, which a fused
    model must keep. Node counts are None where the model cannot be traced (a
    model fused in its exported graph). A position that is NaN on both sides, or the same
    infinity on both, counts as equal (``both_not_finite`` says how many there were);
    ``max_abs_diff`` is over the finite positions. Both models run from the same random
    state, so a train-mode Dropout draws the same mask in both.
    """

    nodes_before: int | None
    nodes_after: int | None
    batchnorms_left: int | None
    max_abs_diff: float
    allclose: bool
    rtol: float
    atol: float
    differs_at: str = ""
    hooked: tuple[str, ...] = ()
    both_not_finite: int = 0

    def to_text(self) -> str:
        verdict = _("same outputs") if self.allclose else _("DIFFERENT outputs: {where} differs by {diff}").format(
            where=self.differs_at, diff=f"{self.max_abs_diff:.3g}")
        text = (
            f"{verdict} (max|fused - original| <= rtol * max|original| + atol, rtol={self.rtol:g}, atol={self.atol:g})"
        )
        if self.nodes_before is not None and self.nodes_after is not None:
            text += "; " + _("nodes {before} -> {after}, BatchNorm2d left: {left}").format(
                before=self.nodes_before, after=self.nodes_after, left=self.batchnorms_left)
        if self.both_not_finite:
            text += "; " + _("{count} positions are NaN or infinite in both outputs, alike: counted as equal").format(
                count=self.both_not_finite)
        if not self.allclose and self.hooked:
            text += "; " + _("the original runs with hooks or parametrizations on {names}: "
                             "a fused model built without them computes something else").format(names=", ".join(self.hooked))
        return text

    def __str__(self) -> str:
        return self.to_text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.to_text())

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(self.to_text())}</p>"


def validate_tolerance(name: str, value: Any) -> float:
    """``value`` as a float, or a labkit error naming ``name`` when it is not a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LabkitTypeError(_("{name} must be a number such as 1e-4, got {type}.").format(
            name=name, type=type(value).__name__))
    if not (math.isfinite(value) and value >= 0):
        raise LabkitValueError(_("{name} must be a finite number >= 0 such as 1e-4, got {value}.").format(
            name=name, value=value))
    return float(value)


def _shape_of(output: Any, spec: Any) -> str:
    return f"{type(output).__name__} of {spec.num_leaves} value{'s' if spec.num_leaves != 1 else ''}"


def compare_outputs(
    expected: Any, actual: Any, *, rtol: float, atol: float, actual_name: str = FUSED_MODEL
) -> tuple[float, bool]:
    """``(largest |difference|, same?)`` over every tensor of two model outputs of the same structure.

    Each tensor is compared relative to its own scale:
    ``max|actual - expected| <= rtol * max|expected| + atol``. Other leaves
    (ints, None) must be equal.
    """
    largest, differs_at, _alike = _compare(expected, actual, rtol=rtol, atol=atol, actual_name=actual_name)
    return largest, not differs_at


def _compare(expected: Any, actual: Any, *, rtol: float, atol: float, actual_name: str) -> tuple[float, str, int]:
    """``(largest |difference| at finite positions, the first output that differs or "", positions NaN or infinite
    alike on both sides)``: :func:`compare_outputs`, naming where.

    Why NaN alike counts as equal: a NaN input gives NaN where the original has it, and a fused model that
    computes the same thing has it there too; ``a - b`` there is NaN, which no tolerance accepts.
    """
    expected_leaves, expected_spec = tree_flatten_with_path(expected)
    actual_leaves, actual_spec = tree_flatten_with_path(actual)
    # Paths, not container types: a traced GraphModule returns a dict where the model returned an OrderedDict.
    if [keystr(path) for path, _leaf in expected_leaves] != [keystr(path) for path, _leaf in actual_leaves]:
        raise LabkitValueError(_(
            "The outputs differ in structure: the original returns {expected}, {name} {actual}. Compare two models "
            "that return the same kind of output.").format(
                expected=_shape_of(expected, expected_spec), name=_(actual_name), actual=_shape_of(actual, actual_spec))
        )
    if not any(isinstance(leaf, torch.Tensor) and leaf.numel() for _path, leaf in expected_leaves):
        raise LabkitValueError(_(
            "The original model's output has no elements, so there is nothing to compare: "
            "pass inputs with a batch of at least one example."
        ))
    largest, differs_at, alike = 0.0, "", 0
    for (path, a), (_same_path, b) in zip(expected_leaves, actual_leaves, strict=True):  # same paths, checked above
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if not (type(a) is type(b) and a == b):
                differs_at = differs_at or f"output{keystr(path)}"
            continue
        if a.shape != b.shape:
            raise LabkitValueError(_("{name} returns shape {shape}, the original {expected} ({output}).").format(
                name=_(actual_name).capitalize(), shape=tuple(b.shape), expected=tuple(a.shape),
                output=f"output{keystr(path)}"))
        if a.numel() == 0:
            continue
        dtype = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
        a, b = a.detach().to("cpu", dtype), b.detach().to("cpu", dtype)
        finite = a.isfinite() & b.isfinite()
        same_not_finite = ~finite & ((a.isnan() & b.isnan()) | (a == b))  # NaN on both, or the same infinity
        alike += int(same_not_finite.sum())
        if not bool((finite | same_not_finite).all()):  # finite on one side only, or opposite infinities
            differs_at = differs_at or f"output{keystr(path)}"
        if not finite.any():
            continue
        diff = float((a - b)[finite].abs().max())
        largest = max(largest, diff)
        if not diff <= rtol * float(a[finite].abs().max()) + atol:
            differs_at = differs_at or f"output{keystr(path)}"
    return largest, differs_at, alike


def verify_fusion(
    original: nn.Module, fused: nn.Module, *inputs: Any, kwargs: Mapping[str, Any] | None = None,
    rtol: float = 1e-4, atol: float = 1e-5, **stray: Any,
) -> FusionVerification:
    """Run both models on ``inputs`` (and keyword inputs ``kwargs``) and compare every output tensor relative to its
    scale (see :class:`FusionVerification`).

    The original runs as the user runs it, hooks and parametrizations included
    (:func:`as_the_user_runs_it`: a copy with its own parameters), each model on
    fresh clones of ``inputs`` and ``kwargs``, so neither model nor the inputs
    change, nor Python's, NumPy's or torch's random state. Both start from the caller's random state, so a
    train-mode Dropout draws the same mask in both and a difference is the fusion's. A hook of ``original`` that
    holds one of the caller's objects gets a :class:`~labkit.core.copies.HookSideEffectWarning`
    naming it (its copy's calls reach that object). Named "verify", not
    "check": in labkit a check is an exercise checker.
    """
    with left_as_found():
        keywords = keyword_inputs("verify_fusion", kwargs, stray, ("kwargs", "rtol", "atol"))
        rtol, atol = validate_tolerance("rtol", rtol), validate_tolerance("atol", atol)
        if not inputs and not keywords:
            raise LabkitValueError(_(
                "verify_fusion needs the example inputs to run both models on: verify_fusion(model, fused, x)."
            ))
        if not isinstance(original, nn.Module) or not isinstance(fused, nn.Module):
            raise LabkitTypeError(_(
                "verify_fusion(original, fused, x) needs two torch.nn.Modules, got {original} and {fused}.").format(
                    original=type(original).__name__, fused=type(fused).__name__)
            )
        refuse_unknown_keywords(original, keywords, inputs)
        warn_hooks_reaching_out(original)
        with torch.no_grad(), replayed_random_state() as rewind:
            args, kwargs_copy = fresh_call(inputs, keywords)
            expected = as_the_user_runs_it(original)(*args, **kwargs_copy)
            rewind()  # the same draws for both: a Dropout's mask differs by chance, not by the fusion
            args, kwargs_copy = fresh_call(inputs, keywords)
            actual = as_the_user_runs_it(fused)(*args, **kwargs_copy)
            nodes = (_nodes_or_none(original), _nodes_or_none(fused), _nodes_or_none(fused, nn.BatchNorm2d))  # traces run forward
        max_abs_diff, differs_at, alike = _compare(expected, actual, rtol=rtol, atol=atol, actual_name=FUSED_MODEL)
        return FusionVerification(
            nodes_before=nodes[0],
            nodes_after=nodes[1],
            batchnorms_left=nodes[2],
            max_abs_diff=max_abs_diff,
            allclose=not differs_at,
            rtol=rtol,
            atol=atol,
            differs_at=differs_at,
            hooked=tuple(repr(name) if name else "the model" for name in hooked_modules(original)),
            both_not_finite=alike,
        )


def _nodes_or_none(model: nn.Module, op_type: type[nn.Module] | None = None) -> int | None:
    """:func:`count_nodes`, or None for a model symbolic_trace cannot trace (one fused in its exported graph)."""
    try:
        return count_nodes(model, op_type)
    except TraceFailedError:
        return None


@dataclass(frozen=True, repr=False)
class FusionTimings(SideBySide):
    """Forward-pass times of the original and the fused variants, measured interleaved.

    A :class:`~labkit.core.timing.SideBySide` against ``"original"``:
    ``speedup("teaching pass")`` above 1 means the fused model is faster.
    """

    baseline: str = "original"
    title: str = N_("Forward pass before and after Conv-BN fusion")

    def table(self) -> Table:
        return replace(super().table(), title=_(self.title))

    def shown_name(self, name: str) -> str:
        return _(name) if name in ("original", "teaching pass") else name

    def note(self, name: str) -> str:
        """SideBySide's notes, plus "no clear change" where a speedup is closer to 1 than its spread.

        Why: fusion saves one pass per BatchNorm, a few percent on a CPU; a run short enough for
        a workshop room must not let a gain inside the noise read as a gain.
        """
        notes = [note] if (note := super().note(name)) else []
        if name != self.baseline and abs(self.speedup(name) - 1.0) < self.spread(name):
            notes.append(_("no clear change (speedup {speedup}x ±{spread})").format(
                speedup=f"{self.speedup(name):.2f}", spread=f"{self.spread(name):.2f}"))
        return ", ".join(notes)


def fusion_timings(
    model: nn.Module, *inputs: Any, kwargs: Mapping[str, Any] | None = None, rounds: int = 10, warmup: int = 2,
    **stray: Any,
) -> FusionTimings:
    """Time ``model(*inputs, **kwargs)``, its teaching-fused and its library-fused versions side by side.

    The original is timed as a :func:`~labkit.core.copies.private_copy`, so its buffers and attributes stay as they
    were, with its own parameters (a forward may write them). The inputs are copied once, before any run, and not
    per run (that would be timed too): a model that changes its input in place changes labkit's copy, never
    ``inputs`` (or ``kwargs``).
    """
    with left_as_found():
        keywords = keyword_inputs("fusion_timings", kwargs, stray, ("kwargs", "rounds", "warmup"))
        refuse_unknown_keywords(model, keywords, inputs)
        variants = {
            N_("original"): private_copy(model, share_parameters=False),
            N_("teaching pass"): fuse_conv_bn_teaching(model),
            "torch.fx fuse": fuse_conv_bn_library(model),
        }
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        args, call_keywords = fresh_call(inputs, keywords)

        def forward_of(module: nn.Module) -> Callable[[], object]:
            return lambda: module(*args, **call_keywords)

        with torch.no_grad():
            stats = compare(
                {name: forward_of(m) for name, m in variants.items()},
                rounds=rounds,
                warmup=warmup,
                device=device,
            )
        return FusionTimings(stats)
