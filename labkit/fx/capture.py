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
no graph. Everything is captured from a :func:`~labkit.core.copies.private_copy`
(hooks and parametrizations included), so the graph's buffers are the copy's, never
the model's. Given the model's own first run (:class:`~labkit.fx.runs.EagerRun`), each
capture is run once and compared with it: a graph that computes something else, or
fails where the model ran, is that capture's failure (:class:`CaptureMismatchError`),
never a silent profile.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import logging
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_flatten, tree_leaves

from labkit.core.copies import fresh_call, fresh_inputs, private_copy
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.random_state import kept_random_state
from labkit.fx.model_inputs import KeywordsIntoVarKeywordError
from labkit.fx.runs import EagerRun
from labkit.fx.tracing import (
    ORIGINAL_TARGET,
    LeafModules,
    TraceFailedError,
    call_arguments,
    code_names,
    describe_failure_site,
    failure_site,
    trace,
)

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


class CaptureMismatchError(TraceFailedError):
    """A traced graph computes something else than the model on the same inputs, or fails where the model ran."""


class ExportMismatchError(ExportFailedError):
    """An exported graph computes something else than the model on the same inputs, or fails where the model ran."""


@dataclass(frozen=True)
class CapturedGraph:
    """A graph ready to time: flat placeholders and outputs, the inputs to call it with, and how it was made."""

    graph_module: torch.fx.GraphModule
    capture: str  # "symbolic_trace" or "export"
    inputs: tuple[Any, ...]  # the graph's positional inputs, in placeholder order
    training: bool  # a module that can run in this graph is in train mode
    reasons: tuple[str, ...] = ()  # why each earlier capture failed
    module_stacks: Mapping[str, ModuleStack] = field(default_factory=dict)  # node name -> its modules
    #: ``model(*call_args, **call_kwargs)`` is the call the graph stands for (an exported graph's inputs are its leaves)
    call_args: tuple[Any, ...] | None = None
    call_kwargs: Mapping[str, Any] = field(default_factory=dict)

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
    eager: EagerRun | None = None,
    graph_args: tuple[Any, ...] | None = None,
) -> CapturedGraph:
    """The graph of ``model(*inputs, **kwargs)`` by ``capture`` (``"auto"``: symbolic_trace, then export).

    With ``eager`` (the model's own first run, :func:`labkit.fx.runs.run_eager_once`), each graph
    is captured from a copy with its own parameters when forward writes them, and is run once and
    compared with the model's output: a mismatch or a failure is a :class:`CaptureMismatchError`
    (symbolic_trace) or :class:`ExportMismatchError` (export), so ``"auto"`` moves on.

    ``concrete_args``, ``leaf_modules`` and ``tracer`` are symbolic_trace's options
    (:func:`labkit.fx.tracing.trace`); torch.export has none of them, so with any of
    them ``"auto"`` does not try it and ``"export"`` refuses them. Raises what
    symbolic_trace raises for ``capture="symbolic_trace"`` (a
    :class:`TraceFailedError`, or a :class:`KeywordsIntoVarKeywordError` for
    keyword inputs a traced graph cannot take), :class:`ExportFailedError` for
    ``capture="export"`` and :class:`CaptureFailedError` with both reasons for
    ``"auto"``.

    ``graph_args`` is the positional call of a traced graph when the caller has bound it already
    (:func:`labkit.fx.tracing.call_arguments` of the same inputs): the inputs are prepared once.
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
            traced = _symbolic_trace(model, inputs, kwargs, concrete_args, leaf_modules, tracer, eager, graph_args)
            return _checked(traced, model, eager)
        except (TraceFailedError, KeywordsIntoVarKeywordError) as exc:
            if capture == "symbolic_trace":
                raise
            failures["symbolic_trace"] = exc
    try:
        if symbolic_options:
            raise ExportFailedError(f"torch.export was not tried: {', '.join(symbolic_options)} are symbolic_trace's options.")
        return _checked(_export(model, inputs, kwargs, tuple(str(error) for error in failures.values()), eager), model, eager)
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
    leaf_modules: LeafModules, tracer: Any, eager: EagerRun | None, graph_args: tuple[Any, ...] | None = None,
) -> CapturedGraph:
    call_args = graph_args if graph_args is not None else call_arguments(model, inputs, concrete_args, kwargs)
    own = _own_copy(model, eager) if isinstance(model, torch.nn.Module) else model
    buffers = _buffer_snapshot(own)
    with kept_random_state():  # tracing runs forward's Python: a random.random() there draws
        graph_module = trace(own, concrete_args, leaf_modules=leaf_modules, tracer=tracer)
    _refuse_lost_buffer_updates(own, buffers)
    nodes = [n for n in graph_module.graph.nodes if n.op not in ("placeholder", "output")]
    training = isinstance(model, torch.nn.Module) and (
        model.training or any(graph_module.get_submodule(n.target).training for n in nodes if n.op == "call_module")
    )  # a layer the graph calls: fx's container stand-ins may say "training" in any mode
    known = frozenset(name for name, _ in own.named_modules()) if isinstance(own, torch.nn.Module) else frozenset()
    stacks = {n.name: _traced_stack(n, known) for n in nodes}
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


def _traced_stack(node: torch.fx.Node, known: frozenset[str] = frozenset()) -> ModuleStack:
    """A traced node's modules: fx's ``nn_module_stack``, or for a torch without it, a call_module node's path."""
    recorded = node.meta.get("nn_module_stack")
    if recorded:
        return _normalized(recorded.values(), known)
    if node.op == "call_module":
        parts = _original_target(node).split(".")
        return tuple((".".join(parts[: i + 1]), "") for i in range(len(parts)))
    return ()


