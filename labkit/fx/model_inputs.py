"""A model's keyword inputs: ``helper(model, *args, kwargs={...})``, checked once, passed the same way everywhere.

Why a module of its own: labkit's helpers take options of their own as keywords
(``warmup``, ``runs``, ``mode``, ``rtol``...), which would collide with a model's
keyword parameters (a Hugging Face model's ``attention_mask``, or a forward that
itself takes ``mode``). So, as ``torch.export.export(model, args, kwargs=...)``
does, the model's keyword inputs travel in one dict, ``kwargs=``. This module
holds what every helper does with it:

- :func:`keyword_inputs` checks ``kwargs`` and refuses a stray model keyword
  given straight to the helper (``profile_model(model, x, attention_mask=m)``),
  saying to pass it in ``kwargs=``;
- :func:`refuse_unknown_keywords` refuses a name ``forward`` does not take, listing
  its parameters, and inputs that do not fit it together (``mask`` given twice);
- :func:`graph_arguments` turns ``args`` and ``kwargs`` into the positional call
  of a traced graph (whose placeholders follow ``forward``'s parameters).

Each run then gets fresh clones of the tensors in both (:func:`labkit.core.copies.fresh_call`).
"""
from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from labkit.core.errors import LabkitError, LabkitTypeError


class StrayKeywordError(LabkitError, TypeError):
    """A helper got a keyword that is none of its options: a model input passed outside ``kwargs=``."""


class UnknownKeywordInputError(LabkitError, ValueError):
    """``kwargs=`` names something the model's ``forward`` does not take."""


class InputsDoNotFitError(LabkitError, TypeError):
    """Positional and keyword inputs together do not fit ``forward`` (a parameter given twice, or none for one)."""


class KeywordsIntoVarKeywordError(LabkitError, ValueError):
    """Keyword inputs would land in ``forward``'s ``**kwargs``, which a traced graph cannot be called with."""


def keyword_inputs(
    helper: str, kwargs: Mapping[str, Any] | None, stray: Mapping[str, Any], options: Sequence[str] = ()
) -> dict[str, Any]:
    """``kwargs`` as a dict; a labkit error for a stray keyword or a ``kwargs`` that is not a dict of names.

    ``helper`` names the function in the message, ``stray`` is what its
    ``**stray`` caught, ``options`` are its own keyword options (a typo of one,
    ``warmups=3``, is pointed at it rather than at ``kwargs=``).
    """
    if stray:
        name = next(iter(stray))
        close = difflib.get_close_matches(name, options, n=1)
        typo = f" If you meant {helper}'s own option, it is spelled {close[0]}=." if close else ""
        given = ", ".join(f"{key!r}: ..." for key in stray)
        raise StrayKeywordError(
            f"{helper}() got {name}=, which is not one of its options ({', '.join(options) or 'none'}). "
            f"If it is an input of the model, pass the model's keyword inputs as kwargs={{{given}}}, "
            f"e.g. {helper}(model, x, kwargs={{{name!r}: ...}}), so they never collide with labkit's options.{typo}"
        )
    if kwargs is None:
        return {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(key, str) for key in kwargs):
        raise LabkitTypeError(
            f"kwargs must be a dict from forward's parameter names to values, got {type(kwargs).__name__}; "
            "e.g. kwargs={'attention_mask': mask}."
        )
    return dict(kwargs)


def _signature(model: Any) -> inspect.Signature | None:
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        return inspect.signature(forward)
    except (TypeError, ValueError):  # no signature to check against (a builtin): the call decides
        return None


def _listed(signature: inspect.Signature) -> str:
    """``x, mask=None, *, scale=1.0``: forward's parameters as its ``def`` line spells them."""
    return str(signature.replace(return_annotation=inspect.Signature.empty))[1:-1] or "(none)"


def refuse_unknown_keywords(model: Any, kwargs: Mapping[str, Any], args: Sequence[Any] | None = None) -> None:
    """Refuse a ``kwargs`` name that is no parameter of ``forward`` (unless it takes ``**kwargs``), listing them;
    given ``args`` too, refuse inputs that do not fit ``forward`` together (a parameter given twice).

    Why here and not the model's own TypeError: the message can list what forward
    does take, and it comes before any copy, trace or run.
    """
    signature = _signature(model)
    if signature is None or not kwargs:
        return
    _refuse_unknown_names(signature, kwargs)
    if args is not None:
        _bind(signature, args, kwargs)


