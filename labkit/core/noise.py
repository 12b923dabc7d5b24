"""Silence the known, harmless noise that torch prints on a CPU-only machine.

Why: strict nbval compares stderr too, and a learner who sees a red
"No CUDA runtime is found" line thinks something broke. We filter *narrowly*, by
message, so a real warning still reaches the learner. Seen with torch 2.14.1:

- ``torch.utils.cpp_extension`` (imported by ``torch.utils.benchmark``) logs
  "No CUDA runtime is found" on a CUDA build without a GPU (torch 2.4, the
  tested floor, and 2.6 print it to ``sys.stderr`` instead, where CUDA_HOME exists);
- ``torch.jit.script`` is deprecated (FutureWarning) and some torch.func /
  autograd.functional paths call it on first use; ``optimize_for_inference``
  calls the equally deprecated ``torch.jit.script_method``;
- torch.profiler's native code writes ``USDT:`` and ``gpuGetDeviceCount failed``
  lines straight to file descriptor 2, below Python's ``sys.stderr``.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

KNOWN_WARNING_MESSAGES = (
    r"`torch\.jit\.script` is deprecated",
    r"`torch\.jit\.script_method` is deprecated",  # optimize_for_inference uses it
)
KNOWN_NATIVE_LINES = re.compile(
    r"^(USDT:|.*gpuGetDeviceCount failed|.*No CUDA runtime is found|"
    r".*\[W\d+ .*(kineto|CUPTI|cupti).*|STAGE:.*ActivityProfilerController.*)"
)


class _DropKnownLogRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "No CUDA runtime is found" not in record.getMessage()


def silence_known_warnings() -> None:
    """Install the narrow, message-based filters (idempotent)."""
    for message in KNOWN_WARNING_MESSAGES:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
    logger = logging.getLogger("torch.utils.cpp_extension")
    if not any(isinstance(f, _DropKnownLogRecords) for f in logger.filters):
        logger.addFilter(_DropKnownLogRecords())


def import_benchmark():
    """Import ``torch.utils.benchmark`` without its CPU-only CUDA notice, and without leaving a filter behind.

    Why scoped: the notice is logged once, when the import runs; a filter left installed afterwards would
    change the learner's warnings and logging for the rest of the session (only ``setup_notebook`` does that,
    on purpose).
    """
    from labkit.core.untouched import kept_logging

    with kept_logging(), warnings.catch_warnings():
        silence_known_warnings()
        with filtered_native_stderr():
            import torch.utils.benchmark as benchmark
    return benchmark


@contextlib.contextmanager
def filtered_native_stderr(pattern: re.Pattern[str] = KNOWN_NATIVE_LINES) -> Iterator[None]:
    """Capture file descriptor 2 and ``sys.stderr`` for the block; re-emit every line not matching ``pattern``.

    Native libraries write to fd 2 directly, so ``contextlib.redirect_stderr``
    cannot see them; Python code prints to ``sys.stderr``, which in a Jupyter
    kernel is not fd 2. Lines that do not match are written back to
    ``sys.stderr`` afterwards, so nothing unexpected is hidden.
    """
    try:
        stderr_fd = sys.__stderr__.fileno() if sys.__stderr__ else 2
    except (AttributeError, ValueError, OSError):
        stderr_fd = 2
    sys.stderr.flush()
    saved_fd = os.dup(stderr_fd)
    printed = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), stderr_fd)
        try:
            with contextlib.redirect_stderr(printed):
                yield
        finally:
            try:
                sys.stderr.flush()
            except (AttributeError, ValueError):
                pass
            os.dup2(saved_fd, stderr_fd)
            os.close(saved_fd)
            capture.seek(0)
            written = [*capture.read().decode("utf-8", "replace").splitlines(keepends=True),
                       *printed.getvalue().splitlines(keepends=True)]  # apart: a native line without "\n" stays whole
            kept = [line for line in written if line.strip() and not pattern.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
