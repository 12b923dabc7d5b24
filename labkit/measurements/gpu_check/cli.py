"""``python -m labkit gpu-check`` (``make gpu-check``): the steps, the plan, the run, the exit code.

Exit codes: 0 every path ran and every check agreed; 1 a path failed or a check disagreed (the table says
which); 2 bad arguments; :data:`NO_CUDA_EXIT` no CUDA GPU here (nothing was run); 130 interrupted.
``--dry-run`` prints the plan and runs nothing, on any machine. ``--device cpu`` is a rehearsal: every
step at its tiny size, to see the command work end to end without a GPU (its figures mean nothing).
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.tables import Table
from labkit.measurements.gpu_check import formats, forward_ad, memory, notebooks, profiler
from labkit.measurements.gpu_check.plan import (
    DROPPED,
    FAILED,
    FULL_BUDGET_S,
    Planned,
    Row,
    Step,
    StepResult,
    plan,
    planned_cost,
)
from labkit.measurements.gpu_check.report import GpuCheckReport, StepRecord, machine_info
from labkit.measurements.gpu_check.settings import snapshot

NO_CUDA_EXIT = 3
#: Seconds per lab notebook on a GPU machine (kernel start included); the capstone compiles with an empty cache.
NOTEBOOK_COSTS_S = {"01": 45, "02": 45, "03": 40, "04": 120}

#: Every step, in the order it runs. Costs are seconds on a GPU machine (estimates until a loan measures them:
#: the JSON keeps each step's real time); priority decides what a short budget keeps first.
STEPS: tuple[Step, ...] = (
    Step("forward-ad", "jvp, module_jvp and hvp against torch.func on the device", {"full": 15, "small": 8, "tiny": 1},
         forward_ad.check_forward_ad, priority=1),
    Step("profiler", "profiler synchronisation (fast, modules) and the torch.profiler cross-check, ResNet18 and BERT",
         {"full": 60, "small": 30, "tiny": 1}, profiler.check_profiler, priority=2),
    Step("memory", "memory per node against torch.cuda.max_memory_allocated", {"full": 1, "tiny": 1},
         memory.check_memory, priority=0),
    Step("channels-last", "channels_last vs channels_first, ResNet50 inference and training step, per precision",
         {"full": 130, "small": 60, "tiny": 1}, formats.check_channels_last, priority=3),
    *(notebooks.notebook_step(lab.stem, lab.exercises, NOTEBOOK_COSTS_S.get(lab.number, 60), priority=4 + i)
      for i, lab in enumerate(notebooks.LAB_NOTEBOOKS)),
)
STEP_NAMES = tuple(step.name for step in STEPS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", type=float, default=FULL_BUDGET_S, metavar="SECONDS",
                        help="seconds the whole check may take (default %(default)g): steps shrink or are dropped to fit")
    parser.add_argument("--dry-run", action="store_true", help="list the steps it would run and their budget; run nothing")
    parser.add_argument("--only", nargs="+", choices=STEP_NAMES, metavar="STEP",
                        help=f"run only these steps ({', '.join(STEP_NAMES)})")
    parser.add_argument("--device", default="cuda",
                        help="cuda (default), or cpu for a rehearsal at tiny sizes whose figures mean nothing")
    parser.add_argument("--out", type=Path, default=Path("build"),
                        help="folder for gpu-check.json and gpu-check.md (default: %(default)s)")


def selected_steps(only: list[str] | None) -> list[Step]:
    return [step for step in STEPS if not only or step.name in only]


def plan_table(planned: list[Planned], budget_s: float) -> Table:
    rows = [[p.step.name, p.size or DROPPED, f"{p.seconds:.0f} s" if p.size else "-", p.step.what, p.why]
            for p in planned]
    return Table(["step", "size", "budget", "what", "note"], rows,
                 title=f"gpu-check plan: {planned_cost(planned):.0f} s of the {budget_s:g} s budget")


def _device(name: str) -> torch.device | None:
    """The device to check, or None when it is CUDA and there is none here."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise LabkitValueError(f"--device {name!r} is not a device name; use cuda (or cpu for a rehearsal).") from None
    if device.type not in ("cuda", "cpu"):
        raise LabkitValueError(f"gpu-check checks the CUDA paths; --device {name!r} is neither cuda nor cpu.")
    if device.type == "cuda" and not torch.cuda.is_available():
        return None
    return device


