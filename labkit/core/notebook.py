"""One call at the top of every notebook: seeds, quiet torch, and the device.

Why: nbval re-runs each notebook and compares its outputs with the stored ones,
so anything random must be seeded the same way every time, and the known
harmless torch warnings must not reach stderr. Learners call
``labkit.setup_notebook()`` first; it prints one line saying where they run.
"""
from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import torch

from labkit.core.device import pick_device
from labkit.core.noise import silence_known_warnings
from labkit.i18n.messages import _

DEFAULT_SEED = 0


def seed_everything(seed: int = DEFAULT_SEED) -> None:
    """Seed Python's ``random`` and torch (CPU and every GPU)."""
    random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def seeded(seed: int = DEFAULT_SEED) -> Iterator[None]:
    """Seed torch for the block only; the caller's random stream continues afterwards.

    Checkers build their models inside this, so running a checker cell never
    resets the learner's own seed.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def setup_notebook(seed: int = DEFAULT_SEED, *, quiet: bool = False) -> torch.device:
    """Seed, silence known noise, pick the device; return the device."""
    seed_everything(seed)
    silence_known_warnings()
    device = pick_device()
    if not quiet:
        print(_("labkit ready: seed {seed}, device type {device}").format(seed=seed, device=device.type))
    return device
