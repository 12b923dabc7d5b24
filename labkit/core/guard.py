"""What an exercise check leaves as it found it: torch's global settings, and torch's and labkit's own code.

Why: a learner's answer runs inside the checker's process, so it can reach everything the checker
relies on. An answer that calls ``torch.set_num_threads``, patches ``nn.MaxPool2d.forward`` or
leaves a ``TorchFunctionMode`` on would change how the checker measures, and would leave the
learner's later cells running on a changed torch. :func:`guarded_state` takes a snapshot before a
check, puts back whatever the check changed and names it; :func:`labkit.core.checks.run_check`
wraps every check in it and refuses "solved" when torch's or labkit's code was replaced.

A replacement made *before* the check (in an earlier cell) is not undone, since labkit never
changes what it did not create, but it still voids the verdict: the check ran on a changed torch.
Only functions whose code lives outside torch and labkit count there, so torch's own lazy set-up
is never mistaken for a patch.

What is watched: every loaded torch and labkit module and the classes defined in them (the checkers'
references too, ``FlopCounterMode``, ``ShapeProp``), code an answer *adds* to one of them (``torch.Tensor.is_contiguous
= ...`` hides the method ``torch.Tensor`` inherits), TorchFunctionModes and TorchDispatchModes left on, global
module hooks, ``sys.setprofile`` / ``sys.settrace`` and torch's global settings.

What no in-process check can stop: an answer runs with the checker's rights, so code written to forge a verdict
(building a ``CheckResult`` and recording it, rewriting a checker's private state) can. The checkers make that
the only way: nothing less deliberate than editing labkit passes.
"""
from __future__ import annotations

import functools
import site
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_globals
from torch.utils import _python_dispatch

# Namespaces whose functions an answer could replace to fool a checker or a timing.
_NAMESPACES: tuple[Callable[[], object], ...] = (
    lambda: torch,
    lambda: torch.nn.functional,
    lambda: torch.Tensor,
    lambda: torch._C.TensorBase,
    lambda: torch.func,
    lambda: torch.autograd,
    lambda: torch.autograd.Function,
    lambda: torch.autograd.forward_ad,
    lambda: torch.fx,
    lambda: torch.fx.Interpreter,
    lambda: torch.fx.Tracer,
    lambda: torch.nn.init,
    lambda: torch.nn.utils,
    lambda: torch.nn.utils.fusion,
    lambda: torch.overrides,
)

_GLOBAL_HOOK_DICTS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
    "_global_buffer_registration_hooks",
)

Key = tuple[int, str]  # (id of the namespace, attribute name)


def _is_code(value: object) -> bool:
    """Functions, classes and descriptors: what a patch replaces. Caches and constants are left out.

    ``type(value)``, not ``isinstance``: a few of torch's module attributes warn when their ``__class__`` is read."""
    return callable(value) or issubclass(type(value), (staticmethod, classmethod, property))


def _torch_module_classes() -> list[type]:
    """nn.Module and every subclass torch itself defines (nn.Conv2d, nn.MaxPool2d, fx.GraphModule, ...)."""
    found: list[type] = [nn.Module]
    queue: list[type] = [nn.Module]
    while queue:
        subclasses: list[type] = type.__subclasses__(queue.pop())
        for sub in subclasses:
            if sub not in found and sub.__module__.startswith("torch."):
                found.append(sub)
                queue.append(sub)
    return found


def _loaded_namespaces(package: str) -> list[object]:
    """Every loaded module of ``package`` and the classes defined in it: an answer may reach any of them (the checker's
    references too: ``torch.utils.flop_counter.FlopCounterMode``, ``torch.fx.passes.shape_prop.ShapeProp``)."""
    spaces: list[object] = []
    for name, module in list(sys.modules.items()):
        if (name == package or name.startswith(package + ".")) and type(module) is types.ModuleType:
            spaces.append(module)
            # type(), not isinstance(): a few of torch's module attributes warn when their __class__ is read
            spaces.extend(value for value in list(vars(module).values())
                          if issubclass(type(value), type) and vars(value).get("__module__") == name)
    return spaces


