"""The labs' notebooks executed on the device: every cell without an error, every checker solved.

Why: each notebook "uses the GPU when one is present". Each runs in a fresh kernel with ``LABKIT_DEVICE``
set to the device (so ``labkit.setup_notebook()`` picks it, or fails clearly), its outputs are not compared
(they are timings on another machine) and nothing is written. One probe cell appended at the end prints
the device the notebook's own ``device`` variable held; every checker's verdict line is read from the
outputs, and each exercise the labs registry lists must be there, solved.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

from labkit.core.checks import Status
from labkit.core.errors import LabkitError
from labkit.labs import LABS, NOTEBOOKS_DIR
from labkit.measurements.gpu_check.plan import DISAGREES, FAILED, OK, Budget, Row, Step, StepResult

PROBE_MARKER = "labkit-gpu-check-probe: "
PROBE_CELL = (
    "import json as _json\n"
    "import torch as _torch\n"
    f"print({PROBE_MARKER!r} + _json.dumps({{'device': str(globals().get('device')),\n"
    "    'cuda_peak_bytes': _torch.cuda.max_memory_allocated() if _torch.cuda.is_available() else 0}))\n"
)
#: "Exercise 1.2: solved." as a checker prints it (English: the kernel runs with labkit's default language).
VERDICT = re.compile(r"Exercise (\d+\.\d+): (" + "|".join(re.escape(s.value) for s in Status) + r")\.")
CELL_TIMEOUT_S = 300


@contextmanager
def kernel_environment(device: torch.device) -> Iterator[None]:
    """``LABKIT_DEVICE`` for kernels started in the block (their progress is off whatever the environment says:
    :func:`labkit.authoring.nbrun.kernel_environment`)."""
    wanted = {"LABKIT_DEVICE": device.type}
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _printed(notebook: object) -> Iterator[str]:
    for cell in getattr(notebook, "cells", []):
        for output in cell.get("outputs", []):
            yield "".join(output.get("text", ""))
            yield "".join(output.get("data", {}).get("text/plain", ""))


def read_outputs(notebook: object) -> tuple[dict[str, str], dict[str, object]]:
    """Each exercise's last verdict, and what the probe cell printed."""
    verdicts: dict[str, str] = {}
    probe: dict[str, object] = {}
    for text in _printed(notebook):
        for exercise, status in VERDICT.findall(text):
            verdicts[exercise] = status
        for line in text.splitlines():
            if line.startswith(PROBE_MARKER):
                probe = json.loads(line[len(PROBE_MARKER):])
    return verdicts, probe


def run_notebook(path: Path, device: torch.device, exercises: Sequence[str], *, timeout: int = CELL_TIMEOUT_S) -> Row:
    """Execute ``path`` on ``device`` and judge it: no cell failed, it ran on ``device``, every exercise solved."""
    from labkit.authoring.nbrun import executed_copy

    what = f"{path.name} on {device.type}"
    if not path.is_file():
        return Row(what, "not found", "", f"FAILED: no {path}; run gpu-check in a checkout of labkit's repository")
    try:
        with kernel_environment(device):
            notebook, seconds = executed_copy(path, timeout=timeout, extra_cells=(PROBE_CELL,))
    except LabkitError as exc:
        first = (str(exc).splitlines() or [""])[0]
        error = next((line for line in str(exc).splitlines() if "Error" in line), first)
        return Row(what, "a cell failed", "", f"FAILED: {error.strip()[:200]}",
                   {"error": str(exc)[-2000:]})
    verdicts, probe = read_outputs(notebook)
    solved = [e for e in exercises if verdicts.get(e) == Status.SOLVED.value]
    problems = [f"{e}: {verdicts.get(e, 'no verdict printed')}" for e in exercises if e not in solved]
    ran_on = str(probe.get("device", "not printed"))
    if not ran_on.startswith(device.type):
        problems.append(f"the notebook's device was {ran_on}, not {device.type}")
    value = f"{len(solved)}/{len(exercises)} exercises solved, {seconds:.0f} s, device {ran_on}"
    return Row(what, value, "", "ok" if not problems else "; ".join(problems),
               {"seconds": seconds, "verdicts": verdicts, "probe": probe})


def notebook_step(stem: str, exercises: Sequence[str], cost_s: float, priority: int) -> Step:
    """The step that runs one lab's notebook (at the tiny size too: a notebook has no smaller size)."""
    path = NOTEBOOKS_DIR / f"{stem}.ipynb"

    def run(device: torch.device, budget: Budget) -> StepResult:
        row = run_notebook(path, device, exercises)
        status = OK if row.verdict == "ok" else FAILED if row.verdict.startswith("FAILED") else DISAGREES
        return StepResult(status, (row,))

    return Step(f"notebook {stem[:2]}", f"{path.name} executed on the device, every checker solved",
                {"full": cost_s, "tiny": cost_s}, run, priority)


#: The labs 01-04 (notebook 00 is the welcome page: no device path of its own).
LAB_NOTEBOOKS = tuple(lab for lab in LABS if lab.number != "00")