def _original_target(node: torch.fx.Node) -> str:
    """:func:`labkit.fx.tracing.original_target`, read here: it is asked per node."""
    return str(node.meta.get(ORIGINAL_TARGET, node.target))


def _own_copy(model: torch.nn.Module, eager: EagerRun | None) -> torch.nn.Module:
    """The private copy a capture works on: the eager run's where that run (and any capture since) left it as the
    learner's model is, else a new one, with its own parameters when forward writes them in place."""
    unchanged = eager.unchanged_copy() if eager is not None else None
    if unchanged is not None:
        return unchanged
    return private_copy(model, share_parameters=eager is None or eager.share_parameters)


# ------------------------------------------------------------------------------ checked against eager

#: Outputs agree when every element is within this much of the model's, relative to the output's largest value:
#: an exported graph's decomposed operators round differently, a wrong graph differs by far more.
_RELATIVE_TOLERANCE = 1e-3


def _checked(captured: CapturedGraph, model: Any, eager: EagerRun | None) -> CapturedGraph:
    """``captured`` once it computed what the model computed on the same inputs (no check without ``eager``)."""
    if eager is None:
        return captured
    error = CaptureMismatchError if captured.capture == "symbolic_trace" else ExportMismatchError
    kind = "traced" if captured.capture == "symbolic_trace" else "exported"
    try:
        with _quiet(), kept_random_state(), torch.no_grad():  # a failing GraphModule prints fx's traceback to stderr
            got = captured.graph_module(*fresh_inputs(captured.inputs))
    except Exception as exc:  # noqa: BLE001 - any failure of the graph is this capture's failure
        first_line = (str(exc).strip().splitlines() or [""])[0]
        node = failing_node(captured)
        where = f" at node {node.name!r} ({node.op} {_original_target(node)})" if node is not None else ""
        raise error(
            f"The {kind} graph of {_name(model)} fails{where} where the model itself ran: {type(exc).__name__}: "
            f"{first_line}. A captured graph fixes every Python value forward read (a default such as mask=None, a "
            "branch taken); this input needs another path. Pass the argument, fix it with concrete_args, let "
            "capture='auto' try the next capture, or profile module by module (mode='modules')."
        ) from exc
    difference = _difference(eager.output, got)
    if difference is None:
        return captured
    where = _first_differing_module(model, captured, eager)
    raise error(
        f"The {kind} graph of {_name(model)} computes something else than the model on the same inputs: {difference}"
        f"{where}. Something forward does is not in the graph (a hook holding outside state, a Python value read "
        "while capturing, a global). labkit does not time a different model: fix that, or profile module by module "
        "(mode='modules')."
    )


