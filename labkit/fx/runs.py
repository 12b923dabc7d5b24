"""What every way of timing a model shares: the run loop, the report, and leaving the learner's state alone.

Why a module of its own: lab 01 times a model three ways (the fx interpreter,
the instrumented graph, forward hooks on modules). Each differs only in how one
run is timed; the rest is the same and lives here once:

- :class:`Profiler` records runs (``warmup``, ``run_once``) and builds the
  :class:`~labkit.fx.report.ProfileReport`;
- :meth:`Profiler.session` restores every random state afterwards (Python's, NumPy's,
  torch's) and warns about a model in train mode;
- every run is of a private copy of the model on fresh clones of the inputs
  (:mod:`labkit.core.copies`), so the learner's model and tensors never change;
- :func:`run_eager_once` runs the model once before any tracing, so a wrong
  input is reported as the model's own error, not as a traced graph's; its
  :class:`EagerRun` (the output, whether forward writes a parameter) is what the
  capture is checked against and how it copies the model;
- :func:`watch_runs` lets a checker see the timed runs really happen, rather
  than trust the count a report object states.
"""
from __future__ import annotations

import contextlib
import copy
import os
import re
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from labkit.core.context import bound
from labkit.core.copies import (
    HookSideEffectWarning,
    fresh_call,
    parameters_written,
    private_copy,
    warn_hooks_reaching_out,
)
from labkit.core.errors import LabkitError, LabkitValueError, require_count
from labkit.core.random_state import kept_random_state
from labkit.core.timing import RunStats
from labkit.fx.model_state import state_token
from labkit.fx.report import NodeTiming, ProfileReport
from labkit.fx.timeline import RunTimeline

#: The most bytes of input tensors :meth:`Profiler.prepare_runs` clones for a series before its first run.
SERIES_CLONE_BYTES = 256 * 2**20


def _tensor_bytes(values: Sequence[Any]) -> int:
    return sum(leaf.numel() * leaf.element_size() for leaf in tree_leaves(list(values)) if isinstance(leaf, torch.Tensor))


class NotRunYetError(LabkitError, RuntimeError):
    """A summary or report was asked for before any timed run."""


class ModelRunError(LabkitError):
    """The model itself (eager, before any tracing) failed on the given inputs."""


class TrainModeWarning(UserWarning):
    """The profiled model is in train mode: Dropout and BatchNorm then do training work."""


@dataclass(frozen=True)
class EagerRun:
    """What the model's own first run showed: its output (what a captured graph must compute) and the parameter
    its forward writes in place, if any (then every later copy gets its own parameters)."""

    output: Any
    parameters_written: tuple[str, ...] = ()
    #: The private copy that ran (None for a function): one run further on than the learner's model, so timing
    #: by hooks can use it (one run more is one warmup run more); a capture needs a fresh one (see labkit.fx.profile).
    model: Any = None
    #: :func:`~labkit.fx.model_state.state_token` of :attr:`model` before its run, if the run left it so (else None)
    fresh_state: Any = None

    @property
    def share_parameters(self) -> bool:
        return not self.parameters_written

    def unchanged_copy(self) -> torch.nn.Module | None:
        """:attr:`model` if it is still as the learner's model is (its run, and any capture since, changed nothing
        the token sees), so a capture or the hooks can use it instead of a copy of their own; else None."""
        if self.fresh_state is None or state_token(self.model) != self.fresh_state:
            return None
        return self.model

    def copy_for_hooks(self) -> torch.nn.Module | None:
        """:attr:`model` for timing by hooks unless a capture may have changed it (then None: hook a new copy).

        A copy its own run changed was never handed to a capture (:meth:`unchanged_copy`), and is one run
        further on, which is one warm-up run more; one that was may hold a failed trace's fx Proxies.
        """
        return self.model if self.fresh_state is None else self.unchanged_copy()


def model_device(module: torch.nn.Module) -> torch.device | None:
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return None


