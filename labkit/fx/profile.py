"""Profile a model node by node with ``torch.fx``: where does the time go?

Why this module exists: ``torch.profiler`` answers "which aten kernels are slow",
but a learner thinks in layers ("is it the BatchNorms?"). ``torch.fx`` traces a
model into a graph whose nodes *are* those layers, so timing each node answers
the learner's question directly. Two ways to time the nodes:

- :class:`ProfilingInterpreter` (``mode="interpreter"``) is the classic tutorial's
  teaching version, kept API-compatible: a ``torch.fx.Interpreter`` that wraps
  every ``run_node`` in a timer. Easy to read, but the interpreter itself adds a
  few microseconds per node, which is more than a small op costs.
- :class:`InstrumentedModule` (``mode="fast"``) generates a new ``GraphModule``
  whose code reads the clock after every node. The graph runs as compiled Python,
  so each node pays one clock read and one list append (well under a microsecond).

Both feed the same result object, :class:`ProfileReport` (per-node statistics,
by-type breakdown, text/HTML/CSV/JSON). What each mode costs per node is measured in
:mod:`labkit.fx.overhead`. Fusion lives in :mod:`labkit.fx.fusion`
and the ``torch.profiler`` cross-check in :mod:`labkit.fx.crosscheck`.
"""
from __future__ import annotations

import contextlib
import copy
import csv
import json
import linecache
import numbers
import os
import re
import statistics
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import tabulate
import torch
import torch.fx

from labkit.core.device import synchronize
from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.files import write_file, write_text
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.timing import RunStats, format_seconds

MODES = ("fast", "interpreter")
SUMMARY_HEADERS = ["Op type", "Op", "Average runtime (s)", "Pct total runtime"]


class TraceFailedError(LabkitError):
    """``torch.fx.symbolic_trace`` could not trace the model."""


class NotRunYetError(LabkitError, RuntimeError):
    """A summary or report was asked for before any timed run."""


class TrainModeWarning(UserWarning):
    """The profiled model is in train mode: Dropout and BatchNorm then do training work."""


