"""The learner's own record: ``.labkit/progress.jsonl`` in their workspace, one event per line.

Why a local file first, even on a hub: the learner's table (``python -m labkit progress``) works
offline, and the hub's board is sent what this file holds (:mod:`labkit.progress.sender`), so a
board that was down misses nothing. Where it is:

- ``LABKIT_PROGRESS=off``: nowhere (the tests and ``make notebooks`` run the solved labs);
- ``LABKIT_PROGRESS=/some/file.jsonl``: there;
- otherwise in the workspace (the folder above the notebook holding ``.labkit-manifest.json``,
  :mod:`labkit.learner.workspace`), else in ``~/.labkit/``.

Each event is appended with one ``write`` on a file opened ``O_APPEND`` (two kernels never
interleave their lines); a line cut short by a full disk is skipped when read, never shown.
The folder is 0700 and the file 0600: the learner's alone. A link there is refused, not followed.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.progress.events import Event, parse_event

ENVIRONMENT = "LABKIT_PROGRESS"
FOLDER = ".labkit"
FILE = "progress.jsonl"
WORKSPACE_MARKER = ".labkit-manifest.json"


def journal_path(cwd: Path | None = None) -> Path | None:
    """The file this process records to, or None when recording is off (``LABKIT_PROGRESS=off``)."""
    setting = os.environ.get(ENVIRONMENT, "").strip()
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting).expanduser()
    workspace = workspace_folder(cwd)
    return (workspace or Path.home()) / FOLDER / FILE


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
