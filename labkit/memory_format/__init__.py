"""Lab 02: memory formats, ``channels_last`` and strides.

- :mod:`~labkit.memory_format.layout`: ``describe`` a tensor's layout, offsets, conversions.
- :mod:`~labkit.memory_format.tracker`: ``FormatTracker``, which operator dropped the format and which changed it on purpose.
- :mod:`~labkit.memory_format.conversion`: convert a model layer by layer, and report.
- :mod:`~labkit.memory_format.benchmark`: time a model in each format and precision.
- :mod:`~labkit.memory_format.widgets`: ``StrideExplorer`` and the layout figures
  (the only module importing ipywidgets or matplotlib).
- :mod:`~labkit.memory_format.checks`: the exercise checkers.
"""
from labkit.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "layout": ("FORMATS", "FormatLike", "format_name", "resolve_format", "dim_letters", "check_rank", "satisfied_formats",
               "LayoutDescription", "describe", "memory_offsets", "elements_in_memory_order", "permute_to_format",
               "CONVERSION_METHODS", "convert", "ConversionRow", "ConversionComparison", "explain_conversion"),
    "tracker": ("FormatTracker", "FormatRecord", "FormatTrackerError", "RecordKind", "LAYOUT_OPERATORS", "MIXED_INPUTS"),
    "conversion": ("convert_model_per_layer", "conversion_report", "ConversionReport", "CONVERSIONS"),
    "benchmark": ("benchmark_formats", "FormatBenchmark", "FormatTiming", "Precision", "PRECISIONS", "LAYOUTS"),
})
