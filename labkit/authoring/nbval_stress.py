"""Strict nbval under load: ``make nbval-stress`` (``python -m labkit nbval-stress``).

Why: a stored output that depends on timing (an order by measured time, a
verdict from a speedup) passes on a quiet machine and fails in a busy
classroom or CI. The only way to know is to run the strict notebook suite
while something else keeps every core busy. This runs it ``--repeat`` times
with one busy-looping process per CPU core, then once more with
``OMP_NUM_THREADS=1`` (a different kernel path for torch's CPU ops), and
prints the time of each run. It exits non-zero on the first failing run.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitValueError

ROOT = Path(__file__).resolve().parents[2]


def _spin() -> None:
    while True:
        pass


@contextmanager
def cpu_hog(processes: int) -> Iterator[None]:
    """Keep ``processes`` cores busy until the block ends (also on Ctrl-C)."""
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for hog in hogs:
        hog.start()
    try:
        yield
    finally:
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.join()


@dataclass(frozen=True)
class StressRun:
    label: str
    seconds: float
    returncode: int


def run_suite(label: str, notebooks: Sequence[str], extra_env: dict[str, str]) -> StressRun:
    """One strict nbval run of ``notebooks`` (pytest's own options from pyproject)."""
    env = {**os.environ, **extra_env}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml"), *notebooks]
    start = time.perf_counter()
    returncode = subprocess.run(command, cwd=ROOT, env=env).returncode
    return StressRun(label, time.perf_counter() - start, returncode)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every notebooks/0*.ipynb)")
    parser.add_argument("--repeat", type=int, default=3, help="runs under load with the default thread count (default 3)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy processes (default: one per core)")


def run(args: argparse.Namespace) -> int:
    """``python -m labkit nbval-stress``: the strict suite under load, then single-threaded."""
    if args.repeat < 1 or args.hogs < 0:
        raise LabkitValueError("--repeat must be at least 1 and --hogs at least 0.")
    notebooks = args.notebooks or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("0*.ipynb"))

    plan: list[tuple[str, dict[str, str]]] = [
        (f"run {i + 1} of {args.repeat}, {args.hogs} busy processes", {}) for i in range(args.repeat)
    ]
    plan.append((f"OMP_NUM_THREADS=1, {args.hogs} busy processes", {"OMP_NUM_THREADS": "1"}))
    runs: list[StressRun] = []
    with cpu_hog(args.hogs):
        for label, extra_env in plan:
            print(f"nbval-stress: {label}", flush=True)
            runs.append(run_suite(label, notebooks, extra_env))
            if runs[-1].returncode != 0:
                break
    print("\nnbval-stress summary")
    for run in runs:
        print(f"  {run.label:45} {'passed' if run.returncode == 0 else 'FAILED'} in {run.seconds:.0f} s")
    failed = len(runs) < len(plan) or any(run.returncode for run in runs)
    print("nbval-stress: FAILED" if failed else f"nbval-stress: all {len(runs)} runs passed")
    return 1 if failed else 0

