"""Profile a model without tracing it: forward hooks time every call of a leaf module or of a block.

Why: ``torch.fx`` cannot trace every model (a detection model loops over a
list of images; RAFT iterates on tensor values), and ``torch.export`` cannot
either where the Python reads a tensor's value. Forward hooks need no trace:
torch calls ``register_forward_pre_hook`` / ``register_forward_hook`` functions
around each module's ``forward`` whatever Python code calls it. The granularity
is coarser than a graph: one row per call of a hooked module, plus one row,
"(outside leaf modules)", for the time spent in the model's own Python and
functional code between them. A module called twice gets two rows (``relu`` and
``relu#2``). What is hooked (:func:`hook_plan`):

- a **leaf**: a module without children, a subclass of a torch.nn layer that
  keeps its ``forward``, or one you name in ``leaf_modules`` (timed whole, its
  children not hooked);
- a **unit**: a module whose class name ends in ``Attention``, ``Block`` or
  ``Layer`` (:data:`UNIT_SUFFIXES`: ``BertSelfAttention``, ``GPT2Block``,
  torchvision's ``BasicBlock``, ``nn.MultiheadAttention``), timed whole as one
  row, its children not hooked. Why: the code *inside* such a block (the
  attention's matmuls, softmax and masks, a residual add) runs between its
  leaves, so with leaves alone it lands in "(outside leaf modules)": 54-68 % of
  the time of labkit's twelve small Hugging Face types on a CPU. Timed as units,
  that share drops to 22-34 %; what remains is the model's own code outside every block (building the
  masks, the embeddings' sums), which :attr:`~labkit.fx.report.ProfileReport.largest_children`
  places: each child of the model with its whole time, hooked rows and own code;
- a unit that holds another unit (a ``GPT2Block`` around its ``GPT2Attention``)
  is **split**: the inner unit and the other children are hooked as above, and
  the outer unit's own code between them is a row of its own, ``h.0 (own code)``:
  the attention stays one row, and the block's residual adds are not left outside.

``ModuleProfiler(..., units=False)`` hooks leaves only, as labkit did before units.
The hooks go on a private copy of the model (:func:`~labkit.core.copies.private_copy`): the
learner's model never carries labkit's hooks, not even after an error. The copy keeps the
learner's own hooks, since they are part of what the model computes; labkit's clock starts
before a module's pre-hooks and stops after its hooks, so their time is the module's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from labkit.core.copies import private_copy
from labkit.core.device import synchronize
from labkit.core.errors import LabkitError, LabkitTypeError
from labkit.fx.model_inputs import keyword_inputs, refuse_unknown_keywords
from labkit.fx.report import ProfileReport
from labkit.fx.runs import Profiler, check_input_devices
from labkit.fx.timeline import RunTimeline, Span
from labkit.fx.tracing import LeafModules, leaf_list, torch_nn_layer
from labkit.i18n.messages import _

#: The row for time spent between hooked modules (the model's own Python and functional calls).
OUTSIDE = "(outside leaf modules)"
#: The name of the only leaf when the model itself has no children.
WHOLE_MODEL = "(whole model)"
#: torch's error when a hook (labkit's clock) runs inside torch.cond, whose branches only run compiled
HIGHER_ORDER_ERROR = "UncapturedHigherOrderOpError"


class ScriptedSubmoduleError(LabkitTypeError):
    """A module ``mode="modules"`` would hook is TorchScript, and torch refuses hooks on a ScriptModule."""


def refuse_scripted_submodules(plan: list[Hooked]) -> None:
    """Raise :class:`ScriptedSubmoduleError` naming the first hooked module that is TorchScript.

    Why before any hook: torch's own "register_forward_pre_hook is not supported on ScriptModules" names neither
    the module nor what to do; a graph mode times a scripted submodule as one node.
    """
    scripted = [hooked.name for hooked in plan if isinstance(hooked.module, torch.jit.ScriptModule)]
    if scripted:
        raise ScriptedSubmoduleError(
            _("model.{name} is TorchScript (torch.jit.script or trace), and torch supports no forward hooks on a "
              "ScriptModule, so mode='modules' cannot time it. Profile with a graph instead: "
              "profile_model(model, x, mode='fast') times the scripted submodule as one node; or profile the Python "
              "module you scripted.").format(name=scripted[0])
        )


class HooksInsideCondError(LabkitError):
    """A module hooked for timing runs inside a ``torch.cond`` branch, which torch compiles and hooks cannot time."""


@contextlib.contextmanager
def _clock_warning_silenced() -> Iterator[None]:
    """Drop dynamo's one-time warning about labkit's clock (``time.perf_counter``) in a torch.cond branch, narrowly by
    message and for one run only: the :class:`HooksInsideCondError` that follows says what happened and what to do."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Dynamo does not know how to trace the builtin `time\.perf_counter",
                                category=UserWarning)
        yield


