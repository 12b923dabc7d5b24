"""Lab 01: profile a model node by node with ``torch.fx``.

The profile pipeline reads one way: capture a graph, time it, report.

- :mod:`~labkit.fx.capture`: the graph to time: fx's ``symbolic_trace``, then ``torch.export`` (``capture=``).
- :mod:`~labkit.fx.profile`: the tutorial's ``ProfilingInterpreter``, the fast
  instrumented mode and ``profile_model``: they time the captured graph.
- :mod:`~labkit.fx.tracing`: ``trace`` with fx's options, and why a model does not trace.
- :mod:`~labkit.fx.module_hooks`: ``mode="modules"``, forward hooks for models fx cannot trace.
- :mod:`~labkit.fx.runs`: the run loop every mode shares, and the eager first run.
- :mod:`~labkit.fx.model_inputs`: the model's keyword inputs, ``kwargs={...}``, checked the same way by every helper.
- :mod:`~labkit.fx.model_kinds`: a ``torch.compile``'d model profiled as what it wraps; TorchScript refused.
- :mod:`~labkit.fx.report`: ``ProfileReport``, the result every mode fills (by node, op type and module).
- :mod:`~labkit.fx.overhead`: what each profiling mode costs per node.
- :mod:`~labkit.fx.crosscheck`: the same breakdown from ``torch.profiler``.
- :mod:`~labkit.fx.fusion`: Conv+BatchNorm fusion, by hand and by torch.
- :mod:`~labkit.fx.widgets`: ``LiveProfile`` (the only module importing ipywidgets).
- :mod:`~labkit.fx.checks`: the exercise checkers.
"""
from labkit.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "profile": ("ProfilingInterpreter", "InstrumentedModule", "NodeProfiler", "profile_model", "require_profilable",
                "TraceFallbackWarning", "TracedRunError", "MODES"),
    "capture": ("capture_graph", "CapturedGraph", "CaptureFailedError", "ExportFailedError", "BufferUpdatesLostError",
                "CAPTURES"),
    "tracing": ("trace", "traceable_children", "TraceFailedError"),
    "module_hooks": ("ModuleProfiler",),
    "runs": ("ModelRunError", "NotRunYetError", "TrainModeWarning"),
    "model_inputs": ("StrayKeywordError", "UnknownKeywordInputError", "InputsDoNotFitError",
                     "KeywordsIntoVarKeywordError"),
    "model_kinds": ("CompiledModelWarning", "eager_model"),
    "report": ("ProfileReport", "OpTypeBreakdown", "ModuleBreakdown", "ModuleTime", "NodeTiming"),
    "overhead": ("measure_overhead", "OverheadResult", "TinyOpsChain"),
    "crosscheck": ("compare_with_torch_profiler", "CrossCheck", "TooLittleComparedError"),
    "memory_agreement": ("compare_memory_with_allocator", "MemoryAgreement"),
    "fusion": ("fold_bn_into_conv", "fuse_conv_bn_teaching", "fuse_conv_bn_library", "fuse_safely", "count_nodes",
               "verify_fusion", "FusionVerification", "fusion_timings", "FusionTimings", "UnsafeFusionError",
               "FusionSkippedWarning"),
})
