"""Output folders that labkit's tools update without touching what they did not write.

Why: ``make student-copy`` and ``make docs`` write into folders people also use:
an instructor drops ``instructor_notes.md`` into a student copy, a site gets a
``custom.css``, a learner works on a copy's notebooks. Swapping in a whole new
folder deleted all of that. Instead each tool records what it wrote in a
manifest (``.labkit-manifest.json``: relative path -> SHA-256 of the bytes
written), and on the next run:

- writes a file where nothing is, or over its own unchanged file;
- keeps every file it did not write, and says so;
- keeps a file it wrote that was changed since (a learner's edited notebook)
  and writes the new version beside it as ``name.labkit-new.ext``: a change
  is never overwritten, with or without ``--force``;
- removes a file it wrote earlier and no longer produces, only if unchanged;
- never follows a symbolic link inside the folder: a link is the user's and is
  kept as it is; a link where the tool needs a folder is refused.

A folder from before manifests holds only the tool's marker file. Nothing
there says which files the old tool wrote, and a modification time proves
nothing (``cp -p``, ``rsync -a``, ``tar`` and ``unzip`` restore an old one on
an edited file), so only contents count: a file holding exactly the bytes the
tool writes now is the tool's; any other file at a path the tool writes is kept
as the user's, with the new version beside it; files the tool no longer writes
are kept, since their origin is unknown.

Safety: the new files are built in a staging folder inside the output folder;
every validation runs before anything moves; each move is journalled and undone if
a later one fails or is interrupted, so an error leaves the previous output as
it was.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from labkit.core.errors import LabkitValueError

MANIFEST = ".labkit-manifest.json"
STAGING_PREFIX = ".labkit-staging-"
NEW_VERSION = ".labkit-new"  # inserted before the suffix of a changed file's new version
_FORMAT = 1


@dataclass
class UpdateReport:
    """What an update did beyond writing the tool's files (paths relative to the folder)."""

    written: list[str] = field(default_factory=list)  # the tool's files now in the folder
    added: list[str] = field(default_factory=list)  # the user's files, kept
    changed: list[tuple[str, str]] = field(default_factory=list)  # (kept changed file, where its new version went)
    changed_stale: list[str] = field(default_factory=list)  # changed files the tool no longer writes, kept
    removed: list[str] = field(default_factory=list)  # unchanged files the tool no longer writes
    leftovers: list[str] = field(default_factory=list)  # staging folders of killed runs, left alone
    legacy: bool = False  # a folder from before manifests: a kept file may be the old tool's, not the user's

    def lines(self) -> list[str]:
        """One sentence per kind of file the user should know about; empty when there is nothing to say."""
        lines = []
        if self.added:
            lines.append(f"kept {_files(self.added)} you added: {', '.join(self.added)}")
        if self.changed:
            pairs = ", ".join(f"{kept} (new version: {new})" for kept, new in self.changed)
            why = (
                "that differ from labkit's (this folder is from before labkit kept a manifest, so it cannot tell "
                "your edits from its older output)" if self.legacy else "you changed"
            )
            lines.append(f"kept {_files(self.changed)} {why}; the new versions are beside them: {pairs}")
        if self.changed_stale:
            lines.append(
                f"kept {_files(self.changed_stale)} you changed that "
                f"labkit no longer writes: {', '.join(self.changed_stale)}"
            )
        if self.removed:
            lines.append(f"removed {_files(self.removed)} labkit wrote earlier and no longer writes: {', '.join(self.removed)}")
        if self.leftovers:
            lines.append(
                f"left alone {len(self.leftovers)} staging folder(s) of an interrupted run: {', '.join(self.leftovers)} "
                "(delete them when no labkit run is writing here)"
            )
        return lines


def _files(items: list) -> str:
    return f"{len(items)} file" if len(items) == 1 else f"{len(items)} files"


