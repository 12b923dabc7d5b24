"""Trace a model with ``torch.fx``, and say clearly why when it cannot be traced.

Why a module of its own: tracing is where "profile your own model" meets models
written without FX in mind. fx's own errors name its mechanism (a Proxy, control
flow), not the learner's code, and its options (``concrete_args``, leaf modules,
a custom ``Tracer``) are easy to get wrong. This module keeps all of that in one
place: :func:`trace` with those options, the explanation of a failure by family,
and :func:`traceable_children`, the parts of an untraceable model that do trace,
suggested for node-level detail.
"""
from __future__ import annotations

import copy
import difflib
import functools
import inspect
import keyword
import linecache
import os
import re
import traceback
import unicodedata
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import torch
import torch.fx

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.fx.model_inputs import graph_arguments, refuse_unknown_keywords
from labkit.i18n.messages import N_, _

#: What ``leaf_modules=`` accepts: module classes, class names ("MultiScaleRoIAlign") or
#: qualified submodule names ("backbone.body").
LeafModules = Iterable[Union[str, type[torch.nn.Module]]]


class TraceFailedError(LabkitError):
    """``torch.fx`` symbolic tracing could not trace the model."""


def failure_site(exc: BaseException) -> tuple[str, str]:
    """('Block.forward, line 12 of model.py', 'if x.sum() > 0:') for the innermost frame outside torch.

    For a failed trace, and for a failed torch.export (which runs the model's own Python).

    Why the separator: torch's folder ``.../site-packages/torch`` is also the start of
    ``.../site-packages/torchvision``, and a torchvision model's frames are the ones
    that say where it failed. Frames of labkit.fx are skipped too. ``("", "")`` if
    there is no such frame.
    """
    skipped = (str(Path(torch.__file__).parent) + os.sep, str(Path(__file__).parent) + os.sep)
    where, source = "", ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if code.co_filename.startswith(skipped) or lineno is None:  # no line: code Python made, not the model's
            continue
        owner = frame.f_locals.get("self")
        name = f"{type(owner).__name__}.{code.co_name}" if isinstance(owner, torch.nn.Module) else code.co_name
        where = f"{name}, line {lineno} of {Path(code.co_filename).name}"
        source = linecache.getline(code.co_filename, lineno).strip()
    return where, source


def describe_failure_site(exc: BaseException) -> str:
    """'Block.forward, line 12 of model.py: `if x.sum() > 0:`' for the innermost user frame."""
    where, source = failure_site(exc)
    if not where:
        return "an unknown place (no user frame in the traceback)"
    return where + (f": `{source}`" if source else "")


_LEAF_OR_NO_TRACE = N_(
    "make the offending submodule a leaf (profile_model(..., leaf_modules=['its.name']), or your own "
    "torch.fx.Tracer with tracer=), or time it without a trace: module by module with mode='modules' "
    "(profile_model falls back to it), or per aten operator with torch.profiler."
)
_TRACE_OPTIONS = N_("Options: fix the branch with concrete_args (e.g. profile_model(model, x, concrete_args={{'flag': True}})), "
                    "or {leaf_or_no_trace}")


def could_not_trace(error: str) -> str:
    """The first line of a trace failure, in the learner's language (:func:`could_not_trace_prefix` finds it)."""
    return _("torch.fx could not trace the model: {error}").format(error=error)


def failed_in(site: str) -> str:
    """The line of a trace failure that says where, in the learner's language."""
    return _("It failed in {site}.").format(site=site)


def could_not_trace_prefix() -> str:
    """What :func:`could_not_trace` puts before the error, in the language spoken now (for readers of the message)."""
    return could_not_trace("\0").split("\0")[0]


def failed_in_prefix() -> str:
    """What :func:`failed_in` puts before the site, in the language spoken now."""
    return failed_in("\0").split("\0")[0]


