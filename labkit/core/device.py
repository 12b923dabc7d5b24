"""Pick the device a lab runs on, and wait for it.

Why: GPU kernels run asynchronously, so a timer that reads the clock without
synchronizing measures only the launch. Every timer in labkit goes through
:func:`synchronize`. The order cuda -> mps -> cpu matches what a learner expects
("use the accelerator if I have one"), and ``LABKIT_DEVICE`` overrides it for a
whole workshop without editing notebooks.
"""
from __future__ import annotations

import os

import torch

from labkit.core.errors import LabkitError

ENV_VAR = "LABKIT_DEVICE"


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def available_devices() -> list[str]:
    """Device types usable here, best first (always ends with ``"cpu"``)."""
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    if _mps_available():
        found.append("mps")
    found.append("cpu")
    return found


def pick_device(prefer: str | torch.device | None = None) -> torch.device:
    """Return the device to use: ``prefer``, else ``$LABKIT_DEVICE``, else the best available.

    Raises :class:`LabkitError` when the requested device is not usable here,
    rather than failing later deep inside a kernel launch.
    """
    requested = prefer if prefer is not None else os.environ.get(ENV_VAR) or None
    if requested is None:
        return torch.device(available_devices()[0])
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError) as exc:
        raise LabkitError(
            f"{requested!r} is not a device name. Use one of {available_devices()} "
            f"(or unset {ENV_VAR})."
        ) from exc
    if device.type not in available_devices():
        raise LabkitError(
            f"Device {device.type!r} was requested but is not available here; "
            f"available: {available_devices()}. Unset {ENV_VAR} or pass one of those."
        )
    return device


def synchronize(device: str | torch.device | None = None) -> None:
    """Block until all queued work on ``device`` has finished (a no-op on CPU)."""
    device = torch.device(device) if device is not None else pick_device()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def device_line(device: str | torch.device | None = None) -> str:
    """One human line describing the device, e.g. ``"cpu (2 threads)"``."""
    device = torch.device(device) if device is not None else pick_device()
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    if device.type == "mps":
        return "mps (Apple GPU)"
    return f"cpu ({torch.get_num_threads()} threads)"
