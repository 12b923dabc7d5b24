"""The profiler on the device: do its clocks wait for the GPU, and does torch.profiler agree with it?

Why: GPU kernels run asynchronously, so a clock read without a synchronize times the launch, not the work.
labkit's fast mode synchronizes before every stamp, its modules mode in every hook. The check times the
same model's eager forward with ``torch.cuda.Event`` (the GPU's own clock; ``SyncTimer`` on a CPU) and
reads each profile's median total against it:

- a total *shorter* than the GPU's own time for the work (ratio below :data:`MIN_RATIO`) means a clock
  was read before the work had finished;
- in fast mode, the nodes must account for the run (time outside every node at most
  :data:`MAX_OUTSIDE_PCT`): stamps that did not wait would leave the work to the final synchronize, outside
  every node.

Above 1 the ratio is the profile's own cost (a synchronize per node); it is printed, not judged. Then
:func:`~labkit.fx.crosscheck.compare_with_torch_profiler` watches the same runs with torch.profiler's CUDA
activity (kernel time) and must reach a verdict.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from labkit.core.timing import RunStats, SyncTimer
from labkit.measurements.gpu_check.plan import DISAGREES, OK, Budget, Row, StepResult

MIN_RATIO = 0.8
MAX_OUTSIDE_PCT = 25.0


def device_clock(device: torch.device) -> tuple[Callable[[Callable[[], object]], float], str]:
    """A function that times one call of ``fn`` on ``device`` (seconds), and the clock's name: CUDA events on a
    GPU (the GPU's own clock, from the first kernel queued to the last), ``SyncTimer`` elsewhere."""
    if device.type == "cuda":
        def on_gpu(fn: Callable[[], object]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # ms -> s
        return on_gpu, "torch.cuda.Event"

    def elsewhere(fn: Callable[[], object]) -> float:
        with SyncTimer(device) as timer:
            fn()
        return timer.elapsed
    return elsewhere, "SyncTimer"


def resnet18_call(device: torch.device, budget: Budget) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    import torchvision

    batch, side = budget.pick((32, 224), (8, 224), (1, 32))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = torchvision.models.resnet18(weights=None).eval().to(device)
        x = torch.randn(batch, 3, side, side).to(device)
    return model, (x,), {}


def bert_call(device: torch.device, budget: Budget) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    from labkit.fx import hf_zoo

    model = hf_zoo.build_model("bert").to(device)
    return model, (), hf_zoo.example_inputs("bert", model, budget.pick(32, 8, 1), device)


MODELS: dict[str, Callable[[torch.device, Budget], tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]]] = {
    "ResNet18": resnet18_call,
    "BERT (small config)": bert_call,
}


def sync_verdict(ratio: float, outside_pct: float | None, device: torch.device) -> str:
    """"ok", or what the figures say went wrong (see the module docstring); on a CPU nothing runs asynchronously
    and a loaded machine moves both figures, so there is nothing to judge."""
    if device.type == "cpu":
        return "not judged on a CPU"
    problems = []
    if ratio < MIN_RATIO:
        problems.append(f"total below {MIN_RATIO:g}x the device's own time: a clock did not wait for the device")
    if outside_pct is not None and outside_pct > MAX_OUTSIDE_PCT:
        problems.append(f"{outside_pct:.0f} % outside every node (> {MAX_OUTSIDE_PCT:g} %): the stamps did not wait")
    return "; ".join(problems) or "ok"


def _profile_rows(name: str, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                  device: torch.device, warmup: int, runs: int) -> list[Row]:
    """Per mode: the profile's median total over the eager forward's, one eager forward timed after each profiled run
    (interleaved, so load and clocks hit both alike)."""
    from labkit.fx.profile import TraceFallbackWarning, profile_model

    clock, clock_name = device_clock(device)

    def forward() -> None:
        with torch.no_grad():
            model(*args, **kwargs)

    def eager_after_each_run(samples: list[float]) -> Callable[[object], None]:
        return lambda _report: samples.append(clock(forward))

    rows = []
    for mode in ("fast", "modules"):
        eager: list[float] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceFallbackWarning)  # the row names the mode that ran
            report = profile_model(model, *args, kwargs=kwargs, mode=mode, warmup=warmup, runs=runs,
                                   on_run=eager_after_each_run(eager))
        eager_stats = RunStats.from_samples(eager)
        ratio = report.total.median / eager_stats.median
        outside = report.outside_pct if report.mode == "fast" else None
        detail = f", {outside:.1f} % outside every node" if outside is not None else ""
        rows.append(Row(f"{name}: profile total over eager forward ({clock_name}), mode {report.mode} "
                        f"(capture {report.capture})",
                        f"{ratio:.2f}x{detail}", f"eager {eager_stats}", sync_verdict(ratio, outside, device),
                        {"ratio": ratio, "outside_pct": outside, "total_median_s": report.total.median,
                         "eager_median_s": eager_stats.median, "clock": clock_name, "mode": report.mode,
                         "capture": report.capture, "nodes": report.graph_nodes}))
    return rows


def _crosscheck_row(name: str, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                    warmup: int, runs: int) -> Row:
    from labkit.fx.crosscheck import compare_with_torch_profiler

    with torch.no_grad():
        check = compare_with_torch_profiler(model, *args, kwargs=kwargs, warmup=warmup, runs=runs)
    verdict = "ok" if check.comparable and check.rows else "no verdict"
    return Row(f"{name}: cross-check against torch.profiler ({check.basis} basis, capture {check.capture})",
               f"largest difference {check.max_difference:.1f} points" if check.rows else "nothing compared",
               "", verdict, {"verdict": check.verdict(), "agrees": check.agrees() if check.rows else None,
                             "max_difference_points": check.max_difference if check.rows else None})


def check_profiler(device: torch.device, budget: Budget) -> StepResult:
    """Fast and modules mode against the device's own clock, then the cross-check, on ResNet18 and BERT (at the
    tiny size, ResNet18 only: BERT's export capture alone takes a test's share of the CPU)."""
    warmup, runs = budget.pick((3, 10), (2, 5), (1, 3))
    rows: list[Row] = []
    notes: list[str] = []
    for name, build in list(MODELS.items())[:budget.pick(2, 2, 1)]:  # tiny (the CPU tests): ResNet18 alone
        model, args, kwargs = build(device, budget)
        rows += _profile_rows(name, model, args, kwargs, device, warmup, runs)
        rows.append(_crosscheck_row(name, model, args, kwargs, warmup, runs))
        notes.append(f"{name} cross-check: {rows[-1].data['verdict']}")
    bad = [row for row in rows if row.verdict not in ("", "ok", "not judged on a CPU")]
    return StepResult(DISAGREES if bad else OK, tuple(rows), tuple(notes))
