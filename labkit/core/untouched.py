"""What every helper that runs a user's model leaves as it found it in the process: random streams, warning and
logging filters.

Why in core: a helper runs the model (a forward may reseed torch, install a warning filter or a logging
handler) and torch (whose known noise labkit silences by message while it runs). After the call the
user's next random number, the warnings they see and their logging must be what they would have been
without labkit. :func:`left_as_found` is that promise for the body of every public helper that runs a
user's model; the model's own objects are kept by private copies (:mod:`labkit.core.copies`).
"""
from __future__ import annotations

import contextlib
import logging
import random
import warnings
from collections.abc import Callable, Iterator

import torch

from labkit.core.random_state import kept_random_state

try:  # NumPy is optional for labkit's core, as in labkit.core.random_state
    import numpy as np
except ImportError:  # pragma: no cover - numpy is installed with torch in every supported setup
    np = None  # type: ignore[assignment]



def _existing_loggers() -> list[logging.Logger]:
    manager = logging.Logger.manager
    return [logging.getLogger(), *(lg for lg in list(manager.loggerDict.values()) if isinstance(lg, logging.Logger))]


@contextlib.contextmanager
def kept_logging() -> Iterator[None]:
    """Run the block, then give every logger that existed before it back its level, handlers, filters and flags.

    A logger made during the block (torch makes its own on a module's first import) is its maker's to
    configure, and is left as it is.
    """
    saved = [(lg, lg.level, list(lg.handlers), list(lg.filters), lg.propagate, lg.disabled) for lg in _existing_loggers()]
    try:
        yield
    finally:
        for logger, level, handlers, filters, propagate, disabled in saved:
            if logger.level != level:
                logger.setLevel(level)
            logger.handlers[:], logger.filters[:] = handlers, filters
            logger.propagate, logger.disabled = propagate, disabled


@contextlib.contextmanager
def left_as_found() -> Iterator[None]:
    """Run the block; afterwards Python's, NumPy's and torch's random states, ``warnings.filters`` and every
    existing logger's configuration are as they were, also when the block raises.

    Warnings raised inside the block still reach the user as usual (nothing is recorded); only the filters a
    block installs (labkit's narrow silencing of torch noise, or the model's own) go away with it.
    """
    with kept_random_state(), kept_logging(), warnings.catch_warnings():
        yield


@contextlib.contextmanager
def replayed_random_state() -> Iterator[Callable[[], None]]:
    """Give the block a ``rewind()`` that puts every random stream back where it was when the block began.

    Why: comparing two models that draw random numbers (a train-mode Dropout) is only fair when both draw
    the same numbers; run one, ``rewind()``, run the other. All streams are as they were after the block.
    """
    with kept_random_state():
        python_state = random.getstate()
        numpy_state = np.random.get_state() if np is not None else None
        torch_state = torch.get_rng_state()
        cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

        def rewind() -> None:
            random.setstate(python_state)
            if np is not None:
                np.random.set_state(numpy_state)
            torch.set_rng_state(torch_state)
            if cuda_states is not None:
                torch.cuda.set_rng_state_all(cuda_states)

        yield rewind


__all__ = ["kept_logging", "left_as_found", "replayed_random_state"]
