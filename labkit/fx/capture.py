"""Capture a model's graph for profiling: ``symbolic_trace`` first, then ``torch.export``.

Why a module of its own: a profile times the nodes of a graph, and there are two
ways to get one. This is the first step of the pipeline *capture* (here) ->
*time* (:mod:`labkit.fx.profile`) -> *report* (:mod:`labkit.fx.report`):

- ``"symbolic_trace"`` (:func:`labkit.fx.tracing.trace`): nodes are the model's
  modules and functions (``layer1.0.conv1``, ``add``). It fails on code that
  needs a concrete value (an ``if`` on a tensor, a loop over a list of inputs,
  most Hugging Face models), and it cannot take keyword inputs that only
  ``forward``'s ``**kwargs`` collects.
- ``"export"`` (``torch.export.export(private_copy(model), args, kwargs,
  strict=False)``): nodes are ATen operators (``aten.linear``), each carrying the
  stack of modules it ran in (``node.meta["nn_module_stack"]``). It runs the
  model's Python with fake tensors, so lists, keyword inputs and ``**kwargs``
  are fine; it fails where the Python reads a tensor's *value*, and on output
  types it cannot flatten (a Hugging Face cache: ``use_cache=False``).

:func:`capture_graph` tries them in that order (``capture="auto"``) or only the
one asked for, and returns a :class:`CapturedGraph`: a flat ``GraphModule``
(positional placeholders, a flat tuple out) that every timing mode runs the same
way, which capture made it, and why the earlier one failed. When none works it
raises :class:`CaptureFailedError` with every reason; profiling then falls back
to forward hooks (``mode="modules"``, :mod:`labkit.fx.module_hooks`), which need
no graph. Everything is captured from a :func:`~labkit.core.copies.private_copy`,
so the graph's buffers are the copy's, never the model's.
"""
from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from labkit.core.copies import private_copy
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.fx.model_inputs import KeywordsIntoVarKeywordError
from labkit.fx.runs import model_device, preserved_rng
from labkit.fx.tracing import LeafModules, TraceFailedError, call_arguments, describe_failure_site, failure_site, trace

#: What ``capture=`` accepts: ``"auto"`` tries symbolic_trace, then export.
CAPTURES = ("auto", "symbolic_trace", "export")
#: The oldest torch whose ``torch.export`` labkit captures with: labkit's tested floor (``make test-torch-floor``).
#: Releases differ in how far export decomposes an op (2.4 gives a BatchNorm as
#: ``aten._native_batch_norm_legit_no_training``, later ones as ``aten.batch_norm``), so op types can too.
EXPORT_MIN_TORCH = "2.4"
#: ``(module path, class name)`` of each module a node ran in, outermost first, the model itself left out.
ModuleStack = tuple[tuple[str, str], ...]


class CaptureFailedError(TraceFailedError):
    """No graph capture labkit tried worked; ``failures`` holds each one's error, by capture, in the order tried."""

    def __init__(self, message: str, failures: Mapping[str, LabkitError] | None = None) -> None:
        super().__init__(message)
        self.failures: dict[str, LabkitError] = dict(failures) if failures is not None else {"export": self}

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(str(error) for error in self.failures.values())


class ExportFailedError(CaptureFailedError):
    """``torch.export`` could not capture the model, was not tried (symbolic_trace's options), or needs a newer torch."""


@dataclass(frozen=True)
class CapturedGraph:
    """A graph ready to time: flat placeholders and outputs, the inputs to call it with, and how it was made."""

    graph_module: torch.fx.GraphModule
    capture: str  # "symbolic_trace" or "export"
    inputs: tuple[Any, ...]  # the graph's positional inputs, in placeholder order
    training: bool  # a module that can run in this graph is in train mode
    reasons: tuple[str, ...] = ()  # why each earlier capture failed
    module_stacks: Mapping[str, ModuleStack] = field(default_factory=dict)  # node name -> its modules

    @property
    def fallback_reason(self) -> str:
        """Why the earlier captures failed, one message after another ("" if the first one worked)."""
        return "\n".join(self.reasons)


def check_capture(capture: Any) -> str:
    if capture not in CAPTURES:
        raise LabkitValueError(
            f"capture must be one of {CAPTURES} (got {capture!r}): 'auto' tries symbolic_trace, then torch.export."
        )
    return str(capture)


