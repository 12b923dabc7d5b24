"""Profile a model node by node with ``torch.fx``: where does the time go?

Why this module exists: ``torch.profiler`` answers "which aten kernels are slow",
but a learner thinks in layers ("is it the BatchNorms?"). ``torch.fx`` traces a
model into a graph whose nodes *are* those layers, so timing each node answers
the learner's question directly. Three ways to time a model:

- :class:`ProfilingInterpreter` (``mode="interpreter"``) is the classic tutorial's
  teaching version, kept API-compatible: a ``torch.fx.Interpreter`` that wraps
  every ``run_node`` in a timer. Easy to read, but the interpreter itself adds a
  few microseconds per node, which is more than a small op costs.
- :class:`InstrumentedModule` (``mode="fast"``) generates a new ``GraphModule``
  whose code reads the clock after every node. The graph runs as compiled Python,
  so each node pays one clock read and one list append (well under a microsecond).
- :class:`~labkit.fx.module_hooks.ModuleProfiler` (``mode="modules"``) needs no
  graph: forward hooks time each call of a leaf module. :func:`profile_model`
  falls back to it, with a :class:`TraceFallbackWarning`, when no graph can be captured.

The graph the first two time comes from :mod:`labkit.fx.capture`: fx's
``symbolic_trace``, or where that fails ``torch.export`` (ATen operators, each
with its module), chosen with ``capture=``. This module only times it; all modes
feed the same result object, :class:`~labkit.fx.report.ProfileReport`. Before
any of them, :func:`profile_model` runs the model itself once, so a wrong input
is the model's own clear error. Tracing and its errors live in
:mod:`labkit.fx.tracing`, what each mode costs per node in
:mod:`labkit.fx.overhead`, fusion in :mod:`labkit.fx.fusion` and the
``torch.profiler`` cross-check in :mod:`labkit.fx.crosscheck`.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import keyword
import os
import re
import statistics
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tabulate
import torch
import torch.fx

from labkit.core.copies import UNWATCHED, private_copy
from labkit.core.device import synchronize
from labkit.core.errors import LabkitError, LabkitValueError, require_count
from labkit.core.random_state import kept_random_state
from labkit.core.timing import RunStats
from labkit.core.untouched import left_as_found
from labkit.fx.capture import (
    CAPTURES,
    CapturedGraph,
    CaptureFailedError,
    CaptureMismatchError,
    ExportFailedError,
    ExportMismatchError,
    capture_graph,
    check_capture,
    failing_node,
)
from labkit.fx.memory import GraphMemory, NodeMemory, graph_memory
from labkit.fx.model_inputs import (
    InputsDoNotFitError,
    KeywordsIntoVarKeywordError,
    StrayKeywordError,
    UnknownKeywordInputError,
    keyword_inputs,
    refuse_unknown_keywords,
    without_cache,
)
from labkit.fx.model_kinds import CompiledModelWarning, eager_model
from labkit.fx.module_hooks import ModuleProfiler
from labkit.fx.report import NODE_FIELDS, OP_TYPE_SORT_KEYS, SORT_KEYS, NodeTiming, OpTypeBreakdown, ProfileReport
from labkit.fx.runs import (
    EagerRun,
    ModelRunError,
    NotRunYetError,
    Profiler,
    TrainModeWarning,
    check_input_devices,
    model_device,
    run_eager_once,
    run_series,
)
from labkit.fx.timeline import RunTimeline, Span, from_stamps
from labkit.fx.tracing import (
    ORIGINAL_TARGET,
    LeafModules,
    TraceFailedError,
    call_arguments,
    torch_nn_layer,
    trace,
    traceable_children,
)

MODES = ("fast", "interpreter", "modules")
#: Each helper's own keyword options: a stray keyword close to one is pointed at it, not at kwargs=.
_TRACE_OPTIONS = ("mode", "capture", "concrete_args", "leaf_modules", "tracer")
#: capture_model's options, which make_profiler passes through as they are.
_CAPTURE_OPTIONS = ("kwargs", *_TRACE_OPTIONS, "fallback")
_MAKE_OPTIONS = (*_CAPTURE_OPTIONS, "stacklevel")
_PROFILE_OPTIONS = ("kwargs", "warmup", "runs", "on_run", *_TRACE_OPTIONS, "fallback")
SUMMARY_HEADERS = ["Op type", "Op", "Average runtime (s)", "Pct total runtime"]


class TracedRunError(LabkitError):
    """The traced graph failed on inputs the model itself ran on."""


class TraceFallbackWarning(UserWarning):
    """No graph could be captured (fx, then torch.export), so the model was profiled module by module (``mode="modules"``)."""


def _check_runs(warmup: Any, runs: Any) -> tuple[int, int]:
    return (
        require_count("warmup", warmup, 0, "use warmup=0 to skip it"),
        require_count("runs", runs, 1, "use runs=5 or more for stable statistics"),
    )


def _check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise LabkitValueError(f"mode must be one of {MODES} (got {mode!r}).")
    return str(mode)


# --------------------------------------------------------------- the teaching version


class ProfilingInterpreter(torch.fx.Interpreter):
    """The classic FX profiling tutorial's interpreter, with honest timers.

    Same API as the tutorial: ``.run(*args)``, ``.summary(should_sort=False)``,
    ``total_runtime_sec`` and ``runtimes_sec``. Differences: ``time.perf_counter``
    instead of ``time.time`` and a device synchronization around each node, so
    GPU times are the kernels' and not just their launches. ``device`` is the one
    to synchronize (default: the model's); :class:`NodeProfiler` passes the inputs'
    device, which is the only clue for a model without parameters.
    """

    def __init__(self, module: torch.nn.Module, device: torch.device | str | None = None) -> None:
        graph_module = trace(module)
        super().__init__(graph_module)
        # The model's device by default; pass the inputs' device for a parameter-free model.
        self.device = torch.device(device) if device is not None else model_device(graph_module) or torch.device("cpu")
        self._asynchronous = self.device.type != "cpu"  # CPU ops finish before they return
        self.total_runtime_sec: list[float] = []
        self.runtimes_sec: dict[torch.fx.Node, list[float]] = {}
        #: the last run's clock reads: its start and end, and each timed node's (start, end) (not placeholders, output)
        self.last_start = self.last_end = 0.0
        self.last_spans: list[tuple[float, float]] = []

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if self._asynchronous:
            synchronize(self.device)
        self.last_spans = []
        self.last_start = start = time.perf_counter()
        result = super().run(*args, **kwargs)
        if self._asynchronous:
            synchronize(self.device)
        self.last_end = time.perf_counter()
        self.total_runtime_sec.append(self.last_end - start)
        return result

    def run_node(self, n: torch.fx.Node) -> Any:
        if self._asynchronous:
            synchronize(self.device)
        start = time.perf_counter()
        result = super().run_node(n)
        if self._asynchronous:
            synchronize(self.device)
        end = time.perf_counter()
        self.runtimes_sec.setdefault(n, []).append(end - start)
        if n.op not in ("placeholder", "output"):  # the nodes a profile times: its timeline's spans
            self.last_spans.append((start, end))
        return result

    def summary(self, should_sort: bool = False) -> str:
        """One row per node: op kind, node, mean seconds, percent of the mean total run."""
        if not self.total_runtime_sec:
            raise NotRunYetError("No runs recorded yet: call .run(*inputs) at least once before .summary().")
        mean_total = statistics.mean(self.total_runtime_sec)
        rows: list[list[Any]] = []
        for node, runtimes in self.runtimes_sec.items():
            mean_runtime = statistics.mean(runtimes)
            rows.append([node.op, str(node), mean_runtime, mean_runtime / mean_total * 100])
        if should_sort:
            rows.sort(key=lambda row: row[2], reverse=True)
        return tabulate.tabulate(rows, headers=SUMMARY_HEADERS)


# ----------------------------------------------------------------- the low-overhead mode

_STAMPS_ATTR = "_labkit_stamps"


# One graph node per stamp: the helper reads the clock *and* appends. (Two nodes per
# stamp, a clock read and an append, tripled the generated forward's local variables.)
def _perf_counter_stamp(stamps: list[float]) -> None:
    stamps.append(time.perf_counter())


def _cuda_stamp(stamps: list[float]) -> None:
    torch.cuda.synchronize()
    stamps.append(time.perf_counter())


def _mps_stamp(stamps: list[float]) -> None:
    torch.mps.synchronize()
    stamps.append(time.perf_counter())


def _stamp_function(device: torch.device) -> Callable[[list[float]], None]:
    return {"cuda": _cuda_stamp, "mps": _mps_stamp}.get(device.type, _perf_counter_stamp)


# ``name = stamp(_labkit_stamps);  name = None`` (possibly with other dead names) as fx writes it; torch
# 2.4 frees no name for a node nothing uses: ``name = stamp(_labkit_stamps)``, perhaps ``;  other = None``.
def _stamp_line(stamps: str) -> re.Pattern[str]:
    """A stamp's line in the generated code, ``stamps`` being the name the stamps' list has there."""
    return re.compile(
        rf"^(?P<indent>\s*)(?P<name>\w+) = (?P<call>\w+\({re.escape(stamps)}\))(?:;  (?P<dead>\w+(?: = \w+)*) = None)?$"
    )


_STAMP_LINE = _stamp_line(_STAMPS_ATTR)


def _drop_stamp_variables(body: list[str], stamps: str = _STAMPS_ATTR) -> list[str]:
    """Write each stamp as a bare call, so the stamps add no local variables to ``forward``.

    Why: a Python >= 3.11 frame lives in a 16 KiB "data stack" chunk. A forward
    with thousands of locals can end just short of a chunk's end; then every
    module it calls gets a fresh chunk, mmap'd and munmap'd per call (a page fault
    each: efficientnet_b5 took ~600 per forward). Without the stamps' variables the
    instrumented forward's frame is the plain GraphModule's. A line in another
    shape is left as it is (still correct, only larger). ``stamps`` is the stamps' list's name in the code
    (another than ``_labkit_stamps`` where the model has a module of that name).
    """
    pattern = _STAMP_LINE if stamps == _STAMPS_ATTR else _stamp_line(stamps)
    lines = "".join(body).split("\n")
    for index, line in enumerate(lines):
        match = pattern.match(line)
        if match is None:
            continue
        # a stamp's value is never used, so its name goes; the other names freed on this line stay freed
        dead = [name for name in (match["dead"] or "").split(" = ") if name and name != match["name"]]
        lines[index] = match["indent"] + match["call"] + (f";  {' = '.join(dead)} = None" if dead else "")
    return ["\n".join(lines)]


def _after_previous_transformer(
    previous: Callable[[list[str]], list[str]] | None, stamps: str = _STAMPS_ATTR,
) -> Callable[[list[str]], list[str]]:
    """For ``Graph.on_generate_code``: drop the stamps' variables after any transformer the graph had."""
    drop = _drop_stamp_variables if stamps == _STAMPS_ATTR else functools.partial(_drop_stamp_variables, stamps=stamps)
    if previous is None:
        return drop
    return lambda body: drop(previous(body))


def _free_attribute(graph_module: torch.fx.GraphModule) -> str:
    """``_labkit_stamps``, or ``_labkit_stamps_2`` etc. where the graph module has an attribute of that name."""
    name, number = _STAMPS_ATTR, 1
    while hasattr(graph_module, name):
        number += 1
        name = f"{_STAMPS_ATTR}_{number}"
    return name


class InstrumentedModule:
    """A copy of a ``GraphModule`` whose generated code reads the clock after every node.

    For ResNet18 the generated ``forward`` (``InstrumentedModule(traced).module.code``) starts::

        def forward(self, x : torch.Tensor) -> torch.Tensor:
            _labkit_stamps = self._labkit_stamps
            labkit_fx_profile__perf_counter_stamp(_labkit_stamps)
            conv1 = self.conv1(x);  x = None
            labkit_fx_profile__perf_counter_stamp(_labkit_stamps)
            bn1 = self.bn1(conv1);  conv1 = None
            labkit_fx_profile__perf_counter_stamp(_labkit_stamps)
            ...

    so node ``i`` took ``stamps[i + 1] - stamps[i]`` seconds. Each stamp is one
    call that reads the clock and appends it (after a device synchronize on CUDA
    or MPS), written as a bare statement: the forward has the plain
    ``GraphModule``'s local variables plus one (see :func:`_drop_stamp_variables`). The output is not
    touched; calling the instance returns what the model returns.
    """

    def __init__(self, graph_module: torch.fx.GraphModule, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.timed_nodes: list[torch.fx.Node] = [
            n for n in graph_module.graph.nodes if n.op not in ("placeholder", "output")
        ]
        self._stamps_attr = _free_attribute(graph_module)
        self.module = self._instrument(graph_module, _stamp_function(self.device), self._stamps_attr)
        self.stamps: list[float] = getattr(self.module, self._stamps_attr)

    @staticmethod
    def _instrument(
        graph_module: torch.fx.GraphModule, stamp: Callable[[list[float]], None], attribute: str = _STAMPS_ATTR,
    ) -> torch.fx.GraphModule:
        instrumented = torch.fx.GraphModule(graph_module, copy.deepcopy(graph_module.graph))
        setattr(instrumented, attribute, [])
        graph = instrumented.graph
        timed = [n for n in graph.nodes if n.op not in ("placeholder", "output")]
        first = timed[0] if timed else next(n for n in graph.nodes if n.op == "output")
        with warnings.catch_warnings():  # a plain list attribute is fine for get_attr here
            warnings.filterwarnings("ignore", message="Attempted to insert a get_attr Node")
            with graph.inserting_before(first):
                stamps = graph.get_attr(attribute)
                graph.call_function(stamp, (stamps,))
        for node in timed:
            with graph.inserting_after(node):
                graph.call_function(stamp, (stamps,))
        graph.on_generate_code(lambda previous: _after_previous_transformer(previous, stamps.name))
        instrumented.recompile()
        return instrumented

    def __call__(self, *inputs: Any) -> Any:
        # a new list per run, so the last run's stamps stay as they were (the timeline keeps them); per run, not per node
        self.stamps = self.module.__dict__[self._stamps_attr] = []
        return self.module(*inputs)

    def last_durations(self) -> list[float]:
        """Seconds per timed node for the most recent call, in graph order."""
        return [b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False)]



# ---------------------------------------------------------------------- the profiler


def _op_type(
    node: torch.fx.Node, graph_module: torch.fx.GraphModule,
    layers: Mapping[type[torch.nn.Module], type[torch.nn.Module] | None] | None = None,
) -> str:
    """The type a node is grouped under in :meth:`ProfileReport.by_op_type`.

    A module's class, normalised to its torch.nn layer for a subclass defined
    elsewhere (``Conv3DSimple`` counts as ``Conv3d``; :attr:`NodeTiming.module_class`
    keeps the real class); an operator (every node of an exported graph) as
    ``namespace.name`` without its overload, ``aten.linear`` or ``aten.add`` (for
    ``aten.add.Tensor``), which is torch.profiler's ``aten::add``; a function's or
    method's name; and ``"get_attr"`` for every read of a parameter or buffer,
    whose target is a parameter's name (one type per parameter would flood the breakdown).
    """
    if node.op == "call_module":
        cls = type(graph_module.get_submodule(str(node.target)))
        return ((layers[cls] if layers is not None else torch_nn_layer(cls)) or cls).__name__
    if isinstance(node.target, torch._ops.OpOverload):
        return f"{node.target.namespace}.{node.target.overloadpacket.__name__}"
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    if node.op == "get_attr":
        return "get_attr"
    return str(node.target)


def _module_class(node: torch.fx.Node, captured: CapturedGraph) -> str:
    """A call_module node's own class; an exported node's innermost module's (its graph has no call_module)."""
    if node.op == "call_module":
        return type(captured.graph_module.get_submodule(str(node.target))).__name__
    stack = captured.module_stacks.get(node.name, ())
    return stack[-1][1] if captured.capture == "export" and stack else ""


def _node_descriptions(nodes: list[torch.fx.Node], captured: CapturedGraph) -> dict[str, tuple[str, str, str, str, str]]:
    """``(op, name, target, op_type, module_class)`` of every timed node, made once when the graph is handed over.

    Why once: these are facts of the captured graph, and a report made after every run (``on_run``)
    asked for each of them again.
    """
    graph_module = captured.graph_module
    classes = {type(graph_module.get_submodule(str(n.target))) for n in nodes if n.op == "call_module"}
    layers = {cls: torch_nn_layer(cls) for cls in classes}
    return {
        n.name: (n.op, n.name, _target(n), _op_type(n, graph_module, layers), _module_class(n, captured)) for n in nodes
    }


def _shown_type(row: NodeTiming) -> str:
    """``Conv3d (Conv3DSimple)`` when the module's class is not the type it is counted as."""
    if row.module_class and row.module_class != row.op_type:
        return f"{row.op_type} ({row.module_class})"
    return row.op_type


_TORCH_DIR = str(Path(torch.__file__).parent) + os.sep
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def source_line(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> str:
    """``"resnet.py:268"``: the line of the model's code that made ``node`` (its stack trace's innermost frame
    outside torch); for a node without one (a parameter read), the ``forward`` of the innermost module it belongs to."""
    frames = [match for match in _FRAME.finditer(node.stack_trace or "") if not match["file"].startswith(_TORCH_DIR)]
    if frames:
        return f"{Path(frames[-1]['file']).name}:{frames[-1]['line']}"
    path = str(node.target).rpartition(".")[0] if node.op == "get_attr" else str(node.target)
    while True:
        try:
            module = graph_module.get_submodule(path)
            break
        except AttributeError:
            if not path:
                return ""
            path = path.rpartition(".")[0]
    forward = type(module).forward
    try:
        return f"{Path(inspect.getsourcefile(forward) or '').name}:{inspect.getsourcelines(forward)[1]}"
    except (OSError, TypeError):
        return ""


def _target(node: torch.fx.Node) -> str:
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target)  # "aten.add.Tensor": the operator and its overload
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    # a module's or parameter's own name where fx's code needed another (tracing.original_target, read here: per node)
    return str(node.meta.get(ORIGINAL_TARGET, node.target))



def _traced_failure(captured: CapturedGraph, exc: Exception) -> TracedRunError:
    """The error for a captured graph that failed where the eager model ran: which node, and why that happens."""
    node = failing_node(captured)  # the same failure again, now with the node that raised it
    where = f"at node {node.name!r} ({node.op} {_target(node)})" if node is not None else "at an unknown node"
    first_line = (str(exc).strip().splitlines() or [""])[0]
    printed = (
        "torch.export.export(model, args, kwargs, strict=False).graph" if captured.capture == "export"
        else "labkit.fx.trace(model).graph"
    )
    return TracedRunError(
        f"The {'exported' if captured.capture == 'export' else 'traced'} graph failed {where}, although the model "
        f"itself ran on the same inputs: {type(exc).__name__}: {first_line}. A captured graph records one path through "
        "forward with every Python value it read fixed (a shape turned into a number, a concrete_args value, a branch "
        f"taken); this input needs another. Print the graph ({printed}) around that node to see what was fixed, or "
        "profile without a graph: profile_model(model, x, mode='modules')."
    )


class NodeProfiler(Profiler):
    """Times a captured graph run by run; :func:`profile_model`, the cross-check and the LiveProfile widget use it.

    ``run_once()`` adds one timed run, ``report()`` summarizes all runs so far,
    so a widget can redraw after every run. The graph comes from
    :func:`labkit.fx.capture.capture_graph`: ``capture="auto"`` (symbolic_trace,
    then torch.export), ``"symbolic_trace"`` or ``"export"``; a model none of them
    captures raises its error (there is no hook fallback here). The trace options
    are those of :func:`labkit.fx.tracing.trace`; ``inputs`` are the arguments not
    fixed by ``concrete_args``. What is captured and run is a
    :func:`~labkit.core.copies.private_copy` of ``model``, each run on
    :func:`~labkit.core.copies.fresh_inputs` cloned before its clock starts, so
    ``model``, its caches and the caller's tensors are left as they were.
    ``kwargs`` are the model's keyword inputs; the graph gets them by position
    (a traced graph's placeholders follow ``forward``'s parameters, an exported
    one's the pytree leaves of ``(inputs, kwargs)``). ``captured`` is a graph
    :func:`~labkit.fx.capture.capture_graph` already made (then ``model`` and the
    capture options are not used again): :func:`make_profiler` hands it over.
    """

    def __init__(
        self,
        model: Any,
        *inputs: Any,
        kwargs: Mapping[str, Any] | None = None,
        mode: str = "fast",
        capture: str = "auto",
        concrete_args: dict[str, Any] | None = None,
        leaf_modules: LeafModules = (),
        tracer: Any = None,
        captured: CapturedGraph | None = None,
        **stray: Any,
    ) -> None:
        # nothing to check when only a captured graph is handed over (make_profiler checked the inputs)
        options = ("kwargs", *_TRACE_OPTIONS)
        keywords = keyword_inputs("NodeProfiler", kwargs, stray, options) if kwargs is not None or stray else {}
        if _check_mode(mode) == "modules":
            raise LabkitValueError("NodeProfiler times a captured graph; for mode='modules' use labkit.fx.ModuleProfiler.")
        if captured is None:
            captured = capture_graph(
                model, inputs, keywords, capture=capture, concrete_args=concrete_args, leaf_modules=leaf_modules,
                tracer=tracer,
            )
        super().__init__(fallback_reason=captured.fallback_reason)
        self.captured = captured
        self.capture = captured.capture
        self.graph_module = captured.graph_module
        self.device = check_input_devices(self.graph_module, captured.inputs)
        self.inputs = captured.inputs
        self.mode = mode
        self.nodes = [n for n in self.graph_module.graph.nodes if n.op not in ("placeholder", "output")]
        self.training = captured.training
        self.samples = {n.name: [] for n in self.nodes}
        self._nodes_by_name = {n.name: n for n in self.nodes}
        stacks = {n.name: captured.module_stacks.get(n.name, ()) for n in self.nodes}
        self._modules = {name: (stack[-1][0] if stack else "", stack) for name, stack in stacks.items()}
        self._sources = {n.name: source_line(n, self.graph_module) for n in self.nodes}
        self._described = _node_descriptions(self.nodes, captured)
        self._graph_memory: GraphMemory | None = None
        self._memory_notes: tuple[str, ...] = ()
        self._asynchronous = self.device.type != "cpu"  # CPU ops finish before they return: nothing to wait for
        if mode == "fast":
            self._instrumented = InstrumentedModule(self.graph_module, self.device)
        else:
            self._interpreter = ProfilingInterpreter(self.graph_module, self.device)

    def _timed_call(self) -> tuple[float, list[tuple[str, float]]]:
        try:
            total, durations = self._run_graph()
        except Exception as exc:  # noqa: BLE001 - any failure of the graph is reported at its node
            raise _traced_failure(self.captured, exc) from exc
        return total, list(zip(self.samples, durations, strict=True))

    def _run_graph(self) -> tuple[float, list[float]]:
        inputs, _ = self._run_call or self._run_inputs()  # handed down by the run loop; a graph takes them by position
        with torch.no_grad():
            if self.mode == "fast":
                if self._asynchronous:
                    synchronize(self.device)
                start = time.perf_counter()
                self._instrumented(*inputs)
                if self._asynchronous:
                    synchronize(self.device)
                end = time.perf_counter()
                self._clock_reads = (start, self._instrumented.stamps, end)
                return end - start, self._instrumented.last_durations()
            interpreter = self._interpreter
            interpreter.run(*inputs)
            self._clock_reads = (interpreter.last_start, interpreter.last_spans, interpreter.last_end)
            return interpreter.total_runtime_sec[-1], [interpreter.runtimes_sec[n][-1] for n in self.nodes]

    def _timelines_of(self, reads: Sequence[Any]) -> list[RunTimeline]:
        """Each timed run, node by node, from the stamps it took (fast mode) or the interpreter's clock reads."""
        keys = list(self.samples)
        if self.mode == "fast":
            return [from_stamps(keys, start, stamps, end) for start, stamps, end in reads]
        return [
            RunTimeline(start, end - start, tuple(Span(key, a - start, b - start)
                                                  for key, (a, b) in zip(keys, spans, strict=True)))
            for start, spans, end in reads
        ]

    def _describe(self, key: str) -> tuple[str, str, str, str, str]:
        return self._described[key]

    def _descriptions(self, keys: Sequence[str]) -> Mapping[str, tuple[str, str, str, str, str]]:
        return self._described

    def _after_runs(self) -> None:
        """The memory stage, right after the timed runs: the report then only reads it."""
        self._memory()

    def _completed(self, report: ProfileReport) -> ProfileReport:
        """The report with what only the graph knows: how it was captured, the modules each node ran in, and
        each run's time outside its nodes (a median of those, unlike one of means, ignores one disturbed run)."""
        memory = self._memory()
        facts = memory.nodes if memory is not None else {}
        unknown = NodeMemory((), None, None)
        rows = [
            dataclasses.replace(
                row, module=self._modules[row.name][0], module_stack=self._modules[row.name][1],
                source=self._sources[row.name], input_shapes=facts.get(row.name, unknown).input_shapes,
                output_bytes=facts.get(row.name, unknown).output_bytes, live_bytes=facts.get(row.name, unknown).live_bytes,
            )
            for row in report.rows
        ]
        outside = [max(0.0, total - sum(samples[run] for samples in self.samples.values()))
                   for run, total in enumerate(self.totals)]
        return dataclasses.replace(
            report, rows=rows, capture=self.capture, outside=RunStats.from_samples(outside),
            memory=memory.as_dict() if memory is not None else None, notes=report.notes + self._memory_notes,
        )

    def _memory(self) -> GraphMemory | None:
        """The graph's memory per node (:mod:`labkit.fx.memory`): one untimed run, made once, after a timed one
        (:func:`~labkit.fx.runs.run_series` asks after the last; a report made before, by ``on_run``, after the first).

        A graph the recording interpreter cannot run (the timed runs did) has no memory figures, and a note says why.
        """
        if self._graph_memory is None and not self._memory_notes:
            try:
                self._graph_memory = graph_memory(self.graph_module, self.inputs)
            except Exception as exc:  # noqa: BLE001 - the timings stand; the memory figures are what is missing
                self._memory_notes = (f"no memory per node: the recording run failed ({type(exc).__name__}: "
                                      f"{(str(exc).splitlines() or [''])[0][:120]}).",)
        return self._graph_memory


@dataclasses.dataclass(frozen=True)
class ModelCapture:
    """What the capture step hands to the timing step: how the model is timed, and what was found on the way.

    ``graph`` is the checked graph a graph mode times (``None``: the model is timed by hooks, ``tier``
    ``"hooks"``); ``eager`` is the model's own first run, the reference each graph was checked against,
    and its private copy, which timing by hooks reuses. ``call_args`` and ``call_kwargs`` are how the hooked
    model is called; ``notes`` what labkit chose for the learner.
    """

    model: Any
    mode: str
    eager: EagerRun
    graph: CapturedGraph | None
    call_args: tuple[Any, ...]
    call_kwargs: Mapping[str, Any]
    leaves: list[Any]
    units: bool = True
    fallback_reason: str = ""
    traceable_children: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def tier(self) -> str:
        """``"symbolic_trace"``, ``"export"`` or ``"hooks"``."""
        return self.graph.capture if self.graph is not None else "hooks"


def capture_model(
    model: Any,
    *inputs: Any,
    kwargs: Mapping[str, Any] | None = None,
    mode: str = "fast",
    capture: str = "auto",
    concrete_args: dict[str, Any] | None = None,
    leaf_modules: LeafModules = (),
    tracer: Any = None,
    fallback: bool = True,
    stacklevel: int = 2,
) -> ModelCapture:
    """Step 1 of :func:`profile_model`: run the model once, then capture a checked graph of it, or plan its hooks.

    Private copies, one per use that needs its own (counted in tests/fx/test_pipeline.py): the eager run's,
    which each graph capture and the hooks use too while its run changed nothing in it
    (:func:`~labkit.fx.model_state.state_token`: a graph's buffers must start where the learner's model is,
    not a run further on: a counter, a running mean, a cache); else one per capture (the hooks take the
    eager run's: a run further on is one warmup run more); one more with its own parameters when forward
    writes one in place (the shared copy was stopped part-way); the fallback's look at which children trace
    (tracing can leave fx Proxies in a copy's caches); one more to locate a mismatch.
    """
    _check_mode(mode)
    check_capture(capture)
    model = eager_model(model, stacklevel=stacklevel)
    keywords = dict(kwargs or {})
    refuse_unknown_keywords(model, keywords, None if concrete_args else inputs)
    keywords, notes = without_cache(model, keywords)
    leaves = [leaf_modules] if isinstance(leaf_modules, (str, type)) else list(leaf_modules)
    # With concrete_args every input goes by position (as the graph gets them); else as the caller gave them.
    call_args, call_kwargs = (call_arguments(model, inputs, concrete_args, keywords), {}) if concrete_args else (inputs, keywords)
    # the traced graph's positional call, where it is known now (else the capture binds the keywords, which can fail)
    graph_args = tuple(call_args) if concrete_args or not keywords else None
    eager = run_eager_once(model, call_args, call_kwargs, stacklevel=stacklevel + 1)
    if eager.parameters_written == (UNWATCHED,):
        notes += ("this torch cannot watch a forward through torch.cond for in-place parameter writes, so the "
                  "profiled copy has its own parameters and yours are unchanged.",)
    elif eager.parameters_written:
        notes += (f"forward writes parameter {eager.parameters_written[0]} in place, so the profiled copy has its own "
                  "parameters and yours are unchanged.",)
    plan = ModelCapture(model, mode, eager, None, tuple(call_args), call_kwargs, leaves, notes=notes)
    if mode == "modules":  # asked for: every leaf module, as the notebook teaches; a fallback times blocks as units
        return dataclasses.replace(plan, units=False)
    try:
        graph = capture_graph(
            model, inputs, keywords, capture=capture, concrete_args=concrete_args, leaf_modules=leaves, tracer=tracer,
            eager=eager, graph_args=graph_args,
        )
    except (TraceFailedError, KeywordsIntoVarKeywordError) as exc:
        if not fallback or not isinstance(model, torch.nn.Module):
            raise
        failures = exc.failures if isinstance(exc, CaptureFailedError) else {"symbolic_trace": exc}
        with kept_random_state():
            children = traceable_children(private_copy(model))
        warnings.warn(_fallback_warning(type(model).__name__, failures, children), TraceFallbackWarning, stacklevel=stacklevel)
        reason = "\n".join(str(error) for error in failures.values())
        return dataclasses.replace(plan, fallback_reason=reason, traceable_children=children)
    return dataclasses.replace(plan, graph=graph, fallback_reason=graph.fallback_reason)


def profiler_for(captured: ModelCapture) -> Profiler:
    """Step 2's timer for a :class:`ModelCapture`: the graph's :class:`NodeProfiler`, or a :class:`ModuleProfiler`
    hooking the eager run's private copy."""
    profiler = _graph_or_hooks_profiler(captured)
    profiler.model_name = _model_name(captured.model)
    return profiler


def _model_name(model: Any) -> str:
    return type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", "function")


def _graph_or_hooks_profiler(captured: ModelCapture) -> Profiler:
    if captured.graph is None:
        return ModuleProfiler(
            captured.model, *captured.call_args, kwargs=captured.call_kwargs, leaf_modules=captured.leaves,
            units=captured.units, fallback_reason=captured.fallback_reason, traceable_children=captured.traceable_children,
            notes=captured.notes, private=captured.eager.copy_for_hooks(),
            share_parameters=captured.eager.share_parameters,
        )
    profiler = NodeProfiler(captured.model, mode=captured.mode, captured=captured.graph)
    profiler.notes = captured.notes
    return profiler


def time_capture(
    captured: ModelCapture, warmup: int, runs: int, on_run: Callable[[ProfileReport], None] | None = None,
    stacklevel: int = 2,
) -> Profiler:
    """Step 2 of :func:`profile_model`: ``warmup`` untimed and ``runs`` timed runs; the profiler holds the timings."""
    return run_series(profiler_for(captured), warmup, runs, on_run, stacklevel=stacklevel + 1)


def make_profiler(model: Any, *inputs: Any, stacklevel: int = 2, **options: Any) -> Profiler:
    """The profiler :func:`profile_model` uses, after one eager run of the model (:func:`capture_model`).

    ``options`` are :func:`capture_model`'s, passed through (``kwargs``, ``mode``, ``capture``,
    ``concrete_args``, ``leaf_modules``, ``tracer``, ``fallback``): a graph mode captures the graph
    by ``capture`` (``"auto"`` tries symbolic_trace, then torch.export) and, when that fails, falls
    back to ``mode="modules"`` with a :class:`TraceFallbackWarning`, unless ``fallback=False``.
    ``stacklevel`` is that of the warning, counted from this function (2: its caller's line).
    """
    stray = {name: value for name, value in options.items() if name not in _CAPTURE_OPTIONS}
    keywords = keyword_inputs("make_profiler", options.pop("kwargs", None), stray, _MAKE_OPTIONS)
    return profiler_for(capture_model(model, *inputs, kwargs=keywords, stacklevel=stacklevel + 1, **options))


def _fallback_warning(name: str, failures: Mapping[str, Exception], children: tuple[tuple[str, int], ...]) -> str:
    """One line: which captures failed, where and why in a sentence each, and what to profile instead."""
    said, details = [], []
    traced = failures.get("symbolic_trace")
    if traced is not None:
        if isinstance(traced, CaptureMismatchError):
            said.append(f"torch.fx's graph of {name} does not compute what {name} does")
        else:
            said.append(f"torch.fx could not trace {name}" if isinstance(traced, TraceFailedError)
                        else f"A traced graph of {name} cannot take these keyword inputs")
        lines = str(traced).splitlines()
        details.append(lines[1] if len(lines) > 1 else lines[0])
    exported = failures.get("export")
    if exported is not None:
        lines = str(exported).splitlines()
        if isinstance(exported, ExportMismatchError):
            said.append("torch.export's graph does not either" if said else f"torch.export's graph of {name} does not")
            details.append(lines[0])
        elif lines[0].startswith("torch.export could not"):
            said.append(f"torch.export could not capture {'it' if said else name}")
            details.append("torch.export: " + (lines[1] if len(lines) > 1 else lines[0].split(": ", 1)[-1]))
        else:  # not tried, or not on this torch
            details.append(lines[0])
    cannot = " and ".join(said) or f"No graph of {name} could be captured"
    part = _submodule_code(children[0][0]) if children else ""
    suggestion = f" For node-level detail, profile a part that traces, e.g. {part}." if children else ""
    return (
        f"{cannot}, so it is profiled module by module (mode='modules'). {' '.join(details)} "
        f"report.fallback_reason has the details.{suggestion}"
    )


def _submodule_code(path: str) -> str:
    """``model.backbone.body``, or ``model.get_submodule("it's")`` for a path Python cannot write as attributes."""
    if all(part.isidentifier() and not keyword.iskeyword(part) for part in path.split(".")):
        return f"model.{path}"
    return f"model.get_submodule({path!r})"


def require_profilable(
    model: Any, *inputs: Any, kwargs: Mapping[str, Any] | None = None, mode: str = "fast", capture: str = "auto",
    fallback: bool = True, **stray: Any,
) -> None:
    """Raise now the labkit error :func:`profile_model` would raise for these arguments, without running the model.

    Why: a widget built with a model that cannot be profiled should fail where it
    is built, with labkit's message, not at the first click. A model no graph
    capture works on is fine while ``fallback`` is on (it is profiled module by
    module); with ``fallback=False`` the graph is captured (a torch.export
    takes about a second) to know.
    """
    keywords = keyword_inputs("require_profilable", kwargs, stray, ("kwargs", "mode", "capture", "fallback"))
    _check_mode(mode)
    check_capture(capture)
    with warnings.catch_warnings():  # profile_model warns when it runs; this only checks
        warnings.simplefilter("ignore", CompiledModelWarning)
        model = eager_model(model)
    refuse_unknown_keywords(model, keywords, inputs)
    if isinstance(model, torch.nn.Module) and (mode == "modules" or fallback):
        private_copy(model)  # profiling works on one: a model deepcopy cannot copy fails here as there
        check_input_devices(model, [*inputs, *keywords.values()])  # a model no graph captures is profiled by hooks
        return
    captured = capture_graph(model, inputs, keywords, capture=capture)
    check_input_devices(captured.graph_module, captured.inputs)


def profile_model(
    model: Any,
    *inputs: Any,
    kwargs: Mapping[str, Any] | None = None,
    warmup: int = 2,
    runs: int = 5,
    mode: str = "fast",
    on_run: Callable[[ProfileReport], None] | None = None,
    capture: str = "auto",
    concrete_args: dict[str, Any] | None = None,
    leaf_modules: LeafModules = (),
    tracer: Any = None,
    fallback: bool = True,
    **stray: Any,
) -> ProfileReport:
    """Run ``model`` once, then ``warmup`` times untimed and ``runs`` times timed; time every node.

    ``mode="fast"`` (default) times with an instrumented GraphModule (see
    :class:`InstrumentedModule`); ``mode="interpreter"`` with the tutorial's
    :class:`ProfilingInterpreter`; ``mode="modules"`` with forward hooks on the
    leaf modules, no graph needed (:class:`~labkit.fx.module_hooks.ModuleProfiler`).

    ``capture`` says how a graph mode gets its graph (:mod:`labkit.fx.capture`):
    ``"auto"`` (default) tries fx's ``symbolic_trace`` (nodes are modules and
    functions) and, where that fails, ``torch.export`` (nodes are ATen operators
    such as ``aten.linear``, each with its module: see
    :meth:`ProfileReport.by_module`); ``"symbolic_trace"`` or ``"export"`` tries
    only that one. A model whose config has ``use_cache`` (a Hugging Face decoder)
    gets ``use_cache=False`` unless ``kwargs`` sets it, with a note in
    ``report.notes``: its cache is no output torch.export can flatten. Each graph
    is run once and compared with the model's own output; one that differs is not
    timed (the next capture is tried). If no
    graph can be captured, a graph mode falls back to ``"modules"`` with a
    :class:`TraceFallbackWarning`; ``report.capture`` says which capture ran
    (``"symbolic_trace"``, ``"export"`` or ``"hooks"``), ``report.mode`` the
    timing mode and ``report.fallback_reason`` why the earlier captures failed
    (``fallback=False`` raises the capture's error, a :class:`TraceFailedError`, instead).

    Tracing options, as in :func:`labkit.fx.tracing.trace`: ``concrete_args``
    (``inputs`` are then the other arguments), ``leaf_modules``, ``tracer``.
    torch.export has none of them: with one, ``"auto"`` does not try it.

    The model is called as ``model(*inputs, **kwargs)``: its keyword inputs go
    in one dict, as in ``torch.export.export(model, args, kwargs=...)``, e.g.
    ``profile_model(model, ids, kwargs={"attention_mask": mask})``, so they never
    collide with labkit's own options (``mode``, ``runs``...). A model keyword
    given directly (``attention_mask=mask``) is a :class:`StrayKeywordError`, a
    name ``forward`` does not take an :class:`UnknownKeywordInputError`.

    The first, untimed run is the model itself: if it fails, the
    :class:`ModelRunError` carries the model's own message. Runs happen under
    ``torch.no_grad()`` on a :func:`~labkit.core.copies.private_copy` (shared
    parameters, or its own where forward writes them in place; its own buffers,
    attributes and caches; the model's hooks and parametrizations, which are part
    of what it computes), each on fresh copies of the inputs, and Python's, NumPy's
    and torch's random states are restored afterwards, so ``model``, the inputs
    and later random numbers are left unchanged. A train-mode model is profiled as it is, with a :class:`TrainModeWarning`.

    ``on_run(report)``, if given, is called after each timed run with the report
    of the runs so far (its ``runs`` grows 1, 2, ... ``runs``), so a widget can
    redraw while the profile is still running.
    """
    with left_as_found():
        keywords = keyword_inputs("profile_model", kwargs, stray, _PROFILE_OPTIONS)
        warmup, runs = _check_runs(warmup, runs)
        captured = capture_model(  # 1. the model's own run, then a checked graph of it (or its hooks)
            model, *inputs, kwargs=keywords, mode=mode, capture=capture, concrete_args=concrete_args,
            leaf_modules=leaf_modules, tracer=tracer, fallback=fallback, stacklevel=3,
        )
        timed = time_capture(captured, warmup, runs, on_run, stacklevel=3)  # 2. timed
        return timed.report()  # 3. reported


__all__ = [
    "CAPTURES",
    "MODES",
    "NODE_FIELDS",
    "OP_TYPE_SORT_KEYS",
    "SORT_KEYS",
    "CaptureFailedError",
    "ExportFailedError",
    "InputsDoNotFitError",
    "InstrumentedModule",
    "KeywordsIntoVarKeywordError",
    "ModelRunError",
    "ModuleProfiler",
    "NodeProfiler",
    "NodeTiming",
    "NotRunYetError",
    "OpTypeBreakdown",
    "ProfileReport",
    "ProfilingInterpreter",
    "StrayKeywordError",
    "TraceFailedError",
    "TraceFallbackWarning",
    "TracedRunError",
    "TrainModeWarning",
    "UnknownKeywordInputError",
    "ModelCapture",
    "capture_model",
    "make_profiler",
    "profile_model",
    "profiler_for",
    "time_capture",
    "without_cache",
    "require_count",
    "require_profilable",
    "trace",
]
