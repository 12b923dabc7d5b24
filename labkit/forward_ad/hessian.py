"""``hvp``: a Hessian-vector product, forward-over-reverse, without building the Hessian.

Why forward-over-reverse: ``jvp(grad(f), x, v)`` costs a small constant times
one gradient, where the full Hessian costs one gradient per input dimension.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.untouched import left_as_found
from labkit.forward_ad.diagnosis import (
    _is_missing_forward_formula,
    _unsupported,
)
from labkit.forward_ad.host_sync import HostSyncRecorder, raise_if_tangent_lost
from labkit.forward_ad.inputs import (
    _as_tuple,
    _validate_pairs,
)


def hvp(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Hessian of scalar ``f`` at ``x`` times ``v``, forward-over-reverse: ``jvp(grad(f), x, v)``.

    Costs a small constant times one gradient, never the full Hessian.
    """
    with left_as_found():
        primal_tuple, tangent_tuple = _as_tuple(x, "x", "x"), _as_tuple(v, "v", "v")
        if len(primal_tuple) != 1:
            raise LabkitValueError("hvp takes one tensor x and one tensor v of the same shape.")
        _validate_pairs(primal_tuple, tangent_tuple)
        syncs = HostSyncRecorder(torch._C._functorch.is_functorch_wrapped_tensor)
        try:
            with syncs:
                product = torch.func.jvp(torch.func.grad(f), primal_tuple, tangent_tuple)[1]
        except NotImplementedError as exc:
            if not _is_missing_forward_formula(exc):
                raise
            raise _unsupported(exc) from exc
        except RuntimeError as exc:
            if "Expected f(*args) to return" not in str(exc):
                raise
            raise LabkitValueError(
                "hvp needs f to return a scalar tensor (one element); reduce its output first, e.g. f(x).sum(). "
                f"torch said: {str(exc).split(': ', 1)[-1]}"
            ) from None

        def gradient(point: torch.Tensor) -> list[torch.Tensor]:
            return [torch.func.grad(f)(point)]

        raise_if_tangent_lost(syncs.seen, gradient, primal_tuple, tangent_tuple, [product], what="Hessian-vector product")
        return product
