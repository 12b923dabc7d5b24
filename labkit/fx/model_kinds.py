"""Models fx cannot see into as given: torch.compile's wrapper (profiled as what it wraps) and TorchScript (refused).

Why: ``torch.compile(model)`` returns a wrapper whose forward is dynamo's;
fx traced it as one opaque call and reported a "successful" one-row profile
with all of the time outside. The wrapper keeps the original module, and a
profile of that module is what a learner can read (its eager timings: the
compiled kernels are what ``torch.profiler`` shows). A scripted module is
TorchScript, not Python: neither fx nor forward hooks see inside it, so
labkit says what to profile instead of failing deep in fx.
"""
from __future__ import annotations

import warnings
from typing import Any

import torch

from labkit.core.errors import LabkitTypeError


class CompiledModelWarning(UserWarning):
    """A ``torch.compile``'d model is profiled as the eager module it wraps."""


def eager_model(model: Any, stacklevel: int = 2) -> Any:
    """``model`` itself, the module or function ``torch.compile`` wrapped (with a warning), or a labkit error for TorchScript."""
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise LabkitTypeError(
            f"{type(model).__name__} is TorchScript (torch.jit.script or trace): torch.fx and forward hooks cannot see "
            "inside it. Profile the Python module you scripted instead, or time the scripted one with torch.profiler."
        )
    original = getattr(model, "_orig_mod", None) if isinstance(model, torch.nn.Module) else None
    if original is None and callable(model) and not isinstance(model, torch.nn.Module):
        original = getattr(model, "_torchdynamo_orig_callable", None)
    if original is None:
        return model
    warnings.warn(
        f"{type(original).__name__} was compiled with torch.compile: labkit profiles the original (eager) "
        "module it wraps, node by node. The compiled kernels' own times are what torch.profiler shows.",
        CompiledModelWarning,
        stacklevel=stacklevel + 1,
    )
    return original
