"""Lab 03: forward-mode automatic differentiation.

- :mod:`~labkit.forward_ad.derivatives`: the public names of the modules below, where they have always been
  importable: ``jvp``, ``module_jvp``, ``hvp`` and ``verify_jvp``.
- :mod:`~labkit.forward_ad.dual`: ``jvp`` on ``torch.autograd.forward_ad``.
- :mod:`~labkit.forward_ad.parameter_jvp`: ``module_jvp``, the JVP with respect to a module's parameters.
- :mod:`~labkit.forward_ad.hessian`: ``hvp``, forward-over-reverse.
- :mod:`~labkit.forward_ad.verification`: ``verify_jvp``, four methods compared.
- :mod:`~labkit.forward_ad.inputs` and :mod:`~labkit.forward_ad.diagnosis`: the checks and errors they share.
- :mod:`~labkit.forward_ad.host_sync`: catches a tangent lost through ``.item()``, ``.tolist()`` or ``float(t)``.
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
    "host_sync": ("TangentLostError",),
    "jacobian_cost": ("jacobian_cost", "JacobianCost", "jacobian_sweep", "JacobianSweep", "jvp_overhead", "JvpOverhead",
                      "jacobian_problem", "default_out_dims", "relu_mlp", "DEFAULT_HIDDEN"),
    "custom_function": ("Exp", "OldStyleExp", "gradcheck_forward"),
})
