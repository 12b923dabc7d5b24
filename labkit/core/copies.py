"""Private copies of what the learner handed labkit: a model's own buffers and attributes, fresh input tensors.

Why in core: profiling (labkit.fx), the format benchmark (labkit.memory_format) and verify_jvp
(labkit.forward_ad) all run the learner's model and must change nothing the learner created:
not a BatchNorm's running statistics, a call counter or a cache filled in ``forward``, not
the caller's input tensors, and the learner's hooks must not run.

- :func:`private_copy` gives a copy of the model that shares its parameters but owns its
  buffers and Python attributes and has none of its hooks;
- :func:`fresh_inputs` (and :func:`fresh_call`, with keyword inputs) clones the input tensors
  for one run, so a model that changes its input in place changes a copy.
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import torch
from torch.utils._pytree import tree_leaves, tree_map

from labkit.core.errors import LabkitError

ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


class UncopyableModelError(LabkitError):
    """The model holds something ``copy.deepcopy`` cannot copy, so labkit cannot profile a private copy of it."""


#: What ``nn.Module.__init__`` puts in every module's ``__dict__``: torch's bookkeeping, not the model's own attributes.
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
#: The hook dictionaries the copy starts without: the learner's hooks are neither run nor copied.
_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
)
#: Locks are shared with the copy, not copied (deepcopy cannot): they guard something outside the model.
_SHARED_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _own_attributes(module: torch.nn.Module) -> Iterator[tuple[str, str, Any]]:
    """``(submodule name, attribute, value)`` for every Python attribute the model's code set (``self.cache = {}``)."""
    for name, sub in module.named_modules(remove_duplicate=False):
        for attribute, value in vars(sub).items():
            if attribute not in _MODULE_INTERNALS:
                yield name, attribute, value


def _copy_memo(module: torch.nn.Module, share_parameters: bool) -> dict[int, Any]:
    """What ``copy.deepcopy`` must not copy as it is: parameters (shared), hooks (left out), locks (shared),
    and tensors computed from parameters in a cache (a detached clone: deepcopy refuses non-leaf tensors)."""
    memo: dict[int, Any] = {id(p): p for p in module.parameters()} if share_parameters else {}
    for sub in module.modules():
        for hooks in _HOOK_DICTS:
            value = getattr(sub, hooks, None)
            if value:
                memo[id(value)] = type(value)()
    for _, _, value in _own_attributes(module):
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
    """A copy of ``module`` that owns its buffers and Python attributes and has none of its hooks.

    Why: profiling must change nothing the learner created. A forward can update
    a buffer (a train-mode BatchNorm's running statistics, even under
    ``no_grad``; a call counter), a Python attribute (``self.n_calls += 1``) or a
    cache (``self.cache[key] = ...``, which tracing would fill with fx Proxies
    that break every later trace); the learner's forward hooks must not run
    either. All of that happens on this copy. Parameters are shared by default
    (no copy of large weights); ``share_parameters=False`` copies them too, for
    a result the learner keeps (a fused model). Raises
    :class:`UncopyableModelError` naming an attribute ``copy.deepcopy`` cannot copy.
    """
    try:
        return copy.deepcopy(module, _copy_memo(module, share_parameters))
    except Exception as exc:  # noqa: BLE001 - deepcopy raises TypeError, RuntimeError, a class's own errors...
        raise UncopyableModelError(_uncopyable_message(module, share_parameters, exc)) from exc


def _clone(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    cloned = value.detach().clone()
    return cloned.requires_grad_() if value.requires_grad else cloned


def fresh_inputs(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """``inputs`` with every tensor (also one in a list or dict) cloned, other values as they are.

    Why: a model that changes its input in place (``x.add_(1)``) would otherwise
    change the caller's tensor once per profiled run, and each run would see a
    different input. Cloning happens before a run's clock starts.
    """
    return tuple(tree_map(_clone, list(inputs)))


def fresh_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """:func:`fresh_inputs` for one call with keyword inputs: the tensors of ``kwargs`` are cloned too."""
    cloned_args, cloned_kwargs = tree_map(_clone, (list(args), dict(kwargs)))
    return tuple(cloned_args), cloned_kwargs