def capture_graph(
    model: Any,
    inputs: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    capture: str = "auto",
    concrete_args: dict[str, Any] | None = None,
    leaf_modules: LeafModules = (),
    tracer: Any = None,
) -> CapturedGraph:
    """The graph of ``model(*inputs, **kwargs)`` by ``capture`` (``"auto"``: symbolic_trace, then export).

    ``concrete_args``, ``leaf_modules`` and ``tracer`` are symbolic_trace's options
    (:func:`labkit.fx.tracing.trace`); torch.export has none of them, so with any of
    them ``"auto"`` does not try it and ``"export"`` refuses them. Raises what
    symbolic_trace raises for ``capture="symbolic_trace"`` (a
    :class:`TraceFailedError`, or a :class:`KeywordsIntoVarKeywordError` for
    keyword inputs a traced graph cannot take), :class:`ExportFailedError` for
    ``capture="export"`` and :class:`CaptureFailedError` with both reasons for
    ``"auto"``.
    """
    check_capture(capture)
    symbolic_options = [name for name, value in
                        (("concrete_args", concrete_args), ("leaf_modules", list(leaf_modules)), ("tracer", tracer)) if value]
    if capture == "export" and symbolic_options:
        raise LabkitValueError(
            f"{', '.join(symbolic_options)} are options of symbolic_trace, which torch.export does not have: drop them "
            "for capture='export', or use capture='symbolic_trace'."
        )
    failures: dict[str, LabkitError] = {}
    if capture != "export":
        try:
            return _symbolic_trace(model, inputs, kwargs, concrete_args, leaf_modules, tracer)
        except (TraceFailedError, KeywordsIntoVarKeywordError) as exc:
            if capture == "symbolic_trace":
                raise
            failures["symbolic_trace"] = exc
    try:
        if symbolic_options:
            raise ExportFailedError(f"torch.export was not tried: {', '.join(symbolic_options)} are symbolic_trace's options.")
        return _export(model, inputs, kwargs, tuple(str(error) for error in failures.values()))
    except ExportFailedError as exc:
        if capture == "export":
            raise
        failures["export"] = exc
        reasons = "\n".join(str(error) for error in failures.values())
        headline = f"Neither symbolic_trace nor torch.export captured {_name(model)}."
        raise CaptureFailedError(f"{headline}\n{reasons}", failures) from exc


def _name(model: Any) -> str:
    return type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", "the function")


# ------------------------------------------------------------------------------- symbolic_trace


def _symbolic_trace(
    model: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any], concrete_args: dict[str, Any] | None,
    leaf_modules: LeafModules, tracer: Any,
) -> CapturedGraph:
    call_args = call_arguments(model, inputs, concrete_args, kwargs)
    own = private_copy(model) if isinstance(model, torch.nn.Module) else model
    buffers = _buffer_snapshot(own)
    graph_module = trace(own, concrete_args, leaf_modules=leaf_modules, tracer=tracer)
    _refuse_lost_buffer_updates(own, buffers)
    nodes = [n for n in graph_module.graph.nodes if n.op not in ("placeholder", "output")]
    training = isinstance(model, torch.nn.Module) and (
        model.training or any(graph_module.get_submodule(n.target).training for n in nodes if n.op == "call_module")
    )  # a layer the graph calls: fx's container stand-ins may say "training" in any mode
    stacks = {n.name: _traced_stack(n) for n in nodes}
    return CapturedGraph(graph_module, "symbolic_trace", call_args, training, (), stacks)


class BufferUpdatesLostError(TraceFailedError):
    """forward updates buffers in a way symbolic_trace runs once, while tracing, instead of recording it."""


def _buffer_snapshot(model: Any) -> dict[str, tuple[int, torch.Tensor]]:
    if not isinstance(model, torch.nn.Module):
        return {}
    return {name: (id(buffer), buffer.detach().clone()) for name, buffer in model.named_buffers()}


def _refuse_lost_buffer_updates(model: Any, before: dict[str, tuple[int, torch.Tensor]]) -> None:
    """Raise :class:`BufferUpdatesLostError` when tracing changed or replaced a buffer of the (private) model.

    Why: symbolic_trace runs ``self.calls += 1`` on the real buffer while tracing and
    records nothing, and bakes ``self.running = 0.9 * self.running + ...`` into a
    constant. The graph then computes something else than the model on every later
    run, silently. torch.export records buffer updates, so ``capture="auto"`` moves on
    to it.
    """
    now = dict(model.named_buffers()) if isinstance(model, torch.nn.Module) else {}
    lost = [
        name for name, (identity, value) in before.items()
        if name not in now or id(now[name]) != identity or not torch.equal(now[name].detach(), value)
    ]
    if lost:
        raise BufferUpdatesLostError(
            f"symbolic_trace cannot record how {_name(model)}.forward updates its buffers ({', '.join(lost)}): it ran "
            "those updates once, while tracing, so a traced graph would compute with stale buffers on every run. "
            "torch.export records buffer updates: use capture='export' (capture='auto' tries it next), or profile "
            "module by module (mode='modules')."
        )