class _NodeFinder(torch.fx.Interpreter):
    """Runs a graph node by node and remembers the node that raised."""

    failed: torch.fx.Node | None = None

    def run_node(self, n: torch.fx.Node) -> Any:
        try:
            return super().run_node(n)
        except Exception:
            self.failed = self.failed or n
            raise


def failing_node(captured: CapturedGraph) -> torch.fx.Node | None:
    """The node at which ``captured``'s graph fails on fresh copies of its inputs (``None`` if it runs)."""
    finder = _NodeFinder(captured.graph_module)
    try:
        with _quiet(), kept_random_state(), torch.no_grad():
            finder.run(*fresh_inputs(captured.inputs))
    except Exception:  # noqa: BLE001 - the failure is what is looked for
        pass
    return finder.failed


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _difference(expected: Any, got: Any) -> str | None:
    """How the graph's output differs from the model's (``None`` if it does not): the first output that differs."""
    want, have = _tensors(expected), _tensors(got)
    if len(want) != len(have):
        return f"the model returns {len(want)} tensors, the graph {len(have)}"
    for index, (a, b) in enumerate(zip(want, have, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {index} is {tuple(a.shape)} {a.dtype} in the model, {tuple(b.shape)} {b.dtype} in the graph"
        if not (a.is_floating_point() or a.is_complex()):
            if not torch.equal(a, b):
                return f"output {index} differs in {int((a != b).sum())} of {a.numel()} elements"
            continue
        a, b = a.detach().double(), b.detach().double().to(a.device)
        scale = float(a.abs().nan_to_num(0, 0, 0).max()) if a.numel() else 0.0
        gap = (a - b).abs().nan_to_num(0.0, float("inf"), float("inf"))
        gap[a.isnan() != b.isnan()] = float("inf")
        if a.numel() and float(gap.max()) > _RELATIVE_TOLERANCE * max(scale, 1.0):
            return f"output {index} differs by up to {float(gap.max()):.3g} (its largest value is {scale:.3g})"
    return None


def _first_differing_module(model: Any, captured: CapturedGraph, eager: EagerRun) -> str:
    """``" (first at node 'linear_1', module 'b', a Linear)"``: the first module whose output in the graph differs
    from its output in an eager run of a fresh copy, with the graph node that computes it; ``""`` when it cannot be
    told (not a module, or a run fails), and a sentence saying so when no module's output differs.

    A module's output in the graph is the last node (in graph order) whose module stack holds it: a traced
    graph's ``call_module`` node, or for an exported graph the last ATen operator that ran inside the module
    (``node.meta["nn_module_stack"]``). Modules called more than once, or returning more than one tensor, are
    not compared (which call a node belongs to is not recorded). A new copy: the eager run's copy may be a run
    further on (a counter, a cache), and it may be the graph's (whose modules the hooks here must not see twice).
    """
    if not isinstance(model, torch.nn.Module):
        return ""
    own = private_copy(model, share_parameters=eager.share_parameters)
    recorded: dict[str, list[Any]] = {}
    handles = [
        module.register_forward_hook(lambda _m, _i, out, name=name: recorded.setdefault(name, []).append(out))
        for name, module in own.named_modules() if name
    ]
    values: dict[str, Any] = {}

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            values[n.name] = result = super().run_node(n)
            return result

    call_args = captured.inputs if captured.call_args is None else captured.call_args
    try:
        with _quiet(), kept_random_state(), torch.no_grad():
            args, keywords = fresh_call(call_args, captured.call_kwargs)
            own(*args, **keywords)
            _Recorder(captured.graph_module).run(*fresh_inputs(captured.inputs))
    except Exception:  # noqa: BLE001 - locating is a courtesy; the mismatch itself is reported anyway
        return ""
    finally:
        for handle in handles:
            handle.remove()
    for path, node in _module_outputs(captured):
        outputs = recorded.get(path, [])
        if len(outputs) == 1 and isinstance(outputs[0], torch.Tensor) and isinstance(values.get(node.name), torch.Tensor):
            if _difference(outputs[0], values[node.name]) is not None:
                return f" (first at node {node.name!r}, module {path!r}, a {type(own.get_submodule(path)).__name__})"
    return " (no module's output differs: the difference is in forward's own code or a hook of the model itself)"


def _module_outputs(captured: CapturedGraph) -> list[tuple[str, torch.fx.Node]]:
    """``(module path, the node computing its output)`` in graph order, an inner module before the one around it."""
    nodes = [n for n in captured.graph_module.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    last: dict[str, tuple[int, torch.fx.Node]] = {}
    for index, node in enumerate(nodes):
        for path, _ in captured.module_stacks.get(node.name, ()):
            last[path] = (index, node)
    order = sorted(last.items(), key=lambda item: (item[1][0], -item[0].count("."), -len(item[0])))
    return [(path, node) for path, (_, node) in order]


# --------------------------------------------------------------------------------------- export


def _export(
    model: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any], reasons: tuple[str, ...], eager: EagerRun | None
) -> CapturedGraph:
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
    own = _own_copy(model, eager)
    args, keywords = tuple(inputs), dict(kwargs)
    try:
        with _quiet(), kept_random_state():
            program = torch.export.export(own, *fresh_call(args, keywords), strict=False)
    except Exception as exc:  # noqa: BLE001 - export raises many types; each is explained by its message
        raise ExportFailedError(_explain_export_failure(exc)) from exc
    flat_inputs, spec = tree_flatten((args, keywords))
    graph_module = _flat(*_unlifted(program), type(model).__name__)
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    if spec != program.call_spec.in_spec or len(placeholders) != len(flat_inputs):
        raise ExportFailedError(
            "torch.export could not capture the model: its graph takes its inputs in another order or number than "
            f"labkit passes them (torch {torch.__version__}).\nPass the inputs by position in forward's order, or "
            "profile module by module (mode='modules')."
        )
    stacks = _exported_stacks(graph_module, frozenset(name for name, _ in own.named_modules()))
    training = model.training or any(module.training for module in own.modules())
    return CapturedGraph(graph_module, "export", tuple(flat_inputs), training, reasons, stacks, args, keywords)


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


def _unlifted(program: Any) -> tuple[torch.fx.GraphModule, dict[str, str]]:
    """``program.module()``, and ``{code name: the model's name}`` of each parameter or buffer renamed for it.

    Why renamed: ``module()`` writes each parameter's qualified name into the code fx compiles, unescaped
    (:func:`labkit.fx.tracing.odd_name`), so a module named ``say "hi"`` or ``class`` made it raise a
    SyntaxError. A copy of the program names those parameters and buffers as fx can write them
    (:func:`labkit.fx.tracing.code_names`); each node's module stack keeps the model's own names, and the
    graph's parameter reads get theirs back in ``node.meta`` (:func:`_flat`). A torch whose program cannot be
    renamed so, or that still cannot compile it, is an :class:`ExportFailedError` saying what to do.
    """
    signature = program.graph_signature
    specs = [*signature.input_specs, *signature.output_specs]
    names = [*(spec.target for spec in specs if isinstance(spec.target, str)), *program.state_dict, *program.constants]
    renamed = code_names(names)
    try:
        if not renamed:
            return program.module(), {}
        odd = copy.copy(program)
        odd._graph_signature = type(signature)(
            [_renamed_spec(spec, renamed) for spec in signature.input_specs],
            [_renamed_spec(spec, renamed) for spec in signature.output_specs],
        )
        odd._state_dict = {renamed.get(name, name): value for name, value in program.state_dict.items()}
        odd._constants = {renamed.get(name, name): value for name, value in program.constants.items()}
        return odd.module(), {new: old for old, new in renamed.items()}
    except Exception as exc:  # noqa: BLE001 - torch's unlifting raises many types; the names are the likely cause
        if not renamed:
            raise ExportFailedError(_explain_export_failure(exc)) from exc
        modules = dict.fromkeys(name.rpartition(".")[0] or name for name in renamed)
        shown = ", ".join(repr(module) for module in list(modules)[:3])
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ExportFailedError(
            f"torch.export could not capture the model: {type(exc).__name__}: {first_line}\ntorch {torch.__version__} "
            f"cannot build a module from the exported graph of a model whose modules have names such as {shown}, "
            "which Python code cannot spell as attributes. Rename those modules (letters, digits and _), or time the "
            "model module by module (mode='modules')."
        ) from exc


def _renamed_spec(spec: Any, renamed: Mapping[str, str]) -> Any:
    target = getattr(spec, "target", None)
    return dataclasses.replace(spec, target=renamed[target]) if isinstance(target, str) and target in renamed else spec


def _flat(exported: torch.fx.GraphModule, original: Mapping[str, str], name: str) -> torch.fx.GraphModule:
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
        elif node.op == "get_attr" and node.target in original:
            node.meta[ORIGINAL_TARGET] = original[str(node.target)]
    graph.set_codegen(torch.fx.graph.CodeGen())
    return torch.fx.GraphModule(exported, graph, name)


def _export_check(node: torch.fx.Node) -> bool:
    """A node torch.export adds to check its inputs: the guards call, or a dtype/device assertion."""
    if node.op == "call_module":
        return node.target == "_guards_fn"
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.name() == "aten::_assert_tensor_metadata"


def _exported_stacks(graph_module: torch.fx.GraphModule, known: frozenset[str] = frozenset()) -> dict[str, ModuleStack]:
    """Each timed node's modules; a parameter's read (hoisted, with no stack of its own) gets its owner's."""
    stacks: dict[str, ModuleStack] = {}
    by_path: dict[str, ModuleStack] = {}
    for node in graph_module.graph.nodes:
        recorded = node.meta.get("nn_module_stack")
        if recorded:
            stack = _normalized(recorded.values(), known)
            stacks[node.name] = stack
            for depth in range(1, len(stack) + 1):
                by_path.setdefault(stack[depth - 1][0], stack[:depth])
    for node in graph_module.graph.nodes:
        if node.op == "get_attr" and node.name not in stacks:
            owner = _original_target(node).rpartition(".")[0]
            while owner and owner not in by_path:
                owner = owner.rpartition(".")[0]
            stacks[node.name] = by_path.get(owner, ())
    return stacks


# "L['self'].encoder.layer[0]" (dynamo's spelling) -> "encoder.layer.0"; non-strict export writes the latter.
_DYNAMO_PATH = re.compile(r"\[['\"]?([^\]'\"]+)['\"]?\]")


def _module_path(path: str, known: frozenset[str] = frozenset()) -> str:
    """A recorded module path as the model names it: one of ``known`` (the model's own paths) as it is, since a
    module may be named ``a[0]`` or ``L__self__``; else dynamo's spelling read as a path."""
    if path in known:
        return path
    path = re.sub(r"^L\['self'\]\.?|^L__self__\.?", "", path)
    return _DYNAMO_PATH.sub(r".\1", path).strip(".")


def _normalized(entries: Any, known: frozenset[str] = frozenset()) -> ModuleStack:
    """``((path, class name), ...)`` from an ``nn_module_stack``'s values, the root (path "") left out."""
    stack: list[tuple[str, str]] = []
    for path, cls in entries:
        name = cls.__name__ if isinstance(cls, type) else str(cls).rpartition(".")[2]
        module_path = _module_path(str(path), known)
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
    "CaptureMismatchError",
    "CapturedGraph",
    "ExportFailedError",
    "ExportMismatchError",
    "ModuleStack",
    "capture_graph",
    "check_capture",
    "failing_node",
]
