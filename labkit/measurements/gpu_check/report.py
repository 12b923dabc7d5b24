"""The gpu-check's result: the machine, the plan, each step's rows; written as JSON and as a Markdown table.

Why both: the JSON keeps every number (a later session compares loans), the Markdown table is what an
instructor reads and what a closing note quotes.
"""
from __future__ import annotations

import datetime as dt
import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tabulate import tabulate

from labkit.core.device import device_line
from labkit.core.files import write_text
from labkit.core.machine import cpu_model
from labkit.core.tables import ShowsAsTable, Table
from labkit.measurements.gpu_check.plan import BAD, StepResult

HEADERS = ["step", "what", "value (a step: its status)", "spread (a step: its time)", "verdict"]


def machine_info(device: torch.device) -> dict[str, Any]:
    """What the figures were measured on: the device and the versions that decide its kernels."""
    info: dict[str, Any] = {
        "date": dt.date.today().isoformat(), "cpu": cpu_model(), "python": platform.python_version(),
        "torch": torch.__version__, "device": device_line(device),
    }
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        info.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), capability=f"{major}.{minor}",
                    memory_gib=round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1))
    return info


@dataclass(frozen=True)
class StepRecord:
    """One step as it went: planned size and seconds, how long it took, its result (or why it did not run)."""

    name: str
    what: str
    size: str | None
    planned_s: float
    seconds: float
    result: StepResult
    why: str = ""  # shrunk or dropped, and why


@dataclass(repr=False)
class GpuCheckReport(ShowsAsTable):
    machine: dict[str, Any]
    budget_s: float
    rehearsal: bool  # run on a CPU at the tiny sizes: nothing here is a GPU figure
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def bad(self) -> list[StepRecord]:
        return [step for step in self.steps if step.result.status in BAD]

    def title(self) -> str:
        m = self.machine
        head = f"gpu-check {m['date']} · {m['device']} · torch {m['torch']}"
        if "cuda" in m:
            head += f" · CUDA {m['cuda']} · cuDNN {m['cudnn']} · capability {m['capability']} · {m['memory_gib']} GiB"
        if self.rehearsal:
            head += " · CPU REHEARSAL at tiny sizes: no figure here is a GPU figure"
        return head

    def _cells(self) -> list[list[str]]:
        cells = []
        for step in self.steps:
            status = step.result.status + (f" ({step.why})" if step.why else "")
            cells.append([step.name, step.what, status, f"{step.seconds:.0f} s of {step.planned_s:.0f} s planned", ""])
            for row in step.result.rows:
                cells.append(["", row.what, row.value, row.spread, row.verdict])
        return cells

    def table(self) -> Table:
        return Table(HEADERS, self._cells(), title=self.title())

    def summary(self) -> str:
        if not self.bad:
            return "gpu-check: every path ran and every check agreed."
        return "gpu-check: " + "; ".join(f"{step.name} {step.result.status}" for step in self.bad) + "."

    def to_markdown(self) -> str:
        escaped = [[cell.replace("|", "\\|") for cell in row] for row in self._cells()]
        notes = [f"- {step.name}: {note}" for step in self.steps for note in step.result.notes]
        return "\n".join([f"## {self.title()}", "", tabulate(escaped, headers=HEADERS, tablefmt="github"), "",
                          *notes, "", self.summary(), ""])

    def as_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "budget_s": self.budget_s, "rehearsal": self.rehearsal,
                "ok": not self.bad, "steps": [asdict(step) for step in self.steps]}

    def write(self, folder: Path) -> tuple[Path, Path]:
        """``gpu-check.json`` and ``gpu-check.md`` in ``folder`` (created), each written atomically."""
        folder.mkdir(parents=True, exist_ok=True)
        return (write_text(folder / "gpu-check.json", json.dumps(self.as_dict(), indent=2, default=str) + "\n"),
                write_text(folder / "gpu-check.md", self.to_markdown()))