def _traced_stack(node: torch.fx.Node) -> ModuleStack:
    """A traced node's modules: fx's ``nn_module_stack``, or for a torch without it, a call_module node's path."""
    recorded = node.meta.get("nn_module_stack")
    if recorded:
        return _normalized(recorded.values())
    if node.op == "call_module":
        parts = str(node.target).split(".")
        return tuple((".".join(parts[: i + 1]), "") for i in range(len(parts)))
    return ()


# --------------------------------------------------------------------------------------- export


def _export(model: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any], reasons: tuple[str, ...]) -> CapturedGraph:
    if not isinstance(model, torch.nn.Module):
        raise ExportFailedError(
            f"torch.export captures a torch.nn.Module, and {_name(model)} is a {type(model).__name__}: wrap it in a "
            "module whose forward calls it."
        )
    if torch.__version__ < EXPORT_MIN_TORCH:  # TorchVersion compares as a version
        raise ExportFailedError(
            f"torch.export capture needs torch {EXPORT_MIN_TORCH} or newer, and this is torch {torch.__version__}: "
            "upgrade torch for graph profiles of models symbolic_trace cannot trace, or profile module by module "
            "(mode='modules')."
        )
    own = private_copy(model)
    args, keywords = tuple(inputs), dict(kwargs)
    try:
        with _quiet(), preserved_rng(model_device(own) or torch.device("cpu")):
            program = torch.export.export(own, args, keywords, strict=False)
    except Exception as exc:  # noqa: BLE001 - export raises many types; each is explained by its message
        raise ExportFailedError(_explain_export_failure(exc)) from exc
    flat_inputs, spec = tree_flatten((args, keywords))
    graph_module = _flat(program.module(), type(model).__name__)
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    if spec != program.call_spec.in_spec or len(placeholders) != len(flat_inputs):
        raise ExportFailedError(
            "torch.export could not capture the model: its graph takes its inputs in another order or number than "
            f"labkit passes them (torch {torch.__version__}).\nPass the inputs by position in forward's order, or "
            "profile module by module (mode='modules')."
        )
    stacks = _exported_stacks(graph_module)
    training = model.training or any(module.training for module in own.modules())
    return CapturedGraph(graph_module, "export", tuple(flat_inputs), training, reasons, stacks)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No output from a capture attempt: a failed export prints its partial graph to stderr and logs warnings.

    Why: a failure is explained by the labkit error (and, with a fallback, its
    warning); torch's own dump would be a page of stderr in a notebook cell.
    """
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _flat(exported: torch.fx.GraphModule, name: str) -> torch.fx.GraphModule:
    """``ExportedProgram.module()`` as a plain ``GraphModule``: flat inputs in, a flat tuple out, no hooks.

    Why: the exported module flattens its inputs with pytree code and checks them in
    a forward pre-hook, its graph starts with a ``_guards_fn`` call that checks them
    again, and before each ``aten.to`` it asserts the tensor's dtype and device
    (``aten._assert_tensor_metadata``, a tenth of a small Llama's time); none of
    that is the model's work, and none of it is left. With fx's plain code
    generation its placeholders are the pytree leaves of ``(args, kwargs)``, in
    that order, and labkit's instrumented graph and interpreter time it as any
    traced graph. Its parameters and buffers are those of the exported private copy.
    """
    graph = exported.graph
    for node in list(graph.nodes):
        if not node.users and _export_check(node):
            graph.erase_node(node)
    graph.set_codegen(torch.fx.graph.CodeGen())
    return torch.fx.GraphModule(exported, graph, name)


def _export_check(node: torch.fx.Node) -> bool:
    """A node torch.export adds to check its inputs: the guards call, or a dtype/device assertion."""
    if node.op == "call_module":
        return node.target == "_guards_fn"
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.name() == "aten::_assert_tensor_metadata"


def _exported_stacks(graph_module: torch.fx.GraphModule) -> dict[str, ModuleStack]:
    """Each timed node's modules; a parameter's read (hoisted, with no stack of its own) gets its owner's."""
    stacks: dict[str, ModuleStack] = {}
    by_path: dict[str, ModuleStack] = {}
    for node in graph_module.graph.nodes:
        recorded = node.meta.get("nn_module_stack")
        if recorded:
            stack = _normalized(recorded.values())
            stacks[node.name] = stack
            for depth in range(1, len(stack) + 1):
                by_path.setdefault(stack[depth - 1][0], stack[:depth])
    for node in graph_module.graph.nodes:
        if node.op == "get_attr" and node.name not in stacks:
            owner = str(node.target).rpartition(".")[0]
            while owner and owner not in by_path:
                owner = owner.rpartition(".")[0]
            stacks[node.name] = by_path.get(owner, ())
    return stacks


# "L['self'].encoder.layer[0]" (dynamo's spelling) -> "encoder.layer.0"; non-strict export writes the latter.
_DYNAMO_PATH = re.compile(r"\[['\"]?([^\]'\"]+)['\"]?\]")


def _module_path(path: str) -> str:
    path = re.sub(r"^L\['self'\]\.?|^L__self__\.?", "", path)
    return _DYNAMO_PATH.sub(r".\1", path).strip(".")


def _normalized(entries: Any) -> ModuleStack:
    """``((path, class name), ...)`` from an ``nn_module_stack``'s values, the root (path "") left out."""
    stack: list[tuple[str, str]] = []
    for path, cls in entries:
        name = cls.__name__ if isinstance(cls, type) else str(cls).rpartition(".")[2]
        module_path = _module_path(str(path))
        if module_path and (not stack or stack[-1] != (module_path, name)):
            stack.append((module_path, name))
    return tuple(stack)


# ------------------------------------------------------------------------------ export failures

_UNKNOWN_TYPE = re.compile(r"Found <class '([\w.]+)'> in (output|input)")


def _explain_export_failure(exc: BaseException) -> str:
    """What torch.export could not do, and what to do about it, by family of failure."""
    message = str(exc)
    first_line = (message.strip().splitlines() or [""])[0]
    head = f"torch.export could not capture the model: {type(exc).__name__}: {first_line}"
    unknown = _UNKNOWN_TYPE.search(message)
    if unknown:
        qualified, side = unknown[1], unknown[2]
        short = qualified.rpartition(".")[2]
        if side == "output" and "cache" in qualified.lower():
            return (
                f"{head}\nThe model returns a {short} (its key/value cache), a type torch.export cannot flatten. Pass "
                "use_cache=False in kwargs, e.g. profile_model(model, kwargs={'input_ids': ids, 'use_cache': False}): "
                "one forward pass needs no cache."
            )
        return (
            f"{head}\ntorch.export cannot flatten a {short} in the model's {side}. Register the type with "
            "torch.utils._pytree.register_pytree_node (a dataclass: torch.export.register_dataclass) before "
            "profiling, or make the model take and return tensors, tuples, lists and dicts."
        )
    where = f" in {describe_failure_site(exc)}" if failure_site(exc)[0] else ""
    if "data-dependent" in message or "GuardOnDataDependent" in type(exc).__name__:
        return (
            f"{head}\nThe model's Python reads a tensor's value (an if on it, .item(), a size that depends on values)"
            f"{where}. torch.export records shapes, not values, so it cannot follow that either. Options: profile "
            "a part of the model that does not (e.g. its backbone), rewrite the branch with torch.cond, or time it "
            "module by module (mode='modules')."
        )
    if "FunctionalTensor on its own" in message:
        return (
            f"{head}\nThis torch's torch.export (torch {torch.__version__}) loses track of tensors inside torch.vmap, "
            f"which forward calls{where}; newer torch releases capture it. transformers 4.53 and later build their "
            "attention masks with torch.vmap on a torch older than 2.6. Upgrade torch (pip install -U torch), or on "
            "this torch install a transformers that builds its masks without vmap (pip install "
            "'transformers>=4.45,<4.46'), or time it module by module (mode='modules')."
        )
    return (
        f"{head}\nIt failed{where or ' in torch'}. Profile a part of the model that exports, or time it module by "
        "module (mode='modules')."
    )


__all__ = [
    "CAPTURES",
    "EXPORT_MIN_TORCH",
    "BufferUpdatesLostError",
    "CaptureFailedError",
    "CapturedGraph",
    "ExportFailedError",
    "ModuleStack",
    "capture_graph",
    "check_capture",
]
