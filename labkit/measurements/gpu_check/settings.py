"""TF32 and ``cudnn.benchmark`` set for one block, and put back as they were, error or not.

Why: the channels_last table times fp32 with TF32 on and off and lets cuDNN pick its kernels; an
instructor's process (or a notebook kernel) must not be left on another precision afterwards. torch keeps
these settings in two spellings, the older ``allow_tf32`` flags and the newer ``fp32_precision`` strings,
and setting one rewrites the other: both are saved, and both put back.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

# Every backend setting this check may change, in the order they are put back: the allow_tf32 flags first (setting
# one writes an fp32_precision string, "ieee" where it was "none"), then the float32 matmul precision, then the
# fp32_precision strings, a parent before its children (setting a parent's rewrites theirs).
_PRECISION_OWNERS = ("torch.backends", "torch.backends.cuda.matmul", "torch.backends.cudnn",
                     "torch.backends.cudnn.conv", "torch.backends.cudnn.rnn")
_FLAGS = (("torch.backends.cuda.matmul", "allow_tf32"), ("torch.backends.cudnn", "allow_tf32"),
          ("torch.backends.cudnn", "benchmark"))


def _resolve(dotted: str) -> Any:
    owner: Any = torch
    for part in dotted.split(".")[1:]:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _settings() -> list[tuple[str, Any, str]]:
    """(name, owner, attribute) of each setting this torch has."""
    wanted = [*_FLAGS, *((dotted, "fp32_precision") for dotted in _PRECISION_OWNERS)]
    found = []
    for dotted, attribute in wanted:
        owner = _resolve(dotted)
        if owner is not None and hasattr(owner, attribute):
            found.append((f"{dotted}.{attribute}", owner, attribute))
    return found


def snapshot() -> dict[str, Any]:
    """Every setting's value now, by name (the float32 matmul precision too)."""
    values = {name: getattr(owner, attribute) for name, owner, attribute in _settings()}
    values["torch.get_float32_matmul_precision"] = torch.get_float32_matmul_precision()
    return values


@contextmanager
def kept_backend_settings() -> Iterator[None]:
    """Run the block; afterwards every TF32 / cudnn.benchmark setting is what it was before."""
    saved = [(owner, attribute, getattr(owner, attribute)) for _, owner, attribute in _settings()]
    flags = sum(attribute != "fp32_precision" for _, attribute, _ in saved)
    matmul = torch.get_float32_matmul_precision()
    try:
        yield
    finally:
        for owner, attribute, value in saved[:flags]:
            setattr(owner, attribute, value)
        torch.set_float32_matmul_precision(matmul)
        for owner, attribute, value in saved[flags:]:
            setattr(owner, attribute, value)


def set_tf32(enabled: bool) -> None:
    """TF32 on or off for both matmuls and convolutions (inside :func:`kept_backend_settings`)."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


@contextmanager
def tf32(enabled: bool, *, cudnn_benchmark: bool = True) -> Iterator[None]:
    """TF32 ``enabled`` and cuDNN's kernel search on for the block (the way a tuned GPU run is timed), then restored."""
    with kept_backend_settings():
        set_tf32(enabled)
        torch.backends.cudnn.benchmark = cudnn_benchmark
        yield
