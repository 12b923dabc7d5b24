"""A prebuilt learner edition: what a workspace gets, built once, readable by learners without ``notebooks/``.

Why: in a workshop room each learner's own Unix account makes their workspace
(the hub's pre-spawn hook runs ``python -m labkit workspace`` as them), but
``notebooks/`` holds the solved reference notebooks and ``notebooks/solutions/``,
which learners must not read before the instructor hands the solutions out. So
the hub (as root) converts the labs once into an edition folder that holds only
what a workspace gets (the blank-exercise notebooks and the README,
:func:`labkit.learner.workspace.write_learner_edition`), and each workspace is
made from it (``python -m labkit workspace FOLDER --edition DIR``).

The folder holds those files and ``edition.json`` (the tool, the format, the
track, whether the README is a room's, and each file's SHA-256). A build writes
that record first, marked incomplete, then each file atomically, then the
complete record; a reader checks every file against it. So a workspace is never
made from an edition half built, or caught half way through a rebuild: the
learner is told to try again instead. A rebuild replaces the files in place and
removes only the files an earlier record listed; a folder that holds other files
and no record is refused, as it is not an edition.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from labkit.core.errors import LabkitValueError
from labkit.core.files import write_text
from labkit.learner.tracks import TRACKS

RECORD = "edition.json"
TOOL = "learner-edition"
_FORMAT = 1


@dataclass(frozen=True)
class Edition:
    """A learner edition: its folder, track, README kind, and files (name -> text)."""

    folder: Path
    track: str
    room: bool  # the README is a workshop room's: solutions appear in the workspace's own solutions/
    files: dict[str, str]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _require_name(folder: Path, name: str) -> str:
    """A file name of the edition itself: no folder, no dot file, not the record (checked both ways: write and read)."""
    if PurePosixPath(name).name != name or name.startswith(".") or name in ("", RECORD) or "\\" in name:
        raise LabkitValueError(f"{folder / RECORD} lists {name!r}, not a file name of a learner edition; build it again.")
    return name


def _read_record(folder: Path) -> dict[str, object] | None:
    """The record as a dict, or None when there is none; a record labkit cannot use is an error."""
    path = folder / RECORD
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LabkitValueError(f"Cannot read {path}: {exc.strerror}. The edition must be readable by every learner.") from None
    if not stat.S_ISREG(mode):
        raise LabkitValueError(f"{path} is not a regular file (labkit never follows a link there); build the edition again.")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LabkitValueError(f"Cannot read {path}: {exc.strerror}. The edition must be readable by every learner.") from None
    except ValueError:
        record = None
    if not isinstance(record, dict) or record.get("tool") != TOOL or not isinstance(record.get("files"), dict):
        raise LabkitValueError(f"{path} is damaged or not a labkit learner edition's; delete {folder} and build it again.")
    return record


def _listed(folder: Path, record: dict[str, object]) -> dict[str, str]:
    """The record's files (name -> SHA-256), each name checked."""
    files = record.get("files")
    items = files.items() if isinstance(files, dict) else ()
    return {_require_name(folder, str(name)): str(digest) for name, digest in items}


def write_edition(folder: Path, files: Mapping[str, str], track: str, room: bool) -> Edition:
    """Write ``files`` (name -> text) and their record into ``folder``, each file atomically; return the edition.

    Raises :class:`LabkitValueError` before writing anything when ``folder``
    is not a folder, or is not empty and holds no edition.
    """
    folder = Path(folder)
    names = [_require_name(folder, name) for name in sorted(files)]
    if folder.is_symlink():
        raise LabkitValueError(f"{folder} is a symbolic link; give the real folder to write the learner edition to.")
    if folder.exists() and not folder.is_dir():
        raise LabkitValueError(f"{folder} is not a folder; give the folder to write the learner edition to (created if missing).")
    previous = _read_record(folder) if folder.is_dir() else None
    if previous is None and folder.is_dir() and any(folder.iterdir()):
        raise LabkitValueError(f"{folder} is not empty and holds no {RECORD}: not a learner edition; choose another folder.")
    earlier = set(_listed(folder, previous)) if previous is not None else set()
    digests = {name: _digest(files[name]) for name in names}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)  # whatever the umask: every learner reads it (its files are 0644, as write_text makes them)
        # Incomplete first, listing the earlier files too: the next build finishes an interrupted one and removes its leftovers.
        _write_record(folder, track, room, {**dict.fromkeys(earlier, ""), **digests}, complete=False)
        for name in names:
            write_text(folder / name, files[name])
        for name in sorted(earlier - set(names)):
            (folder / name).unlink(missing_ok=True)
        _write_record(folder, track, room, digests, complete=True)
    except OSError as exc:
        raise LabkitValueError(f"Cannot write the learner edition to {folder}: {exc.strerror}; build it again.") from None
    return Edition(folder, track, room, {name: files[name] for name in names})


def _write_record(folder: Path, track: str, room: bool, files: dict[str, str], complete: bool) -> None:
    record = {"tool": TOOL, "format": _FORMAT, "track": track, "room": room, "complete": complete, "files": files}
    write_text(folder / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_edition(folder: str | os.PathLike[str]) -> Edition:
    """The complete edition in ``folder``, every file checked against its record.

    Raises :class:`LabkitValueError` saying what to do when there is no
    edition, when it is incomplete or being rebuilt, or when it cannot be read.
    """
    folder = Path(folder)
    build = f"build it with: python -m labkit workspace --write-edition {folder} --room"
    if not folder.is_dir():
        raise LabkitValueError(f"{folder} is not a folder holding a learner edition; {build}.")
    record = _read_record(folder)
    if record is None:
        raise LabkitValueError(f"{folder} holds no {RECORD}, so it is not a learner edition; {build}.")
    if record.get("format") != _FORMAT or record.get("track") not in TRACKS:
        raise LabkitValueError(f"{folder / RECORD} is from another labkit (format or track unknown here); {build}.")
    if record.get("complete") is not True:
        raise LabkitValueError(f"The learner edition in {folder} is incomplete (its build was interrupted or is running); "
                               "try again in a moment, or build it again.")
    files = {}
    for name, digest in sorted(_listed(folder, record).items()):
        path = folder / name
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                raise LabkitValueError(f"{path} is not a regular file; build the learner edition again.")
            data = path.read_bytes()
        except OSError as exc:
            raise LabkitValueError(f"Cannot read {path}: {exc.strerror}. An edition must be readable by every learner.") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise LabkitValueError(f"{path} changed since the learner edition was built (is it being rebuilt?); "
                                   "try again in a moment, or build it again.")
        files[name] = data.decode("utf-8")  # the bytes labkit wrote: utf-8
    return Edition(folder, str(record["track"]), record.get("room") is True, files)
