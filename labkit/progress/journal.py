"""The learner's own record: ``.labkit/progress.jsonl`` in their workspace, one event per line.

Why a local file first, even on a hub: the learner's table (``python -m labkit progress``) works
offline, and the hub's board is sent what this file holds (:mod:`labkit.progress.sender`), so a
board that was down misses nothing. Where it is:

- ``LABKIT_PROGRESS=off``: nowhere (the tests, and every kernel that runs a reference notebook: they run the solved
  labs, :func:`labkit.authoring.nbrun.kernel_environment`);
- ``LABKIT_PROGRESS=/some/file.jsonl``: there;
- otherwise in the workspace: the folder holding ``.labkit-manifest.json`` (:mod:`labkit.learner.workspace`)
  at or above the current folder, or the ``workspace/`` that ``labkit lab`` makes in it (so ``labkit progress``
  typed where ``labkit lab`` was finds that workspace's journal);
- else in labkit's folder of the platform's user data (``platformdirs``: ``~/.local/share/labkit`` on Linux),
  or in ``~/.labkit/`` where an older labkit left a journal there (it stays read and written).

Each event is appended with one ``write`` on a file opened ``O_APPEND`` (two kernels never
interleave their lines); a line cut short by a full disk is skipped when read, never shown.
The folder is 0700 and the file 0600: the learner's alone. A link there is refused, not followed.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.progress.events import Event, parse_event

ENVIRONMENT = "LABKIT_PROGRESS"
FOLDER = ".labkit"
FILE = "progress.jsonl"
WORKSPACE_MARKER = ".labkit-manifest.json"
LAB_FOLDER = "workspace"  # the folder `labkit lab` makes where it is typed (labkit.learner.workspace.DEFAULT_FOLDER)
Origin = Literal["off", "setting", "workspace", "user data", "old user data"]


@dataclass(frozen=True)
class JournalPlace:
    """Where the journal is, and why there (``labkit progress`` says so)."""

    path: Path | None  # None: recording is off
    origin: Origin
    workspace: Path | None = None  # the workspace it belongs to, for ``workspace``


def locate(cwd: Path | None = None) -> JournalPlace:
    """The journal of a process running in ``cwd`` (default: the current folder), by the module's rules."""
    setting = os.environ.get(ENVIRONMENT, "").strip()
    if setting.lower() == "off":
        return JournalPlace(None, "off")
    if setting:
        return JournalPlace(Path(setting).expanduser(), "setting")
    workspace = workspace_folder(cwd) or lab_folder_in(cwd)
    if workspace is not None:
        return JournalPlace(workspace / FOLDER / FILE, "workspace", workspace)
    old = Path.home() / FOLDER / FILE
    if old.is_file():  # an older labkit's: kept, so its attempts stay in the learner's table
        return JournalPlace(old, "old user data")
    import platformdirs  # here, not above: labkit doctor imports this module (through the messages) and only the
    # standard library may be imported before its probes run

    return JournalPlace(platformdirs.user_data_path("labkit", appauthor=False) / FILE, "user data")


def journal_path(cwd: Path | None = None) -> Path | None:
    """The file this process records to, or None when recording is off (``LABKIT_PROGRESS=off``)."""
    return locate(cwd).path


def lab_folder_in(cwd: Path | None = None) -> Path | None:
    """The workspace ``labkit lab`` made in ``cwd`` (its ``workspace/`` holding a manifest), or None."""
    folder = (cwd or Path.cwd()).resolve() / LAB_FOLDER
    return folder if (folder / WORKSPACE_MARKER).is_file() else None


def workspace_folder(cwd: Path | None = None) -> Path | None:
    """The learner workspace holding ``cwd`` (the folder with ``.labkit-manifest.json``), or None outside one."""
    start = (cwd or Path.cwd()).resolve()
    return next((folder for folder in (start, *start.parents) if (folder / WORKSPACE_MARKER).is_file()), None)


def append(event: Event, path: Path) -> None:
    """Add ``event`` as one line of ``path`` (its folder made 0700 if missing); a link is refused."""
    line = (event.to_json() + "\n").encode()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def read_events(path: Path, start: int = 0) -> tuple[list[Event], int]:
    """The whole events of ``path`` from byte ``start``, and the byte where the last whole line ends.

    A line that is not an event (cut short, edited by hand) is skipped; an unfinished last line is left
    for the next read. A missing file holds no events.
    """
    try:
        with open(path, "rb") as file:
            file.seek(start)
            data = file.read()
    except FileNotFoundError:
        return [], start
    except OSError as exc:
        raise LabkitValueError(f"cannot read your progress file {path}: {exc.strerror}") from None
    end = data.rfind(b"\n") + 1
    return list(_parse_lines(data[:end])), start + end


def _parse_lines(data: bytes) -> Iterator[Event]:
    for line in data.splitlines():
        try:
            yield parse_event(line)
        except LabkitError:
            continue
