"""Profile a model without tracing it: forward hooks time every call of a leaf module.

Why: ``torch.fx`` cannot trace every model (a detection model loops over a
list of images; RAFT iterates on tensor values). Forward hooks need no trace:
torch calls ``register_forward_pre_hook`` / ``register_forward_hook`` functions
around each module's ``forward`` whatever Python code calls it. The granularity
is coarser than a graph: one row per call of a *leaf* module (a module without
children, or a subclass of a torch.nn layer, or one you name in
``leaf_modules``), plus one row, "(outside leaf modules)", for the time spent in
the model's own Python and functional code between them. A module called twice
gets two rows (``relu`` and ``relu#2``).

The hooks go on a private copy of the model (:func:`~labkit.fx.runs.private_copy`), which
starts without the learner's own hooks: the learner's model never carries labkit's hooks, not
even after an error, and the learner's hooks never run while profiling.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import torch

from labkit.core.device import synchronize
from labkit.core.errors import LabkitTypeError
from labkit.fx.model_inputs import keyword_inputs, refuse_unknown_keywords
from labkit.fx.runs import Profiler, check_input_devices, private_copy
from labkit.fx.tracing import LeafModules, leaf_list, torch_nn_layer

#: The row for time spent between leaf modules (the model's own Python and functional calls).
OUTSIDE = "(outside leaf modules)"
#: The name of the only leaf when the model itself has no children.
WHOLE_MODEL = "(whole model)"


def hooked_leaves(model: torch.nn.Module, leaf_modules: LeafModules = ()) -> list[tuple[str, torch.nn.Module]]:
    """``(qualified name, module)`` of the modules to time, in definition order; none inside another.

    The model itself is timed as a whole only if it has no children.
    A leaf is a module without children, a subclass of a torch.nn layer that keeps
    its ``forward`` (torchvision's ``Conv2dNormActivation`` is a Sequential, so its
    parts are timed; ``FrozenBatchNorm2d`` is a leaf), or one named in ``leaf_modules``.
    """
    leaves = leaf_list(model, leaf_modules)
    names = {leaf for leaf in leaves if isinstance(leaf, str)}
    classes = tuple(leaf for leaf in leaves if isinstance(leaf, type))

    def is_leaf(name: str, module: torch.nn.Module) -> bool:
        if name in names or type(module).__name__ in names or isinstance(module, classes):
            return True
        layer = torch_nn_layer(type(module))
        return not any(True for _ in module.children()) or (layer is not None and type(module).forward is layer.forward)

    found: list[tuple[str, torch.nn.Module]] = []

    def visit(prefix: str, module: torch.nn.Module) -> None:
        is_root = prefix == ""
        if (is_root and not any(True for _ in module.children())) or (not is_root and is_leaf(prefix, module)):
            found.append((prefix or WHOLE_MODEL, module))
            return
        for child_name, child in module.named_children():
            visit(f"{prefix}.{child_name}" if prefix else child_name, child)

    visit("", model)
    return found


_OPTIONS = ("kwargs", "leaf_modules", "fallback_reason", "traceable_children")


class ModuleProfiler(Profiler):
    """Times every call of every leaf module with forward hooks (``mode="modules"``); same report as the graph modes.

    Each run calls ``model(*inputs, **kwargs)``: keyword inputs stay keywords, so a
    forward taking ``**kwargs`` (a Hugging Face model's) gets them as it expects.
    """

    mode = "modules"

    def __init__(
        self,
        model: torch.nn.Module,
        *inputs: Any,
        kwargs: Mapping[str, Any] | None = None,
        leaf_modules: LeafModules = (),
        fallback_reason: str = "",
        traceable_children: tuple[tuple[str, int], ...] = (),
        **stray: Any,
    ) -> None:
        keywords = keyword_inputs("ModuleProfiler", kwargs, stray, _OPTIONS)
        if not isinstance(model, torch.nn.Module):
            raise LabkitTypeError(
                f"mode='modules' times the calls of a torch.nn.Module's submodules, got {type(model).__name__}; "
                "wrap the function in a module, or use mode='fast'."
            )
        super().__init__(fallback_reason, traceable_children)
        refuse_unknown_keywords(model, keywords, inputs)
        self.module = private_copy(model)
        self.device = check_input_devices(self.module, [*inputs, *keywords.values()])
        self.inputs = inputs
        self.kwargs = keywords
        self.leaves = hooked_leaves(self.module, leaf_modules)
        self.training = model.training or any(leaf.training for _, leaf in self.leaves)
        self._asynchronous = self.device.type != "cpu"
        self._started: list[float] = []
        self._calls: list[tuple[str, float]] = []
        self._described: dict[str, tuple[str, str, str, str, str]] = {}
        for name, leaf in self.leaves:
            leaf.register_forward_pre_hook(self._enter)
            leaf.register_forward_hook(self._exit_hook(name))

    def _clock(self) -> float:
        if self._asynchronous:
            synchronize(self.device)
        return time.perf_counter()

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        self._started.append(self._clock())

    def _exit_hook(self, name: str) -> Any:
        def exit_(module: torch.nn.Module, args: Any, output: Any) -> None:
            self._calls.append((name, self._clock() - self._started.pop()))

        return exit_

    def _timed_call(self) -> tuple[float, list[tuple[str, float]]]:
        self._started.clear()
        self._calls.clear()
        inputs, kwargs = self._run_inputs()
        with torch.no_grad():
            start = self._clock()
            self.module(*inputs, **kwargs)
            total = self._clock() - start
        seen: Counter[str] = Counter()
        durations = []
        for name, seconds in self._calls:
            seen[name] += 1
            durations.append((name if seen[name] == 1 else f"{name}#{seen[name]}", seconds))
        durations.append((OUTSIDE, max(total - sum(seconds for _, seconds in self._calls), 0.0)))
        return total, durations

    def _describe(self, key: str) -> tuple[str, str, str, str, str]:
        if key == OUTSIDE:
            return "outside", OUTSIDE, "", OUTSIDE, ""
        if key not in self._described:
            target = key.split("#")[0]
            module = self.module if target == WHOLE_MODEL else self.module.get_submodule(target)
            cls = type(module)
            op_type = (torch_nn_layer(cls) or cls).__name__
            self._described[key] = ("call_module", key, target, op_type, cls.__name__)
        return self._described[key]


__all__ = ["OUTSIDE", "WHOLE_MODEL", "ModuleProfiler", "hooked_leaves"]
