"""Catch a derivative that silently loses its tangent through ``.item()``, ``.tolist()`` or ``float(t)``.

Why: these calls turn a tensor into a plain Python number, which carries no
tangent (and no gradient), so every term that flows through it is missing from
the JVP, and neither torch nor the other methods of ``verify_jvp`` notice
(``torch.func.jvp`` and ``jacrev`` treat the number as a constant too). Only a
finite difference sees the term. :class:`HostSyncRecorder` records such a call
on a tensor that depends on the input; :func:`raise_if_tangent_lost` then
confirms with a central finite difference that the answer is really wrong (an
``.item()`` used only to branch leaves it right) and raises :class:`TangentLostError`.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from labkit.core.errors import LabkitError

# The calls that leave torch for a Python number, as a learner writes them.
HOST_SYNCS: dict[Callable[..., Any], str] = {
    torch.Tensor.item: ".item()",
    torch.Tensor.tolist: ".tolist()",
    torch.Tensor.__float__: "float(t)",
    torch.Tensor.__int__: "int(t)",
    torch.Tensor.__complex__: "complex(t)",
}


class TangentLostError(LabkitError, RuntimeError):
    """fn turned a tensor that depends on the input into a Python number, so the derivative misses its terms."""


class HostSyncRecorder(TorchFunctionMode):
    """Records the host syncs (:data:`HOST_SYNCS`) made on tensors for which ``depends(t)`` is true.

    Only the syncs are inspected; every other call passes straight through, so
    the cost is one dictionary look-up per torch call.
    """

    def __init__(self, depends: Callable[[torch.Tensor], bool]) -> None:
        super().__init__()
        self.depends = depends
        self.seen: list[str] = []

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = HOST_SYNCS.get(func)
        if name is not None and args and isinstance(args[0], torch.Tensor) and self.depends(args[0]):
            if name not in self.seen:
                self.seen.append(name)
        return func(*args, **(kwargs or {}))


def _finite_difference(
    evaluate: Callable[..., Sequence[torch.Tensor]], primals: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
) -> tuple[tuple[torch.Tensor, ...], float]:
    """Central difference of ``evaluate`` along the tangents, and the relative tolerance it deserves.

    The step is ``eps ** (1/3)`` of the primals' size (the optimum for a central
    difference), so truncation and rounding error are both about ``eps ** (2/3)``.
    """
    lowest = max((torch.finfo(p.dtype).eps for p in primals), default=torch.finfo(torch.float64).eps)
    size = max([1.0, *(float(p.abs().max()) for p in primals if p.numel())])
    direction = max([1e-30, *(float(t.abs().max()) for t in tangents if t.numel())])
    step = lowest ** (1 / 3) * size / direction
    with torch.no_grad():
        plus = evaluate(*(p.detach() + step * t for p, t in zip(primals, tangents)))
        minus = evaluate(*(p.detach() - step * t for p, t in zip(primals, tangents)))
    return tuple((a - b) / (2 * step) for a, b in zip(plus, minus)), 100 * lowest ** (2 / 3)


def raise_if_tangent_lost(
    seen: Sequence[str],
    evaluate: Callable[..., Sequence[torch.Tensor]],
    primals: Sequence[torch.Tensor],
    tangents: Sequence[torch.Tensor],
    claimed: Sequence[torch.Tensor],
    what: str = "JVP",
) -> None:
    """Raise :class:`TangentLostError` when a host sync was seen and a finite difference contradicts ``claimed``.

    ``evaluate(*primals)`` gives the plain values whose directional derivative
    ``claimed`` is (fn's floating outputs for a JVP, the gradient for an HVP).
    The global RNG is forked, so the check consumes no random numbers.
    """
    if not seen:
        return
    devices = sorted({p.device.index or 0 for p in primals if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a diagnostic rerun: fn's warnings were shown by the first run
        estimate, tolerance = _finite_difference(evaluate, primals, tangents)
    differs = False
    for got, expected in zip(claimed, estimate):
        got, expected = got.detach().double(), expected.detach().double()
        finite = got.isfinite() & expected.isfinite()
        if not finite.any():
            continue
        scale = 1.0 + float(torch.maximum(got[finite].abs(), expected[finite].abs()).max())
        differs = differs or bool(((got - expected).abs()[finite] > tolerance * scale).any())
    if not differs:
        return
    calls = " and ".join(seen)
    raise TangentLostError(
        f"fn calls {calls} on a tensor that depends on the input: that turns it into a plain Python number, which "
        f"carries no tangent, so the {what} silently misses every term that flows through it (a finite difference "
        f"along the tangent disagrees). Keep it a tensor: e.g. z * z.sum() instead of z * z.sum().item(), "
        "and torch.tensor(...) only for constants."
    )