def _labkit_namespaces() -> list[object]:
    """Every loaded labkit module and the classes defined in it: an answer may reach the checker itself."""
    return _loaded_namespaces("labkit")


def _core_namespaces() -> list[object]:
    """The namespaces a learner patches by name (``torch``, ``F``, ``torch.Tensor``, ``nn.MaxPool2d``...): there a
    function of torch's own moved to another name counts as a patch too (see :func:`_is_a_patch`)."""
    return [space() for space in _NAMESPACES] + _torch_module_classes()


def _namespaces(with_labkit: bool) -> list[object]:
    torch_spaces = _core_namespaces() + _loaded_namespaces("torch")
    unique = list({id(space): space for space in torch_spaces}.values())
    return unique + _labkit_namespaces() if with_labkit else unique


@dataclass
class _CodeSnapshot:
    """The code objects found in each namespace, by identity."""

    owners: dict[int, object] = field(default_factory=dict)
    values: dict[Key, object] = field(default_factory=dict)
    core: set[int] = field(default_factory=set)  # ids of the core namespaces
    names: dict[int, set[str]] = field(default_factory=dict)  # every name each namespace held, code or not

    @classmethod
    def take(cls, with_labkit: bool = True) -> _CodeSnapshot:
        snapshot = cls(core={id(space) for space in _core_namespaces()})
        for space in _namespaces(with_labkit):
            snapshot.owners[id(space)] = space
            snapshot.names[id(space)] = set(vars(space))
            for name, value in list(vars(space).items()):
                if _is_code(value):
                    snapshot.values[(id(space), name)] = value
        return snapshot

    def current(self, key: Key) -> object:
        return vars(self.owners[key[0]]).get(key[1], _MISSING)

    def known(self) -> set[int]:
        """The ids of the functions found in the core namespaces: one of them found in another slot was moved there."""
        return {id(value) for key, value in self.values.items() if key[0] in self.core}

    def added(self) -> list[tuple[Key, object]]:
        """Code of the learner's set where there was none: ``torch.Tensor.is_contiguous = ...`` puts a new entry in
        ``torch.Tensor`` that hides the method it inherits from ``torch._C.TensorBase``."""
        found = []
        for owner_id, owner in self.owners.items():
            space = vars(owner)
            for name in space.keys() - self.names[owner_id]:
                value = space.get(name)
                if _is_code(value) and _is_learners(value):
                    found.append(((owner_id, name), value))
        return found


_MISSING = object()


def _qualified(owner: object, name: str) -> str:
    """The name a learner wrote: ``torch.nn.MaxPool2d.forward``, not ``torch.nn.modules.pooling.MaxPool2d.forward``."""
    if isinstance(owner, types.ModuleType):
        return f"{owner.__name__}.{name}"
    if owner is torch._C.TensorBase:
        return f"torch.Tensor.{name}"
    cls = owner if isinstance(owner, type) else type(owner)
    if getattr(nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__qualname__}.{name}"
    return f"{cls.__module__}.{cls.__qualname__}.{name}"