def run_step(planned: Planned, device: torch.device) -> tuple[StepResult, float]:
    """Run one planned step; an exception is its failure; a backend setting it left changed is one too."""
    budget = planned.budget
    if budget is None:
        raise LabkitValueError(f"{planned.step.name} was dropped from the plan ({planned.why}); it cannot run.")
    before = snapshot()
    start = time.perf_counter()
    try:
        result = planned.step.run(device, budget)
    except Exception as exc:  # noqa: BLE001 - a step that raises is a path that fails on this device: a row, not the end
        lines = traceback.format_exception_only(type(exc), exc)
        result = StepResult(FAILED, (Row("raised", type(exc).__name__, "", f"FAILED: {lines[-1].strip()[:300]}",
                                         {"traceback": traceback.format_exc()[-4000:]}),))
    seconds = time.perf_counter() - start
    after = snapshot()
    changed = {name: (value, after[name]) for name, value in before.items() if after[name] != value}
    if changed:
        result = StepResult(FAILED, (*result.rows, Row("settings left changed", str(changed), "", "FAILED")),
                            result.notes)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result, seconds


def run_planned(planned: list[Planned], device: torch.device, budget_s: float, rehearsal: bool,
                log: Callable[[str], None] = print) -> GpuCheckReport:
    """Run each planned step in order; one planned for more than the time left (earlier steps ran long) is dropped."""
    report = GpuCheckReport(machine_info(device), budget_s, rehearsal)
    start = time.perf_counter()
    for item in planned:
        left = budget_s - (time.perf_counter() - start)
        if item.size is None or (not rehearsal and item.seconds > left):
            why = item.why or f"dropped: planned {item.seconds:.0f} s, {max(left, 0):.0f} s left after earlier steps ran long"
            report.steps.append(StepRecord(item.step.name, item.step.what, None, item.seconds, 0.0,
                                           StepResult(DROPPED), why))
            continue
        log(f"gpu-check: {item.step.name} ({item.size}, {item.seconds:.0f} s planned) ...")
        result, seconds = run_step(item, device)
        report.steps.append(StepRecord(item.step.name, item.step.what, item.size, item.seconds, seconds, result, item.why))
    return report


def run(args: argparse.Namespace) -> int:
    from labkit.core.noise import silence_known_warnings

    device = _device(args.device)
    rehearsal = device is not None and device.type == "cpu"
    planned = plan(selected_steps(args.only), args.budget, tiny=rehearsal)
    if args.dry_run:
        print(plan_table(planned, args.budget).to_text())
        if device is None:
            print("(No CUDA GPU here: a real run would stop at once with exit code "
                  f"{NO_CUDA_EXIT}; --device cpu rehearses it at tiny sizes.)")
        return 0
    if device is None:
        print(f"gpu-check: no CUDA GPU here (torch {torch.__version__}, torch.cuda.is_available() is False): nothing "
              "was run. Run it on a machine with an NVIDIA GPU; `--dry-run` lists the steps, `--device cpu` "
              "rehearses them at tiny sizes.", file=sys.stderr)
        return NO_CUDA_EXIT
    silence_known_warnings()
    try:
        report = run_planned(planned, device, args.budget, rehearsal, log=lambda m: print(m, file=sys.stderr))
    except KeyboardInterrupt:
        print("gpu-check: interrupted; nothing was written.", file=sys.stderr)
        return 130
    print(report.to_text())
    json_path, markdown_path = report.write(args.out)
    print(f"{report.summary()}\nWritten: {json_path} and {markdown_path}")
    return 1 if report.bad else 0
