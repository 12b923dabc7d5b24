"""``module_jvp``: the JVP of a module with respect to its parameters, two ways, leaving the module untouched.

Why two ways: the classic tutorial swaps each parameter for a dual tensor
(``delattr`` / ``setattr``); ``torch.func.functional_call`` does the same without
touching the module. Both must restore everything, even when the forward pass
raises, and keep a train-mode model's buffers, its parameters and every random
state as they were. Both differentiate the model as it computes: its hooks and
parametrizations (``spectral_norm``, ``prune``, ``parametrize``) run.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.utils._pytree import tree_leaves

from labkit.core.copies import fresh_call, private_copy, refuse_unrun_lazy_modules, warn_hooks_reaching_out
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.untouched import left_as_found
from labkit.forward_ad.diagnosis import (
    forward_level,
)
from labkit.forward_ad.dual import _unpack
from labkit.forward_ad.inputs import (
    Tensors,
    _as_tuple,
    _fork_rng,
    _split_output,
    _validate_pairs,
)
from labkit.forward_ad.model_kinds import higher_order_explained, refuse_unsupported_module
from labkit.fx.model_inputs import keyword_inputs, refuse_unknown_keywords
from labkit.i18n.messages import N_

Method = Literal["swap", "functional_call"]


def module_jvp(
    model: nn.Module,
    inputs: Tensors,
    tangents: Mapping[str, torch.Tensor],
    method: Method = "swap",
    *,
    kwargs: Mapping[str, Any] | None = None,
    **stray: Any,
) -> tuple[Any, Any]:
    """JVP of ``model(*inputs, **kwargs)`` with respect to its parameters, in direction ``tangents``.

    ``tangents`` maps parameter names (as in ``model.named_parameters()``) to
    tangent tensors; parameters not named are held constant. A tied weight (one
    ``Parameter`` used by several modules) may be named by any of its names; its
    tangent then applies to every use, as ``torch.func.jvp`` would.

    - ``method="swap"``: the classic tutorial's way. Each named parameter is
      removed (``delattr``) and replaced by a dual tensor (``setattr``) for one
      forward pass, in every module that holds it; the original parameters are
      put back afterwards, even when the forward pass raises.
    - ``method="functional_call"``: ``torch.func.functional_call`` runs the
      model with the dual tensors in place of its parameters.

    The model's keyword inputs go in ``kwargs`` (``kwargs={"mask": m}``), as in
    ``torch.export.export(model, args, kwargs=...)`` and labkit's profilers, so
    they never collide with ``method``; a keyword passed directly is refused.

    Either way the module is left untouched, in train mode too: a freshly built
    module *is* in train mode, and a learner probing a derivative expects to
    look at the model, not to train it. So the forward pass runs on a private
    copy (:func:`~labkit.core.copies.private_copy`, with its own parameters, so a
    forward that writes them in place, ``nn.Embedding(max_norm=...)`` or a weight
    clamp, writes the copy's; buffers such as BatchNorm's running statistics and
    Python attributes its own; the model's hooks kept, since they are part of what
    it computes, with a warning for a hook holding outside objects) on copies of
    the inputs, and every random state (Python's, NumPy's, torch's) is kept:
    Dropout still draws a mask, the same one on every call, and later random
    numbers do not change. Call ``model.eval()``
    first for the JVP of the model as used for inference.
    """
    with left_as_found():
        keywords = keyword_inputs("module_jvp", kwargs, stray, ("method", "kwargs"))
        if not isinstance(model, nn.Module):
            raise LabkitTypeError(
                f"module_jvp needs an nn.Module, got {type(model).__name__}; "
                "for a plain function use labkit.forward_ad.jvp."
            )
        if method not in ("swap", "functional_call"):
            raise LabkitValueError(f"method must be 'swap' or 'functional_call', got {method!r}.")
        refuse_unsupported_module(model, method)
        refuse_unrun_lazy_modules(model)
        parameters = dict(model.named_parameters())
        if not isinstance(tangents, Mapping):
            example = next(iter(parameters), "0.weight")
            raise LabkitTypeError(
                f"tangents must be a dict from parameter name to tangent tensor, got a {type(tangents).__name__}; "
                f"e.g. {{{example!r}: torch.randn_like(p)}}, with names from model.named_parameters()."
            )
        names = _canonical_names(model, tangents)
        if not names:
            raise LabkitValueError("tangents is empty; map at least one parameter name to a tangent, e.g. {'0.weight': v}.")
        _validate_pairs(
            tuple(parameters[n].detach() for n in names.values()),
            _as_tuple([tangents[n] for n in names], N_("Tangent"), "tangents"),
        )
        input_tuple = _as_tuple(inputs, N_("Input"), "inputs")
        refuse_unknown_keywords(model, keywords, input_tuple)
        keyword_tensors = [leaf for leaf in tree_leaves(keywords) if isinstance(leaf, torch.Tensor)]
        warn_hooks_reaching_out(model, stacklevel=2)
        own = private_copy(model, share_parameters=False)  # a forward that writes a parameter in place writes its own
        own_parameters = dict(own.named_parameters())
        call_inputs, call_keywords = fresh_call(input_tuple, keywords)  # a forward that writes its input writes a clone
        tensors = [*own.parameters(), *own.buffers(), *input_tuple, *keyword_tensors]
        with _fork_rng(tensors), forward_level(), higher_order_explained():
            duals = {canonical: fwAD.make_dual(own_parameters[canonical].detach(), tangents[given])
                     for given, canonical in names.items()}
            if method == "swap":
                with _swapped_parameters(own, duals):
                    outputs, single = _split_output(own(*call_inputs, **call_keywords))
            else:
                outputs, single = _split_output(torch.func.functional_call(own, duals, call_inputs, call_keywords))
            primals_out, tangents_out, _ = _unpack(outputs)
        if single:
            return primals_out[0], tangents_out[0]
        return tuple(primals_out), tuple(tangents_out)


def _canonical_names(model: nn.Module, tangents: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """Map each name in ``tangents`` to the parameter's first name (tied weights have several)."""
    canonical = {id(p): name for name, p in model.named_parameters()}
    every_name = dict(model.named_parameters(remove_duplicate=False))
    unknown = [name for name in tangents if name not in every_name]
    if unknown:
        verb = "is not a parameter" if len(unknown) == 1 else "are not parameters"
        raise LabkitValueError(
            f"{', '.join(map(repr, unknown))} {verb} of this model; names are e.g. {list(canonical.values())[:4]}."
        )
    names: dict[str, str] = {}
    for given in tangents:
        first = canonical[id(every_name[given])]
        earlier = next((other for other, c in names.items() if c == first), None)
        if earlier is not None:
            raise LabkitValueError(
                f"{earlier!r} and {given!r} are the same parameter (tied weights); give one tangent for it, "
                f"under either name: it applies to every use."
            )
        names[given] = first
    return names

@contextmanager
def _swapped_parameters(model: nn.Module, replacements: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """Replace parameters by plain tensors for the block, in every module holding them; always restore."""
    by_id = {id(model.get_parameter(name)): value for name, value in replacements.items()}
    slots = [
        (module, attr, parameter)
        for module in model.modules()  # each module once, even when shared
        for attr, parameter in module._parameters.items()
        if parameter is not None and id(parameter) in by_id
    ]
    orders = {id(module): (module, list(module._parameters)) for module, _, _ in slots}
    swapped: list[tuple[nn.Module, str, nn.Parameter]] = []
    try:
        for module, attr, parameter in slots:
            delattr(module, attr)
            swapped.append((module, attr, parameter))
            setattr(module, attr, by_id[id(parameter)])  # a plain tensor attribute, not a Parameter: keeps its tangent
        yield
    finally:
        for module, attr, parameter in swapped:
            if attr in module.__dict__:
                delattr(module, attr)
            module.register_parameter(attr, parameter)
        for module, order in orders.values():  # keep model.parameters() in its original order
            for key in order:
                module._parameters[key] = module._parameters.pop(key)
