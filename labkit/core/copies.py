"""Private copies of what the learner handed labkit: a model's own buffers and attributes, fresh inputs.

Why in core: profiling (labkit.fx), the format benchmark (labkit.memory_format) and the forward-AD
helpers (labkit.forward_ad) all run the learner's model and must compute what ``model(*args)``
computes while changing nothing the learner created: not a BatchNorm's running statistics, a call
counter or a cache filled in ``forward``, not a parameter a forward clamps in place, not the caller's
input tensors or a cache object passed in.

- :func:`private_copy` gives a copy of the model that owns its buffers and Python attributes and
  keeps its hooks and parametrizations (they are part of what it computes); parameters are shared
  unless ``share_parameters=False``;
- :func:`parameters_written` tells whether a forward writes a parameter in place (``nn.Embedding(max_norm=...)``,
  a WGAN clamp), without letting the write happen, so the caller can give its copy its own parameters;
- :func:`hooks_reaching_out` names the hooks whose closures hold the learner's objects: a copy shares them;
- :func:`fresh_inputs` (and :func:`fresh_call`, with keyword inputs) clones the input tensors and deep-copies
  any other mutable input object for one run.
"""
from __future__ import annotations

import copy
import enum
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.i18n.messages import _

ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


class HookSideEffectWarning(UserWarning):
    """A hook of the model holds one of the learner's objects: each call of it on labkit's private copy reaches it."""


class UncopyableModelError(LabkitError):
    """The model holds something ``copy.deepcopy`` cannot copy, so labkit cannot profile a private copy of it."""


class LazyModuleNotRunError(LabkitValueError):
    """A lazy module (``nn.LazyLinear``...) has not run yet: its parameters have no shape, so there is nothing to copy."""


#: What a lazy module holds until its first forward.
_UNINITIALIZED = (torch.nn.parameter.UninitializedParameter, torch.nn.parameter.UninitializedBuffer)


def refuse_unrun_lazy_modules(module: torch.nn.Module) -> None:
    """Raise :class:`LazyModuleNotRunError` naming the first lazy module whose parameters or buffers have no shape yet.

    Why: until its first forward, a ``LazyLinear``'s weight is an ``UninitializedParameter``, which every
    tensor operation refuses with a message about "dummy batches"; labkit would raise it from deep inside its
    copy, its state token or its trace. The model's own first run decides the shapes, so the learner runs it once.
    """
    for name, sub in module.named_modules():
        tensors = [*sub.named_parameters(recurse=False), *sub.named_buffers(recurse=False)]
        unrun = [key for key, tensor in tensors if isinstance(tensor, _UNINITIALIZED)]
        if unrun:
            where = f"model.{name}" if name else "the model"
            raise LazyModuleNotRunError(
                _("{where} ({kind}) is a lazy module that has not run yet: its {tensor} has no shape until its first "
                  "forward, so labkit cannot copy, trace or run it. Run it once first (model(x) with an example "
                  "input), then call labkit again.").format(where=where, kind=type(sub).__name__, tensor=unrun[0])
            )


#: What ``nn.Module.__init__`` puts in every module's ``__dict__``: torch's bookkeeping, not the model's own attributes.
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
#: The hook dictionaries of a module whose hooks run in forward (and backward): the copy keeps them.
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
#: Locks are shared with the copy, not copied (deepcopy cannot): they guard something outside the model.
_SHARED_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _own_attributes(module: torch.nn.Module) -> Iterator[tuple[str, str, Any]]:
    """``(submodule name, attribute, value)`` for every Python attribute the model's code set (``self.cache = {}``)."""
    for name, sub in module.named_modules(remove_duplicate=False):
        for attribute, value in vars(sub).items():
            if attribute not in _MODULE_INTERNALS:
                yield name, attribute, value


def _copy_memo(module: torch.nn.Module, share_parameters: bool) -> dict[int, Any]:
    """What ``copy.deepcopy`` must not copy as it is: parameters (shared), locks (shared), and tensors
    computed from parameters in a cache (a detached clone: deepcopy refuses non-leaf tensors)."""
    memo: dict[int, Any] = {id(p): p for p in module.parameters()} if share_parameters else {}
    for *_where, value in _own_attributes(module):
        for leaf in tree_leaves(value):
            if isinstance(leaf, _SHARED_TYPES):
                memo[id(leaf)] = leaf
            elif isinstance(leaf, torch.Tensor) and not leaf.is_leaf and id(leaf) not in memo:
                memo[id(leaf)] = leaf.detach().clone()
    return memo


