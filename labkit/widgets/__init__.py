"""Live ipywidgets UIs for the labs, one module per widget.

Widgets only render: every number they show comes from labkit's core modules.
Importing this package is cheap; ipywidgets and matplotlib load when a widget
class is first used.
"""
from __future__ import annotations

import importlib
from typing import Any

_WIDGETS = {
    "SliderPlot": "labkit.widgets.slider_plot",
    "LiveProfile": "labkit.widgets.live_profile",
    "StrideExplorer": "labkit.widgets.stride_explorer",
    "JacobianScaling": "labkit.widgets.jacobian_scaling",
}

__all__ = list(_WIDGETS)


def __getattr__(name: str) -> Any:
    module = _WIDGETS.get(name)
    if module is None:
        raise AttributeError(f"module 'labkit.widgets' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
