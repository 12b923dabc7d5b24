"""``jvp``: a Jacobian-vector product with the public dual-tensor API (``torch.autograd.forward_ad``).

Why hand-written: ``torch.func.jvp`` already computes JVPs. This shows what it
does underneath (``dual_level``, ``make_dual``, ``unpack_dual``), with labkit
errors instead of a silent wrong answer: a missing forward formula
(:mod:`~labkit.forward_ad.diagnosis`) and a tangent lost through ``.item()``
(:mod:`~labkit.forward_ad.host_sync`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn

from labkit.core.copies import private_copy
from labkit.core.errors import LabkitTypeError
from labkit.core.untouched import left_as_found
from labkit.forward_ad.diagnosis import (
    ForwardADUnsupportedError,
    _raise_on_dropped_tangents,
    _record_calls,
    _reverse_problem,
    _unsupported,
    forward_level,
)
from labkit.forward_ad.host_sync import HostSyncRecorder, raise_if_tangent_lost
from labkit.forward_ad.inputs import (
    Tensors,
    _as_tuple,
    _differentiable,
    _split_output,
    _validate_pairs,
)
from labkit.forward_ad.model_kinds import higher_order_explained
from labkit.i18n.messages import _


def _unpack(outputs: tuple[torch.Tensor, ...]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[int]]:
    """Primals, tangents (zero where missing) and the indices of floating outputs that had no tangent."""
    primals_out, tangents_out, missing = [], [], []
    for index, out in enumerate(outputs):
        primal, tangent = fwAD.unpack_dual(out)
        primals_out.append(primal)
        if tangent is None and _differentiable(primal):
            missing.append(index)
        tangents_out.append(torch.zeros_like(primal) if tangent is None else tangent)
    return primals_out, tangents_out, missing

def jvp(fn: Callable[..., Any], primals: Tensors, tangents: Tensors) -> tuple[Any, Any]:
    """Return ``(fn(*primals), J @ tangents)`` computed with dual tensors.

    ``primals`` and ``tangents`` are a tensor each, or tuples of the same
    length; the result mirrors ``fn``'s output (a tensor or a tuple). Agrees
    with ``torch.func.jvp(fn, primals, tangents)``.

    ``fn`` changes nothing of the caller's: each call gets clones of the primals (a clone keeps a dual's
    tangent), a module ``fn`` runs as a private copy with its own parameters and buffers, and every random
    state, warning and logging filter is kept.
    """
    with left_as_found():
        fn = _as_function(fn, "jvp(fn, primals, tangents)")
        primal_tuple = _as_tuple(primals, "Primal", "primals")
        tangent_tuple = _as_tuple(tangents, "Tangent", "tangents")
        _validate_pairs(primal_tuple, tangent_tuple)
        syncs = HostSyncRecorder(_has_tangent)
        try:
            with forward_level(), higher_order_explained():
                duals = [fwAD.make_dual(p, t) for p, t in zip(primal_tuple, tangent_tuple)]
                with syncs:
                    output = fn(*duals)
                outputs, single = _split_output(output)
                primals_out, tangents_out, missing = _unpack(outputs)
        except ForwardADUnsupportedError as exc:
            if not isinstance(exc.__cause__, NotImplementedError):
                raise
            operator = _record_calls(fn, primal_tuple, tangent_tuple).raised
            raise _unsupported(
                exc.__cause__, operator=operator, reverse_problem=_reverse_problem(fn, primal_tuple)
            ) from exc.__cause__
        if missing:
            _raise_on_dropped_tangents(fn, primal_tuple, tangent_tuple, missing)
        floating = [i for i, out in enumerate(primals_out) if _differentiable(out)]

        def floating_outputs(*args: torch.Tensor) -> list[torch.Tensor]:
            results = _split_output(fn(*args))[0]
            return [results[i] for i in floating]

        raise_if_tangent_lost(syncs.seen, floating_outputs, primal_tuple, tangent_tuple, [tangents_out[i] for i in floating])
        if single:
            return primals_out[0], tangents_out[0]
        return tuple(primals_out), tuple(tangents_out)


def _as_function(fn: Any, call: str) -> Callable[..., Any]:
    """``fn`` as the function to differentiate: a module becomes a private copy, every call gets fresh primals.

    Why: the dual API runs ``fn`` on dual tensors that share the primals' memory, and the diagnostics run it
    again; a ``fn`` that works in place (``x.add_(1)``), a train-mode BatchNorm or a forward that clamps its
    weights would otherwise change the caller's tensors and model.
    """
    if not callable(fn) or isinstance(fn, torch.Tensor):
        raise LabkitTypeError(
            _("{call} wants a function (or a module) as fn, the thing to differentiate, and got a {kind}. Pass a "
              "function of the primals, e.g. jvp(torch.sin, (x,), (v,)), or lambda x: (x ** 2).sum().").format(
                call=call, kind=type(fn).__name__)
        )
    target = private_copy(fn, share_parameters=False) if isinstance(fn, nn.Module) else fn

    def fresh(*args: Any) -> Any:
        return target(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))

    return fresh


def _has_tangent(tensor: torch.Tensor) -> bool:
    return fwAD.unpack_dual(tensor).tangent is not None