def _explain_trace_failure(exc: BaseException, source: str) -> str:
    """What went wrong, by family of fx failure, and what to do about it.

    Why: fx's own messages name its mechanism (Proxy, control flow), not the
    learner's code. Three families cover most models that do not trace: a
    check of a shape or value (``assert``, ``torch._assert``), a loop over an
    input (a list of tensors, ``*args``), and an ``if`` on a tensor value.
    """
    message = str(exc)
    if source.startswith("assert ") or "_assert(" in source:
        return _(
            "The failing line checks a shape or value (assert / torch._assert). While tracing, inputs are "
            "torch.fx Proxies: their shapes and values are not numbers yet, so a Python assert, len() of a "
            "shape or bool() of a comparison cannot run. Options: write the check as "
            "torch._assert(tensor_condition, message) on tensors only (fx records it as a node), drop it from "
            "the traced forward, or {leaf_or_no_trace}"
        ).format(leaf_or_no_trace=_(_LEAF_OR_NO_TRACE))
    if "cannot be iterated" in message:
        return _(
            "The model loops over (or unpacks) a traced value: a Proxy has no length while tracing. This is "
            "typical of a model that takes a list of tensors, e.g. torchvision's detection models take a list "
            "of images. Options: profile a part that takes one tensor (e.g. profile_model(model.backbone, x)), "
            "or {leaf_or_no_trace}"
        ).format(leaf_or_no_trace=_(_LEAF_OR_NO_TRACE))
    if "control flow" in message:
        return _("Symbolic tracing cannot follow Python control flow that depends on tensor values. ") + _options()
    return _(
        "While tracing, inputs are torch.fx Proxies, not tensors: code that needs a concrete value "
        "(an if, a loop, a Python number) cannot run. "
    ) + _options()


def _options() -> str:
    """The way out of an untraceable branch, in the learner's language."""
    return _(_TRACE_OPTIONS).format(leaf_or_no_trace=_(_LEAF_OR_NO_TRACE))


_TORCH_NN_PREFIXES = ("torch.nn.", "torch.ao.nn.")


def torch_nn_layer(cls: type[torch.nn.Module]) -> type[torch.nn.Module] | None:
    """The torch.nn layer class that ``cls`` (a module class defined outside torch.nn) subclasses, if any.

    Why: libraries subclass torch.nn layers (torchvision's video models use
    ``Conv3DSimple(nn.Conv3d)``); a report should count such a layer with its
    base's type, ``Conv3d``. ``None`` for a class of torch.nn itself, and for one
    whose nearest torch.nn base is ``Module`` or a container (``Sequential``,
    ``ModuleList``, ``ModuleDict``): those are models, not layers.
    """
    if cls.__module__.startswith(_TORCH_NN_PREFIXES):
        return None
    bases = [c for c in cls.__mro__[1:] if issubclass(c, torch.nn.Module) and c.__module__.startswith(_TORCH_NN_PREFIXES)]
    base = bases[0] if bases else None
    if base is None or base is torch.nn.Module or base.forward is torch.nn.Module.forward:
        return None  # ModuleList and ModuleDict keep Module's forward (which raises)
    if issubclass(base, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)):
        return None
    return base


def has_forward_hooks(module: torch.nn.Module) -> bool:
    """Whether ``module`` itself has forward hooks or forward pre-hooks (kwargs variants included)."""
    return bool(module._forward_hooks or module._forward_pre_hooks)


_THROUGH_CALL = "_labkit_call_with_hooks"