@functools.cache
@functools.cache
def library_folders() -> tuple[str, ...]:
    """torch's, labkit's and every installed package's folders: code from there is no learner's.

    Installed packages count because some set code on torch when imported (transformers 5 adds
    ``nn.Module.smart_apply``), and a learner who profiles a Hugging Face model must still be judged.
    """
    import labkit

    folders = [Path(module.__file__).parent for module in (torch, labkit) if module.__file__]
    paths = sysconfig.get_paths()
    folders += [Path(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    folders += [Path(folder) for folder in site.getsitepackages()]
    if site.ENABLE_USER_SITE and site.USER_SITE:
        folders.append(Path(site.USER_SITE))
    return tuple(dict.fromkeys(str(folder.resolve()) for folder in folders))


@functools.lru_cache(maxsize=4096)
def _resolved(filename: str) -> str:
    return str(Path(filename).resolve())


def _code_file(value: object) -> str | None:
    function = value.__func__ if issubclass(type(value), (staticmethod, classmethod)) else value  # type: ignore[attr-defined]
    code = getattr(function, "__code__", None)
    return _resolved(code.co_filename) if code is not None else None


def _is_a_patch(value: object, known: set[int]) -> bool:
    """Whether ``value``, found where another function was, was put there by a learner.

    It was if its code is the learner's, or if it is one of torch's or labkit's own functions moved
    to another name (``F.max_pool2d = F.avg_pool2d``). A new function of torch's own, in a slot where
    it was not before, is torch setting itself up (torch.compile wraps ``nn.Module.__init__`` the
    first time it runs).
    """
    return value is _MISSING or id(value) in known or _is_learners(value)


def _is_learners(value: object) -> bool:
    """Whether ``value`` is a function whose code lives outside torch, labkit and the installed packages."""
    where = _code_file(value)
    return where is not None and not where.startswith(library_folders())


_BASELINE: _CodeSnapshot | None = None


def remember_original_code() -> None:
    """Record torch's functions as first seen (labkit.core.checks calls this on import).

    labkit's own functions are compared only within a check: replacing one in an earlier cell is
    editing the checker, not answering the exercise.
    """
    global _BASELINE
    if _BASELINE is None:
        _BASELINE = _CodeSnapshot.take(with_labkit=False)


@dataclass(frozen=True)
class _Setting:
    """One global setting of torch: how to read it, how to put it back, how to name it."""

    name: str
    read: Callable[[], Any]
    write: Callable[[Any], None]


def _set_default_device(device: torch.device) -> None:
    torch.set_default_device(None if device == torch.device("cpu") else device)


def _set_grad_enabled(enabled: bool) -> None:
    torch.set_grad_enabled(enabled)  # a call, not a with: it sets the mode for good


def _set_detect_anomaly(enabled: bool) -> None:
    torch.autograd.set_detect_anomaly(enabled)


def _set_mkldnn(enabled: bool) -> None:
    setattr(torch.backends.mkldnn, "enabled", enabled)  # noqa: B010 - a module-level flag whose stub types it oddly


def _set_cudnn_benchmark(enabled: bool) -> None:
    torch.backends.cudnn.benchmark = enabled


_SETTINGS = (
    _Setting("sys.setprofile", sys.getprofile, sys.setprofile),  # a profile function can slow every call but the answer's
    _Setting("sys.settrace", sys.gettrace, sys.settrace),
    _Setting("torch.set_num_threads", torch.get_num_threads, torch.set_num_threads),
    _Setting("torch.set_grad_enabled", torch.is_grad_enabled, _set_grad_enabled),
    _Setting("torch.set_default_dtype", torch.get_default_dtype, torch.set_default_dtype),
    _Setting("torch.set_default_device", torch.get_default_device, _set_default_device),
    _Setting(
        "torch.use_deterministic_algorithms", torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms
    ),
    _Setting("torch.autograd.set_detect_anomaly", torch.is_anomaly_enabled, _set_detect_anomaly),
    _Setting("torch.backends.mkldnn.enabled", lambda: torch.backends.mkldnn.enabled, _set_mkldnn),
    _Setting("torch.backends.cudnn.benchmark", lambda: torch.backends.cudnn.benchmark, _set_cudnn_benchmark),
)


@dataclass
class StateReport:
    """What a check found changed: ``restored`` (put back afterwards) and ``replaced_code`` (functions of torch
    or labkit that were not their own during the check, which voids its verdict)."""

    restored: list[str] = field(default_factory=list)
    replaced_code: list[str] = field(default_factory=list)

    @property
    def note(self) -> str:
        """One sentence for the verdict, or an empty string when nothing changed."""
        if not self.restored:
            return ""
        return f"Note: your code changed torch's global state ({'; '.join(self.restored)}); the checker put it back."


def _function_modes() -> list[object]:
    return list(torch.overrides._get_current_function_mode_stack())


def _hook_keys() -> dict[str, set[object]]:
    return {name: set(getattr(_module_globals, name, {})) for name in _GLOBAL_HOOK_DICTS}


def _restore_hooks(before: dict[str, set[object]], report: StateReport) -> None:
    for name, keys in _hook_keys().items():
        added = keys - before[name]
        for key in added:
            getattr(_module_globals, name).pop(key, None)
        if added:
            report.restored.append(f"{len(added)} global module hook(s) removed ({name.strip('_')})")


def _dispatch_modes() -> list[object]:
    return list(_python_dispatch._get_current_dispatch_mode_stack())


def _restore_dispatch_modes(before: list[object], report: StateReport) -> None:
    """Take off the TorchDispatchModes the check entered and never exited (one can slow every kernel but the answer's)."""
    extra = _dispatch_modes()[len(before):]
    for _ in extra:
        _python_dispatch._pop_mode()
    if extra:
        names = ", ".join(type(mode).__name__ for mode in extra)
        report.restored.append(f"a TorchDispatchMode left on ({names}) taken off")


def _restore_modes(before: list[object], report: StateReport) -> None:
    extra = _function_modes()[len(before):]
    for mode in reversed(extra):
        mode.__exit__(None, None, None)  # type: ignore[attr-defined]
    if extra:
        names = ", ".join(type(mode).__name__ for mode in extra)
        report.restored.append(f"a TorchFunctionMode left on ({names}) exited")


def _restore_code(before: _CodeSnapshot, report: StateReport) -> None:
    """Put back every function of torch or labkit the check replaced or deleted, and name it."""
    known = before.known()
    for key, original in before.values.items():
        current = before.current(key)
        if current is not original and _is_a_patch(current, known if key[0] in before.core else set()):
            setattr(before.owners[key[0]], key[1], original)
            report.replaced_code.append(f"{_qualified(before.owners[key[0]], key[1])} (restored)")
    for (owner_id, name), _ in before.added():
        delattr(before.owners[owner_id], name)
        report.replaced_code.append(f"{_qualified(before.owners[owner_id], name)} (removed)")


def _replaced_before(before: _CodeSnapshot) -> list[str]:
    """Functions of torch or labkit replaced before the check by code of the learner's (left as they are)."""
    if _BASELINE is None:
        return []
    known = _BASELINE.known()
    replaced = [
        f"{_qualified(_BASELINE.owners[key[0]], key[1])} (replaced before the check)"
        for key, original in _BASELINE.values.items()
        if key[0] in before.owners
        and before.values.get(key, _MISSING) is not original
        and _is_a_patch(before.values.get(key, _MISSING), known if key[0] in _BASELINE.core else set())
    ]
    return replaced + [f"{_qualified(_BASELINE.owners[key[0]], key[1])} (set before the check)"
                       for key, _ in _BASELINE.added()]


@contextmanager
def guarded_state() -> Iterator[StateReport]:
    """Run a check; afterwards put back what it changed in torch and report it (see the module docstring)."""
    code = _CodeSnapshot.take()
    settings = [(setting, setting.read()) for setting in _SETTINGS]
    modes, dispatch_modes, hooks = _function_modes(), _dispatch_modes(), _hook_keys()
    report = StateReport(replaced_code=_replaced_before(code))
    try:
        yield report
    finally:
        _restore_modes(modes, report)
        _restore_dispatch_modes(dispatch_modes, report)
        for setting, value in settings:
            now = setting.read()
            if now != value:
                setting.write(value)
                report.restored.append(f"{setting.name}: {value!r} -> {now!r}")
        _restore_hooks(hooks, report)
        _restore_code(code, report)