def require_count(name: str, value: Any, minimum: int, hint: str) -> int:
    """``value`` as an int if it is a whole number >= ``minimum``; else a labkit error naming ``name``.

    Why: ``range(2.5)`` fails deep inside a run, ``range("5")`` too, and a bool
    (a subclass of int) is almost surely a mistake, so all are refused up front.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LabkitTypeError(f"{name} must be a whole number (an int), got {value!r} ({type(value).__name__}); {hint}.")
    if value < minimum:
        requirement = "cannot be negative" if minimum == 0 else f"must be at least {minimum}"
        raise LabkitValueError(f"{name} {requirement} (got {value}); {hint}.")
    return int(value)


def _check_runs(warmup: Any, runs: Any) -> tuple[int, int]:
    return (
        require_count("warmup", warmup, 0, "use warmup=0 to skip it"),
        require_count("runs", runs, 1, "use runs=5 or more for stable statistics"),
    )


# --------------------------------------------------------------------------- tracing


def _trace_failure_site(exc: BaseException) -> tuple[str, str]:
    """('Block.forward, line 12 of model.py', 'if x.sum() > 0:') for the innermost frame outside torch.

    Why the separator: torch's folder ``.../site-packages/torch`` is also the start of
    ``.../site-packages/torchvision``, and a torchvision model's frames are the ones
    that say where it failed. A frame of this file is skipped too. ``("", "")`` if
    there is no such frame.
    """
    torch_dir = str(Path(torch.__file__).parent) + os.sep
    where, source = "", ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if code.co_filename.startswith(torch_dir) or code.co_filename == __file__:
            continue
        owner = frame.f_locals.get("self")
        name = f"{type(owner).__name__}.{code.co_name}" if isinstance(owner, torch.nn.Module) else code.co_name
        where = f"{name}, line {lineno} of {Path(code.co_filename).name}"
        source = linecache.getline(code.co_filename, lineno).strip()
    return where, source


def _describe_trace_failure(exc: BaseException) -> str:
    """'Block.forward, line 12 of model.py: `if x.sum() > 0:`' for the innermost user frame."""
    where, source = _trace_failure_site(exc)
    if not where:
        return "an unknown place (no user frame in the traceback)"
    return where + (f": `{source}`" if source else "")


_TRACE_OPTIONS = (
    "Options: fix the branch with concrete_args (e.g. trace(model, concrete_args={'flag': True})), "
    "make the offending submodule a leaf (a custom torch.fx.Tracer with is_leaf_module), "
    "or profile the eager model with torch.profiler instead."
)


def _explain_trace_failure(exc: BaseException, source: str) -> str:
    """What went wrong, by family of fx failure, and what to do about it.

    Why: fx's own messages name its mechanism (Proxy, control flow), not the
    learner's code. Three families cover most models that do not trace: a
    check of a shape or value (``assert``, ``torch._assert``), a loop over an
    input (a list of tensors, ``*args``), and an ``if`` on a tensor value.
    """
    message = str(exc)
    if source.startswith("assert ") or "_assert(" in source:
        return (
            "The failing line checks a shape or value (assert / torch._assert). While tracing, inputs are "
            "torch.fx Proxies: their shapes and values are not numbers yet, so a Python assert, len() of a "
            "shape or bool() of a comparison cannot run. Options: write the check as "
            "torch._assert(tensor_condition, message) on tensors only (fx records it as a node), drop it from "
            "the traced forward, make the checking submodule a leaf (a custom torch.fx.Tracer with "
            "is_leaf_module), or profile the eager model with torch.profiler instead."
        )
    if "cannot be iterated" in message:
        return (
            "The model loops over (or unpacks) a traced value: a Proxy has no length while tracing. This is "
            "typical of a model that takes a list of tensors, e.g. torchvision's detection models take a list "
            "of images. Options: profile a part that takes one tensor (e.g. profile_model(model.backbone, x)), "
            "make the looping submodule a leaf (a custom torch.fx.Tracer with is_leaf_module), "
            "or profile the eager model with torch.profiler instead."
        )
    if "control flow" in message:
        return "Symbolic tracing cannot follow Python control flow that depends on tensor values. " + _TRACE_OPTIONS
    return (
        "While tracing, inputs are torch.fx Proxies, not tensors: code that needs a concrete value "
        "(an if, a loop, a Python number) cannot run. " + _TRACE_OPTIONS
    )


_TORCH_NN_PREFIXES = ("torch.nn.", "torch.ao.nn.")


def _torch_nn_layer(cls: type[torch.nn.Module]) -> type[torch.nn.Module] | None:
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


class _Tracer(torch.fx.Tracer):
    """fx's default tracer, plus: a subclass of a torch.nn layer that keeps the layer's ``forward`` is a leaf.

    Why: fx keeps torch.nn layers as single ``call_module`` nodes, but traces into
    any module defined elsewhere. ``class Conv3DSimple(nn.Conv3d)`` (torchvision)
    then became a ``conv3d`` function plus two ``get_attr`` nodes, so a report
    split one layer type in two. A subclass that overrides ``forward`` runs its
    own code and is still traced into. Leafness changes only how finely the graph
    is timed, never what it computes.
    """

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        layer = _torch_nn_layer(type(m))
        inherits_forward = layer is not None and type(m).forward is layer.forward
        return inherits_forward or super().is_leaf_module(m, module_qualified_name)


def trace(model: Any, concrete_args: dict[str, Any] | None = None) -> torch.fx.GraphModule:
    """Symbolically trace ``model`` (an ``nn.Module`` or a function) into a ``GraphModule``.

    As ``torch.fx.symbolic_trace``, except that a subclass of a torch.nn layer that
    does not override ``forward`` stays one node (see :class:`_Tracer`). Raises
    :class:`LabkitTypeError` for something that is not callable, and
    :class:`TraceFailedError` naming the module and line where tracing failed and
    what to do about that kind of failure.
    """
    if isinstance(model, torch.fx.GraphModule) and concrete_args is None:
        return model
    if not callable(model):
        raise LabkitTypeError(
            f"Expected a torch.nn.Module (or a function) to trace, got {type(model).__name__}. "
            "Pass the model itself, e.g. profile_model(torchvision.models.resnet18(), x)."
        )
    tracer = _Tracer()
    try:
        graph = tracer.trace(model, concrete_args=concrete_args)
    except Exception as exc:  # noqa: BLE001 - fx raises TraceError, TypeError, RuntimeError...
        _, source = _trace_failure_site(exc)
        raise TraceFailedError(
            f"torch.fx could not trace the model: {type(exc).__name__}: {exc}\n"
            f"It failed in {_describe_trace_failure(exc)}.\n" + _explain_trace_failure(exc, source)
        ) from exc
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", "function")
    return torch.fx.GraphModule(tracer.root, graph, name)


def _model_device(module: torch.nn.Module) -> torch.device | None:
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return None


def _check_input_devices(module: torch.nn.Module, inputs: Sequence[Any]) -> torch.device:
    """The device to synchronize; raises if an input tensor sits elsewhere than the model."""
    model_device = _model_device(module)
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    for index, tensor in enumerate(tensors):
        if model_device is not None and tensor.device != model_device:
            raise LabkitValueError(
                f"Input {index} is on {tensor.device} but the model is on {model_device}. "
                f"Move one of them, e.g. x = x.to({str(model_device)!r}) or model.to(x.device)."
            )
    if model_device is not None:
        return model_device
    return tensors[0].device if tensors else torch.device("cpu")


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
        self.device = torch.device(device) if device is not None else _model_device(graph_module) or torch.device("cpu")
        self._asynchronous = self.device.type != "cpu"  # CPU ops finish before they return
        self.total_runtime_sec: list[float] = []
        self.runtimes_sec: dict[torch.fx.Node, list[float]] = {}

    def run(self, *args: Any, **kwargs: Any) -> Any:
        synchronize(self.device)
        start = time.perf_counter()
        result = super().run(*args, **kwargs)
        synchronize(self.device)
        self.total_runtime_sec.append(time.perf_counter() - start)
        return result

    def run_node(self, n: torch.fx.Node) -> Any:
        if self._asynchronous:
            synchronize(self.device)
        start = time.perf_counter()
        result = super().run_node(n)
        if self._asynchronous:
            synchronize(self.device)
        self.runtimes_sec.setdefault(n, []).append(time.perf_counter() - start)
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


# ``name = stamp(_labkit_stamps);  name = None`` (possibly with other dead names) as fx writes it.
_STAMP_LINE = re.compile(
    rf"^(?P<indent>\s*)(?P<name>\w+) = (?P<call>\w+\({_STAMPS_ATTR}\));  (?P<dead>\w+(?: = \w+)*) = None$"
)


def _drop_stamp_variables(body: list[str]) -> list[str]:
    """Write each stamp as a bare call, so the stamps add no local variables to ``forward``.

    Why: a Python >= 3.11 frame lives in a 16 KiB "data stack" chunk. A forward
    with thousands of locals can end just short of a chunk's end; then every
    module it calls gets a fresh chunk, mmap'd and munmap'd per call (a page fault
    each: efficientnet_b5 took ~600 per forward). Without the stamps' variables the
    instrumented forward's frame is the plain GraphModule's. A line in another
    shape is left as it is (still correct, only larger).
    """
    lines = "".join(body).split("\n")
    for index, line in enumerate(lines):
        match = _STAMP_LINE.match(line)
        if match is None or match["name"] not in match["dead"].split(" = "):
            continue
        dead = [name for name in match["dead"].split(" = ") if name != match["name"]]
        lines[index] = match["indent"] + match["call"] + (f";  {' = '.join(dead)} = None" if dead else "")
    return ["\n".join(lines)]


def _after_previous_transformer(
    previous: Callable[[list[str]], list[str]] | None,
) -> Callable[[list[str]], list[str]]:
    """For ``Graph.on_generate_code``: drop the stamps' variables after any transformer the graph had."""
    if previous is None:
        return _drop_stamp_variables
    return lambda body: _drop_stamp_variables(previous(body))


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
        self.module = self._instrument(graph_module, _stamp_function(self.device))
        self.stamps: list[float] = getattr(self.module, _STAMPS_ATTR)

    @staticmethod
    def _instrument(graph_module: torch.fx.GraphModule, stamp: Callable[[list[float]], None]) -> torch.fx.GraphModule:
        instrumented = torch.fx.GraphModule(graph_module, copy.deepcopy(graph_module.graph))
        setattr(instrumented, _STAMPS_ATTR, [])
        graph = instrumented.graph
        timed = [n for n in graph.nodes if n.op not in ("placeholder", "output")]
        first = timed[0] if timed else next(n for n in graph.nodes if n.op == "output")
        with warnings.catch_warnings():  # a plain list attribute is fine for get_attr here
            warnings.filterwarnings("ignore", message="Attempted to insert a get_attr Node")
            with graph.inserting_before(first):
                stamps = graph.get_attr(_STAMPS_ATTR)
                graph.call_function(stamp, (stamps,))
        for node in timed:
            with graph.inserting_after(node):
                graph.call_function(stamp, (stamps,))
        graph.on_generate_code(_after_previous_transformer)
        instrumented.recompile()
        return instrumented

    def __call__(self, *inputs: Any) -> Any:
        self.stamps.clear()
        return self.module(*inputs)

    def last_durations(self) -> list[float]:
        """Seconds per timed node for the most recent call, in graph order."""
        return [b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False)]