def _uncopyable_message(module: torch.nn.Module, share_parameters: bool, exc: Exception) -> str:
    """Which attribute ``copy.deepcopy`` fails on, and what to do; found by copying each attribute alone."""
    where = "an attribute of the model"
    for name, attribute, value in _own_attributes(module):
        try:
            copy.deepcopy(value, _copy_memo(module, share_parameters))
        except Exception:  # noqa: BLE001 - any failure names this attribute
            where = f"{'model.' + name if name else 'model'}.{attribute} (a {type(value).__name__})"
            break
    return (
        "labkit works on a private copy of the model, so that profiling or checking it changes none of its "
        f"buffers, attributes or caches, but copy.deepcopy fails on {where}: {type(exc).__name__}: {exc}. Keep that "
        "object outside the model (pass it in, or hold it in a global), or give its class a __deepcopy__ that returns "
        "a fresh one (threading locks are shared with the copy and need neither)."
    )


def private_copy(module: ModuleT, *, share_parameters: bool = True) -> ModuleT:
    """A copy of ``module`` that owns its buffers and Python attributes and keeps its hooks and parametrizations.

    Why: a helper must compute what ``model(*args)`` computes and change nothing
    the learner created. A forward can update a buffer (a train-mode BatchNorm's
    running statistics, even under ``no_grad``; a call counter), a Python
    attribute (``self.n_calls += 1``) or a cache (``self.cache[key] = ...``, which
    tracing would fill with fx Proxies that break every later trace): all of that
    happens on this copy. Hooks (an adapter's forward hook, ``spectral_norm``'s and
    ``prune``'s pre-hooks) and parametrizations are part of the model and are copied
    with it; a hook that closes over the learner's objects still reaches them (see
    :func:`hooks_reaching_out`). Parameters are shared by default (no copy of large
    weights); ``share_parameters=False`` copies them too, for a forward that writes
    them in place (:func:`parameters_written`) or a result the learner keeps (a
    fused model). Raises :class:`UncopyableModelError` naming an attribute
    ``copy.deepcopy`` cannot copy, and :class:`LazyModuleNotRunError` for a lazy module that never ran.
    """
    refuse_unrun_lazy_modules(module)
    try:
        return copy.deepcopy(module, _copy_memo(module, share_parameters))
    except Exception as exc:  # noqa: BLE001 - deepcopy raises TypeError, RuntimeError, a class's own errors...
        raise UncopyableModelError(_uncopyable_message(module, share_parameters, exc)) from exc


class _ParameterWrite(BaseException):
    """Raised inside the dispatcher before an operator writes a watched parameter's memory.

    A ``BaseException``, like ``KeyboardInterrupt``: a model's own ``except Exception`` must not swallow it."""


#: Whether a dispatch mode can run through ``torch.cond`` and the other higher-order operators (torch 2.5 and
#: newer); on older torch a higher-order operator under the watch fails, whatever the model does.
WATCHES_HIGHER_ORDER = hasattr(TorchDispatchMode, "supports_higher_order_operators")
#: What :func:`parameters_written` names when this torch could not watch the run through.
UNWATCHED = "(unknown: this torch cannot watch a forward through torch.cond)"


class _ParameterWatch(TorchDispatchMode):
    """Stops the first operator that would write into a parameter's memory (``aten.clamp_``, ``aten.embedding_renorm_``).

    A higher-order operator (``torch.cond``, ``torch.ops.higher_order.while_loop``...) runs as it is, its
    functions (a cond's branches, a loop's body) each under the watch: the operators inside them are watched too.
    """

    supports_higher_order_operators = True

    def __init__(self, storages: Mapping[int, str]) -> None:
        super().__init__()
        self.storages = storages

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.HigherOrderOperator):  # its kernel refuses a mode, its functions take one
            return func(*tree_map(self._watched, list(args)), **tree_map(self._watched, kwargs))
        if func._schema.is_mutable:
            named = dict(zip((a.name for a in func._schema.arguments), args, strict=False)) | kwargs
            for argument in func._schema.arguments:
                value = named.get(argument.name)
                written = argument.alias_info is not None and argument.alias_info.is_write
                if written and isinstance(value, torch.Tensor) and _storage(value) in self.storages:
                    raise _ParameterWrite(self.storages[_storage(value)])
        return func(*args, **kwargs)

    def _watched(self, value: Any) -> Any:
        """A higher-order operator's function argument made to run under this watch; any other value as it is."""
        if not callable(value) or isinstance(value, torch.Tensor):
            return value

        def watched(*args: Any, **kwargs: Any) -> Any:
            with self:
                return value(*args, **kwargs)

        return watched


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def parameters_written(copy_: torch.nn.Module, run: Callable[[], Any]) -> tuple[str, ...]:
    """Call ``run()`` (a forward of ``copy_``, a copy sharing the learner's parameters); say if it writes one in place.

    Returns ``()`` when the run wrote no parameter, else the name of the first one written, **stopped
    before the write**: the learner's parameter is unchanged, and the caller runs again on a copy with
    its own parameters (``private_copy(model, share_parameters=False)``). Why not compare version
    counters after the run: by then the learner's weights would already have changed.
    """
    storages = {_storage(p): name for name, p in copy_.named_parameters() if p.device.type != "meta" and _storage(p)}
    try:
        with _ParameterWatch(storages):
            run()
    except _ParameterWrite as write:
        return (str(write),)
    except Exception:
        if WATCHES_HIGHER_ORDER:
            raise
        # torch < 2.5: the watch itself may be what failed (a higher-order operator refuses it). Nothing was written
        # (a write is stopped before it happens), so the caller runs the forward again on a copy with its own
        # parameters, where the model's own error, if it is one, shows as itself.
        return (UNWATCHED,)
    return ()


