"""A custom ``torch.autograd.Function`` with a forward-mode formula, in today's style.

Why: the classic forward-AD tutorial writes ``forward(ctx, x)`` and stores
tensors on ``ctx`` by hand. That works under the dual-tensor API but fails under
``torch.func`` (``jvp``, ``jacfwd``, ``vmap``...), which must see the forward
computation separately from what it saves: ``torch.func`` runs ``forward``
itself on unwrapped tensors and calls ``setup_context`` to record what the
derivative formulas need. The modern style splits the two:

- ``forward(x)`` computes the result, with no ``ctx``;
- ``setup_context(ctx, inputs, output)`` saves tensors: ``ctx.save_for_backward``
  for reverse mode, ``ctx.save_for_forward`` for forward mode;
- ``jvp(ctx, x_tangent)`` returns the output tangent; ``backward`` the input gradient;
- ``generate_vmap_rule = True`` (or a ``vmap`` staticmethod) for ``vmap``/``jacfwd``.

:class:`Exp` is that example (``exp`` is its own derivative, so the formulas
stay short); :class:`OldStyleExp` is the tutorial's version, kept to show the
failure under ``torch.func``.
"""
from __future__ import annotations

from typing import Any

import torch


class Exp(torch.autograd.Function):
    """``exp(x)`` with hand-written forward-mode (``jvp``) and reverse-mode (``backward``) rules.

    ``generate_vmap_rule = True`` lets ``torch.func.vmap`` (and so ``jacfwd``,
    which vmaps over tangents) batch it: every step is batch-agnostic.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        ctx.save_for_forward(output)
        ctx.save_for_backward(output)

    @staticmethod
    def jvp(ctx: Any, x_tangent: torch.Tensor) -> torch.Tensor:
        (result,) = ctx.saved_tensors
        return x_tangent * result  # d exp(x) = exp(x) dx

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (result,) = ctx.saved_tensors
        return grad_output * result


class OldStyleExp(torch.autograd.Function):
    """The classic tutorial's style: ``forward(ctx, x)``, results stored on ``ctx`` by hand.

    Works with ``torch.autograd.forward_ad``; ``torch.func.jvp`` rejects it
    because it has no ``setup_context``.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        result = torch.exp(x)
        ctx.result = result
        return result

    @staticmethod
    def jvp(ctx: Any, x_tangent: torch.Tensor) -> torch.Tensor:
        return x_tangent * ctx.result


def gradcheck_forward(function: type[torch.autograd.Function], x: torch.Tensor, *, include_backward: bool = True) -> bool:
    """``torch.autograd.gradcheck`` of ``function.apply`` at ``x`` (in float64), forward AD included.

    Compares the hand-written ``jvp`` (and ``backward`` unless
    ``include_backward=False``) with finite differences; raises
    ``torch.autograd.gradcheck.GradcheckError`` with the mismatching Jacobians when they differ.
    """
    x = x.detach().double().requires_grad_(True)
    return torch.autograd.gradcheck(
        function.apply,
        (x,),
        check_forward_ad=True,
        check_backward_ad=include_backward,
        check_undefined_grad=False,
        check_batched_grad=False,
    )
