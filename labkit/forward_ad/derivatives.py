"""Jacobian-vector products with PyTorch's dual-tensor API, and ways to verify them: the public names, in one place.

Why a module of re-exports: these names have always been importable from here
(``from labkit.forward_ad.derivatives import jvp``), while the code is split by
concern into small modules:

- :mod:`~labkit.forward_ad.inputs` - the primals, tangents and outputs every entry point accepts, checked once.
- :mod:`~labkit.forward_ad.diagnosis` - the errors for an operator without a forward formula or a nested
  level, and :func:`forward_level`.
- :mod:`~labkit.forward_ad.dual` - :func:`jvp`: ``(output, tangent_out)`` from the dual API; agrees with
  ``torch.func.jvp``.
- :mod:`~labkit.forward_ad.parameter_jvp` - :func:`module_jvp`: the JVP of a module with respect to its
  parameters, two ways.
- :mod:`~labkit.forward_ad.hessian` - :func:`hvp`: Hessian-vector product, forward-over-reverse.
- :mod:`~labkit.forward_ad.verification` - :func:`verify_jvp`: dual API vs ``torch.func.jvp`` vs reverse mode
  vs finite differences.
- :mod:`~labkit.forward_ad.host_sync` - :class:`TangentLostError`: a tangent lost through ``.item()``.
"""
from __future__ import annotations

from labkit.forward_ad.diagnosis import ForwardADUnsupportedError, NestedForwardADError, forward_level
from labkit.forward_ad.dual import jvp
from labkit.forward_ad.hessian import hvp
from labkit.forward_ad.host_sync import TangentLostError
from labkit.forward_ad.inputs import Tensors
from labkit.forward_ad.parameter_jvp import Method, module_jvp
from labkit.forward_ad.verification import (
    DUAL_API,
    FINITE_DIFFERENCES,
    FUNC_JVP,
    REVERSE_MODE,
    JvpVerification,
    verify_jvp,
)

__all__ = [
    "DUAL_API", "FINITE_DIFFERENCES", "FUNC_JVP", "REVERSE_MODE", "ForwardADUnsupportedError", "JvpVerification",
    "Method", "NestedForwardADError", "TangentLostError", "Tensors", "forward_level", "hvp", "jvp", "module_jvp",
    "verify_jvp",
]
