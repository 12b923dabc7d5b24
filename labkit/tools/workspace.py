"""The learner's workspace: ``make lab`` opens blank exercises, and never overwrites a learner's work.

Why: the committed notebooks are the solved reference edition (strict nbval
runs them, the docs render them), so a learner who opened them would find
every exercise answered. ``make lab`` instead serves a git-ignored folder
(``workspace/``) holding the learner edition that ``student-copy`` makes: each
exercise a stub, every output cleared, no ``solutions/``. It is created on
first use and brought up to date on every later ``make lab``, file by file,
under rules that keep the learner's work:

- a file labkit has not written yet (a new lab, or one the learner deleted to
  start over) is written;
- a file labkit wrote and nobody changed since is refreshed in place when the
  labs change: it holds no work, and the learner gets the fixes;
- a file the learner changed (even only by running it and saving) is kept
  byte for byte. When labkit's version changes, the new one is written beside
  it as ``NAME.labkit-new.ipynb`` (the naming ``student-copy`` and ``docs``
  already use: it sorts next to the learner's notebook in JupyterLab's file
  browser and runs from the same folder), once: a learner who deletes it after
  merging does not get it back until the labs change again;
- files the learner added, and links, are never touched: labkit never follows
  a link, deletes a file or replaces anything it did not write.

How it tells these apart: ``.labkit-manifest.json`` (the file
:mod:`labkit.tools.output_folder` uses, so ``student-copy`` and ``docs``
refuse this folder) records, per file, the SHA-256 of the bytes labkit wrote
there (``files``: changed means edited) and of the latest version it has
delivered, in place or beside (``delivered``: a new version means the labs
changed). A notebook converts the same way every time, so an unchanged lab
gives the same bytes. Every notebook converts before anything is written;
each file is replaced atomically and the manifest is written last, so a run
that stops half-way leaves every file whole, and the next run finishes the job.

Tracks: ``--track core`` (``make lab TRACK=core``) gives the workshop's core
track, without the sections tagged ``extra`` (see
:mod:`labkit.tools.tracks`); ``--track all`` every section. The manifest
records the track (``track``), and a later run without ``--track`` keeps it, so
a workshop machine set up once stays on its track. Switching tracks is one more
change of the labs, under the same rules: a notebook the learner never edited
is replaced by the other track's version; an edited one is kept, and the other
track's version goes beside it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import write_text
from labkit.labs import find_notebooks
from labkit.tools.docs import describe_notebook
from labkit.tools.nbrun import read_notebook
from labkit.tools.output_folder import MANIFEST, OutputFolder, new_version_name
from labkit.tools.student_copy import student_notebook
from labkit.tools.tracks import DEFAULT_TRACK, TRACKS, require_track

TOOL = "workspace"  # the tool named in the manifest
DEFAULT_FOLDER = Path("workspace")
README_NAME = "README.md"
_FORMAT = 1

README = """\
# Your labkit workspace

Your own copy of the labkit labs: every exercise is blank and nothing has run
yet. `make lab` (or `python -m labkit lab`) in the labkit repository opens
this folder in JupyterLab; on a workshop hub, logging in opens it. Work
through the notebooks in order, starting with `00_start_here.ipynb` (*Run >
Run All Cells*: its preflight must say READY):

{notebook_list}

## Exercises

Each lab ends with exercises. An exercise is two cells: a code cell with the
functions or classes to write (their docstrings say what to do; their bodies
`raise NotImplementedError` until you replace them), then a checker cell that
answers *not yet solved*, *not solved* with a hint, or *solved*. Run the
exercise cell after each change, then the checker again.

## Your work is safe

This folder is brought up to date each time the labs start (`make lab`,
`python -m labkit lab`, or logging in to a workshop hub), and your work is
never overwritten:

- a notebook you have not changed is refreshed when the labs change;
- a notebook you changed (running it and saving counts) is kept as it is.
  When the labs change, the new version is written beside it, e.g.
  `02_memory_format.labkit-new.ipynb`, and `make lab` says so. Copy over what
  you want, then delete that file: it comes back only if the labs change again;
- files you add are never touched, and nothing here is ever deleted;
- to start a notebook over, delete or rename it and start the labs again;
- `{manifest}` records what labkit wrote here; leave it in place.

## Track
{track_text}
## Solutions

