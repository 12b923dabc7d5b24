"""``python -m labkit bench``: reproduce every performance figure the labs claim.

Why one command: a figure in a README is a claim; this makes each one a
measurement anybody can repeat. Every figure is a ratio of things measured side
by side in one process (the machines are noisy), carries its spread, and is
compared with its goal. The result prints as a table and is written as JSON
together with the machine line (CPU, threads, torch version, device).

Figures: P1 profiler overhead per node, P2 agreement with torch.profiler,
P3 capstone speedups, P4 channels_last per precision, P5 JVP overhead and the jacfwd/jacrev crossover,
P6 the exported-graph profile's overhead per node against torch.profiler's per operator, P7 the profile's
total over eager and its outside share on small Hugging Face models (P6 and P7 need a transformers that
runs on this torch, release 5 needs torch >= 2.6, and a torch labkit exports with; otherwise each is
skipped with a note), the kernel-side redraw time of every registered widget, the notebooks' run times,
and the import time of labkit over torch.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from labkit.core.device import device_line
from labkit.core.errors import LabkitValueError
from labkit.core.files import writable_target, write_text
from labkit.core.machine import cpu_model
from labkit.core.tables import Row, ShowsAsTable, Table
from labkit.core.timing import RunStats, SideBySide, SyncTimer, measure
from labkit.labs import DEFAULT_BUDGET_S, LABS, NOTEBOOKS_DIR, PATH_BUDGET_S, lab_for

# Every figure is measured on the CPU, the machine every learner has, so one run never
# mixes CPU and GPU numbers under one machine line. GPU timings live in the labs' GPU cells.
BENCH_DEVICE = "cpu"
CROSSCHECK_TYPES = ("Conv2d", "BatchNorm2d", "MaxPool2d")


@dataclass(frozen=True)
class BenchConfig:
    """Sizes and repetitions of one bench run."""

    overhead_ops: int = 100  # P1's chain: short enough that a call fits in a time slice (see overhead_rounds)
    overhead_rounds: int = 20  # P1: paired rounds per batch (overhead_rounds)
    overhead_calls: int = 20  # timed calls of each mode per round, one of each in turn
    overhead_max_rounds: int = 400  # P1's batches stop once its verdict is decided, or at this many rounds
    overhead_budget_s: float = 60.0  # ... or once the rounds took this long
    resnet_batch: int = 8
    image_size: int = 224
    crosscheck_runs: int = 10
    variant_rounds: int = 15
    include_compiled: bool = True
    format_run_time: float = 2.0
    format_rounds: int = 5
    format_precisions: tuple[str, ...] | None = None  # P4's precisions (None: every one the device runs)
    mlp_sizes: tuple[int, ...] = (256, 512, 512, 10)
    mlp_batch: int = 64
    jvp_rounds: int = 30
    jacobian_in: int = 32
    jacobian_batch: int = 16  # per-example Jacobians: without a batch, fixed vmap overhead hides the crossover
    jacobian_budget: float = 0.5  # seconds per output size; notebook 03's widget spends 0.05 (a room runs it per learner)
    hf_rounds: int = 20  # P6, P7: rounds of blocks, each variant's block in turn, run in batches of this many
    hf_calls: int = 5  # timed calls per block
    hf_max_rounds: int = 400  # P6, P7: batches stop once every verdict is decided, or at this many rounds
    hf_budget_s: float = 240.0  # ... or once a model's rounds took this long
    widget_redraws: int = 15
    notebooks: tuple[str, ...] = tuple(lab.stem for lab in LABS)
    import_repeats: int = 7
    left_out: tuple[str, ...] = ()  # steps a run of all steps leaves out (``--only`` still runs them)


FULL = BenchConfig()
# Quick: ResNet18 on a smaller input (a forward at batch 8, 224 px took about 0.3 s of a 2-core machine, and P2-P4 run
# hundreds): the ratios are of that input, and the whole run stays within the few minutes its help promises.
QUICK = BenchConfig(overhead_rounds=10, overhead_budget_s=15.0, resnet_batch=2, image_size=160, crosscheck_runs=5,
                    variant_rounds=6, include_compiled=False, format_run_time=0.3, format_rounds=3,
                    format_precisions=("fp32",),  # bf16 convolutions on a CPU without bf16 units: minutes alone
                    jvp_rounds=10, jacobian_budget=0.1, hf_rounds=15, hf_max_rounds=120, hf_budget_s=60.0,
                    widget_redraws=9, notebooks=(), import_repeats=3,
                    left_out=("P6", "P7"))  # 16-70 s on the loaded 2-core machine: model builds, exports
# For the smoke test only: tiny sizes, figures not meaningful.
SMOKE = BenchConfig(overhead_ops=20, overhead_rounds=3, overhead_calls=2, overhead_max_rounds=3,
                    resnet_batch=1, image_size=64, crosscheck_runs=2,
                    variant_rounds=2, include_compiled=False, format_run_time=0.05, format_rounds=1,
                    mlp_sizes=(16, 32, 4), mlp_batch=4, jvp_rounds=3, jacobian_in=4, jacobian_batch=2, jacobian_budget=0.01,
                    hf_rounds=1, hf_calls=2, hf_max_rounds=1, hf_budget_s=0.0,
                    widget_redraws=2, notebooks=("00_start_here",), import_repeats=1)
CONFIGS = {"full": FULL, "quick": QUICK, "smoke": SMOKE}


@dataclass(frozen=True)
class BenchFigure:
    """One reported figure: value, spread, unit, goal and whether it is met."""

    key: str
    label: str
    value: float | None  # None: nothing to report (e.g. no crossover inside the sweep)
    unit: str
    spread: float | None = None
    goal: str = ""
    meets: bool | None = None
    skipped: str = ""  # why the figure could not be measured here ("" when it was)
    too_close: bool = False  # the goal lies within the spread: met or missed by noise, not by a margin

    @property
    def verdict(self) -> str:
        """"met" or "MISSED", and when the goal lies within the spread, that the margin is noise."""
        verdict = {True: "met", False: "MISSED", None: ""}[self.meets]
        return f"{verdict}, within the spread: too close to call" if verdict and self.too_close else verdict


def too_close(value: float, spread: float | None, goal: float) -> bool:
    """Whether ``goal`` lies within ``spread`` of ``value``: then a verdict on it is a coin toss, and says so."""
    return spread is not None and abs(value - goal) <= spread


@dataclass(repr=False)
class BenchResult(ShowsAsTable):
    machine: dict[str, Any]
    mode: str
    figures: list[BenchFigure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def add(self, figure: BenchFigure) -> None:
        self.figures.append(figure)

    def figure(self, key: str) -> BenchFigure:
        return next(f for f in self.figures if f.key == key)

    def table(self) -> Table:
        rows: list[Row] = []
        for f in self.figures:
            spread = "" if f.spread is None else f"± {f.spread:.3g}"
            value = "skipped" if f.skipped else "not found" if f.value is None else f"{f.value:.3g} {f.unit}"
            rows.append((f.key, f.label, value, spread, f.goal, f.verdict))
        return Table(["figure", "what", "value", "spread (IQR; P1, P6, P7: 95 % interval)", "goal", "verdict"], rows,
                     title=machine_line(self.machine))

    def to_json(self, path: str | Path) -> Path:
        """Write the figures atomically (:func:`labkit.core.files.write_text`: symlinks followed, special files refused).

        The folder is created, since the default ``build/bench.json`` lives in a build folder.
        """
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        payload = {"machine": self.machine, "mode": self.mode,
                   "figures": {f.key: asdict(f) for f in self.figures}, "details": self.details}
        return write_text(path, json.dumps(payload, indent=2, default=str) + "\n")


def machine_info() -> dict[str, Any]:
    device = torch.device(BENCH_DEVICE)
    return {
        "date": dt.date.today().isoformat(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device_line(device),
    }


def machine_line(machine: dict[str, Any]) -> str:
    return (f"{machine['date']} · {machine['cpu']} · {machine['threads']} threads · "
            f"torch {machine['torch']} · device {machine['device']}")


def _resnet18_and_input(config: BenchConfig) -> tuple[torch.nn.Module, torch.Tensor]:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    return model, torch.randn(config.resnet_batch, 3, config.image_size, config.image_size)


#: P1's goal: µs per node fast mode may add over the plain GraphModule.
FAST_OVERHEAD_GOAL_US = 1.0


@dataclass(frozen=True)
class OverheadRounds:
    """P1 round by round: in each round ``overhead_calls`` calls of each mode (the plain GraphModule, fast mode, the
    interpreter), one of each in turn, the fastest call of each kept (noise only adds time); per round, µs per node
    each mode adds over that round's plain graph, measured within milliseconds of it."""

    num_nodes: int
    plain_us: list[float]  # µs per node of the plain graph, per round
    fast_us: list[float]  # added µs per node, per round
    interpreter_us: list[float]
    seconds: float


