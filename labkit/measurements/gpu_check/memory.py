"""Memory per node against ``torch.cuda.max_memory_allocated``: only where labkit's profile has memory per node.

Why a step that may say "not available": the check is planned (a profile's bytes per node, and its peak,
read against what CUDA's allocator saw), but the profile that reports memory is being written beside this
command. Until a labkit has it, the step says so plainly; it never reports a comparison it did not make.
"""
from __future__ import annotations

import dataclasses

import torch

from labkit.measurements.gpu_check.plan import NOT_AVAILABLE, Budget, Row, StepResult

#: What a report with memory per node carries (the fields this step looks for).
MEMORY_FIELDS = ("memory",)


def memory_fields() -> list[str]:
    """The fields of this labkit's ProfileReport that hold memory per node (empty today)."""
    from labkit.fx.report import ProfileReport

    return [f.name for f in dataclasses.fields(ProfileReport) if f.name in MEMORY_FIELDS]


def check_memory(device: torch.device, budget: Budget) -> StepResult:
    found = memory_fields()
    if not found:
        why = "not available in this labkit: its ProfileReport has no memory per node, so there is nothing to compare"
        return StepResult(NOT_AVAILABLE, (Row("memory per node vs torch.cuda.max_memory_allocated", "-", "", why),))
    why = (f"not available in this gpu-check: this labkit's ProfileReport has {', '.join(found)}, but the comparison "
           "with torch.cuda.max_memory_allocated is not written yet (labkit/measurements/gpu_check/memory.py)")
    return StepResult(NOT_AVAILABLE, (Row("memory per node vs torch.cuda.max_memory_allocated", "-", "", why),))
