"""Keep every random stream the caller can see: Python's ``random``, NumPy's global one, torch's CPU and GPU ones.

Why in core: profiling, the crosscheck, ``verify_fusion`` and the forward-AD helpers run the
learner's model several times. A Dropout draws a mask, a model or a transform may call
``random.random()`` or ``np.random.rand()``; without this the learner's next random number
would depend on how many runs labkit did. ``torch.random.fork_rng`` keeps only torch's.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import torch

try:  # NumPy is optional for labkit's core; when it is absent there is no NumPy stream to keep
    import numpy as np
except ImportError:  # pragma: no cover - numpy is installed with torch in every supported setup
    np = None  # type: ignore[assignment]


def _accelerators() -> list[str]:
    """The device types with their own generator that are initialised in this process (cuda, xpu)."""
    kinds = []
    for kind in ("cuda", "xpu"):
        module = getattr(torch, kind, None)
        if module is not None and getattr(module, "is_initialized", lambda: False)() and module.device_count():
            kinds.append(kind)
    return kinds


@contextlib.contextmanager
def kept_random_state() -> Iterator[None]:
    """Run the block, then put Python's, NumPy's and torch's (CPU and every initialised GPU's) random states back.

    States are restored also when the block raises. A GPU that was not initialised before the block has no
    state the caller could have seen, so it is left alone (forking it would start CUDA on a CPU-only run).
    """
    python_state = random.getstate()
    numpy_state = np.random.get_state() if np is not None else None
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.random.fork_rng(devices=[]))
        for kind in _accelerators():
            module = getattr(torch, kind)
            stack.enter_context(torch.random.fork_rng(devices=range(module.device_count()), device_type=kind))
        try:
            yield
        finally:
            random.setstate(python_state)
            if np is not None:
                np.random.set_state(numpy_state)