def check_input_devices(module: torch.nn.Module, inputs: Sequence[Any]) -> torch.device:
    """The device to synchronize; raises if an input tensor (also one in a list) sits elsewhere than the model."""
    device = model_device(module)
    tensors = [leaf for leaf in tree_leaves(list(inputs)) if isinstance(leaf, torch.Tensor)]
    for index, tensor in enumerate(tensors):
        if device is not None and tensor.device != device:
            raise LabkitValueError(
                f"Input {index} is on {tensor.device} but the model is on {device}. "
                f"Move one of them, e.g. x = x.to({str(device)!r}) or model.to(x.device)."
            )
    if device is not None:
        return device
    return tensors[0].device if tensors else torch.device("cpu")


@contextlib.contextmanager
def preserved_rng(device: torch.device | None = None) -> Iterator[None]:
    """Restore every random state (Python's, NumPy's, torch's CPU and GPU ones) when the block ends.

    ``device`` is accepted for the callers that name the device in use; every initialised one is kept anyway.
    """
    with kept_random_state():
        yield


def describe_inputs(inputs: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> str:
    """'a 1x3x64x64 tensor', 'a list of 2 tensors (3x224x224, 3x224x224)', 'mask=a 1x8 int64 tensor', ... for errors."""

    def one(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return "a " + "x".join(map(str, value.shape)) + f" {value.dtype} tensor".replace("torch.", "")
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            shapes = ", ".join("x".join(map(str, v.shape)) for v in value[:3]) + (", ..." if len(value) > 3 else "")
            return f"a {type(value).__name__} of {len(value)} tensors ({shapes})"
        return f"{type(value).__name__} {value!r}"[:60]

    described = [one(value) for value in inputs] + [f"{name}={one(value)}" for name, value in (kwargs or {}).items()]
    return "; ".join(described) or "no inputs"


def _raised_in(exc: BaseException) -> str:
    """' (raised in vision_transformer.py, line 288: `torch._assert(...)`)' for the innermost frame outside torch."""
    torch_dir = str(Path(torch.__file__).parent) + os.sep
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(torch_dir)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (raised in {Path(frame.filename).name}, line {frame.lineno}: `{(frame.line or '').strip()}`)"


def run_eager_once(
    model: Any, call_args: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *, stacklevel: int = 2
) -> EagerRun:
    """Run ``model(*call_args, **kwargs)`` once under ``no_grad``; a failure is a :class:`ModelRunError` with the model's message.

    Why first: a traced graph that fails on a wrong input reports it at a fx node
    (``Expected 224 but got Proxy(getitem_2)``), a dozen frames deep. The model's
    own message says it plainly (``Expected 224 but got 64``). A module runs as
    a :func:`~labkit.core.copies.private_copy` (with its hooks) on :func:`~labkit.core.copies.fresh_call`,
    and every random state is restored, so the run leaves no trace. A forward that would write a
    parameter in place is stopped before the write and run again on a copy with its own parameters;
    the :class:`EagerRun` says so. A hook holding the learner's objects gets a :class:`HookSideEffectWarning`.
    """
    if not callable(model):
        return EagerRun(None)  # trace() says what to pass instead
    kwargs = kwargs or {}
    every_input = [*call_args, *kwargs.values()]
    if not isinstance(model, torch.nn.Module):
        return EagerRun(_run(model, model, call_args, kwargs))
    check_input_devices(model, every_input)
    warn_hooks_reaching_out(model, stacklevel=stacklevel + 1)
    own = private_copy(model)
    fresh = state_token(own)
    output: list[Any] = []
    written = parameters_written(own, lambda: output.append(_run(model, own, call_args, kwargs)))
    if written:  # the shared copy was stopped part-way through forward: a copy with its own parameters runs it whole
        own = private_copy(model, share_parameters=False)
        fresh = state_token(own)
        output = [_run(model, own, call_args, kwargs)]
    return EagerRun(output[0], written, own, fresh if not written and state_token(own) == fresh else None)


def _run(model: Any, runnable: Any, call_args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    args, keywords = fresh_call(call_args, kwargs)  # an input it cannot copy is labkit's error, not the model's
    try:
        with kept_random_state(), torch.no_grad():
            return runnable(*args, **keywords)
    except Exception as exc:  # noqa: BLE001 - whatever the model raises is reported the same way
        raise ModelRunError(_eager_failure_message(model, call_args, kwargs, exc)) from exc


def _eager_failure_message(model: Any, call_args: Sequence[Any], kwargs: Mapping[str, Any], exc: Exception) -> str:
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", "the function")
    first_line = (str(exc).strip().splitlines() or [""])[0]
    message = (
        f"{name} itself fails on {describe_inputs(call_args, kwargs)}, before any profiling: "
        f"{type(exc).__name__}: {first_line}{_raised_in(exc)}."
    )
    if "has been specialized" in first_line:
        return message + (
            " This GraphModule was traced with concrete_args, and fx checks that each call passes the traced value. "
            "Profile the original model with the same concrete_args instead, e.g. "
            "profile_model(model, x, concrete_args={'flip': True}), or pass the value as an input too."
        )
    expected = re.search(r"[Ee]xpected (.+?) but got (.+?)[!.]?$", first_line)
    if expected:
        return message + f" The model expects {expected[1]} where the input has {expected[2]}: change the input to fit."
    return message + " This is the model's own error on this input, not labkit's: fix the input (its shape, size or type) first."


@dataclass(frozen=True)
class WatchedReport:
    """A report a profiler built while :func:`watch_runs` was open: a copy as it was built, the timed runs
    its profiler had really done by then, and whether the model was in train mode."""

    report: ProfileReport
    timed_runs: int
    training: bool


@dataclass
class RunWatch:
    """What labkit's profilers did while :func:`watch_runs` was open."""

    reports: list[WatchedReport] = field(default_factory=list)
    _runs: dict[Profiler, int] = field(default_factory=dict)  # timed runs each profiler did

    @property
    def timed_runs(self) -> int:
        """The most timed runs any one profiler did."""
        return max(self._runs.values(), default=0)

    @property
    def profiler_classes(self) -> frozenset[type]:
        """The class of each profiler that timed a run: a checker counts only labkit's own."""
        return frozenset(type(profiler) for profiler in self._runs)

    def _ran(self, profiler: Profiler) -> None:
        self._runs[profiler] = self._runs.get(profiler, 0) + 1

    def _reported(self, profiler: Profiler, report: ProfileReport) -> None:
        self.reports.append(WatchedReport(copy.deepcopy(report), self._runs.get(profiler, 0), profiler.training))


_watch: ContextVar[RunWatch | None] = ContextVar("labkit_run_watch", default=None)


@contextlib.contextmanager
def watch_runs() -> Iterator[RunWatch]:
    """Record every timed run and every report labkit's profilers make inside the block.

    Why: exercise 1.1's checker must know that the runs a report claims really
    happened; a report is a plain object that an answer can build or relabel
    (``dataclasses.replace``). What the profilers do is counted here, out of the
    answer's reach, and the checker compares the report with it. Costs one
    context-variable read per run when no watch is open.
    """
    with bound(_watch, RunWatch()) as watch:
        yield watch


class Profiler:
    """Records timed runs of a model and summarizes them in a :class:`ProfileReport`.

    A subclass sets ``mode``, ``device`` and ``training`` and implements
    :meth:`_timed_call` (one run: its total seconds and ``(key, seconds)`` per timed
    part, in order) and :meth:`_describe` (what the report says about a key), or
    :meth:`_descriptions` for every key at once; it may override :meth:`_completed` to add
    what it alone knows to each report. To keep each timed run as it happened (the
    report's ``timeline``), :meth:`_timed_call` leaves the run's own clock reads in
    ``_clock_reads`` and :meth:`_timelines` turns those of every timed run into
    :class:`~labkit.fx.timeline.RunTimeline` s, once, when a report or :attr:`timelines` asks.

    The stages, in the one order they run (:func:`run_series`): the inputs of each run
    cloned before its clock starts; the timed runs, each keeping its clock reads; what a
    profiler measures once after them (:meth:`_after_runs`: a graph's memory per node);
    then :meth:`report` assembles the :class:`ProfileReport`, and writers (table, CSV/JSON,
    trace) work on that alone.
    """

    mode: str
    device: torch.device
    training: bool
    inputs: Sequence[Any]

    def __init__(self, fallback_reason: str = "", traceable_children: tuple[tuple[str, int], ...] = ()) -> None:
        #: The keyword inputs of every run (``model(*inputs, **kwargs)``); a traced graph gets all by position.
        self.kwargs: Mapping[str, Any] = {}
        self.warmup_runs = 0
        self.totals: list[float] = []
        self.samples: dict[str, list[float]] = {}
        #: the profiled model's class name, said in the report (the trace's outermost slice)
        self.model_name = ""
        #: each timed run's own clock reads, as :meth:`_timed_call` left them in ``_clock_reads``; see :attr:`timelines`
        self._runs_read: list[Any] = []
        self._timelines: list[RunTimeline] = []
        self._clock_reads: Any = None
        self.fallback_reason = fallback_reason
        self.traceable_children = traceable_children
        #: What labkit chose for the learner (use_cache=False, own parameters), said in the report.
        self.notes: tuple[str, ...] = ()
        self._prepared: list[tuple[tuple[Any, ...], dict[str, Any]]] = []  # cloned inputs of the runs to come
        self._run_call: tuple[tuple[Any, ...], dict[str, Any]] | None = None  # the running run's, for _timed_call

    def prepare_runs(self, count: int) -> None:
        """Clone the inputs of the next ``count`` runs at once, before the first of them: prepared once per series.

        Why: every run gets its own :func:`~labkit.core.copies.fresh_call`, cloned before its clock
        starts, so a model that changes its input in place sees the learner's input every time. Made
        together, the clones stay out of every run and of what happens between runs (the cross-check's
        ``torch.profiler`` window). Clones that would hold more than :data:`SERIES_CLONE_BYTES` are
        made one run at a time instead, when each run comes (:meth:`prepare_run`).
        """
        if count * _tensor_bytes([*self.inputs, *self.kwargs.values()]) > SERIES_CLONE_BYTES:
            self._prepared = []
            return
        self._prepared = [fresh_call(self.inputs, self.kwargs) for _ in range(count)]

    def prepare_run(self) -> None:
        """Clone the inputs of the next run now, not when it starts.

        Why: every run gets :func:`~labkit.core.copies.fresh_call`, cloned before its clock starts.
        A caller that labels each run for another instrument (the cross-check's
        ``record_function``) calls this first, so the clone's ``aten::clone`` is
        outside the label too. Nothing to do when :meth:`prepare_runs` cloned it already.
        """
        if not self._prepared:
            self._prepared.append(fresh_call(self.inputs, self.kwargs))

    def _run_inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The ``(inputs, kwargs)`` of the running run: those :meth:`_next_run` handed over, else the next
        :meth:`prepare_run` cloned, or a fresh clone."""
        if self._run_call is not None:
            return self._run_call
        return self._prepared.pop(0) if self._prepared else fresh_call(self.inputs, self.kwargs)

    def _next_run(self) -> tuple[float, list[tuple[str, float]]]:
        """:meth:`_timed_call` on its run's inputs, handed down (``_run_call``): a run never asks back for them."""
        self._run_call = None
        self._run_call = self._run_inputs()
        try:
            return self._timed_call()
        finally:
            self._run_call = None

    def _timed_call(self) -> tuple[float, list[tuple[str, float]]]:
        raise NotImplementedError

    def _describe(self, key: str) -> tuple[str, str, str, str, str]:
        """``(op, name, target, op_type, module_class)`` of the part recorded under ``key``."""
        raise NotImplementedError

    def _descriptions(self, keys: Sequence[str]) -> Mapping[str, tuple[str, str, str, str, str]]:
        """:meth:`_describe` of every key: a subclass that knows them all beforehand says so in one answer."""
        return {key: self._describe(key) for key in keys}

    def _timelines_of(self, reads: Sequence[Any]) -> list[RunTimeline]:
        """One :class:`~labkit.fx.timeline.RunTimeline` per timed run, from the clock reads each left (none: not kept)."""
        return []

    @property
    def timelines(self) -> list[RunTimeline]:
        """Each timed run as it happened (:class:`~labkit.fx.timeline.RunTimeline`), in order.

        Built from the clock reads the runs kept, after them: nothing of it is done while a run's clock runs,
        nor between runs.
        """
        pending = self._runs_read[len(self._timelines):]
        if pending:
            self._timelines.extend(self._timelines_of(pending))
        return self._timelines

    def _after_runs(self) -> None:
        """What the profiler measures once, after the timed runs and before the report (nothing here)."""

    def _completed(self, report: ProfileReport) -> ProfileReport:
        """``report`` with what only the subclass knows added (a graph's capture, each node's modules); as it is here."""
        return report

    @contextlib.contextmanager
    def session(self, stacklevel: int = 3) -> Iterator[None]:
        """Wrap a series of runs: every random state (Python, NumPy, torch CPU and GPU) is restored afterwards.

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
        with kept_random_state():
            yield

    def warmup(self, runs: int = 2) -> None:
        """Run ``runs`` times without recording (first calls allocate and pick kernels)."""
        runs = require_count("warmup", runs, 0, "use warmup=0 to skip it")
        for _ in range(runs):
            self._next_run()
        self.warmup_runs += runs

    def run_once(self) -> None:
        """One recorded run."""
        self._clock_reads = None
        total, durations = self._next_run()
        self.totals.append(total)
        if self._clock_reads is not None:
            self._runs_read.append(self._clock_reads)
        for key, seconds in durations:
            self.samples.setdefault(key, []).append(seconds)
        watch = _watch.get()
        if watch is not None:
            watch._ran(self)

    def report(self) -> ProfileReport:
        if not self.totals:
            raise NotRunYetError("No timed runs yet: call run_once() (or profile_model(..., runs=5)) first.")
        # what the runs kept, read once: each part's statistics and the whole run's, the runs' timelines, what each part is
        stats = {key: RunStats.from_samples(samples) for key, samples in self.samples.items()}
        total = RunStats.from_samples(self.totals)
        timelines = tuple(self.timelines)
        described = self._descriptions(list(stats))
        rows = []
        for key, row_stats in stats.items():
            op, name, target, op_type, module_class = described[key]
            share = row_stats.median / total.median * 100 if total.median > 0 else 0.0  # medians: one disturbed run moves a mean
            rows.append(NodeTiming(op, name, target, op_type, row_stats, share, module_class))
        report = self._completed(ProfileReport(
            rows, total, self.mode, self.warmup_runs, len(rows), self.fallback_reason, self.traceable_children,
            notes=self.notes, timeline=timelines, model=self.model_name,
        ))
        watch = _watch.get()
        if watch is not None:
            watch._reported(self, report)
        return report


def run_series(
    profiler: Profiler, warmup: int, runs: int, on_run: Callable[[ProfileReport], None] | None = None, *,
    window: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    each_run: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext, stacklevel: int = 2,
) -> Profiler:
    """The one run loop of every profile: a session, ``warmup`` untimed runs, ``runs`` timed ones inside ``window()``,
    then what the profiler measures once after them (a graph's memory per node), so a report only assembles.

    Why one: :func:`~labkit.fx.profile.time_capture` and the cross-check must time the very
    same runs; the cross-check only adds torch.profiler's window and a label around each run
    (``each_run()``). Each run's inputs are cloned before the label opens; ``on_run(report)``
    follows each timed run. ``stacklevel`` is that of the train-mode warning, counted from here.
    """
    with profiler.session(stacklevel=stacklevel + 2):  # the session's frame and contextlib's
        profiler.prepare_runs(warmup + runs)  # every run's inputs, cloned once, before the first
        profiler.warmup(warmup)
        with window():
            for _ in range(runs):
                profiler.prepare_run()  # the inputs' clones stay outside the run's label
                with each_run():
                    profiler.run_once()
                if on_run is not None:
                    on_run(profiler.report())
        profiler._after_runs()
    return profiler


__all__ = [
    "EagerRun",
    "HookSideEffectWarning",
    "ModelRunError",
    "NotRunYetError",
    "Profiler",
    "RunWatch",
    "TrainModeWarning",
    "WatchedReport",
    "check_input_devices",
    "describe_inputs",
    "model_device",
    "preserved_rng",
    "run_eager_once",
    "run_series",
    "watch_runs",
]
