"""The labs' widgets under one name, for ``from labkit.widgets import LiveProfile``.

Each widget lives in its lab's package (``labkit.fx.widgets`` ...); this package
only points there, and imports nothing until a widget is used.
"""
from labkit.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "labkit.core.widgets": ("SliderPlot",),
    "labkit.fx.widgets": ("LiveProfile", "MemoryTimeline"),
    "labkit.memory_format.widgets": ("StrideExplorer",),
    "labkit.forward_ad.widgets": ("JacobianScaling",),
})
