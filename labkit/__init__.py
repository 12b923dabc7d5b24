"""labkit: executable labs that teach PyTorch internals.

Layout: :mod:`labkit.core` (what every lab shares), one package per lab
(:mod:`labkit.fx`, :mod:`labkit.memory_format`, :mod:`labkit.forward_ad`,
:mod:`labkit.capstone`), :mod:`labkit.labs` (the registry of labs) and
the ``python -m labkit`` commands by who runs them: :mod:`labkit.learner`,
:mod:`labkit.authoring` and :mod:`labkit.measurements`.

Data flows one way: measure -> plain result objects -> render (tables, plots,
widgets). ``import labkit`` stays cheap and headless: it imports neither
ipywidgets nor matplotlib nor torchvision; the heavier modules load on first use.
"""
from __future__ import annotations

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.lazy import lazy_exports

__version__ = "0.2.0"  # the one place the version is defined (pyproject reads it)

__getattr__, __dir__, _lazy_names = lazy_exports(__name__, {
    "fx.profile": ("profile_model", "ProfilingInterpreter", "ProfileReport"),
    "memory_format.layout": ("describe",),
    "memory_format.tracker": ("FormatTracker",),
    "memory_format.benchmark": ("benchmark_formats",),
    "memory_format.conversion": ("convert_model_per_layer",),
    "forward_ad.derivatives": ("jvp", "hvp"),
    "core.device": ("pick_device",),
    "core.notebook": ("setup_notebook",),
    "progress.hints": ("hint",),
    "progress.help": ("help",),
    "progress.solutions": ("solution",),
    "progress.table": ("my_progress",),
})
__all__ = ["LabkitError", "LabkitTypeError", "LabkitValueError", "__version__", *_lazy_names]