def new_version_name(rel: str) -> str:
    """``pages/a.html`` -> ``pages/a.labkit-new.html``: where the new version of a changed file goes."""
    path = PurePosixPath(rel)
    suffix = path.suffix if path.stem else ""  # ".hidden" has no suffix
    stem = path.name[: len(path.name) - len(suffix)]
    return str(path.with_name(f"{stem}{NEW_VERSION}{suffix}"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class OutputFolder:
    """A folder one tool writes into: ``tool`` names it in the manifest, ``marker`` is its pre-manifest marker file."""

    path: Path
    tool: str
    marker: str
    what: str  # "a student copy": how errors name the folder's kind

    def inspect(self) -> str:
        """Say what the folder is before any work: ``"new"`` (missing or empty), ``"ours"`` or ``"legacy"``.

        Raises :class:`LabkitValueError` for a path that is not a folder, a
        folder labkit cannot write, one that holds another's files, or a
        damaged manifest.
        """
        path = Path(self.path)
        try:
            mode = path.stat().st_mode  # the folder the user named may itself be a link
        except FileNotFoundError:
            if path.is_symlink():
                raise LabkitValueError(f"{path} is a broken symbolic link; remove it or choose another folder.") from None
            self._require_creatable(path)
            return "new"
        except OSError as exc:  # e.g. a parent that is a file
            self._require_creatable(path)
            raise LabkitValueError(f"Cannot use {path}: {exc.strerror}.") from None
        if not stat.S_ISDIR(mode):
            kind = "a file" if stat.S_ISREG(mode) else "a special file (a device, FIFO or socket)"
            raise LabkitValueError(
                f"{path} is {kind}, not a folder; give the folder to "
                f"write {self.what} to (it is created if missing)."
            )
        if not os.access(path, os.W_OK | os.X_OK):
            raise LabkitValueError(
                f"Cannot write {self.what} to {path}: no permission to "
                f"write in {path}. Choose a folder you can write to."
            )
        if _lstat(path / MANIFEST) is not None:
            self.read_manifest()
            return "ours"
        marker = _lstat(path / self.marker)
        if marker is not None and stat.S_ISREG(marker.st_mode):
            return "legacy"
        if any(not p.name.startswith(STAGING_PREFIX) for p in path.iterdir()):  # a killed run's staging does not count
            raise LabkitValueError(f"{path} exists and is not {self.what}; choose an empty or new folder.")
        return "new"

    def _require_creatable(self, path: Path) -> None:
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise LabkitValueError(f"Cannot create {path}: {ancestor} is a file, not a folder. Choose another folder.")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise LabkitValueError(
                f"Cannot create {path}: no permission to write in "
                f"{ancestor}. Choose a folder you can write to."
            )

    def read_manifest(self) -> dict[str, str]:
        """The files this tool wrote last time (relative path -> SHA-256); ``{}`` if there is no manifest."""
        manifest = Path(self.path) / MANIFEST
        found = _lstat(manifest)
        if found is None:
            return {}
        if not stat.S_ISREG(found.st_mode):
            raise LabkitValueError(
                f"{manifest} is not a regular file (labkit never "
                "follows a link there); move it away, then run again."
            )
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            tool, files = data["tool"], data["files"]
        except (ValueError, KeyError, TypeError):
            raise LabkitValueError(
                f"{manifest} is damaged, so labkit cannot tell its files from yours. "
                "Move the files you want to keep elsewhere and delete the folder, or choose a new folder."
            ) from None
        if tool != self.tool:
            raise LabkitValueError(f"{self.path} was written by {tool}, not {self.tool}; choose another folder for {self.what}.")
        return {str(rel): str(digest) for rel, digest in files.items()}

    def update(self, build: Callable[[Path], None]) -> UpdateReport:
        """Run ``build(staging)`` to write the new files into an empty folder, then move them in.

        Nothing in the output folder changes unless ``build`` returns and every
        validation passes; a folder this call created is removed again on error.
        """
        state = self.inspect()
        path = Path(self.path)
        created = [p for p in (path, *path.parents) if not p.exists()][::-1]
        try:
            path.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=path))
        except OSError as exc:
            _remove_empty(created)
            raise LabkitValueError(f"Cannot create {path}: {exc.strerror}. Choose a folder you can write to.") from None
        try:
            (staging / "new").mkdir()
            build(staging / "new")
            report = _Update(self, state, staging).run()
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            _remove_empty(created)
            if isinstance(exc, OSError):  # e.g. a full disk; name the user's file, never a staging file
                named = exc.filename and not str(exc.filename).startswith(str(staging))
                where = f" ({exc.filename})" if named else ""
                raise LabkitValueError(
                    f"Cannot update {path}{where}: "
                    f"{exc.strerror or exc}. {path} was left as it was."
                ) from None
            raise
        shutil.rmtree(staging, ignore_errors=True)
        return report


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