def _hooks_inside_cond_message(name: str) -> str:
    return (
        f"{name} calls a module inside torch.cond, and torch compiles the branches of torch.cond, so labkit's module "
        "hooks (mode='modules') cannot time it. Profile it with a graph: profile_model(model, ..., mode='fast', "
        "capture='export') (torch.export captures torch.cond). Your model, its hooks and the random state are unchanged."
    )
#: The end of a split unit's row name: its own code between the hooked modules inside it.
OWN_CODE = " (own code)"
#: Class-name endings of the modules timed as units: attention and the blocks or layers of a network.
UNIT_SUFFIXES = ("Attention", "Block", "Layer")
#: How many of the model's children :attr:`~labkit.fx.report.ProfileReport.largest_children` lists.
LARGEST_CHILDREN = 10
#: Containers torch never calls (their forward raises): their items are called instead.
_UNCALLED = (torch.nn.ModuleList, torch.nn.ModuleDict)


@dataclass(frozen=True)
class Hooked:
    """One module the hooks time: ``kind`` is ``"leaf"``, ``"unit"`` (each a row per call) or ``"split"`` (a row for
    its own code); ``child`` marks a child of the model (an item of a ModuleList child, which is never called
    itself), whose whole time is also kept for ``largest_children``."""

    name: str
    module: torch.nn.Module
    kind: str | None  # None: only a child of the model, no row of its own
    child: bool = False


def is_unit(module: torch.nn.Module) -> bool:
    """A module timed as one unit: its class name ends in one of :data:`UNIT_SUFFIXES`."""
    return type(module).__name__.endswith(UNIT_SUFFIXES)


def layers_of(model: torch.nn.Module) -> dict[type[torch.nn.Module], type[torch.nn.Module] | None]:
    """:func:`~labkit.fx.tracing.torch_nn_layer` of each module class in ``model``, looked up once for the plan and the report."""
    return {cls: torch_nn_layer(cls) for cls in {type(module) for module in model.modules()}}


def hook_plan(model: torch.nn.Module, leaf_modules: LeafModules = (), *, units: bool = True) -> list[Hooked]:
    """Every module to hook, in definition order (see the module docstring); a module shared by two parents once.

    The model itself is timed as a whole only if it has no children; it is never
    a unit (one row for the whole model would say nothing).
    """
    leaves = leaf_list(model, leaf_modules)
    layers = layers_of(model)
    names = {leaf for leaf in leaves if isinstance(leaf, str)}
    classes = tuple(leaf for leaf in leaves if isinstance(leaf, type))

    def named_leaf(name: str, module: torch.nn.Module) -> bool:
        return name in names or type(module).__name__ in names or isinstance(module, classes)

    def plain_leaf(module: torch.nn.Module) -> bool:
        layer = layers[type(module)]
        return not any(True for _ in module.children()) or (layer is not None and type(module).forward is layer.forward)

    def holds_unit(module: torch.nn.Module) -> bool:
        return any(is_unit(inner) for inner in module.modules() if inner is not module)

    if not any(True for _ in model.children()):
        return [Hooked(WHOLE_MODEL, model, "leaf")]
    found: list[Hooked] = []
    seen: set[int] = {id(model)}

    def visit(prefix: str, module: torch.nn.Module, child: bool) -> None:
        if id(module) in seen:
            return  # a shared module: its calls count under the first name it has
        seen.add(id(module))
        # a ModuleList is never called: the model's children are then its items (GPT-2's h.0, h.1...)
        container = isinstance(module, _UNCALLED)
        kind: str | None = None
        if named_leaf(prefix, module):
            kind = "leaf"
        elif units and is_unit(module):
            kind = "split" if holds_unit(module) else "unit"
        elif plain_leaf(module):
            kind = "leaf"
        if kind is not None or (child and not container):
            found.append(Hooked(prefix, module, kind, child and not container))
        if kind in (None, "split"):
            for child_name, grandchild in module.named_children():
                visit(f"{prefix}.{child_name}", grandchild, child and container)

    for child_name, child in model.named_children():
        visit(child_name, child, True)
    return found