def fastest_in_turn(calls: dict[str, Callable[[], object]], repeats: int,
                    clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Seconds of the fastest of ``repeats`` calls of each of ``calls``, called one of each in turn (in their order),
    so that every callable meets the same moments of load. The clock is read around each call alone (on the CPU,
    where P1 runs, nothing is left to synchronize)."""
    fastest = dict.fromkeys(calls, math.inf)
    for _ in range(repeats):
        for name, call in calls.items():
            start = clock()
            call()
            fastest[name] = min(fastest[name], clock() - start)
    return fastest


def overhead_rounds(config: BenchConfig, settled: Callable[[list[float]], bool] = lambda _v: False) -> OverheadRounds:
    """P1's paired rounds on :class:`~labkit.fx.overhead.TinyOpsChain`, batches of ``overhead_rounds`` until
    ``settled(fast_us)``, ``overhead_max_rounds`` or ``overhead_budget_s``.

    Why this estimator and not the fastest call of each mode over the run with their IQRs as spread (the old P1):
    on a 2-core machine with other work beside it, the scheduler interrupts a call of a few milliseconds (the
    1000-op chain took 5-10 ms), so a mode's fastest call was still an interrupted one, both the minimum and the IQR
    moved by more than fast mode's whole cost (about 0.3 µs a node), and the verdict changed from run to run. A
    chain of ``overhead_ops`` = 100 ops runs in well under a time slice, so among a round's calls some ran
    uninterrupted; the modes alternate call by call, so each round's difference compares calls made under the
    same load; and the median over rounds, with its 95 % interval (:func:`median_interval`), narrows as rounds
    are added, until it lies on one side of the goal.
    """
    from labkit.fx.overhead import TinyOpsChain
    from labkit.fx.profile import InstrumentedModule, ProfilingInterpreter, trace

    graph_module = trace(TinyOpsChain(config.overhead_ops))
    x = torch.zeros(16)
    interpreter, instrumented = ProfilingInterpreter(graph_module), InstrumentedModule(graph_module)

    def run_interpreter() -> None:
        interpreter.run(x)
        interpreter.total_runtime_sec.clear()  # keep memory flat over many rounds
        interpreter.runtimes_sec.clear()

    calls: dict[str, Callable[[], object]] = {"plain": lambda: graph_module(x), "fast": lambda: instrumented(x),
                                              "interpreter": run_interpreter}
    order = list(calls)
    per_node_us = 1e6 / config.overhead_ops
    plain_us: list[float] = []
    fast_us: list[float] = []
    interpreter_us: list[float] = []
    start = time.perf_counter()
    with torch.no_grad():
        for call in calls.values():  # warm: the first call of each builds what later ones reuse
            call()
        while True:
            for _ in range(config.overhead_rounds):
                fastest = fastest_in_turn({name: calls[name] for name in order}, config.overhead_calls)
                order.append(order.pop(0))  # each mode first in turn: none always follows the same one
                plain_us.append(fastest["plain"] * per_node_us)
                fast_us.append((fastest["fast"] - fastest["plain"]) * per_node_us)
                interpreter_us.append((fastest["interpreter"] - fastest["plain"]) * per_node_us)
            spent = time.perf_counter() - start
            if settled(fast_us) or len(fast_us) >= config.overhead_max_rounds or spent >= config.overhead_budget_s:
                return OverheadRounds(config.overhead_ops, plain_us, fast_us, interpreter_us, spent)


def bench_profiler_overhead(config: BenchConfig, result: BenchResult) -> None:
    """P1: µs per node the interpreter and the fast mode add over the plain GraphModule: the median of paired
    rounds (:func:`overhead_rounds`) with half its 95 % interval, rounds added until it excludes the goal."""
    run = overhead_rounds(config, settled=lambda fast: decided(fast, FAST_OVERHEAD_GOAL_US))
    interpreter, interpreter_ci = median_interval(run.interpreter_us)
    fast, fast_ci = median_interval(run.fast_us)
    rounds = len(run.fast_us)
    result.add(BenchFigure("P1.interpreter", f"interpreter overhead ({run.num_nodes} tiny ops; median of {rounds} "
                                             "paired rounds ± half its 95 % interval)",
                           interpreter, "µs/node", interpreter_ci))
    result.add(BenchFigure("P1.fast", "low-overhead mode overhead", fast, "µs/node", fast_ci,
                           f"<= {FAST_OVERHEAD_GOAL_US:g}", fast <= FAST_OVERHEAD_GOAL_US,
                           too_close=too_close(fast, fast_ci, FAST_OVERHEAD_GOAL_US)))
    result.details["P1"] = {"plain_us_per_node": statistics.median(run.plain_us), "num_nodes": run.num_nodes,
                            "rounds": rounds, "seconds": run.seconds,
                            "fast_us_per_round": run.fast_us, "interpreter_us_per_round": run.interpreter_us}


def bench_profiler_fidelity(config: BenchConfig, result: BenchResult) -> None:
    """P2: per-module-type shares, labkit vs torch.profiler, on ResNet18 with warm runs."""
    from labkit.fx.crosscheck import compare_with_torch_profiler

    model, x = _resnet18_and_input(config)
    with torch.no_grad():
        check = compare_with_torch_profiler(model, x, warmup=2, runs=config.crosscheck_runs)
    watched = max(check.difference(t) for t in CROSSCHECK_TYPES if t in check.labkit_pct)
    result.add(BenchFigure("P2.max_difference", "largest share difference, Conv2d/BatchNorm2d/MaxPool2d",
                           watched, "points", None, "<= 5", watched <= 5.0))
    result.add(BenchFigure("P2.max_difference_all", "largest share difference, all op types",
                           check.max_difference, "points"))
    result.details["P2"] = {"shares": [{"op_type": t, "labkit_pct": a, "profiler_pct": b} for t, a, b in check.rows],
                            "labkit_pct_sum": sum(check.labkit_pct.values()),
                            "profiler_pct_sum": sum(check.profiler_pct.values())}


def bench_capstone(config: BenchConfig, result: BenchResult) -> None:
    """P3: speedups over eager of channels_last, fused, fused + channels_last (and compiled)."""
    from labkit import capstone

    model, x = _resnet18_and_input(config)
    include_compiled = config.include_compiled and capstone.compiler_available()
    variants = capstone.build_variants(model, x, include_compiled=include_compiled)
    variants.append(capstone.optimize_for_inference_variant(variants[0]))
    comparison = capstone.compare_variants(variants, rounds=config.variant_rounds)
    timings = comparison.timings  # against eager
    for name, key in ((capstone.CHANNELS_LAST, "P3.channels_last"), (capstone.FUSED, "P3.fused"),
                      (capstone.FUSED_CHANNELS_LAST, "P3.fused_channels_last")):
        speedup = timings.speedup(name)
        target = capstone.FUSED_CHANNELS_LAST_GOAL
        judged = name == capstone.FUSED_CHANNELS_LAST
        result.add(BenchFigure(key, f"speedup of {name} over eager (ResNet18, batch {config.resnet_batch})",
                               speedup, "x", timings.spread(name), goal=f">= {target}" if judged else "",
                               meets=speedup >= target if judged else None,
                               too_close=judged and too_close(speedup, timings.spread(name), target)))
    name = capstone.OPTIMIZED_FOR_INFERENCE
    result.add(BenchFigure("P3.optimize_for_inference", "speedup of optimize_for_inference over eager",
                           timings.speedup(name), "x", timings.spread(name)))
    maxpool_ms = {name: report.by_op_type().seconds["MaxPool2d"] * 1e3
                  for name, report in capstone.profile_variants(variants[:2], runs=config.crosscheck_runs).items()}
    collapse = maxpool_ms[capstone.EAGER] / maxpool_ms[capstone.CHANNELS_LAST]
    result.add(BenchFigure("P3.maxpool_collapse", "MaxPool2d time, contiguous over channels_last (labkit profile)",
                           collapse, "x"))
    if include_compiled:
        compiled = comparison[capstone.COMPILED]
        result.add(BenchFigure("P3.compiled", "speedup of torch.compile over eager", compiled.speedup, "x"))
        result.add(BenchFigure("P3.compile_seconds_cold", "torch.compile time, first call, empty inductor cache",
                               cold_compile_seconds(config), "s"))
        result.add(BenchFigure("P3.compile_seconds_warm", "torch.compile time, first call, this machine's cache",
                               compiled.setup_seconds, "s"))
    result.details["P3"] = {
        "all_close": comparison.all_close,
        "maxpool_ms": maxpool_ms,
        "variants": [{"name": r.name, "median_s": r.stats.median, "iqr_s": r.stats.iqr, "speedup": r.speedup,
                      "allclose": r.allclose} for r in comparison.results],
    }


COLD_COMPILE_PROBE = """
import sys, time, torch, torchvision
from labkit.capstone import variants as capstone
batch, size = int(sys.argv[1]), int(sys.argv[2])
model = torchvision.models.resnet18(weights=None).eval()
variant = capstone.build_variants(model, torch.randn(batch, 3, size, size))[-1]
print(capstone.compile_variant(variant).setup_seconds)
"""


def cold_compile_seconds(config: BenchConfig) -> float:
    """Compile time as a learner meets it the first time: a fresh process and an empty inductor cache."""
    with tempfile.TemporaryDirectory(prefix="labkit-inductor-") as cache:
        out = subprocess.run(
            [sys.executable, "-c", COLD_COMPILE_PROBE, str(config.resnet_batch), str(config.image_size)],
            capture_output=True, text=True, check=True, env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache},
        ).stdout
    return float(out.split()[-1])


def bench_memory_format(config: BenchConfig, result: BenchResult) -> None:
    """P4: channels_last over contiguous for ResNet18 in each precision the device runs (lab 02)."""
    from labkit.memory_format.benchmark import benchmark_formats

    model, x = _resnet18_and_input(config)
    formats = benchmark_formats(model, x, precisions=config.format_precisions, device=BENCH_DEVICE,
                                min_run_time=config.format_run_time, rounds=config.format_rounds)
    for timing in formats.timings:
        result.add(BenchFigure(f"P4.channels_last_{timing.precision}",
                               f"channels_last over contiguous, {timing.precision} (ResNet18, batch {config.resnet_batch})",
                               timing.speedup, "x", timing.spread))
    result.details["P4"] = formats.as_dict()


def bench_forward_ad(config: BenchConfig, result: BenchResult) -> None:
    """P5: JVP cost over the forward pass, labkit.jvp over the raw dual API, jacfwd/jacrev crossover."""
    from labkit.forward_ad.jacobian_cost import JvpOverhead, jacobian_sweep, jvp_overhead, relu_mlp

    torch.manual_seed(0)
    model = relu_mlp(config.mlp_sizes)
    x = torch.randn(config.mlp_batch, config.mlp_sizes[0])
    overhead = jvp_overhead(model, x, rounds=config.jvp_rounds)  # slowdowns against the forward pass
    over_raw = overhead.rebased(JvpOverhead.RAW)
    sizes = "-".join(map(str, config.mlp_sizes))
    result.add(BenchFigure("P5.raw_dual_over_forward", f"raw dual API JVP / forward (MLP {sizes}, batch {config.mlp_batch})",
                           overhead.slowdown(JvpOverhead.RAW), "x", overhead.slowdown_spread(JvpOverhead.RAW)))
    result.add(BenchFigure("P5.func_jvp_over_forward", "torch.func.jvp / forward",
                           overhead.slowdown(JvpOverhead.FUNC), "x", overhead.slowdown_spread(JvpOverhead.FUNC)))
    labkit_spread = over_raw.slowdown_spread(JvpOverhead.LABKIT)
    result.add(BenchFigure("P5.labkit_over_raw", "labkit.jvp / raw dual API", overhead.labkit_over_raw, "x",
                           labkit_spread, "<= 1.05", overhead.labkit_over_raw <= 1.05,
                           too_close=too_close(overhead.labkit_over_raw, labkit_spread, 1.05)))
    sweep = jacobian_sweep(config.jacobian_in, batch=config.jacobian_batch, budget=config.jacobian_budget)
    crossover = sweep.crossover
    result.add(BenchFigure("P5.crossover_out",
                           f"jacfwd overtakes jacrev at out = (in = {config.jacobian_in}, batch {config.jacobian_batch})",
                           crossover, "outputs"))
    result.details["P5"] = {"sweep": [{"out": p.out_features, "jacfwd_s": p.jacfwd.median, "jacrev_s": p.jacrev.median}
                                      for p in sweep.points]}


# P6 and P7 profile small Hugging Face models (labkit.fx.hf_zoo: random weights, no download) by torch.export.
#: P7's models, in this order; P6 measures the first.
HF_MODELS = ("bert", "gpt2", "llama")
HF_LABELS = {"bert": "BERT", "gpt2": "GPT-2", "llama": "Llama"}
#: A profile whose runs take at most this many times an eager forward shows the model's own time.
OVER_EAGER_GOAL = 1.15
#: At most this share (%) of a profiled run is outside every node: the profile accounts for the rest.
OUTSIDE_GOAL_PCT = 5.0
EAGER, PROFILED = "eager forward", "labkit profile (export, fast mode)"
GRAPH, TORCH_PROFILER = "exported graph, not profiled", "eager forward, torch.profiler on"


def hf_skip_reason() -> str:
    """Why P6 and P7 cannot run here ("" when they can): they capture by torch.export and build transformers models
    (transformers 5 turns itself off below torch 2.6, and :func:`~labkit.fx.hf_zoo.transformers_module` says so)."""
    from labkit.fx.capture import EXPORT_MIN_TORCH
    from labkit.fx.hf_zoo import TransformersUnavailableError, transformers_module

    if torch.__version__ < EXPORT_MIN_TORCH:  # TorchVersion compares as a version
        return f"torch.export capture needs torch {EXPORT_MIN_TORCH} or newer, and this is torch {torch.__version__}"
    try:
        transformers_module()
    except TransformersUnavailableError as exc:
        return str(exc)
    return ""


def _skipped(step: str, result: BenchResult) -> bool:
    """Add ``step``'s note and return True where it cannot run here."""
    reason = hf_skip_reason()
    if reason:
        result.add(BenchFigure(step, f"{step} skipped: {reason}", None, "", skipped=reason))
    return bool(reason)


def median_interval(values: list[float]) -> tuple[float, float]:
    """The median of ``values`` and half the width of its 95 % confidence interval (order statistics, no model of the
    noise: ranks n/2 ± 0.98·sqrt(n)); with under 6 values, half their range.

    Why not the IQR: the IQR says how noisy one round is and stays as wide however many rounds run, so a goal
    inside it can never be decided; the interval of the median narrows as rounds are added.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n < 6:
        return statistics.median(ordered), (ordered[-1] - ordered[0]) / 2
    low = max(0, math.floor(n / 2 - 0.98 * math.sqrt(n)))
    high = min(n - 1, math.ceil(n / 2 + 0.98 * math.sqrt(n)))
    return statistics.median(ordered), (ordered[high] - ordered[low]) / 2


def decided(values: list[float], goal: float) -> bool:
    """Whether the median's 95 % interval (:func:`median_interval`) lies wholly on one side of ``goal``."""
    median, half = median_interval(values)
    return abs(median - goal) > half


@dataclass(frozen=True)
class HFMeasurement:
    """One small Hugging Face model: eager forwards and labkit's profile (P6: two more variants), round by round.

    ``rounds`` holds, per variant, each round's fastest call (noise only adds time), so round ``i`` of two
    variants is a pair measured seconds apart; ``outside_pct`` the profile's share outside every node, per run.
    """

    timings: SideBySide  # seconds per call; the profile's are its report's run totals; baseline EAGER
    report: Any  # labkit's ProfileReport of every recorded run
    rounds: dict[str, list[float]]
    outside_pct: list[float]
    profiler_ops: int = 0  # aten operators torch.profiler records in one forward, nested ones included (0: not run)
    profiler_top_level_ops: int = 0
    seconds: float = 0.0  # how long the rounds took


@contextlib.contextmanager
def _torch_profiler_on() -> Iterator[Any]:
    from torch.profiler import ProfilerActivity, profile

    from labkit.core.noise import filtered_native_stderr

    with filtered_native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:  # kineto's log lines
        yield prof


def _timed_block(forward: Callable[[], object], calls: int, samples: list[float],
                 context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext) -> None:
    """One untimed call, then ``calls`` timed ones, all inside ``context``."""
    with context():
        forward()
        for _ in range(calls):
            with SyncTimer(BENCH_DEVICE) as timer:
                forward()
            samples.append(timer.elapsed)


def measure_hf_model(name: str, config: BenchConfig, against_profiler: bool = False,
                     settled: Callable[[HFMeasurement], bool] = lambda _m: False) -> HFMeasurement:
    """Eager forwards and labkit's profile (torch.export, fast mode); ``against_profiler``: the exported graph
    unprofiled and forwards under torch.profiler too.

    Why blocks: each round runs each variant's block in turn, one untimed call and then ``hf_calls`` timed
    ones. The first forward inside a torch.profiler session, and the first after one, took about 0.2 ms
    more than the next ones on a 0.55 ms BERT; a first call after a switch can pay for caches the other
    variant filled. None of them is timed. The profile's times are its report's run totals (its own clock
    around the graph call), as a learner reads them; a torch.profiler session's start and its event
    processing are outside the timed calls too.

    Why batches: rounds run ``hf_rounds`` at a time until ``settled`` (the caller's verdicts are decided),
    ``hf_max_rounds`` or ``hf_budget_s``, so a quiet machine stops early and a noisy one measures longer.
    """
    from labkit.fx import hf_zoo
    from labkit.fx.profile import NodeProfiler

    model = hf_zoo.build_model(name)
    kwargs = hf_zoo.example_inputs(name, model)
    profiler = NodeProfiler(model, kwargs=kwargs, mode="fast", capture="export")
    graph, graph_inputs = profiler.graph_module, profiler.inputs
    variants = (EAGER, PROFILED, GRAPH, TORCH_PROFILER) if against_profiler else (EAGER, PROFILED)
    samples: dict[str, list[float]] = {variant: [] for variant in variants}
    rounds: dict[str, list[float]] = {variant: [] for variant in variants}

    def forward() -> None:
        model(**kwargs)

    def one_round() -> None:
        blocks = {EAGER: lambda: _timed_block(forward, config.hf_calls, samples[EAGER])}
        blocks[PROFILED] = profiled_block
        if against_profiler:
            blocks[GRAPH] = lambda: _timed_block(lambda: graph(*graph_inputs), config.hf_calls, samples[GRAPH])
            blocks[TORCH_PROFILER] = lambda: _timed_block(forward, config.hf_calls, samples[TORCH_PROFILER],
                                                          _torch_profiler_on)
        for variant, block in blocks.items():
            block()
            rounds[variant].append(min(samples[variant][-config.hf_calls:]))

    def profiled_block() -> None:
        profiler.warmup(1)
        for _ in range(config.hf_calls):
            profiler.run_once()
        samples[PROFILED][:] = profiler.totals

    def measurement() -> HFMeasurement:
        report = profiler.report()
        stats = {variant: RunStats.from_samples(samples[variant]) for variant in variants}
        stats[PROFILED] = report.total
        outside = [(total - sum(times[i] for times in profiler.samples.values())) / total * 100
                   for i, total in enumerate(profiler.totals)]
        return HFMeasurement(SideBySide(stats, EAGER, title=f"{HF_LABELS[name]} (small config)"), report, rounds,
                             outside, ops, top_level, time.perf_counter() - start)

    ops = top_level = 0
    if against_profiler:
        with _torch_profiler_on() as prof:
            forward()
        events = [event for event in prof.events() if event.name.startswith("aten::")]
        ops, top_level = len(events), sum(event.cpu_parent is None for event in events)
    start = time.perf_counter()
    with torch.no_grad(), profiler.session():
        while True:
            for _ in range(config.hf_rounds):
                one_round()
            done = len(rounds[EAGER]) >= config.hf_max_rounds or time.perf_counter() - start >= config.hf_budget_s
            if done or settled(measurement()):
                break
    return measurement()


def _ms(timings: SideBySide, statistic: str) -> dict[str, float]:
    return {name: getattr(stats, statistic) * 1e3 for name, stats in timings.stats.items()}


def _p6_per_round(run: HFMeasurement) -> dict[str, list[float]]:
    """Per round, µs per node (labkit) and per recorded operator (torch.profiler) over that round's eager call."""
    eager, nodes, ops = run.rounds[EAGER], run.report.graph_nodes, max(run.profiler_ops, 1)
    labkit = [(p - e) / nodes * 1e6 for p, e in zip(run.rounds[PROFILED], eager, strict=True)]
    profiler = [(p - e) / ops * 1e6 for p, e in zip(run.rounds[TORCH_PROFILER], eager, strict=True)]
    return {
        "labkit": labkit,
        "over_graph": [(p - g) / nodes * 1e6 for p, g in zip(run.rounds[PROFILED], run.rounds[GRAPH], strict=True)],
        "torch_profiler": profiler,
        "difference": [a - b for a, b in zip(labkit, profiler, strict=True)],
    }


def bench_export_overhead(config: BenchConfig, result: BenchResult) -> None:
    """P6: µs the exported-graph profile adds per node, beside what torch.profiler adds per operator it records.

    Both over the eager forward: what a learner's run costs with each instrument. The exported graph runs
    without the model's Python around its operators, so the profile's cost over that graph, the instrument's
    own, is reported as well. Each round's figures come from its fastest calls, as P1 (noise only adds
    time), and the verdict is on the paired difference per round (labkit's µs/node minus torch.profiler's
    µs/op of the same round): its median, with its 95 % interval, rounds added until that interval excludes 0.
    """
    if _skipped("P6", result):
        return
    name = HF_MODELS[0]
    run = measure_hf_model(name, config, against_profiler=True,
                           settled=lambda m: decided(_p6_per_round(m)["difference"], 0.0))
    per_round = _p6_per_round(run)
    nodes, ops = run.report.graph_nodes, run.profiler_ops
    (labkit_us, labkit_ci), (profiler_us, profiler_ci) = (median_interval(per_round[k]) for k in ("labkit", "torch_profiler"))
    difference, difference_ci = median_interval(per_round["difference"])
    result.add(BenchFigure("P6.labkit", f"labkit profile (export, fast mode) over eager forward, per node "
                                        f"({HF_LABELS[name]} small, {nodes} nodes; median of {len(per_round['labkit'])} "
                                        "paired rounds ± half its 95 % interval)",
                           labkit_us, "µs/node", labkit_ci, "<= P6.torch_profiler", difference <= 0,
                           too_close=too_close(difference, difference_ci, 0.0)))
    over_graph, over_graph_ci = median_interval(per_round["over_graph"])
    result.add(BenchFigure("P6.labkit_over_graph", "the same over the exported graph unprofiled (the instrument's own)",
                           over_graph, "µs/node", over_graph_ci))
    result.add(BenchFigure("P6.torch_profiler", f"torch.profiler (CPU) over eager forward, per aten op it records "
                                                f"({ops} a forward, {run.profiler_top_level_ops} top level)",
                           profiler_us, "µs/op", profiler_ci))
    result.add(BenchFigure("P6.difference", "labkit's µs/node minus torch.profiler's µs/op, round by round (the verdict)",
                           difference, "µs", difference_ci, "<= 0", difference <= 0,
                           too_close=too_close(difference, difference_ci, 0.0)))
    result.details["P6"] = {"model": name, "min_ms": _ms(run.timings, "min"), "median_ms": _ms(run.timings, "median"),
                            "nodes": nodes, "aten_ops": ops, "top_level_aten_ops": run.profiler_top_level_ops,
                            "capture": run.report.capture, "rounds": len(per_round["labkit"]), "seconds": run.seconds,
                            "per_round_us": per_round}


def _p7_ratios(run: HFMeasurement) -> list[float]:
    return [p / e for p, e in zip(run.rounds[PROFILED], run.rounds[EAGER], strict=True)]


def bench_hf_models(config: BenchConfig, result: BenchResult) -> None:
    """P7: the profile's run total over an eager forward, and its share outside every node, per model.

    The ratio is taken round by round (each round's fastest profiled call over its fastest eager call, seconds
    apart), the outside share run by run; each figure is a median with half its 95 % interval, and rounds are
    added until both intervals exclude their goals (or the round and time bounds are reached).
    """
    if _skipped("P7", result):
        return
    details = {}
    for name in HF_MODELS:
        run = measure_hf_model(name, config, settled=lambda m: decided(_p7_ratios(m), OVER_EAGER_GOAL)
                               and decided(m.outside_pct, OUTSIDE_GOAL_PCT))
        report, label = run.report, HF_LABELS[name]
        ratio, ratio_ci = median_interval(_p7_ratios(run))
        result.add(BenchFigure(f"P7.{name}.over_eager", f"profile total over eager forward ({label} small, "
                                                        f"{report.graph_nodes} nodes by export, fast mode; "
                                                        f"{len(run.rounds[EAGER])} paired rounds)",
                               ratio, "x", ratio_ci, f"<= {OVER_EAGER_GOAL:g}", ratio <= OVER_EAGER_GOAL,
                               too_close=too_close(ratio, ratio_ci, OVER_EAGER_GOAL)))
        outside, spread = median_interval(run.outside_pct)
        result.add(BenchFigure(f"P7.{name}.outside", f"share of the profiled run outside every node ({label})",
                               outside, "%", spread, f"<= {OUTSIDE_GOAL_PCT:g}", outside <= OUTSIDE_GOAL_PCT,
                               too_close=too_close(outside, spread, OUTSIDE_GOAL_PCT)))
        details[name] = {"median_ms": _ms(run.timings, "median"), "min_ms": _ms(run.timings, "min"),
                         "nodes": report.graph_nodes, "capture": report.capture, "rounds": len(run.rounds[EAGER]),
                         "seconds": run.seconds}
    result.details["P7"] = details


# A redraw probe builds a widget as a notebook shows it and returns what the kernel runs when a learner moves
# a control: setting the control's value runs the widget's own observer, so the time is the callback's
# (computing, drawing, encoding), with the real ipywidgets objects and no browser.
ProbeBuilder = Callable[[], Callable[[], object]]


def _set_each(control: Any, values: list[Any]) -> Callable[[], object]:
    """Set ``control`` to the next of ``values``, round and round: a slider dragged back and forth."""
    steps = itertools.cycle(values)
    return lambda: setattr(control, "value", next(steps))


def _slider_plot_redraw() -> Callable[[], object]:
    from labkit.core.widgets import SliderPlot

    return _set_each(SliderPlot(frequency=1.0).slider, [1.5, 2.0, 2.5, 2.0])


def _live_profile_redraw() -> Callable[[], object]:
    """After one profile of a small CNN, "sort by" changes redraw the table and the bars (no new runs).

    The CNN has more nodes than the notebook's top k (10), so table and bars are as long as the notebook's.
    """
    from labkit.fx.widgets import LiveProfile

    torch.manual_seed(0)
    blocks = [layer for channels in (3, 8, 8, 8, 8) for layer in (torch.nn.Conv2d(channels, 8, 3, padding=1), torch.nn.ReLU())]
    model = torch.nn.Sequential(*blocks, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()
    widget = LiveProfile(model, torch.randn(1, 3, 16, 16), runs=2, warmup=1, top_k=10)
    widget.run()
    return _set_each(widget.sort_by, ["median", "min", "mean"])


def _memory_timeline_redraw() -> Callable[[], object]:
    """After one profile of a small CNN, the node slider moves: the picture outlines another node, the caption follows."""
    from labkit.fx.profile import profile_model
    from labkit.fx.widgets import MemoryTimeline

    torch.manual_seed(0)
    blocks = [layer for channels in (3, 8, 8, 8, 8) for layer in (torch.nn.Conv2d(channels, 8, 3, padding=1), torch.nn.ReLU())]
    model = torch.nn.Sequential(*blocks, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()
    widget = MemoryTimeline(profile_model(model, torch.randn(1, 3, 16, 16), warmup=0, runs=1))
    return _set_each(widget.slider, [1, 4, 7, 2])


def _stride_explorer_redraw() -> Callable[[], object]:
    from labkit.memory_format.widgets import StrideExplorer

    return _set_each(StrideExplorer(shape=(2, 3, 2, 2), memory_format="channels_last").c, [4, 3, 2, 1, 2, 3])


def _stride_explorer_largest_redraw() -> Callable[[], object]:
    from labkit.memory_format.widgets import SLIDER_MAX, StrideExplorer

    shape = tuple(SLIDER_MAX[letter] for letter in "NCDHW")
    return _set_each(StrideExplorer(shape=shape, memory_format="channels_last_3d").w, [3, 4])


def _synthetic_stats(median_s: float) -> RunStats:
    return RunStats.from_samples([0.9 * median_s, median_s, 1.2 * median_s])


def _jacobian_scaling_redraw() -> Callable[[], object]:
    """What JacobianScaling draws after each measured point, for the notebook's sizes, from made-up timings.

    The sweep grows one point per call and starts again when complete, as a sweep does. A control change
    also times jacfwd and jacrev (seconds: a measurement, not a redraw); the drawing is the same whatever
    the timings.
    """
    from labkit.forward_ad.jacobian_cost import JacobianCost, JacobianSweep
    from labkit.forward_ad.widgets import JacobianScaling

    in_features, batch = 32, 16
    widget = JacobianScaling(in_features=in_features, out_features=64, batch=batch, run=False)
    points = [JacobianCost(in_features, out, batch, jacfwd=_synthetic_stats(1e-4 * in_features),
                           jacrev=_synthetic_stats(1e-4 * out)) for out in widget.out_dims()]
    growing = itertools.cycle([JacobianSweep(in_features, batch, points[:count]) for count in range(1, len(points) + 1)])
    return lambda: widget.show_sweep(next(growing))


def _variant_bars_draw() -> Callable[[], object]:
    """The capstone's chart of five variants, from made-up timings, as notebook 04 shows it (HiDPI PNG)."""
    from labkit.capstone.variants import VariantComparison, VariantResult
    from labkit.capstone.widgets import variant_bars
    from labkit.core.plots import figure_image

    results = [VariantResult(f"variant {i}", _synthetic_stats(0.01 / (i + 1)), float(i + 1), 0.0, True, 0.0)
               for i in range(5)]
    return lambda: figure_image(variant_bars(VariantComparison(results)))


#: What each figure times and how, by name: every widget the labs registry lists (a test checks that none is
#: missing), in learning order, then two more pictures.
REDRAW_PROBES: dict[str, tuple[str, ProbeBuilder]] = {
    "SliderPlot": ("SliderPlot (00): drag the frequency slider", _slider_plot_redraw),
    "LiveProfile": ("LiveProfile (01): change sort by after a profile", _live_profile_redraw),
    "MemoryTimeline": ("MemoryTimeline (01): move the node slider after a profile", _memory_timeline_redraw),
    "StrideExplorer": ("StrideExplorer (02, shape 2x3x2x2): drag the C slider", _stride_explorer_redraw),
    "StrideExplorer_largest": ("StrideExplorer at the most the sliders allow (5-D, 2x4x2x4x4): drag W",
                               _stride_explorer_largest_redraw),
    "JacobianScaling": ("JacobianScaling (03): redraw the plot after a measured point", _jacobian_scaling_redraw),
    "variant_bars": ("variant_bars (04; drawn once, not a widget): chart to HiDPI PNG", _variant_bars_draw),
}
#: A slider drag stays smooth when the kernel answers each step in about this time (ms).
WIDGET_REDRAW_GOAL_MS = 60.0
#: variant_bars is drawn once, when its cell runs, never while a control moves: a full matplotlib layout and a
#: HiDPI PNG, which took about 0.2-0.4 s on a loaded 2-core machine. Its goal only keeps that from growing
#: into a noticeable part of the capstone's run-time budget.
VARIANT_BARS_GOAL_MS = 500.0
#: Redraw goals (ms) of every probe.
REDRAW_GOALS_MS = {**{key: WIDGET_REDRAW_GOAL_MS for key in REDRAW_PROBES}, "variant_bars": VARIANT_BARS_GOAL_MS}


def registered_widgets() -> list[str]:
    """Every widget class the labs registry lists, in learning order."""
    return [name for lab in LABS for name in lab.widgets]


def bench_widget_redraw(config: BenchConfig, result: BenchResult) -> None:
    """Kernel-side milliseconds of one redraw of every registered widget (no browser): the median of several."""
    ranges = {}
    for key, (what, build) in REDRAW_PROBES.items():
        stats = measure(build(), warmup=1, runs=config.widget_redraws, device=BENCH_DEVICE)
        median_ms, goal_ms = stats.median * 1e3, REDRAW_GOALS_MS.get(key)
        goal = ("", None) if goal_ms is None else (f"<= {goal_ms:g}", median_ms <= goal_ms)
        result.add(BenchFigure(f"widget.{key}", f"redraw in the kernel: {what}", median_ms, "ms", stats.iqr * 1e3, *goal))
        ranges[key] = [stats.min * 1e3, stats.max * 1e3]
    for name in registered_widgets():
        if name not in REDRAW_PROBES:
            result.add(BenchFigure(f"widget.{name}", f"{name}: no redraw probe in labkit.measurements.bench yet", None, "ms"))
    result.details["widgets"] = {"redraws": config.widget_redraws, "min_max_ms": ranges}


def bench_notebooks(config: BenchConfig, result: BenchResult) -> None:
    """Wall seconds of each notebook executed headless (outputs not written)."""
    from labkit.authoring.nbrun import execute_notebook

    seconds = {}
    for stem in config.notebooks:
        path = NOTEBOOKS_DIR / f"{stem}.ipynb"
        seconds[path.name] = execute_notebook(path, write=False)
        lab = lab_for(path)
        budget = lab.budget_s if lab else DEFAULT_BUDGET_S
        result.add(BenchFigure(f"notebook.{stem}", f"{path.name} run time", seconds[path.name], "s", None,
                               f"<= {budget:g}", seconds[path.name] <= budget))
    path_labs = [lab for lab in LABS if lab.kind != "capstone"]
    if all(lab.notebook in seconds for lab in path_labs):
        total = sum(seconds[lab.notebook] for lab in path_labs)
        result.add(BenchFigure("notebook.total_path", f"notebooks {path_labs[0].number}-{path_labs[-1].number} together",
                               total, "s", None, f"<= {PATH_BUDGET_S:g}", total <= PATH_BUDGET_S))
    result.details["notebooks_s"] = seconds


IMPORT_PROBE = (
    "import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter();"
    "import labkit, labkit.core.timing, labkit.core.tables, labkit.core.device, labkit.widgets, labkit.core.checks;"
    "t2 = time.perf_counter(); print(t1 - t0, t2 - t1)"
)


def bench_import(config: BenchConfig, result: BenchResult) -> None:
    """Seconds ``import labkit`` adds over ``import torch``, in fresh processes."""
    extra, base = [], []
    for _ in range(config.import_repeats):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True).stdout
        torch_s, labkit_s = map(float, out.split())
        base.append(torch_s)
        extra.append(labkit_s)
    median = statistics.median(extra)
    spread = (max(extra) - min(extra)) if len(extra) > 1 else None
    result.add(BenchFigure("import.labkit_over_torch", "import labkit on top of import torch", median, "s",
                           spread, "<= 0.3", median <= 0.3))
    result.details["import"] = {"torch_s": statistics.median(base), "labkit_extra_s": extra}


STEPS: dict[str, Callable[[BenchConfig, BenchResult], None]] = {
    "P1": bench_profiler_overhead,
    "P2": bench_profiler_fidelity,
    "P3": bench_capstone,
    "P4": bench_memory_format,
    "P5": bench_forward_ad,
    "P6": bench_export_overhead,
    "P7": bench_hf_models,
    "widgets": bench_widget_redraw,
    "notebooks": bench_notebooks,
    "import": bench_import,
}


def run_bench(mode: str = "full", only: list[str] | None = None, log: Callable[[str], None] = print) -> BenchResult:
    """Run the chosen steps (all by default, less those ``mode`` leaves out) with the sizes of ``mode``
    (full, quick or smoke)."""
    from labkit.core.noise import silence_known_warnings

    silence_known_warnings()
    config = CONFIGS[mode]
    result = BenchResult(machine_info(), mode)
    for name, step in STEPS.items():
        if (only and name not in only) or (not only and name in config.left_out):
            continue
        log(f"bench: {name} ...")
        start = time.perf_counter()
        step(config, result)
        result.details.setdefault("step_seconds", {})[name] = time.perf_counter() - start
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help=f"ResNet18 on a smaller input (batch {QUICK.resnet_batch}, {QUICK.image_size} px), P4 in "
                             f"{', '.join(QUICK.format_precisions or ())} only, fewer repetitions, no notebooks, no "
                             "torch.compile, no Hugging Face models (P6, P7; --only P6 P7 runs them): a few minutes on a "
                             "2-core machine, longer with other work beside it")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # tiny sizes, for the test suite
    parser.add_argument("--json", type=Path, default=Path("build/bench.json"),
                        help="where to write the JSON (default: %(default)s)")
    parser.add_argument("--only", nargs="+", choices=list(STEPS), help="run only these figures")


def _json_target(path: Path) -> None:
    """Check the --json path before a bench of minutes, not after: create its folder, refuse a folder or special file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabkitValueError(f"Cannot write --json {path}: cannot create its folder ({exc.strerror}).") from None
    writable_target(path)


def run(args: argparse.Namespace) -> int:
    _json_target(args.json)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    result = run_bench(mode, args.only, log=lambda message: print(message, file=sys.stderr))
    print(result.to_text())
    print(f"JSON written to {result.to_json(args.json)}")
    missed = [f.key for f in result.figures if f.meets is False]
    if missed:
        print(f"Goals missed: {', '.join(missed)}")
    return 0