def _bind(signature: inspect.Signature, args: Sequence[Any], kwargs: Mapping[str, Any]) -> inspect.BoundArguments:
    try:
        return signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise InputsDoNotFitError(
            f"These inputs do not fit forward({_listed(signature)}): {exc}. Pass each parameter once, "
            "by position (in forward's order) or by name in kwargs=."
        ) from exc


def _refuse_unknown_names(signature: inspect.Signature, kwargs: Mapping[str, Any]) -> None:
    parameters = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    named = {p.name for p in parameters if p.kind not in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL)}
    unknown = [name for name in kwargs if name not in named]
    if unknown:
        close = difflib.get_close_matches(unknown[0], named, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownKeywordInputError(
            f"kwargs names {', '.join(map(repr, unknown))}, which forward does not take; its parameters are "
            f"{_listed(signature)}.{hint} Name one of those in kwargs=, or pass the input by position."
        )


def graph_arguments(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """The positional call of ``model``'s traced graph for ``model(*args, **kwargs)``.

    Why: a traced graph's placeholders follow ``forward``'s parameters in order
    (a keyword-only one included), and ``torch.fx.Interpreter`` takes positional
    values only. So the inputs are bound to ``forward``'s signature, and each
    parameter gets its value or its default. Keyword inputs that only
    ``**kwargs`` would collect cannot be passed to a graph: that is a
    :class:`KeywordsIntoVarKeywordError` (profile such a model with ``mode="modules"``).
    """
    if not kwargs:
        return tuple(args)
    signature = _signature(model)
    if signature is None:
        raise UnknownKeywordInputError(
            "labkit cannot read forward's signature, so it cannot pass keyword inputs to a traced graph; "
            "pass every input by position instead."
        )
    _refuse_unknown_names(signature, kwargs)
    bound = _bind(signature, args, kwargs)
    positional: list[Any] = []
    for parameter in signature.parameters.values():
        value = bound.arguments.get(parameter.name, parameter.default)
        if parameter.kind is parameter.VAR_POSITIONAL:
            positional.extend(value if value is not parameter.empty else ())
        elif parameter.kind is parameter.VAR_KEYWORD:
            if value is not parameter.empty and value:
                raise KeywordsIntoVarKeywordError(
                    f"forward collects {', '.join(map(repr, value))} in **{parameter.name}, which a traced graph "
                    "cannot be called with.\nThe keyword inputs "
                    f"{', '.join(map(repr, value))} go into forward's **{parameter.name}. Profile with "
                    "mode='modules' (it calls the model with kwargs as keywords), or give forward a named "
                    "parameter for each."
                )
        else:
            positional.append(None if value is parameter.empty else value)
    return tuple(positional)


def without_cache(model: Any, keywords: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``keywords`` with ``use_cache=False`` for a model whose config has ``use_cache`` and the caller did not set it.

    Why: a Hugging Face decoder otherwise returns its key/value cache, which torch.export cannot flatten,
    and one forward pass needs no cache; the profile then is a graph's, not the weaker hooked one. The
    note says so in the report.
    """
    config = getattr(model, "config", None)
    if getattr(config, "use_cache", None) is None or "use_cache" in keywords or not _takes_keyword(model, "use_cache"):
        return dict(keywords), ()
    return {**keywords, "use_cache": False}, (
        "use_cache=False was passed (the model's config has use_cache): one forward pass needs no key/value "
        "cache, and torch.export cannot capture one. Pass kwargs={'use_cache': True} to profile with it.",
    )


def _takes_keyword(model: Any, name: str) -> bool:
    signature = _signature(model) if isinstance(model, torch.nn.Module) else None
    return signature is not None and any(p.name == name or p.kind is p.VAR_KEYWORD for p in signature.parameters.values())


__all__ = [
    "InputsDoNotFitError",
    "KeywordsIntoVarKeywordError",
    "StrayKeywordError",
    "UnknownKeywordInputError",
    "refuse_unknown_keywords",
    "graph_arguments",
    "keyword_inputs",
    "without_cache",
]
