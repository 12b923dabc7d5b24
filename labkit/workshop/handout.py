"""``python -m labkit workshop hand-out-solutions``: give every learner of a workshop hub the solutions, mid-session.

Copies ``notebooks/solutions/*.py`` into ``solutions/`` of each learner
workspace the hub made (found from the same ``LABKIT_WORKSHOP_*`` settings as
``workshop/jupyterhub_config.py``, or named on the command line). It never
touches the learners' notebooks and never overwrites a file already in their
``solutions/`` (one they wrote, or one handed out before). The instructor
usually runs this as root, inside folders learners own, so every step refuses a
link (``O_NOFOLLOW`` relative to an open folder) and the new files are given to
the workspace's owner.

Each file is written whole or not at all: into a new temporary file in the same
open folder (given to the owner, then synced), published under its name with
``os.link``, which never replaces anything (a name already there is kept), and
the temporary file is removed whatever happens. So a full disk leaves no
truncated solution that a later run would keep: that workspace's line says why
it failed, the command exits 1, and running it again once there is room
completes the hand-out. Every error is one line, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import pwd
import secrets
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from labkit.authoring.output_folder import MANIFEST
from labkit.core.errors import LabkitValueError
from labkit.workshop.accounts import learner_accounts
from labkit.workshop.settings import WORKSPACE_NAME, HubSettings

SOLUTIONS = "solutions"
TEMP_PREFIX = ".labkit-hand-out-"  # a file being written: removed by the run that made it, whatever happens
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


@dataclass
class HandOut:
    """What handing out did in one workspace."""

    workspace: Path
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already there (the learner's, or handed out before): untouched
    refused: str = ""  # why nothing was written here (the workspace is not one to write into)
    failed: str = ""  # why writing stopped part way (e.g. a full disk); no partial file is left, a later run finishes

    def line(self) -> str:
        if self.refused:
            return f"{self.workspace}: nothing handed out: {self.refused}"
        kept = f"; kept {len(self.kept)} already there" if self.kept else ""
        if self.failed:
            return f"{self.workspace}: {len(self.written)} solutions handed out{kept}, then failed: {self.failed}"
        return f"{self.workspace}: {len(self.written)} solutions handed out{kept}"


def read_solutions(folder: Path) -> dict[str, bytes]:
    """Every solution file in ``folder`` (name -> bytes), read before any workspace is touched.

    Raises :class:`LabkitValueError` when ``folder`` is not a folder of
    solutions or a file in it cannot be read.
    """
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):  # lstat: a link is refused too
            raise LabkitValueError(f"{folder} is not a folder of solutions; pass --solutions notebooks/solutions.")
        return {path.name: path.read_bytes() for path in sorted(folder.glob("*.py"))}
    except OSError as exc:
        where = exc.filename or folder
        raise LabkitValueError(f"Cannot read {where}: {exc.strerror or exc}; pass --solutions notebooks/solutions.") from None


def learner_workspaces(settings: HubSettings) -> list[Path]:
    """Every labkit workspace the hub made: ``HOMES/*/labkit-workspace``, or in each learner account's home (``system-users``)."""
    if settings.spawner == "system-users":  # only the accounts labkit made (prefix and marker), never another's
        homes = sorted({Path(pwd.getpwnam(account).pw_dir) for account in learner_accounts(settings.account_prefix)})
    else:
        homes = sorted(settings.homes.iterdir()) if settings.homes.is_dir() else []
    return [home / WORKSPACE_NAME for home in homes if (home / WORKSPACE_NAME / MANIFEST).is_file()]


def hand_out_solutions(workspace: Path, solutions: Path) -> HandOut:
    """Create ``workspace/solutions/NAME`` for each solution file not already there, owned by the workspace's owner.

    Never raises for a problem in one workspace: the result says what was
    refused or why writing failed.
    """
    result = HandOut(workspace)
    try:
        files = read_solutions(solutions)
    except LabkitValueError as exc:
        result.failed = str(exc)
        return result
    try:
        folder = os.open(workspace, _OPEN_FOLDER)
    except OSError as exc:
        result.refused = f"cannot open it as a folder ({exc.strerror}; a link is refused)"
        return result
    try:
        _hand_out(folder, files, result)
    except OSError as exc:  # e.g. a full disk: nothing partial is left
        result.failed = f"{exc.strerror or exc}; no partial file was left, run this again to finish"
    finally:
        os.close(folder)
    return result


def _hand_out(folder: int, files: dict[str, bytes], result: HandOut) -> None:
    owner = os.fstat(folder)
    made = False
    try:
        os.mkdir(SOLUTIONS, 0o755, dir_fd=folder)
        made = True
    except FileExistsError:
        pass
    try:
        target = os.open(SOLUTIONS, _OPEN_FOLDER, dir_fd=folder)
    except OSError as exc:
        result.refused = f"{SOLUTIONS}/ is not a folder ({exc.strerror}); rename it and run again"
        return
    try:
        if made:  # give the folder just made, by its open handle: the learner may have swapped the name meanwhile
            _give(owner, lambda uid, gid: os.fchown(target, uid, gid))
        for name, data in files.items():
            if _publish(target, name, data, owner):
                result.written.append(name)
            else:
                result.kept.append(name)
    finally:
        os.close(target)


def _publish(folder: int, name: str, data: bytes, owner: os.stat_result) -> bool:
    """Write ``data`` as ``name`` in the open ``folder`` whole, only where nothing is; False if something was there."""
    if _exists(folder, name):
        return False  # checked first only to spare the copy: the link below is what never replaces anything
    temp, fd = _new_temp(folder)
    try:
        try:
            _give(owner, lambda uid, gid: os.fchown(fd, uid, gid))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:  # a hard link of the whole file: it never replaces a name, and never follows a link planted at temp
            os.link(temp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(temp, dir_fd=folder)
        except FileNotFoundError:
            pass


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _new_temp(folder: int) -> tuple[str, int]:
    """A new, empty file of this run's in the open ``folder``: its name and an open descriptor."""
    while True:
        temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}.tmp"
        try:
            return temp, os.open(temp, _NEW_FILE, 0o644, dir_fd=folder)
        except FileExistsError:
            continue  # a name someone else holds: draw another


def _give(owner: os.stat_result, chown: Callable[[int, int], None]) -> None:
    """Give a new file to the workspace's owner (only root can, and only root needs to)."""
    if os.geteuid() == 0 and owner.st_uid != 0:
        chown(owner.st_uid, owner.st_gid)


def add_arguments(hand_out: argparse.ArgumentParser) -> None:
    hand_out.add_argument("workspaces", type=Path, nargs="*",
                          help="the workspaces (default: every one the hub made, found from the LABKIT_WORKSHOP_* settings)")
    hand_out.add_argument("--solutions", type=Path, default=None, help="the solutions folder (default: notebooks/solutions)")


def run(args: argparse.Namespace) -> int:
    settings = HubSettings.from_environment()
    solutions = args.solutions or settings.notebooks / SOLUTIONS
    read_solutions(solutions)  # an unreadable solutions folder: one line (labkit's CLI prints it), before any workspace
    try:
        workspaces = args.workspaces or learner_workspaces(settings)
    except OSError as exc:
        raise LabkitValueError(f"Cannot look for the learners' workspaces: {exc.filename or settings.homes}: "
                               f"{exc.strerror or exc}. Name them, or check LABKIT_WORKSHOP_HOMES.") from None
    if not workspaces:
        where = "the learners' home folders" if settings.spawner == "system-users" else settings.homes
        raise LabkitValueError(f"found no learner workspace in {where}; name them, or check LABKIT_WORKSHOP_SPAWNER/HOMES.")
    status = 0
    for workspace in workspaces:
        try:
            result = hand_out_solutions(workspace, solutions)
        except KeyboardInterrupt:
            print(f"hand-out-solutions: interrupted at {workspace}; no partial file was left. Run again to finish.",
                  file=sys.stderr)
            return 130
        print(f"hand-out-solutions: {result.line()}", flush=True)
        status = 1 if result.refused or result.failed else status
    return status
