"""Lab 03: forward-mode automatic differentiation.

- :mod:`~labkit.forward_ad.derivatives`: ``jvp`` on ``torch.autograd.forward_ad``,
  ``module_jvp``, ``hvp`` and ``verify_jvp``.
- :mod:`~labkit.forward_ad.jacobian_cost`: when ``jacfwd`` beats ``jacrev``, and what a JVP costs.
- :mod:`~labkit.forward_ad.custom_function`: a custom ``autograd.Function`` with forward AD.
- :mod:`~labkit.forward_ad.widgets`: ``JacobianScaling`` (the only module importing ipywidgets).
- :mod:`~labkit.forward_ad.checks`: the exercise checkers.
"""
from labkit.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "derivatives": ("jvp", "hvp", "module_jvp", "forward_level", "verify_jvp", "JvpVerification", "Method", "Tensors",
                    "ForwardADUnsupportedError", "NestedForwardADError", "DUAL_API", "FUNC_JVP", "REVERSE_MODE",
                    "FINITE_DIFFERENCES"),
    "jacobian_cost": ("jacobian_cost", "JacobianCost", "jacobian_sweep", "JacobianSweep", "jvp_overhead", "JvpOverhead",
                      "jacobian_problem", "default_out_dims", "relu_mlp", "DEFAULT_HIDDEN"),
    "custom_function": ("Exp", "OldStyleExp", "gradcheck_forward"),
})