class _Update:
    """One update: plan every move (all validation), then apply the moves with an undo journal."""

    def __init__(self, folder: OutputFolder, state: str, staging: Path) -> None:
        self.folder, self.root, self.staging = folder, Path(folder.path), staging
        self.old = folder.read_manifest() if state == "ours" else {}  # a legacy folder: nothing known to be the tool's
        self.legacy = state == "legacy"
        self.undo: list[Callable[[], None]] = []

    def run(self) -> UpdateReport:
        new = self._staged_files()
        report = UpdateReport(legacy=self.legacy)
        moves: list[tuple[str, str]] = []  # (path in staging, path in the folder)
        manifest: dict[str, str] = {}
        for rel, digest in sorted(new.items()):
            target = rel
            if not self._may_write(rel, digest):
                target = new_version_name(rel)
                if not self._may_write(target, digest):
                    raise LabkitValueError(
                        f"{self.root / rel} and {self.root / target} were both changed since labkit wrote them; "
                        "move one of them away, then run again."
                    )
                report.changed.append((rel, target))
            manifest[target] = digest
            if not self._holds(target, digest):
                moves.append((rel, target))
        kept_changed = {rel for rel, _ in report.changed}
        for rel, digest in sorted(self.old.items()):
            if rel in manifest or rel in kept_changed:
                continue
            try:
                found = self._lstat_inside(rel)
            except LabkitValueError:
                continue  # under a link or a file of the user's: not the tool's to touch
            if found is None:
                continue
            if stat.S_ISREG(found.st_mode) and _digest(self.root / rel) == digest:
                report.removed.append(rel)
            else:
                report.changed_stale.append(rel)
        manifest_text = json.dumps({"tool": self.folder.tool, "format": _FORMAT, "files": manifest}, indent=1, sort_keys=True)
        (self.staging / "new" / MANIFEST).write_text(manifest_text + "\n", encoding="utf-8")
        moves.append((MANIFEST, MANIFEST))
        try:
            self._apply(moves, report.removed)
        except BaseException:
            for undo in reversed(self.undo):
                undo()
            raise
        report.written = sorted(manifest)
        ours = {*manifest, MANIFEST, *kept_changed, *report.changed_stale}
        report.added = [rel for rel in self._entries() if rel not in ours]
        report.leftovers = sorted(
            p.name for p in self.root.iterdir() if p.name.startswith(STAGING_PREFIX) and p.name != self.staging.name
        )
        return report

    def _staged_files(self) -> dict[str, str]:
        staged = self.staging / "new"
        files = {}
        for path in sorted(staged.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                raise LabkitValueError(f"{path.relative_to(staged)}: labkit writes only regular files and folders.")
            if path.is_file():
                files[path.relative_to(staged).as_posix()] = _digest(path)
        if MANIFEST in files:
            raise LabkitValueError(f"A tool may not write its own {MANIFEST}.")
        return files

    def _lstat_inside(self, rel: str) -> os.stat_result | None:
        """lstat of ``rel`` in the folder, after making sure that every folder on the way is a real folder."""
        current = self.root
        parts = PurePosixPath(rel).parts
        for part in parts[:-1]:
            current = current / part
            found = _lstat(current)
            if found is None:
                return None
            if stat.S_ISLNK(found.st_mode):
                raise LabkitValueError(
                    f"{current} is a symbolic link; labkit never writes through links inside {self.root}. "
                    "Move it away, then run again."
                )
            if not stat.S_ISDIR(found.st_mode):
                raise LabkitValueError(f"{current} is in the way: labkit writes a folder there. Move it away, then run again.")
        return _lstat(current / parts[-1])

    def _holds(self, rel: str, digest: str) -> bool:
        found = self._lstat_inside(rel)
        return found is not None and stat.S_ISREG(found.st_mode) and _digest(self.root / rel) == digest

    def _may_write(self, rel: str, digest: str) -> bool:
        """Nothing there, the same bytes, or the tool's own unchanged file (by content: times are never trusted)."""
        found = self._lstat_inside(rel)
        if found is None:
            return True
        if not stat.S_ISREG(found.st_mode):
            return False  # a link, a folder or a special file is the user's
        return _digest(self.root / rel) in (self.old.get(rel), digest)

    def _apply(self, moves: list[tuple[str, str]], removals: list[str]) -> None:
        backups = self.staging / "old"
        for number, rel in enumerate(removals):
            self._move_aside(self.root / rel, backups / str(number))
        for number, (source, target) in enumerate(moves, start=len(removals)):
            destination = self._make_parents(target)
            if _lstat(destination) is not None:
                self._move_aside(destination, backups / str(number))
            self._move(self.staging / "new" / source, destination)
        for rel in removals:
            self._remove_emptied_parents(rel)

    def _move(self, source: Path, destination: Path) -> None:
        def undo() -> None:
            if _lstat(source) is None and _lstat(destination) is not None:
                os.replace(destination, source)

        self.undo.append(undo)  # before the move, so an interrupt right after it is still undone
        os.replace(source, destination)

    def _move_aside(self, path: Path, backup: Path) -> None:
        backup.parent.mkdir(parents=True, exist_ok=True)

        def undo() -> None:
            if _lstat(backup) is not None:
                os.replace(backup, path)

        self.undo.append(undo)
        os.replace(path, backup)

    def _make_parents(self, rel: str) -> Path:
        current = self.root
        for part in PurePosixPath(rel).parts[:-1]:
            current = current / part
            if _lstat(current) is None:
                folder = current
                self.undo.append(functools.partial(_remove_empty, [folder]))
                folder.mkdir()
        return current / PurePosixPath(rel).name

    def _remove_emptied_parents(self, rel: str) -> None:
        for parent in PurePosixPath(rel).parents:
            folder = self.root / parent
            if folder == self.root or _lstat(folder) is None or any(folder.iterdir()):
                return  # the top, already removed with an earlier file, or still holding files
            self.undo.append(functools.partial(folder.mkdir, exist_ok=True))
            folder.rmdir()

    def _entries(self) -> list[str]:
        """Every file and link in the folder (links never followed), except staging folders."""
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            here = Path(dirpath)
            if here == self.root:
                dirnames[:] = [d for d in dirnames if not d.startswith(STAGING_PREFIX)]
            found += [(here / name).relative_to(self.root).as_posix() for name in filenames]
            found += [(here / d).relative_to(self.root).as_posix() for d in dirnames if (here / d).is_symlink()]
        return sorted(found)
