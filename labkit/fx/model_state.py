"""A token of a private copy's state, so that the copy a model's first run used can serve a capture too.

Why: a capture needs a copy that starts where the learner's model is. The first (eager) run's copy is
that copy whenever the run changed nothing in it (most models: eval mode, no counters or caches), and a
new deep copy of a large model costs memory and time. The token covers what a forward can change: every
module's parameters and buffers (identity and in-place version; a buffer's sum too), its hooks, and its attributes, with the
containers and plain objects they hold a few levels down (identity, length, version). A change the token
cannot see (a value rewritten inside a container deeper than :data:`DEPTH`) is one it misses; a capture
from such a copy is still checked against the first run's output.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import torch

#: How many levels of containers and plain objects inside a module attribute the token looks into.
DEPTH = 3


def _token(value: Any, depth: int) -> Hashable:
    if isinstance(value, torch.Tensor):
        if value.is_inference():  # made under torch.inference_mode: no version counter (an in-place write outside it raises)
            return "inference tensor", id(value)
        return "tensor", id(value), value._version
    if isinstance(value, torch.nn.Module):
        return "module", id(value)  # its own state is tokened with the model's other modules
    if depth == 0:
        return "object", id(value)
    if isinstance(value, Mapping):
        return "map", id(value), tuple((repr(key), _token(item, depth - 1)) for key, item in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=id) if isinstance(value, (set, frozenset)) else value
        return "sequence", id(value), tuple(_token(item, depth - 1) for item in items)
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and not isinstance(value, type):
        return "object", id(value), _token(attributes, depth - 1)
    return "value", id(value)


def _digest(buffer: torch.Tensor | None) -> float | None:
    """A buffer's sum: a write through ``.data`` (no version bump, e.g. a running mean) still changes it."""
    if buffer is None or not buffer.numel():
        return None
    values = torch.view_as_real(buffer.detach()) if buffer.is_complex() else buffer.detach()
    return float(values.double().sum())


def state_token(model: torch.nn.Module) -> Hashable:
    """What a forward could have changed in ``model``, as one comparable value (equal: nothing seen changed).

    A parameter written through ``.data`` is not seen here: the first run's watch
    (:func:`~labkit.core.copies.parameters_written`) catches it, and then no capture reuses the copy.
    """
    return tuple(
        (name, id(module), _token(vars(module), DEPTH), tuple((key, _digest(b)) for key, b in module._buffers.items()))
        for name, module in model.named_modules(remove_duplicate=False)
    )


__all__ = ["DEPTH", "state_token"]
