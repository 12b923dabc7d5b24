"""The machine a figure was measured on, named in every benchmark's output.

Why: the same notebooks cost nearly three times as many CPU seconds on one of the CPUs the test
machines alternate between as on the other, so a figure without its CPU means little.
"""
from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's name as ``/proc/cpuinfo`` gives it, else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