def hooked_leaves(
    model: torch.nn.Module, leaf_modules: LeafModules = (), *, units: bool = True
) -> list[tuple[str, torch.nn.Module]]:
    """``(qualified name, module)`` of the modules timed whole (leaves and units), in definition order; none inside another.

    A leaf is a module without children, a subclass of a torch.nn layer that
    keeps its ``forward`` (torchvision's ``Conv2dNormActivation`` is a Sequential, so its
    parts are timed; ``FrozenBatchNorm2d`` is a leaf), or one named in ``leaf_modules``;
    a unit, see :func:`hook_plan`.
    """
    return [(hooked.name, hooked.module) for hooked in hook_plan(model, leaf_modules, units=units)
            if hooked.kind in ("leaf", "unit")]


_OPTIONS = (
    "kwargs", "leaf_modules", "units", "fallback_reason", "traceable_children", "share_parameters", "notes", "private",
)


class ModuleProfiler(Profiler):
    """Times every call of every hooked module (``mode="modules"``); same report as the graph modes.

    Each run calls ``model(*inputs, **kwargs)``: keyword inputs stay keywords, so a
    forward taking ``**kwargs`` (a Hugging Face model's) gets them as it expects.
    The report's ``largest_children`` lists the model's children by their whole
    time (hooked rows and their own code), the ten largest first. ``private`` is a
    :func:`~labkit.core.copies.private_copy` of ``model`` labkit already made (the one its
    eager run used): it is hooked and timed instead of a new copy.
    """

    mode = "modules"

    def __init__(
        self,
        model: torch.nn.Module,
        *inputs: Any,
        kwargs: Mapping[str, Any] | None = None,
        leaf_modules: LeafModules = (),
        units: bool = True,
        fallback_reason: str = "",
        traceable_children: tuple[tuple[str, int], ...] = (),
        share_parameters: bool = True,
        notes: tuple[str, ...] = (),
        private: torch.nn.Module | None = None,
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
        self.notes = notes
        # with the model's own hooks
        self.module = private if private is not None else private_copy(model, share_parameters=share_parameters)
        self.device = check_input_devices(self.module, [*inputs, *keywords.values()])
        self.inputs = inputs
        self.kwargs = keywords
        self.plan = hook_plan(self.module, leaf_modules, units=units)
        refuse_scripted_submodules(self.plan)
        self.leaves = [(hooked.name, hooked.module) for hooked in self.plan if hooked.kind in ("leaf", "unit")]
        self.training = model.training or any(
            inner.training for hooked in self.plan if hooked.kind for inner in hooked.module.modules()
        )
        self._asynchronous = self.device.type != "cpu"
        self._open: list[tuple[float, float] | None] = []  # per open hooked call: (start, recorded at start)
        self._inside_rows = 0  # open calls of modules timed whole: a hooked module they call is part of them
        self._recorded = 0.0  # seconds recorded in rows so far in this run
        self._calls: list[tuple[str, str, float]] = []  # (name, kind, seconds) per row, in call order
        self._spans: list[tuple[str, str | None, float, float]] = []  # (name, kind, start, end) per timed call
        self._child_calls: list[tuple[str, float]] = []
        self._child_runs: list[dict[str, float]] = []  # per timed run: child -> its whole time
        self._last_children: dict[str, float] = {}
        self._described: dict[str, tuple[str, str, str, str, str]] = {}
        self._row_modules: dict[str, str] = {}  # row name -> the hooked module's path
        self._layers = layers_of(self.module)
        for hooked in self.plan:
            # the clock starts before the model's own pre-hooks and stops after its hooks: they are part of the call
            hooked.module.register_forward_pre_hook(self._enter_hook(hooked), prepend=True)
            hooked.module.register_forward_hook(self._exit_hook(hooked))

    def _clock(self) -> float:
        if self._asynchronous:
            synchronize(self.device)
        return time.perf_counter()

    def _enter_hook(self, hooked: Hooked) -> Any:
        whole = hooked.kind in ("leaf", "unit")

        def enter(module: torch.nn.Module, args: Any) -> None:
            if self._inside_rows:
                self._open.append(None)
                return
            if whole:
                self._inside_rows += 1
            self._open.append((self._clock(), self._recorded))

        return enter

    def _exit_hook(self, hooked: Hooked) -> Any:
        whole = hooked.kind in ("leaf", "unit")

        def exit_(module: torch.nn.Module, args: Any, output: Any) -> None:
            opened = self._open.pop()
            if opened is None:
                return
            start, recorded_before = opened
            end = self._clock()
            elapsed = end - start
            self._spans.append((hooked.name, hooked.kind, start, end))  # the timeline's: every hooked call, nested
            if whole:
                self._inside_rows -= 1
            if hooked.kind is not None:
                seconds = elapsed if whole else max(0.0, elapsed - (self._recorded - recorded_before))
                self._calls.append((hooked.name, hooked.kind, seconds))
                self._recorded += seconds
            if hooked.child:
                self._child_calls.append((hooked.name, elapsed))

        return exit_

    def _timed_call(self) -> tuple[float, list[tuple[str, float]]]:
        self._open.clear()
        self._calls.clear()
        self._child_calls.clear()
        self._spans = []
        self._inside_rows, self._recorded = 0, 0.0
        inputs, kwargs = self._run_call or self._run_inputs()  # handed down by the run loop
        with torch.no_grad(), _clock_warning_silenced():
            start = self._clock()
            try:
                self.module(*inputs, **kwargs)
            except Exception as exc:
                if type(exc).__name__ == HIGHER_ORDER_ERROR:
                    raise HooksInsideCondError(_hooks_inside_cond_message(type(self.module).__name__)) from exc
                raise
            end = self._clock()
            total = end - start
            self._clock_reads = (start, end, self._spans)  # this run's: a new list of spans per run
        seen: Counter[tuple[str, str]] = Counter()
        durations = []
        for name, kind, seconds in self._calls:
            seen[name, kind] += 1
            key = _row_key(name, kind, seen[name, kind])
            self._row_modules.setdefault(key, name)  # the row's module: a name may hold "#" or " (own code)" itself
            durations.append((key, seconds))
        durations.append((OUTSIDE, max(total - sum(seconds for *_, seconds in self._calls), 0.0)))
        self._last_children = {}
        for name, seconds in self._child_calls:
            self._last_children[name] = self._last_children.get(name, 0.0) + seconds
        return total, durations

    def _timelines_of(self, reads: Sequence[Any]) -> list[RunTimeline]:
        """Each timed run's hooked calls as spans (see :func:`_timeline`)."""
        return [_timeline(*read) for read in reads]

    def run_once(self) -> None:
        """One recorded run, and the whole time of each of the model's children in it."""
        super().run_once()
        self._child_runs.append(self._last_children)

    def _describe(self, key: str) -> tuple[str, str, str, str, str]:
        if key == OUTSIDE:
            return "outside", OUTSIDE, "", OUTSIDE, ""
        if key not in self._described:
            target = self._row_modules.get(key) or key.removesuffix(OWN_CODE).split("#")[0]
            module = self.module if target == WHOLE_MODEL else self.module.get_submodule(target)
            cls = type(module)
            op_type = ((self._layers[cls] if cls in self._layers else torch_nn_layer(cls)) or cls).__name__
            self._described[key] = ("call_module", key, target, op_type, cls.__name__)
        return self._described[key]

    def _completed(self, report: ProfileReport) -> ProfileReport:
        """The report with the model's largest children: each one's whole time per run, median over the runs."""
        runs = self._child_runs[-report.runs:]
        classes = {hooked.name: type(hooked.module).__name__ for hooked in self.plan if hooked.child}
        called = dict.fromkeys(name for run in runs for name in run)
        medians = {name: statistics.median(run.get(name, 0.0) for run in runs) for name in called}
        total = report.total.median
        ranked = sorted(medians.items(), key=lambda item: (-item[1], item[0]))[:LARGEST_CHILDREN]
        largest = tuple(
            (name, classes[name], seconds, seconds / total * 100 if total > 0 else 0.0) for name, seconds in ranked
        )
        return dataclasses.replace(report, largest_children=largest)


def _row_key(name: str, kind: str, count: int) -> str:
    """A row's name: the module's path, ``#2`` from its second call on, `` (own code)`` for a split unit's own code."""
    return name + (f"#{count}" if count > 1 else "") + (OWN_CODE if kind == "split" else "")


def _timeline(start: float, end: float, calls: Sequence[tuple[str, str | None, float, float]]) -> RunTimeline:
    """One run's hooked calls as spans, in the order they started: a row's call under its row's name
    (``relu#2``, ``h.0 (own code)``), a child of the model that has no row under its path."""
    seen: Counter[tuple[str, str | None]] = Counter()
    spans = []
    for name, kind, began, ended in sorted(calls, key=lambda span: (span[2], -span[3])):
        key = name
        if kind is not None:
            seen[name, kind] += 1
            key = _row_key(name, kind, seen[name, kind])
        spans.append(Span(key, began - start, ended - start))
    return RunTimeline(start, end - start, tuple(spans))


__all__ = [
    "HIGHER_ORDER_ERROR",
    "LARGEST_CHILDREN",
    "OUTSIDE",
    "OWN_CODE",
    "UNIT_SUFFIXES",
    "WHOLE_MODEL",
    "Hooked",
    "HooksInsideCondError",
    "ScriptedSubmoduleError",
    "ModuleProfiler",
    "hook_plan",
    "hooked_leaves",
    "is_unit",
]
