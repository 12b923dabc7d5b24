"""What every forward-AD entry point accepts and returns: tensors, checked once, with errors that say what to do.

Why its own module: ``jvp``, ``module_jvp``, ``hvp`` and ``verify_jvp`` take the
same primals and tangents and give the same kinds of outputs; checking them in
one place keeps one wording for each mistake (an integer primal, a tangent of
the wrong shape or dtype, a Python number instead of a tensor).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Union

import torch

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.i18n.messages import N_, _

Tensors = Union[torch.Tensor, Sequence[torch.Tensor]]
def _as_tuple(value: Tensors, what: str, argument: str | None = None) -> tuple[torch.Tensor, ...]:
    """``value`` as a tuple of tensors; ``argument`` names the parameter in the error."""
    if not isinstance(value, (torch.Tensor, tuple, list)):
        kind = type(value).__name__
        message = (_("{argument} is an {kind}, not a torch.Tensor; pass a tensor or a tuple of tensors, e.g. "
                     "torch.tensor(1.0) instead of 1.0.") if kind[:1].lower() in "aeiou" else
                   _("{argument} is a {kind}, not a torch.Tensor; pass a tensor or a tuple of tensors, e.g. "
                     "torch.tensor(1.0) instead of 1.0."))  # English's article; one sentence in zh and ru
        raise LabkitTypeError(message.format(argument=argument or _(what), kind=kind))
    items = (value,) if isinstance(value, torch.Tensor) else tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise LabkitTypeError(_(
                "{what} {index} is a {kind}, not a torch.Tensor; "
                "pass a tensor or a tuple of tensors (e.g. torch.tensor([1.0]))."
            ).format(what=_(what), index=index, kind=type(item).__name__))
    return items


def _validate_pairs(primals: tuple[torch.Tensor, ...], tangents: tuple[torch.Tensor, ...]) -> None:
    if len(primals) != len(tangents):
        raise LabkitValueError(
            _("Got {primals} primal(s) but {tangents} tangent(s); give exactly one tangent per primal.").format(
                primals=len(primals), tangents=len(tangents))
        )
    for index, (primal, tangent) in enumerate(zip(primals, tangents)):
        for what, tensor in ((_("Primal"), primal), (_("Tangent"), tangent)):
            if tensor.layout != torch.strided:
                raise LabkitTypeError(
                    _("{what} {index} is a sparse or other non-strided tensor ({layout}); forward-mode AD "
                      "(make_dual) needs dense tensors. Convert it first with .to_dense().").format(
                        what=what, index=index, layout=tensor.layout)
                )
        if not (primal.is_floating_point() or primal.is_complex()):
            raise LabkitTypeError(
                _("Primal {index} has dtype {dtype}; forward-mode AD needs a floating-point "
                  "(or complex) primal, because an integer has no derivative. Convert it first, "
                  "e.g. x.float() or x.double().").format(index=index, dtype=primal.dtype)
            )
        if tangent.shape != primal.shape:
            raise LabkitValueError(
                _("Tangent {index} has shape {shape} but its primal has shape "
                  "{primal_shape}; a tangent must have exactly its primal's shape.").format(
                    index=index, shape=tuple(tangent.shape), primal_shape=tuple(primal.shape))
            )
        if tangent.dtype != primal.dtype:
            raise LabkitValueError(
                _("Tangent {index} has dtype {dtype} (shape {shape}) but its primal "
                  "has dtype {primal_dtype} (shape {primal_shape}); torch would keep both precisions side by side "
                  "(a {primal_dtype} value with a {dtype} tangent), and a matrix multiply would then fail "
                  "on the mix. Use tangent.to(primal.dtype).").format(
                    index=index, dtype=tangent.dtype, shape=tuple(tangent.shape), primal_dtype=primal.dtype,
                    primal_shape=tuple(primal.shape))
            )


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in nested tuples, lists and dicts (a torch function's arguments or result)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors_in(item)


def _differentiable(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()
def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

def _split_output(output: Any) -> tuple[tuple[torch.Tensor, ...], bool]:
    is_tensor = isinstance(output, torch.Tensor)
    if not is_tensor and not isinstance(output, (tuple, list)):
        raise LabkitTypeError(
            f"The function returned a {type(output).__name__}; jvp needs a tensor or a tuple of tensors."
        )
    return _as_tuple(output, N_("Output")), is_tensor
def _fork_rng(tensors: Iterable[torch.Tensor]) -> AbstractContextManager[None]:
    """``torch.random.fork_rng`` for the CPU and the CUDA devices these tensors live on."""
    devices = sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})
    return torch.random.fork_rng(devices=devices)
