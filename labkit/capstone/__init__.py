"""Lab 04, the capstone: make a model faster with everything the labs taught.

- :mod:`~labkit.capstone.variants`: the model variants (channels_last, fused,
  compiled, ...) timed side by side and profiled.
- :mod:`~labkit.capstone.widgets`: the bar chart of the variants (the only module importing matplotlib).
- :mod:`~labkit.capstone.checks`: the exercise checker.
"""
from labkit.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "variants": ("EAGER", "CHANNELS_LAST", "FUSED", "FUSED_CHANNELS_LAST", "COMPILED", "OPTIMIZED_FOR_INFERENCE",
                 "FUSED_CHANNELS_LAST_GOAL", "FUSED_CHANNELS_LAST_GOALS", "CHALLENGE_SIZE", "GoalVerdict", "goal_verdict",
                 "Variant", "VariantResult", "VariantComparison", "compiler_available", "build_variants",
                 "optimize_for_inference_variant", "compile_variant", "compare_variants", "challenge_model",
                 "challenge_input", "profile_variants", "op_type_table", "OpTypeSaving", "TimeSaved", "time_saved_by_op_type",
                 "break_even_runs"),
})
