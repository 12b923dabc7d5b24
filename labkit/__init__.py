"""labkit: executable labs that teach PyTorch internals.

Data flows one way: measure (``fx_profile``, ``memory_format``, ``forward_ad``,
``timing``) -> plain result objects -> render (``tables``, ``plots``,
``widgets``). ``import labkit`` stays cheap and headless: it imports neither
ipywidgets nor matplotlib nor torchvision; the heavier modules load on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from labkit.errors import LabkitError, LabkitTypeError, LabkitValueError

# Public names that live in submodules, imported the first time they are used.
_LAZY = {
    "profile_model": "labkit.fx_profile",
    "ProfilingInterpreter": "labkit.fx_profile",
    "ProfileReport": "labkit.fx_profile",
    "describe": "labkit.memory_format",
    "FormatTracker": "labkit.memory_format",
    "benchmark_formats": "labkit.memory_format",
    "convert_model_per_layer": "labkit.memory_format",
    "jvp": "labkit.forward_ad",
    "hvp": "labkit.forward_ad",
    "pick_device": "labkit.device",
    "setup_notebook": "labkit.notebook",
}

__all__ = ["LabkitError", "LabkitTypeError", "LabkitValueError", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'labkit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