# --------------------------------------------------------------------- result objects


@dataclass(frozen=True)
class NodeTiming:
    """One graph node's timings."""

    op: str  # call_module, call_function, call_method, get_attr
    name: str  # node name, e.g. "layer1_0_conv1"
    target: str  # "layer1.0.conv1" or "add"
    op_type: str  # torch.nn class ("Conv2d"), function/method name ("add"), or "get_attr"
    stats: RunStats
    pct: float  # mean as percent of the mean total run
    module_class: str = ""  # call_module: the module's own class ("Conv3DSimple" where op_type is "Conv3d")

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "name": self.name,
            "target": self.target,
            "op_type": self.op_type,
            "mean_s": self.stats.mean,
            "median_s": self.stats.median,
            "min_s": self.stats.min,
            "iqr_s": self.stats.iqr,
            "runs": self.stats.count,
            "pct_total": self.pct,
            "module_class": self.module_class,
        }


#: The keys :meth:`ProfileReport.sorted` and :meth:`ProfileReport.top` rank nodes by.
SORT_KEYS = ("mean", "median", "min", "iqr", "pct", "name")
#: The keys :meth:`ProfileReport.by_op_type` ranks op types by (a type's time is a sum of means).
OP_TYPE_SORT_KEYS = ("mean", "pct", "name")
REPORT_HEADERS = ["op", "node", "type", "mean", "median", "min", "IQR", "% total"]
# Columns of to_csv and keys of NodeTiming.as_dict, fixed so an empty report still writes a header.
# New columns go at the end, so readers of older files keep working.
NODE_FIELDS = (
    "op", "name", "target", "op_type", "mean_s", "median_s", "min_s", "iqr_s", "runs", "pct_total", "module_class",
)


