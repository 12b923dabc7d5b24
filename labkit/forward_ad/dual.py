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
    """
    primal_tuple = _as_tuple(primals, "Primal", "primals")
    tangent_tuple = _as_tuple(tangents, "Tangent", "tangents")
    _validate_pairs(primal_tuple, tangent_tuple)
    syncs = HostSyncRecorder(_has_tangent)
    try:
        with forward_level():
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


def _has_tangent(tensor: torch.Tensor) -> bool:
    return fwAD.unpack_dual(tensor).tangent is not None
