"""What a gpu-check step is, what it returns, and how the steps are fitted into a budget.

Why a plan: a loan of a GPU lasts minutes, so the whole check has a budget (``--budget``, at most
:data:`FULL_BUDGET_S`). Each step knows what it costs on a GPU at each size it can run at; the plan
runs every step at the largest size that still fits, in priority order, drops the rest and says so.
A step that ran longer than planned leaves less for the later ones: each is planned again just before
it runs, against the time really left.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from labkit.core.errors import LabkitValueError

#: The whole check, on a GPU, fits in this (seconds): 8 minutes.
FULL_BUDGET_S = 480.0
#: Sizes a step can run at, largest first. ``tiny`` is for the CPU (the tests): figures mean nothing there.
SIZES = ("full", "small", "tiny")

# A step's outcome. Only FAILED and DISAGREES make the command exit non-zero.
OK = "ok"
FAILED = "failed"  # the path raised: it does not work on this device
DISAGREES = "disagrees"  # it ran, and a check of its result failed
NOT_AVAILABLE = "not available"  # this labkit has no such path yet (said, never pretended)
DROPPED = "dropped"  # left out to fit the budget
BAD = (FAILED, DISAGREES)


@dataclass(frozen=True)
class Budget:
    """What a step may spend: ``size`` picks its sizes (model batch, repetitions), ``seconds`` is its share."""

    size: str
    seconds: float

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise LabkitValueError(f"size must be one of {SIZES}, got {self.size!r}.")

    def pick(self, full: Any, small: Any, tiny: Any) -> Any:
        """The value for this budget's size."""
        return {"full": full, "small": small, "tiny": tiny}[self.size]


@dataclass(frozen=True)
class Row:
    """One line of the table: what was measured or checked, its value and spread (text), the verdict."""

    what: str
    value: str
    spread: str = ""
    verdict: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)  # the numbers behind the text, for the JSON


@dataclass(frozen=True)
class StepResult:
    """What one step found: its status (see the constants above), its rows and notes."""

    status: str
    rows: tuple[Row, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """A step: its name, what it checks, its cost on a GPU per size (seconds), and the function that runs it.

    ``run(device, budget)`` returns a :class:`StepResult`; an exception it raises is the step's failure.
    ``priority``: lower is planned first when the budget is short (the order of the run stays the steps' own).
    """

    name: str
    what: str
    costs: Mapping[str, float]  # size -> seconds on a GPU; a size missing here is one the step cannot run at
    run: Callable[[torch.device, Budget], StepResult]
    priority: int = 5


@dataclass(frozen=True)
class Planned:
    """One step's place in the plan: the size it runs at (``None``: dropped) and why."""

    step: Step
    size: str | None
    seconds: float
    why: str = ""

    @property
    def budget(self) -> Budget | None:
        return None if self.size is None else Budget(self.size, self.seconds)


def plan(steps: Sequence[Step], budget_s: float, *, tiny: bool = False) -> list[Planned]:
    """Fit ``steps`` into ``budget_s`` seconds: each at its largest size that fits, by priority; the rest dropped.

    ``tiny``: every step at its tiny size (the CPU rehearsal), whatever the budget.
    Returns the steps in their own order.
    """
    if not budget_s > 0:
        raise LabkitValueError(f"--budget must be a positive number of seconds, got {budget_s!r}.")
    placed: dict[str, Planned] = {}
    left = budget_s
    for step in sorted(steps, key=lambda s: s.priority):
        if tiny:
            placed[step.name] = (Planned(step, "tiny", step.costs["tiny"]) if "tiny" in step.costs
                                 else Planned(step, None, 0.0, "dropped: it has no tiny size to rehearse at"))
            continue
        fitting = [size for size in SIZES[:2] if size in step.costs and step.costs[size] <= left]
        if fitting:
            size = fitting[0]
            shrunk = "" if size == "full" or "full" not in step.costs else (
                f"shrunk to its small size: full needs {step.costs['full']:.0f} s, {left:.0f} s were left")
            placed[step.name] = Planned(step, size, step.costs[size], shrunk)
            left -= step.costs[size]
        else:
            smallest = min((step.costs[size] for size in SIZES[:2] if size in step.costs), default=math.inf)
            placed[step.name] = Planned(step, None, 0.0, f"dropped: needs {smallest:.0f} s, {left:.0f} s were left")
    return [placed[step.name] for step in steps]


def planned_cost(planned: Sequence[Planned]) -> float:
    return sum(p.seconds for p in planned if p.size is not None)