@dataclass(frozen=True, repr=False)
class OpTypeBreakdown(ShowsAsTable):
    """Time per op type (module class or function name), slowest first."""

    rows: list[tuple[str, int, float, float]]  # (op_type, nodes, seconds, pct)

    @property
    def seconds(self) -> dict[str, float]:
        return {op_type: seconds for op_type, _, seconds, _ in self.rows}

    @property
    def pct(self) -> dict[str, float]:
        return {op_type: pct for op_type, _, _, pct in self.rows}

    def top(self, k: int) -> OpTypeBreakdown:
        """The first ``k`` types in this breakdown's order (the slowest, unless sorted by name)."""
        return OpTypeBreakdown(self.rows[: require_count("k", k, 1, "e.g. top(5) for the five slowest types")])

    def table(self) -> Table:
        return Table(
            ["type", "nodes", "mean per run", "% total"],
            [[t, n, format_seconds(s), f"{p:.1f}"] for t, n, s, p in self.rows],
            title="Time by op type",
        )


@dataclass(frozen=True, repr=False)
class ProfileReport(ShowsAsTable):
    """Per-node timings of repeated runs; renders as text, HTML, CSV and JSON."""

    rows: list[NodeTiming]  # graph order
    total: RunStats  # whole runs
    mode: str
    warmup: int
    graph_nodes: int = 0  # timed nodes in the whole graph (``top`` keeps fewer rows)

    @property
    def runs(self) -> int:
        return self.total.count

    def sorted(self, key: str = "mean", descending: bool = True) -> list[NodeTiming]:
        """Rows sorted by ``mean``, ``median``, ``min``, ``iqr``, ``pct`` or ``name``."""
        if key == "name":
            return sorted(self.rows, key=lambda r: r.name, reverse=descending)
        if key == "pct":
            return sorted(self.rows, key=lambda r: r.pct, reverse=descending)
        if key not in SORT_KEYS:
            raise LabkitValueError(f"Cannot sort by {key!r}; use mean, median, min, iqr, pct or name.")
        return sorted(self.rows, key=lambda r: getattr(r.stats, key), reverse=descending)

    def top(self, k: int = 10, key: str = "mean") -> ProfileReport:
        """A report with only the first ``k`` nodes by ``key``: the slowest, or A-Z for ``"name"``.

        Percentages stay those of the whole run.
        """
        k = require_count("k", k, 1, "e.g. top(10) for the ten slowest nodes")
        rows = self.sorted(key, descending=key != "name")[:k]
        return ProfileReport(rows, self.total, self.mode, self.warmup, self.graph_nodes)

    def by_op_type(self, key: str = "mean") -> OpTypeBreakdown:
        """Sum of mean node times per module class / function name: slowest first, or A-Z for ``key="name"``.

        A type's time is the sum of its nodes' means, so it can be ranked by that
        time (``"mean"``, or its share ``"pct"``: the same order) or by name only.
        """
        if key not in OP_TYPE_SORT_KEYS:
            raise LabkitValueError(
                f"Cannot sort op types by {key!r}: a type's time is the sum of its nodes' means; use mean, pct or name."
            )
        groups: dict[str, list[NodeTiming]] = {}
        for row in self.rows:
            groups.setdefault(row.op_type, []).append(row)
        rows = [
            (op_type, len(members), sum(r.stats.mean for r in members), sum(r.pct for r in members))
            for op_type, members in groups.items()
        ]
        if key == "name":
            return OpTypeBreakdown(sorted(rows))
        return OpTypeBreakdown(sorted(rows, key=lambda r: r[2], reverse=True))

    def table(self) -> Table:
        rows: list[Sequence[Any]] = [
            [
                r.op,
                r.name,
                _shown_type(r),
                format_seconds(r.stats.mean),
                format_seconds(r.stats.median),
                format_seconds(r.stats.min),
                format_seconds(r.stats.iqr),
                f"{r.pct:.1f}",
            ]
            for r in self.rows
        ]
        shown = f"{len(self.rows)} nodes" if len(self.rows) == self.graph_nodes else (
            f"top {len(self.rows)} of {self.graph_nodes} nodes"
        )
        title = (
            f"{shown}, mode={self.mode}, {self.runs} runs after {self.warmup} warm-up; "
            f"total {self.total}"
        )
        return Table(REPORT_HEADERS, rows, title=title)

    def to_dicts(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.rows]

    def to_csv(self, path: str | Path) -> Path:
        """One line per node (columns :data:`NODE_FIELDS`); seconds as floats. Returns the path written.

        Written atomically through :func:`labkit.core.files.write_file`: a symlink is
        followed, a folder or special file is refused, a missing folder is an error.
        """

        def write(handle: TextIO) -> None:
            writer = csv.DictWriter(handle, fieldnames=NODE_FIELDS)
            writer.writeheader()
            writer.writerows(self.to_dicts())

        return write_file(path, write)

    def to_json(self, path: str | Path) -> Path:
        """``{"mode", "warmup", "total": {...}, "nodes": [...]}``. Returns the path written (as :meth:`to_csv`)."""
        payload = {"mode": self.mode, "warmup": self.warmup, "total": self.total.as_dict(), "nodes": self.to_dicts()}
        return write_text(path, json.dumps(payload, indent=2))