Stuck? In the labkit repository, `make lab-reference` opens the solved
notebooks (the same labs, every exercise solved and run); in a workshop, your
instructor hands the solutions out when it is time. Each exercise's solution
is a file in
`{solutions}` (exercise 2.1 is `02_1_<name>.py`; on a workshop hub, in
`solutions/` here once handed out): to load one into an exercise cell,
replace the cell's content with `%load {solutions}/<file>.py` and run the
cell twice.
"""


@dataclass
class WorkspaceResult:
    """What one run did, in paths relative to the workspace."""

    folder: Path
    created: bool = False  # the folder was new (missing or empty)
    added: list[str] = field(default_factory=list)  # written where nothing was
    refreshed: list[str] = field(default_factory=list)  # unchanged by the learner; the labs' new version replaced it
    beside: list[tuple[str, str]] = field(default_factory=list)  # (the learner's changed file, kept; the new version)
    left_alone: list[tuple[str, str]] = field(default_factory=list)  # (file, why labkit did not deliver it)
    track: str = DEFAULT_TRACK  # the track the workspace now holds
    previous_track: str | None = None  # the track it held before, when this run switched

    def lines(self) -> list[str]:
        """One sentence per change the learner should know about, or one saying that nothing changed."""
        if self.created:
            notebooks = sum(name.endswith(".ipynb") for name in self.added)
            lines = [f"created {self.folder}: {notebooks} notebooks with blank exercises, and {README_NAME}"]
        else:
            lines = [f"added {name} (new in the labs)" for name in self.added]
        if self.previous_track is not None:
            lines.append(
                f"switched from the {self.previous_track} track to the {self.track} track: notebooks you had not edited now "
                "hold it; an edited one is kept, with the new version beside it"
            )
        lines += [f"refreshed {name}: the labs changed and you had not edited it" for name in self.refreshed]
        lines += [
            f"NOTE: the labs changed {kept}, which you edited; yours is kept as it was and the new version "
            f"is beside it: {new} (see {README_NAME})"
            for kept, new in self.beside
        ]
        lines += [f"left alone {name}: {why}" for name, why in self.left_alone]
        return lines or [f"{self.folder} is up to date"]


TRACK_TEXT = {
    "all": """
This workspace holds every section of every lab. A workshop may use its
shorter core track instead: `make lab TRACK=core`.
""",
    "core": """
This workspace holds the workshop's core track: the sections planned for the
time you have. Where a section was left out, a one-line note says so. To get
every section, run `make lab TRACK=all`; notebooks you edited are kept as
always, and the full version goes beside them.
""",
}


def learner_edition(notebooks_dir: Path, folder: Path, track: str = DEFAULT_TRACK) -> dict[str, str]:
    """The files workspace ``folder`` holds (name -> text): each notebook as students get it, and the README."""
    sources = find_notebooks(notebooks_dir)
    files = {path.name: _notebook_text(path, student_notebook(path, track=track)) for path in sources}
    titles = [f"- `{path.name}`: {describe_notebook(path, read_notebook(path, write=False)).title}" for path in sources]
    solutions = Path(os.path.relpath(notebooks_dir / "solutions", folder)).as_posix()
    files[README_NAME] = README.format(
        notebook_list="\n".join(titles), manifest=MANIFEST, solutions=solutions, track_text=TRACK_TEXT[track]
    )
    return files


def _notebook_text(path: Path, notebook: nbformat.NotebookNode) -> str:
    """The text ``nbformat.write`` would write, the same on every run for the same lab.

    nbformat gives a cell saved without an id (a notebook being written, not yet
    re-executed) a random one on every read; such a lab would look changed on
    every run, so those cells get ids derived from their place instead.
    """
    saved_ids = {cell.get("id") for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]}
    for index, cell in enumerate(notebook.cells):
        if cell.get("id") not in saved_ids:
            cell.id = hashlib.sha256(f"{path.name}:{index}".encode()).hexdigest()[:16]
    text = nbformat.writes(notebook)
    return text if text.endswith("\n") else text + "\n"


def prepare_workspace(
    folder: str | Path = DEFAULT_FOLDER, notebooks_dir: str | Path = "notebooks", track: str | None = None
) -> WorkspaceResult:
    """Create or bring up to date the learner workspace ``folder`` from the labs in ``notebooks_dir``.

    ``track`` is ``"all"`` or ``"core"``; ``None`` keeps the track the
    workspace holds (``"all"`` for a new one). Raises :class:`LabkitValueError`
    (before writing anything) when ``folder`` is not a folder labkit may use,
    e.g. a non-empty folder that is not a workspace, or when a notebook cannot
    be converted.
    """
    folder, notebooks_dir = Path(folder), Path(notebooks_dir)
    output = OutputFolder(folder, tool=TOOL, marker=MANIFEST, what="a labkit workspace")  # no pre-manifest workspaces
    state = output.inspect()
    written = output.read_manifest() if state == "ours" else {}
    record = _read_record(folder) if state == "ours" else {}
    previous = str(record.get("track", DEFAULT_TRACK)) if state == "ours" else None  # before tracks: every section
    track = require_track(track) if track is not None else _known_track(folder, previous)
    files = learner_edition(notebooks_dir, folder, track)  # every notebook converts before anything is written
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabkitValueError(f"Cannot create {folder}: {exc.strerror}. Choose a folder you can write to.") from None
    result = WorkspaceResult(folder, created=state == "new", track=track, previous_track=None if previous == track else previous)
    update = _Update(folder, written, _delivered(record), result)
    for name, text in files.items():
        update.deliver(name, text)
    update.write_manifest()
    return update.result


def _read_record(folder: Path) -> dict[str, object]:
    """The manifest as a dict (read after :meth:`OutputFolder.read_manifest` validated the file)."""
    record = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return record if isinstance(record, dict) else {}


def _delivered(record: dict[str, object]) -> dict[str, str]:
    """The manifest's ``delivered`` record: the latest version of each file given to the learner."""
    delivered = record.get("delivered", {})
    return {str(name): str(digest) for name, digest in delivered.items()} if isinstance(delivered, dict) else {}


