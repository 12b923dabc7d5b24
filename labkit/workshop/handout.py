"""``python -m labkit workshop hand-out-solutions``: give every learner of a workshop hub the solutions, mid-session.

Copies ``notebooks/solutions/*.py`` into ``solutions/`` of each learner
workspace the hub made (found from the same ``LABKIT_WORKSHOP_*`` settings as
``workshop/jupyterhub_config.py``, or named on the command line). It never
touches the learners' notebooks and never overwrites a file already in their
``solutions/`` (one they wrote, or one handed out before): a file is only ever
created, exclusively. The instructor usually runs this as root, inside folders
learners own, so every step refuses a link (``O_NOFOLLOW`` relative to an open
folder) and the new files are given to the workspace's owner.
"""
from __future__ import annotations

import argparse
import os
import pwd
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from labkit.core.errors import LabkitValueError
from labkit.tools.output_folder import MANIFEST
from labkit.workshop.settings import WORKSPACE_NAME, HubSettings

SOLUTIONS = "solutions"
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


@dataclass
class HandOut:
    """What handing out did in one workspace."""

    workspace: Path
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already there (the learner's, or handed out before): untouched
    refused: str = ""  # why nothing was written here

    def line(self) -> str:
        if self.refused:
            return f"{self.workspace}: nothing handed out: {self.refused}"
        kept = f"; kept {len(self.kept)} already there" if self.kept else ""
        return f"{self.workspace}: {len(self.written)} solutions handed out{kept}"


def learner_workspaces(settings: HubSettings) -> list[Path]:
    """Every labkit workspace the hub made: ``HOMES/*/labkit-workspace``, or in each account's home (``system-users``)."""
    if settings.spawner == "system-users":
        homes = sorted({Path(entry.pw_dir) for entry in pwd.getpwall()})
    else:
        homes = sorted(settings.homes.iterdir()) if settings.homes.is_dir() else []
    return [home / WORKSPACE_NAME for home in homes if (home / WORKSPACE_NAME / MANIFEST).is_file()]


def hand_out_solutions(workspace: Path, solutions: Path) -> HandOut:
    """Create ``workspace/solutions/NAME`` for each solution file not already there, owned by the workspace's owner."""
    result = HandOut(workspace)
    try:
        folder = os.open(workspace, _OPEN_FOLDER)
    except OSError as exc:
        result.refused = f"cannot open it as a folder ({exc.strerror}; a link is refused)"
        return result
    try:
        owner = os.fstat(folder)
        try:
            os.mkdir(SOLUTIONS, 0o755, dir_fd=folder)
            _give(owner, lambda uid, gid: os.chown(SOLUTIONS, uid, gid, dir_fd=folder, follow_symlinks=False))
        except FileExistsError:
            pass
        try:
            target = os.open(SOLUTIONS, _OPEN_FOLDER, dir_fd=folder)
        except OSError as exc:
            result.refused = f"{SOLUTIONS}/ is not a folder ({exc.strerror}); rename it and run again"
            return result
        try:
            for source in sorted(solutions.glob("*.py")):
                _create(source, target, owner, result)
        finally:
            os.close(target)
    finally:
        os.close(folder)
    return result


def _create(source: Path, folder: int, owner: os.stat_result, result: HandOut) -> None:
    """Write ``source`` into the open ``folder`` under its name, only where nothing is."""
    try:
        fd = os.open(source.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
    except FileExistsError:
        result.kept.append(source.name)
        return
    with os.fdopen(fd, "wb") as handle:
        handle.write(source.read_bytes())
        _give(owner, lambda uid, gid: os.fchown(handle.fileno(), uid, gid))
    result.written.append(source.name)


def _give(owner: os.stat_result, chown: Callable[[int, int], None]) -> None:
    """Give a new file to the workspace's owner (only root can, and only root needs to)."""
    if os.geteuid() == 0 and owner.st_uid != 0:
        chown(owner.st_uid, owner.st_gid)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    hand_out = actions.add_parser(
        "hand-out-solutions", help="copy notebooks/solutions/ into solutions/ of every learner's workspace (nothing overwritten)"
    )
    hand_out.add_argument("workspaces", type=Path, nargs="*",
                          help="the workspaces (default: every one the hub made, found from the LABKIT_WORKSHOP_* settings)")
    hand_out.add_argument("--solutions", type=Path, default=None, help="the solutions folder (default: notebooks/solutions)")


def run(args: argparse.Namespace) -> int:
    settings = HubSettings.from_environment()
    solutions = args.solutions or settings.notebooks / SOLUTIONS
    if not solutions.is_dir() or stat.S_ISLNK(solutions.lstat().st_mode):
        raise LabkitValueError(f"{solutions} is not a folder of solutions; pass --solutions notebooks/solutions.")
    workspaces = args.workspaces or learner_workspaces(settings)
    if not workspaces:
        where = "the learners' home folders" if settings.spawner == "system-users" else settings.homes
        raise LabkitValueError(f"found no learner workspace in {where}; name them, or check LABKIT_WORKSHOP_SPAWNER/HOMES.")
    results = [hand_out_solutions(workspace, solutions) for workspace in workspaces]
    for result in results:
        print(f"hand-out-solutions: {result.line()}")
    return 1 if any(result.refused for result in results) else 0