# ---------------------------------------------------------------------- the profiler


def _op_type(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> str:
    """The type a node is grouped under in :meth:`ProfileReport.by_op_type`.

    A module's class, normalised to its torch.nn layer for a subclass defined
    elsewhere (``Conv3DSimple`` counts as ``Conv3d``; :attr:`NodeTiming.module_class`
    keeps the real class); a function's or method's name; and ``"get_attr"`` for
    every read of a parameter or buffer, whose target is a parameter's name (one
    type per parameter would flood the breakdown).
    """
    if node.op == "call_module":
        cls = type(graph_module.get_submodule(str(node.target)))
        return (_torch_nn_layer(cls) or cls).__name__
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    if node.op == "get_attr":
        return "get_attr"
    return str(node.target)


def _module_class(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> str:
    if node.op != "call_module":
        return ""
    return type(graph_module.get_submodule(str(node.target))).__name__


def _shown_type(row: NodeTiming) -> str:
    """``Conv3d (Conv3DSimple)`` when the module's class is not the type it is counted as."""
    if row.module_class and row.module_class != row.op_type:
        return f"{row.op_type} ({row.module_class})"
    return row.op_type


def _target(node: torch.fx.Node) -> str:
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    return str(node.target)


def _with_private_buffers(graph_module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``graph_module`` that shares its parameters but owns its buffers.

    A training-mode BatchNorm updates running_mean/var and num_batches_tracked on
    every forward, even under ``no_grad``. Profiling runs on this copy, so the
    learner's model is left exactly as it was, at the memory cost of the buffers only.
    """
    shared_parameters = {id(p): p for p in graph_module.parameters()}
    return copy.deepcopy(graph_module, memo=shared_parameters)


def _traced_for_profiling(model: Any, inputs: Sequence[Any], mode: str) -> tuple[torch.fx.GraphModule, torch.device]:
    """The traced model and the device to synchronize, or the labkit error a profile of it would raise."""
    if mode not in MODES:
        raise LabkitValueError(f"mode must be one of {MODES} (got {mode!r}).")
    traced = trace(model)
    return traced, _check_input_devices(traced, inputs)


def require_profilable(model: Any, *inputs: Any, mode: str = "fast") -> None:
    """Raise now the labkit error :func:`profile_model` would raise for these arguments, without running the model.

    Why: a widget built with a model that cannot be traced should fail where it
    is built, with labkit's message, not at the first click.
    """
    _traced_for_profiling(model, inputs, mode)


class NodeProfiler:
    """Times a traced model run by run; :func:`profile_model` and the LiveProfile widget use it.

    ``run_once()`` adds one timed run, ``report()`` summarizes all runs so far,
    so a widget can redraw after every run.
    """

    def __init__(self, model: Any, *inputs: Any, mode: str = "fast") -> None:
        traced, self.device = _traced_for_profiling(model, inputs, mode)
        self.graph_module = _with_private_buffers(traced)
        self.inputs = inputs
        self.mode = mode
        self.warmup_runs = 0
        self.nodes = [n for n in self.graph_module.graph.nodes if n.op not in ("placeholder", "output")]
        # The model itself or a layer the graph calls; fx's own container stand-ins are always "training".
        self.training = isinstance(model, torch.nn.Module) and (
            model.training
            or any(self.graph_module.get_submodule(n.target).training for n in self.nodes if n.op == "call_module")
        )
        self.samples: dict[str, list[float]] = {n.name: [] for n in self.nodes}
        self.totals: list[float] = []
        if mode == "fast":
            self._instrumented = InstrumentedModule(self.graph_module, self.device)
        else:
            self._interpreter = ProfilingInterpreter(self.graph_module, self.device)

    def _timed_call(self) -> tuple[float, list[float]]:
        with torch.no_grad():
            if self.mode == "fast":
                synchronize(self.device)
                start = time.perf_counter()
                self._instrumented(*self.inputs)
                synchronize(self.device)
                return time.perf_counter() - start, self._instrumented.last_durations()
            interpreter = self._interpreter
            interpreter.run(*self.inputs)
            return interpreter.total_runtime_sec[-1], [interpreter.runtimes_sec[n][-1] for n in self.nodes]

    @contextlib.contextmanager
    def session(self, stacklevel: int = 3) -> Iterator[None]:
        """Wrap a series of runs: the global RNG (CPU and the device in use) is restored afterwards.

        A train-mode Dropout draws random numbers on every run, so without the
        fork profiling would change what the learner's next random call returns.
        A train-mode model also gets one :class:`TrainModeWarning` per session.
        """
        if self.training:
            warnings.warn(
                "The model is in train mode, so Dropout and BatchNorm do training work in every profiled run. "
                "Call model.eval() first to profile inference.",
                TrainModeWarning,
                stacklevel=stacklevel,  # 3: the line with the ``with``
            )
        if self.device.type in ("cpu", "meta"):
            devices, device_type = [], "cpu"
        else:
            device_module = torch.get_device_module(self.device.type)
            devices = [self.device.index if self.device.index is not None else device_module.current_device()]
            device_type = self.device.type
        with torch.random.fork_rng(devices=devices, device_type=device_type):
            yield

    def warmup(self, runs: int = 2) -> None:
        """Run ``runs`` times without recording (first calls allocate and pick kernels)."""
        runs = require_count("warmup", runs, 0, "use warmup=0 to skip it")
        for _ in range(runs):
            self._timed_call()
        self.warmup_runs += runs

    def run_once(self) -> None:
        """One recorded run."""
        total, durations = self._timed_call()
        self.totals.append(total)
        for node, seconds in zip(self.nodes, durations, strict=True):
            self.samples[node.name].append(seconds)

    def report(self) -> ProfileReport:
        if not self.totals:
            raise NotRunYetError("No timed runs yet: call run_once() (or profile_model(..., runs=5)) first.")
        total = RunStats.from_samples(self.totals)
        rows = []
        for node in self.nodes:
            stats = RunStats.from_samples(self.samples[node.name])
            rows.append(
                NodeTiming(
                    op=node.op,
                    name=node.name,
                    target=_target(node),
                    op_type=_op_type(node, self.graph_module),
                    stats=stats,
                    pct=stats.mean / total.mean * 100,
                    module_class=_module_class(node, self.graph_module),
                )
            )
        return ProfileReport(rows, total, self.mode, self.warmup_runs, len(rows))


def profile_model(
    model: Any,
    *inputs: Any,
    warmup: int = 2,
    runs: int = 5,
    mode: str = "fast",
    on_run: Callable[[ProfileReport], None] | None = None,
) -> ProfileReport:
    """Trace ``model``, run it ``warmup`` times untimed and ``runs`` times timed; time every node.

    ``mode="fast"`` (default) times with an instrumented GraphModule (see
    :class:`InstrumentedModule`); ``mode="interpreter"`` with the tutorial's
    :class:`ProfilingInterpreter`. Runs happen under ``torch.no_grad()`` on a
    copy with private buffers, and the global RNG is restored afterwards, so
    ``model`` and later random numbers are left unchanged. A train-mode model is
    profiled as it is, with a :class:`TrainModeWarning`.

    ``on_run(report)``, if given, is called after each timed run with the report
    of the runs so far (its ``runs`` grows 1, 2, ... ``runs``), so a widget can
    redraw while the profile is still running.
    """
    warmup, runs = _check_runs(warmup, runs)
    profiler = NodeProfiler(model, *inputs, mode=mode)
    with profiler.session(stacklevel=4):  # the warning points at the caller's line
        profiler.warmup(warmup)
        for _ in range(runs):
            profiler.run_once()
            if on_run is not None:
                on_run(profiler.report())
    return profiler.report()


__all__ = [
    "MODES",
    "NODE_FIELDS",
    "OP_TYPE_SORT_KEYS",
    "SORT_KEYS",
    "InstrumentedModule",
    "NodeProfiler",
    "NodeTiming",
    "NotRunYetError",
    "OpTypeBreakdown",
    "ProfileReport",
    "ProfilingInterpreter",
    "TraceFailedError",
    "TrainModeWarning",
    "profile_model",
    "require_count",
    "require_profilable",
    "trace",
]