#: Values a hook's closure can hold without reaching anything the learner could see change.
_IMMUTABLE = (int, float, complex, bool, str, bytes, type(None), type, enum.Enum, torch.dtype, torch.device,
              types.FunctionType, types.BuiltinFunctionType, types.MethodType, range, slice, frozenset)


def _reaches_out(value: Any) -> bool:
    if isinstance(value, tuple):
        return any(_reaches_out(item) for item in value)
    return not isinstance(value, _IMMUTABLE)


def hooks_reaching_out(module: torch.nn.Module) -> list[str]:
    """``"model.a's forward hook log_output (closes over outputs, a list)"`` for each hook whose closure holds a
    mutable object: the private copy shares it, so the hook's side effects reach the learner's objects."""
    found = []
    for name, sub in module.named_modules():
        for hooks in _HOOK_DICTS:
            for hook in getattr(sub, hooks, {}).values():
                function = getattr(hook, "__func__", hook)
                closure = getattr(function, "__closure__", None) or ()
                names = getattr(getattr(function, "__code__", None), "co_freevars", ())
                held = [(n, c.cell_contents) for n, c in zip(names, closure, strict=False) if _filled(c)]
                outward = [f"{n}, a {type(v).__name__}" for n, v in held if _reaches_out(v)]
                if outward:
                    kind = hooks.strip("_").replace("_", " ").removesuffix("s")
                    found.append(
                        f"{'model.' + name if name else 'model'}'s {kind} {getattr(function, '__qualname__', hook)!s} "
                        f"(closes over {'; '.join(outward)})"
                    )
    return found


def warn_hooks_reaching_out(module: torch.nn.Module, stacklevel: int = 2) -> None:
    """A :class:`HookSideEffectWarning` naming each hook of :func:`hooks_reaching_out`; nothing when there is none."""
    reaching = hooks_reaching_out(module)
    if reaching:
        warnings.warn(
            f"{'; '.join(reaching)}: labkit runs the model's hooks on its private copy, since they are part of what "
            "the model computes, but this hook holds your object, so each of labkit's calls reaches it. Make the "
            "hook keep its state on the module (self.attribute), or remove it first if it only records.",
            HookSideEffectWarning,
            stacklevel=stacklevel + 1,
        )


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


#: Input values passed as they are: nothing a run could change in them.
_PASSED_AS_IS = (*_IMMUTABLE, torch.Size, torch.memory_format, torch.layout)


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        cloned = value.detach().clone()
        return cloned.requires_grad_() if value.requires_grad else cloned
    if isinstance(value, _PASSED_AS_IS):
        return value
    try:  # a cache object, a config: a forward may change it, so each run gets its own
        return copy.deepcopy(value)
    except Exception as exc:  # noqa: BLE001 - deepcopy raises TypeError, RuntimeError, a class's own errors...
        raise LabkitValueError(
            f"An input is a {type(value).__name__}, which labkit copies for every run so that the model cannot "
            f"change yours, but copy.deepcopy fails on it: {type(exc).__name__}: {exc}. Pass its tensors instead "
            "(as a tensor, a list, a tuple or a dict), or give its class a __deepcopy__."
        ) from exc


def fresh_inputs(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """``inputs`` with every tensor (also one in a list or dict) cloned and every other mutable object deep-copied.

    Why: a model that changes its input in place (``x.add_(1)``, ``cache.append(...)``)
    would otherwise change the caller's tensor or object once per profiled run, and
    each run would see a different input. Numbers, strings, dtypes and functions are
    passed as they are. Copying happens before a run's clock starts.
    """
    return tuple(tree_map(_clone, list(inputs)))


def fresh_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """:func:`fresh_inputs` for one call with keyword inputs: the tensors of ``kwargs`` are cloned too."""
    cloned_args, cloned_kwargs = tree_map(_clone, (list(args), dict(kwargs)))
    return tuple(cloned_args), cloned_kwargs
