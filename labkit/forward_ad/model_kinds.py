"""Models forward-mode AD cannot differentiate as given, refused with what to do instead.

Why: ``module_jvp`` swaps parameters for dual tensors in Python (``setattr``) or hands them to
``torch.func.functional_call``; TorchScript code, ``nn.DataParallel`` under ``functional_call`` and a
``torch.cond`` (whose branches torch compiles, and dual tensors cannot enter) each fail deep in torch
with a message about its mechanism ("get_parameter is not supported on ScriptModules", "Attempted to
wrap a dual tensor input"). These checks run first and name the model's part and the way that works.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from labkit.core.errors import LabkitTypeError
from labkit.forward_ad.diagnosis import ForwardADUnsupportedError
from labkit.i18n.messages import _

#: torch's error when a dual tensor reaches ``torch.cond`` (or another higher-order operator).
HIGHER_ORDER_ERROR = "UncapturedHigherOrderOpError"


class ScriptedModelError(LabkitTypeError):
    """The model, or a part of it, is TorchScript: its parameters cannot be swapped for dual tensors."""


class WrappedModelError(LabkitTypeError):
    """The model is an ``nn.DataParallel`` wrapper, which ``torch.func.functional_call`` refuses."""


class HigherOrderForwardADError(ForwardADUnsupportedError):
    """A ``torch.cond`` (or another higher-order operator) got a dual tensor, which torch does not support."""


def refuse_unsupported_module(model: nn.Module, method: str) -> None:
    """Raise a labkit error for a model ``module_jvp`` cannot differentiate with ``method``, saying what works."""
    if isinstance(model, torch.jit.ScriptModule):
        raise ScriptedModelError(
            _("The model is TorchScript (torch.jit.script or trace): module_jvp replaces its parameters with dual "
              "tensors, which TorchScript code never sees. Differentiate the Python module you scripted instead: "
              "module_jvp(eager_model, inputs, tangents).")
        )
    scripted = next((name for name, sub in model.named_modules() if isinstance(sub, torch.jit.ScriptModule)), None)
    if scripted is not None and method == "swap":
        raise ScriptedModelError(
            _("model.{name} is TorchScript, whose parameters cannot be swapped for dual tensors (method='swap'). "
              "Use method='functional_call', which passes them in without swapping, or the Python module you "
              "scripted.").format(name=scripted)
        )
    if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)) and method == "functional_call":
        raise WrappedModelError(
            _("The model is an {kind} wrapper, which torch.func.functional_call refuses. Differentiate the module it "
              "wraps: module_jvp(model.module, inputs, tangents, method='functional_call'), with the parameter names "
              "of model.module (without 'module.'), or use method='swap'.").format(kind=type(model).__name__)
        )


@contextlib.contextmanager
def higher_order_explained() -> Iterator[None]:
    """Turn torch's error for a dual tensor reaching ``torch.cond`` into a :class:`HigherOrderForwardADError`."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ != HIGHER_ORDER_ERROR:
            raise
        raise HigherOrderForwardADError(
            _("The function uses torch.cond (or another higher-order operator such as while_loop), and torch "
              "{version} cannot run one on dual tensors, so forward-mode AD cannot differentiate through it. Use "
              "reverse mode with torch.autograd.grad or .backward(), which torch.cond supports, or write the branch as "
              "torch.where(condition, a, b) with both sides computed.").format(version=torch.__version__)
        ) from None


__all__ = [
    "HigherOrderForwardADError",
    "ScriptedModelError",
    "WrappedModelError",
    "higher_order_explained",
    "refuse_unsupported_module",
]