def _called_through_hooks(root: torch.nn.Module) -> torch.nn.Module:
    """A shallow copy of ``root`` whose class has a method with ``forward``'s signature that calls it with its hooks.

    fx reads the traced method's parameters through ``__wrapped__`` (forward's) and calls it with
    Proxies; ``Module.__call__`` then runs the root's pre-hooks, forward and hooks, which fx records.
    The copy shares every submodule, parameter, buffer and hook with ``root``; ``root`` is unchanged.
    """
    cls = type(root)

    @functools.wraps(cls.forward)
    def call_with_hooks(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        return torch.nn.Module.__call__(self, *args, **kwargs)  # looked up now: fx patches __call__ while tracing

    hooked = copy.copy(root)
    hooked.__class__ = type(cls.__name__, (cls,), {_THROUGH_CALL: call_with_hooks, "__module__": cls.__module__})
    return hooked


class _Tracer(torch.fx.Tracer):
    """fx's default tracer, plus: a subclass of a torch.nn layer that keeps the layer's ``forward`` is a leaf,
    and so is every module named in ``leaf_modules``.

    Why: fx keeps torch.nn layers as single ``call_module`` nodes, but traces into
    any module defined elsewhere. ``class Conv3DSimple(nn.Conv3d)`` (torchvision)
    then became a ``conv3d`` function plus two ``get_attr`` nodes, so a report
    split one layer type in two. A subclass that overrides ``forward`` runs its
    own code and is still traced into. Leafness changes only how finely the graph
    is timed, never what it computes.
    """

    #: each node keeps the line of forward that made it (``node.stack_trace``): a profile's trace shows it
    record_stack_traces = True

    def __init__(self, leaf_modules: Sequence[str | type[torch.nn.Module]] = ()) -> None:
        super().__init__()
        self.leaf_names = {leaf for leaf in leaf_modules if isinstance(leaf, str)}
        self.leaf_classes = tuple(leaf for leaf in leaf_modules if isinstance(leaf, type))

    def trace(self, root: Any, concrete_args: dict[str, Any] | None = None) -> torch.fx.Graph:
        """fx's trace, except that the root's own forward hooks and pre-hooks are traced too.

        Why: fx traces ``type(root).forward`` directly, so a hook on the model itself (an adapter that
        scales the output) was silently left out of the graph; hooks of submodules run through
        ``Module.__call__`` and are kept by fx already.
        """
        if not (isinstance(root, torch.nn.Module) and has_forward_hooks(root)) or self.is_leaf_module(root, ""):
            return super().trace(root, concrete_args)
        previous, self.traced_func_name = self.traced_func_name, _THROUGH_CALL
        try:
            return super().trace(_called_through_hooks(root), concrete_args)
        finally:
            self.traced_func_name = previous

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        if module_qualified_name in self.leaf_names or type(m).__name__ in self.leaf_names:
            return True
        if isinstance(m, self.leaf_classes):
            return True
        layer = torch_nn_layer(type(m))
        inherits_forward = layer is not None and type(m).forward is layer.forward
        return inherits_forward or super().is_leaf_module(m, module_qualified_name)


def leaf_list(model: Any, leaf_modules: LeafModules) -> list[str | type[torch.nn.Module]]:
    """``leaf_modules`` as a list, each entry checked against ``model``: a typo must not be silently ignored."""
    if isinstance(leaf_modules, (str, type)):
        leaf_modules = [leaf_modules]
    leaves = list(leaf_modules)
    modules = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
    class_names = {type(m).__name__ for m in modules.values()}
    for leaf in leaves:
        if isinstance(leaf, type) and issubclass(leaf, torch.nn.Module):
            continue
        if not isinstance(leaf, str):
            raise LabkitTypeError(
                f"leaf_modules takes module classes, class names or qualified submodule names, got {leaf!r}; "
                "e.g. leaf_modules=['backbone.body'] or leaf_modules=[torchvision.ops.MultiScaleRoIAlign]."
            )
        if leaf not in modules and leaf not in class_names:
            close = difflib.get_close_matches(leaf, [*modules, *class_names], n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else " See dict(model.named_modules())."
            raise LabkitValueError(
                f"leaf_modules names {leaf!r}, which is neither a submodule nor a module class of the model.{hint}"
            )
    return leaves


def _tracer_for(model: Any, leaf_modules: LeafModules, tracer: Any) -> torch.fx.Tracer:
    """The tracer to use: the caller's (an instance or a subclass of ``torch.fx.Tracer``), or labkit's with the leaves."""
    if tracer is None:
        return _Tracer(leaf_list(model, leaf_modules))
    if list(leaf_modules):
        raise LabkitValueError(
            "Pass either tracer= or leaf_modules=, not both: with your own tracer, make those modules leaves "
            "in its is_leaf_module."
        )
    if isinstance(tracer, type) and issubclass(tracer, torch.fx.Tracer):
        return tracer()
    if isinstance(tracer, torch.fx.Tracer):
        return tracer
    raise LabkitTypeError(
        f"tracer must be a torch.fx.Tracer (an instance or a subclass), got {type(tracer).__name__}; "
        "e.g. class MyTracer(torch.fx.Tracer) with is_leaf_module overridden, then tracer=MyTracer()."
    )


def _fx_parameter_name(parameter: inspect.Parameter) -> str:
    """The name fx gives a parameter in ``concrete_args``: ``x``, ``*args`` or ``**kwargs``."""
    if parameter.kind is parameter.VAR_POSITIONAL:
        return "*" + parameter.name
    if parameter.kind is parameter.VAR_KEYWORD:
        return "**" + parameter.name
    return parameter.name


def _check_concrete_arg_names(model: Any, concrete_args: dict[str, Any]) -> None:
    """Refuse a ``concrete_args`` name that is not a parameter of the traced ``forward``: fx would ignore it.

    Why: fx looks up each parameter's name in ``concrete_args`` and never the other
    way round, so a typo (``{"flop": True}``) silently leaves the branch untraceable
    or the graph unspecialized. That holds for a forward taking ``**kwargs`` too: fx
    traces ``**kwargs`` as one Proxy and never puts a ``concrete_args`` entry into
    it, so such a name is refused as well. fx's own spelling for fixing a whole
    ``*args`` or ``**kwargs`` (``"**kwargs"``) is accepted.
    """
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        parameters = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):  # no signature to check against (a builtin): fx decides
        return
    names = [_fx_parameter_name(p) for p in parameters]
    unknown = [name for name in concrete_args if name not in names]
    if unknown:
        variadic = [name for name in names if name.startswith("*")]
        note = (
            f" fx never passes a concrete_args entry into {', '.join(variadic)}, so it would be ignored; "
            "give forward a named parameter for it." if variadic else ""
        )
        raise LabkitValueError(
            f"concrete_args names {', '.join(map(repr, unknown))}, which is not a parameter of forward; its "
            f"parameters are {', '.join(names) or '(none)'}.{note} Name one of those, e.g. concrete_args={{'flip': True}} "
            "for a forward(self, x, flip=False)."
        )


def trace(
    model: Any,
    concrete_args: dict[str, Any] | None = None,
    *,
    leaf_modules: LeafModules = (),
    tracer: torch.fx.Tracer | type[torch.fx.Tracer] | None = None,
) -> torch.fx.GraphModule:
    """Symbolically trace ``model`` (an ``nn.Module`` or a function) into a ``GraphModule``.

    As ``torch.fx.symbolic_trace``, except that a subclass of a torch.nn layer that
    does not override ``forward`` stays one node (see :class:`_Tracer`). Options:

    - ``concrete_args``: values for arguments that steer Python control flow
      (``{"flip": True}``), as in fx; the graph is specialized to them. A name
      that is not a parameter of ``forward`` is refused (fx would ignore it),
      also for a forward taking ``**kwargs``, which fx never fills from it.
    - ``leaf_modules``: modules to keep as single nodes instead of tracing into
      them, by class, class name or qualified name (``["backbone.body"]``).
    - ``tracer``: your own ``torch.fx.Tracer`` (instance or subclass) instead.

    Raises :class:`LabkitTypeError` for something that is not callable, :class:`LabkitValueError` for an
    unknown ``concrete_args`` name, and
    :class:`TraceFailedError` naming the module and line where tracing failed and
    what to do about that kind of failure.
    """
    if isinstance(model, torch.fx.GraphModule) and concrete_args is None and tracer is None and not list(leaf_modules):
        return model
    if not callable(model):
        raise LabkitTypeError(
            f"Expected a torch.nn.Module (or a function) to trace, got {type(model).__name__}. "
            "Pass the model itself, e.g. profile_model(torchvision.models.resnet18(), x)."
        )
    if concrete_args:
        _check_concrete_arg_names(model, concrete_args)
    chosen = _tracer_for(model, leaf_modules, tracer)
    try:
        graph = chosen.trace(model, concrete_args=concrete_args)
    except Exception as exc:  # noqa: BLE001 - fx raises TraceError, TypeError, RuntimeError...
        _site, source = failure_site(exc)
        raise TraceFailedError(
            could_not_trace(f"{type(exc).__name__}: {exc}") + "\n"
            + failed_in(describe_failure_site(exc)) + "\n" + _explain_trace_failure(exc, source)
        ) from exc
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", "function")
    graph_module = graph_module_with_code_names(chosen.root, graph, name)
    _match_stand_ins(graph_module, chosen.root)
    return graph_module


# ------------------------------------------------------------------- names fx cannot write as code

#: ``node.meta`` key of a node whose target labkit renamed for fx's code: the model's own qualified name.
ORIGINAL_TARGET = "labkit_original_target"


def odd_name(segment: str) -> bool:
    """Whether fx's generated code cannot name the attribute ``segment`` (one part of a qualified name).

    Why: fx writes ``self.conv`` for an identifier and ``getattr(self, "it's")`` for anything else, with
    the name pasted between double quotes unescaped; so a name with a double quote, a backslash, a newline or
    a NUL, and a Python keyword (``self.class``), is a SyntaxError when the ``GraphModule`` compiles its
    ``forward``. An identifier that NFKC normalisation changes (``"ﬁ"`` is read as ``fi``) names another
    attribute. Every such name is odd; one with a space, a ``#`` or a leading digit is fine for fx (``getattr``),
    and is odd only if it is one of the above.
    """
    if segment.isidentifier():
        return keyword.iskeyword(segment) or unicodedata.normalize("NFKC", segment) != segment
    return any(char in segment for char in '"\\\n\r\x00') or not segment.isprintable()


def code_names(paths: Iterable[str], reserved: Iterable[str] = ()) -> dict[str, str]:
    """``{qualified name: the name fx's code uses}`` for each of ``paths`` that has an :func:`odd_name` part.

    Each odd part becomes ``_`` and its letters, digits and underscores (``it's`` -> ``_it_s``, ``class`` ->
    ``_class``), numbered where that name is taken among its siblings (``reserved``, the other paths' parts) or
    is an attribute every ``GraphModule`` has (``_code``); so is a top-level name a GraphModule uses itself (a
    module called ``graph`` or ``code``). One part renamed is renamed the same in every path
    under it, so a module and its parameters stay together.
    """
    paths = list(dict.fromkeys(paths))
    taken: dict[str, set[str]] = {}
    for path in [*paths, *reserved]:
        parts = path.split(".")
        for depth, part in enumerate(parts):
            taken.setdefault(".".join(parts[:depth]), set()).add(part)
    renamed: dict[str, str] = {}  # original prefix -> its code name

    def code_name(prefix: str) -> str:
        if prefix in renamed:
            return renamed[prefix]
        parent, _, part = prefix.rpartition(".")
        new_parent = code_name(parent) if parent else ""
        if _renamed_part(parent, part):
            siblings = taken.setdefault(parent, set())
            base = "_" + re.sub(r"[^A-Za-z0-9_]", "_", part)
            new, number = base, 1
            while new in siblings or new in _graph_module_attributes():
                number += 1
                new = f"{base}_{number}"
            siblings.add(new)
        else:
            new = part
        renamed[prefix] = f"{new_parent}.{new}" if new_parent else new
        return renamed[prefix]

    odd = [path for path in paths if any(_renamed_part(".".join(path.split(".")[:depth]), part)
                                         for depth, part in enumerate(path.split(".")))]
    return {path: code_name(path) for path in odd}


def _renamed_part(parent: str, part: str) -> bool:
    """An odd name, or one at the top that a GraphModule uses itself (``graph``, ``code``, ``_code``, ``meta``)."""
    return odd_name(part) or (not parent and part in _graph_module_attributes())


@functools.lru_cache(maxsize=1)
def _graph_module_attributes() -> frozenset[str]:
    """The names every GraphModule has, as class or instance attributes (``forward``, ``_code``, ``graph``)."""
    empty = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    return frozenset({*dir(torch.fx.GraphModule), *vars(empty)})


def original_target(node: torch.fx.Node) -> str:
    """A node's target as the model names it: a renamed module or parameter's own qualified name."""
    return str(node.meta.get(ORIGINAL_TARGET, node.target))


def _place(shim: torch.nn.Module, path: str, root: torch.nn.Module, target: str) -> None:
    """Put ``root``'s attribute ``target`` at ``path`` in ``shim``, under new stand-in modules: nothing of ``root`` changes."""
    owner: Any = root
    *owners, field = target.split(".")
    for part in owners:
        owner = getattr(owner, part)
    value = getattr(owner, field)
    *parents, name = path.split(".")
    place = shim
    for part in parents:
        if not isinstance(getattr(place, part, None), torch.nn.Module):
            place.add_module(part, torch.nn.Module())
        place = getattr(place, part)
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        persistent = field not in getattr(owner, "_non_persistent_buffers_set", ())
        place.register_buffer(name, value, persistent=persistent)
    else:
        setattr(place, name, value)


def graph_module_with_code_names(root: torch.nn.Module, graph: torch.fx.Graph, name: str) -> torch.fx.GraphModule:
    """``torch.fx.GraphModule(root, graph, name)``, for a model whose module or parameter names fx cannot write.

    Why: fx pastes each module's name into the code it compiles (see :func:`odd_name`), so
    ``model.add_module('say "hi"', ...)`` made ``GraphModule`` raise a SyntaxError. Here each odd name gets a
    name fx can write (:func:`code_names`) in the graph module only: the node keeps the model's own in
    ``node.meta[ORIGINAL_TARGET]`` (:func:`original_target`; a profile reports that one), its recorded module
    stack is the model's, and the model is not changed. A node named ``self`` (a module called ``self``) is
    renamed too: fx's ``forward`` takes ``self`` and would lose it. Otherwise, exactly fx's GraphModule.
    """
    for node in graph.nodes:
        if node.name == "self" and hasattr(node, "_rename"):  # torch without it: the graph fails its check, export is next
            node._rename("self_")
    targets = [str(node.target) for node in graph.nodes if node.op in ("call_module", "get_attr")]
    renamed = code_names(targets)
    if not renamed:
        return torch.fx.GraphModule(root, graph, name)
    shim = torch.nn.Module()  # the model's attributes under their code names: what fx copies into the graph module
    placed: set[str] = set()
    for target in sorted(dict.fromkeys(targets), key=lambda path: path.count(".")):
        parts = target.split(".")
        if not any(".".join(parts[:depth]) in placed for depth in range(1, len(parts))):  # not inside one placed
            _place(shim, renamed.get(target, target), root, target)
            placed.add(target)
    for node in graph.nodes:
        if node.op in ("call_module", "get_attr") and str(node.target) in renamed:
            node.meta[ORIGINAL_TARGET] = str(node.target)
            node.target = renamed[str(node.target)]
    shim.training = root.training
    return torch.fx.GraphModule(shim, graph, name)


def _match_stand_ins(graph_module: torch.fx.GraphModule, root: torch.nn.Module) -> None:
    """Give fx's stand-in containers the traced model's mode.

    Why: a ``GraphModule`` keeps a submodule path such as ``layer1.0.conv1`` by
    creating a plain ``nn.Module`` for ``layer1`` and ``layer1.0``, in train mode
    whatever the model's mode, so an eval-mode trace looked half in training
    (fusion refused it). Only those stand-ins change: a module of the model
    itself is shared with the trace and is never touched.
    """
    own = {id(module) for module in root.modules()}
    for module in graph_module.modules():
        if id(module) not in own:
            module.training = root.training


def count_timed_nodes(graph_module: torch.fx.GraphModule) -> int:
    """The nodes a profile times: every node but the inputs (placeholders) and the output."""
    return sum(1 for node in graph_module.graph.nodes if node.op not in ("placeholder", "output"))


#: How many submodules :func:`traceable_children` tries at most (tracing is symbolic and quick, but a model can be huge).
MAX_TRACE_ATTEMPTS = 200


def traceable_children(model: torch.nn.Module, limit: int = 5) -> tuple[tuple[str, int], ...]:
    """The largest submodules of ``model`` that fx can trace: ``(qualified name, timed nodes)``, largest first.

    Why: when the whole model does not trace, a part usually does (a detection
    model's ``backbone``); profiling that part gives node-level detail. The search
    goes top-down: a child that traces is a candidate and is not searched further,
    one that does not is searched through its own children. A single layer
    (no children) is not suggested: it would be one node.
    """
    found: list[tuple[str, int]] = []
    queue = list(model.named_children())
    for _attempt in range(MAX_TRACE_ATTEMPTS):
        if not queue:
            break
        name, child = queue.pop(0)
        if not any(True for _ in child.children()):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found.append((name, count_timed_nodes(trace(child))))
        except LabkitError:
            queue.extend((f"{name}.{sub}", grandchild) for sub, grandchild in child.named_children())
    return tuple(sorted(found, key=lambda item: -item[1])[:limit])


def call_arguments(
    model: Any, inputs: Sequence[Any], concrete_args: dict[str, Any] | None, kwargs: Mapping[str, Any] | None = None
) -> tuple[Any, ...]:
    """The positional arguments for one forward: ``inputs`` and ``kwargs`` for the free parameters, ``concrete_args``
    for the rest.

    Why: fx keeps a specialized argument as a parameter of the traced
    ``forward``, renamed (``flip_1``) and guarded by an assert that it gets the
    traced value; its default stays the original one. So both the eager model and
    the traced graph are called with every parameter by position, in ``forward``'s
    order: ``profile_model(model, x, concrete_args={"flip": True})`` then calls
    ``model(x, True)`` and ``traced(x, True)``. Keyword inputs are put at their
    parameter's place the same way (see :func:`labkit.fx.model_inputs.graph_arguments`).
    """
    kwargs = kwargs or {}
    if not concrete_args:
        return graph_arguments(model, inputs, kwargs)
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    parameters = list(inspect.signature(forward).parameters.values())
    variadic = [p.name for p in parameters if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY)]
    if variadic:
        raise LabkitValueError(
            f"concrete_args needs a forward with plain named parameters, but it has {', '.join(variadic)}. "
            "Wrap the model in a module whose forward names each argument."
        )
    unknown = sorted(set(concrete_args) - {p.name for p in parameters})
    if unknown:
        raise LabkitValueError(
            f"concrete_args names {', '.join(unknown)}, which forward does not take; its parameters are "
            f"{', '.join(p.name for p in parameters)}."
        )
    refuse_unknown_keywords(model, kwargs)
    both = sorted(set(concrete_args) & set(kwargs))
    if both:
        raise LabkitValueError(
            f"{', '.join(map(repr, both))} is in both concrete_args and kwargs; give it in one of them: "
            "concrete_args fixes it in the graph, kwargs passes it as an input."
        )
    free = iter(inputs)
    arguments = []
    for parameter in parameters:
        if parameter.name in concrete_args:
            arguments.append(concrete_args[parameter.name])
            continue
        if parameter.name in kwargs:
            arguments.append(kwargs[parameter.name])
            continue
        value = next(free, parameter.default)
        if value is inspect.Parameter.empty:
            raise LabkitValueError(f"No input for forward's parameter {parameter.name!r}: pass it after the others.")
        arguments.append(value)
    extra = list(free)
    if extra:
        raise LabkitValueError(
            f"{len(extra)} input(s) too many: forward takes {len(parameters)} parameters, "
            f"{len(concrete_args)} of them fixed by concrete_args."
        )
    return tuple(arguments)


__all__ = [
    "MAX_TRACE_ATTEMPTS",
    "LeafModules",
    "TraceFailedError",
    "call_arguments",
    "count_timed_nodes",
    "describe_failure_site",
    "failure_site",
    "leaf_list",
    "torch_nn_layer",
    "trace",
    "traceable_children",
]
