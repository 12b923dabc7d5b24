"""Writing a file the user named, without ever destroying something else.

Why: ``--csv out.csv`` or ``to_json(path)`` is a promise to write one regular
file. Replacing the path blindly turns a symlink into a plain file (the link's
target keeps its stale content) and can replace a device node or a FIFO. So:

- a symlink is followed: the file it points to is the one rewritten, and the
  link stays a link;
- anything that is not a regular file (a folder, a FIFO, a device) is refused;
- the new content goes to a temporary file beside the target and replaces it
  in one ``os.replace``, so an error or Ctrl-C never leaves a half-written file;
- every error names the user's path, never the temporary file.
"""
from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from labkit.core.errors import LabkitValueError


def writable_target(path: str | os.PathLike[str]) -> Path:
    """The regular file that writing ``path`` will replace (symlinks followed), validated before any work.

    Raises :class:`LabkitValueError` when the path is a folder or a special
    file, or when its folder is missing or not writable.
    """
    given = Path(path)
    target = Path(os.path.realpath(given))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a special file (a device, FIFO or socket)"
        raise LabkitValueError(f"{given} is {kind}, not a regular file; give the path of a file to write.")
    folder = target.parent
    if not folder.is_dir():
        raise LabkitValueError(
            f"Cannot write {given}: the folder {folder} does not "
            "exist. Create it first, or choose another path."
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise LabkitValueError(f"Cannot write {given}: no permission to write in {folder}. Choose a folder you can write to.")
    return target


def write_file(path: str | os.PathLike[str], write: Callable[[TextIO], object]) -> Path:
    """Write a text file atomically through ``write(handle)``; return the user's path.

    An existing file keeps its permission bits; a new one is ``0644`` (reports
    and notebooks are shared documents, and ``mkstemp`` would make it private).
    """
    target = writable_target(path)
    existing_mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}-", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise LabkitValueError(f"Cannot write {path}: {exc.strerror}.") from None
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            write(handle)
        os.chmod(tmp_name, existing_mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise LabkitValueError(f"Cannot write {path}: {exc.strerror or exc}.") from None
        raise
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """:func:`write_file` for a string."""
    return write_file(path, lambda handle: handle.write(text))