def _known_track(folder: Path, recorded: str | None) -> str:
    """The track to keep when none was asked for: the one the workspace holds, ``all`` for a new one."""
    if recorded is None:
        return DEFAULT_TRACK
    if recorded not in TRACKS:
        raise LabkitValueError(
            f"{folder / MANIFEST} records the track {recorded!r}, which this labkit does not know; "
            f"choose one with --track ({', '.join(TRACKS)})."
        )
    return recorded


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_NOT_A_FILE = "not a regular file"


def _current(path: Path) -> str | None:
    """The SHA-256 of the regular file at ``path``, None if nothing is there, or ``_NOT_A_FILE`` (links never followed)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    return _digest(path.read_bytes()) if stat.S_ISREG(mode) else _NOT_A_FILE


@dataclass
class _Update:
    """One run over the workspace: deliver each file under the module's rules, then record what was written."""

    folder: Path
    written: dict[str, str]  # name -> SHA-256 of the bytes labkit wrote there
    delivered: dict[str, str]  # name -> SHA-256 of the latest version given to the learner
    result: WorkspaceResult

    def deliver(self, name: str, text: str) -> None:
        digest = _digest(text.encode("utf-8"))
        current = _current(self.folder / name)
        if current == _NOT_A_FILE:
            self.result.left_alone.append((name, "it is a link or not a regular file, so it is yours"))
        elif current is None:
            self._write(name, text, digest)
            self.result.added.append(name)
        elif current == digest:  # already this version (e.g. a run that stopped before its manifest)
            self._record(name, name, digest)
        elif current == self.written.get(name):
            self._write(name, text, digest)
            self.result.refreshed.append(name)
        elif self.delivered.get(name) != digest:
            self._write_beside(name, text, digest)

    def _write_beside(self, name: str, text: str, digest: str) -> None:
        """The labs changed a file the learner edited: the new version goes next to it, never over it."""
        new = new_version_name(name)
        current = _current(self.folder / new)
        if current not in (None, digest, self.written.get(new)):
            why = f"its new version is not written: {new} is not labkit's (changed since, or a link); rename it and run again"
            self.result.left_alone.append((name, why))
            return
        if current != digest:
            write_text(self.folder / new, text)
        self._record(new, name, digest)
        self.result.beside.append((name, new))

    def _write(self, name: str, text: str, digest: str) -> None:
        write_text(self.folder / name, text)
        self._record(name, name, digest)

    def _record(self, path: str, name: str, digest: str) -> None:
        self.written[path] = digest
        self.delivered[name] = digest

    def write_manifest(self) -> None:
        """Record what labkit wrote that is still there, so the next run tells the learner's changes from its own."""
        still_there = {
            path: digest for path, digest in self.written.items() if _current(self.folder / path) not in (None, _NOT_A_FILE)
        }
        record = {
            "tool": TOOL, "format": _FORMAT, "files": still_there, "delivered": self.delivered, "track": self.result.track,
        }
        write_text(self.folder / MANIFEST, json.dumps(record, indent=1, sort_keys=True) + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder", type=Path, nargs="?", default=DEFAULT_FOLDER,
        help=f"the workspace folder, created on first use (default: {DEFAULT_FOLDER})",
    )
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="the labs' notebooks folder")
    parser.add_argument(
        "--track", choices=TRACKS, default=None,
        help="core: a workshop's shorter path, without the sections tagged 'extra'; all: every section "
        "(default: the track the workspace holds, all for a new one)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        result = prepare_workspace(args.folder, args.notebooks, args.track)
    except LabkitError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"workspace: interrupted; every file in {args.folder} is whole. Run again to finish.", file=sys.stderr)
        return 130
    for line in result.lines():
        print(f"workspace: {line}")
    return 0
