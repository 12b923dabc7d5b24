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
:mod:`labkit.authoring.output_folder` uses, so ``student-copy`` and ``docs``
refuse this folder) records, per file, the SHA-256 of the bytes labkit wrote
there (``files``: changed means edited) and of the latest version it has
delivered, in place or beside (``delivered``: a new version means the labs
changed). A notebook converts the same way every time, so an unchanged lab
gives the same bytes. Every notebook converts before anything is written, and
each file is replaced atomically, so a run that stops half way (Ctrl-C, a full
disk, a killed process) leaves every file whole. A new folder gets its manifest
first, before any notebook (marked ``creating`` until the run ends), and each
file is recorded as soon as it is written: a run never refuses a folder it
started itself, and the next run finishes the job under the same rules (a file
holding exactly labkit's bytes is labkit's; anything else is kept).

A workshop room: the learners' own accounts make their workspaces, and must
not read ``notebooks/`` (the solved notebooks, ``solutions/``). The hub builds
the learner edition once (:func:`write_learner_edition`, ``--write-edition
DIR --room``; see :mod:`labkit.learner.edition`) and each workspace is made from
it (``--edition DIR``), under the same rules. A room's README (``--room``)
names no path outside the workspace: the solutions appear in its own
``solutions/`` when the instructor hands them out.

An installed labkit (a wheel, ``pip install torch-labkit``, Colab) has no
``notebooks/``: its build (:mod:`labkit.authoring.build_labs`) wrote the learner
edition of each track into the package (``labkit/_labs/<track>/``, an edition as
above, with an installed labkit's README), and the workspace is made from it
under the same rules, so ``labkit lab`` in any folder gives what ``make lab``
gives in a checkout. It carries no solutions: the wheel is also what a room's
learner venv holds (:mod:`labkit.workshop.install`), and an installed labkit's
README points at the repository's ``notebooks/solutions/`` instead. Which labs a
run uses, unless told (``--notebooks``, ``--edition``): the checkout's
``notebooks/`` when this labkit runs from a checkout (:data:`labkit.labs.NOTEBOOKS_DIR`),
else the labs the package carries.

Tracks: ``--track core`` (``make lab TRACK=core``) gives the workshop's core
track, without the sections tagged ``extra`` (see
:mod:`labkit.learner.tracks`); ``--track all`` every section. The manifest
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
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.authoring.hosted import repository_link
from labkit.authoring.output_folder import MANIFEST, STAGING_PREFIX, OutputFolder, new_version_name
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import write_text
from labkit.i18n.messages import LANGUAGES, SOURCE_LANGUAGE, known
from labkit.labs import NOTEBOOKS_DIR, find_notebooks
from labkit.learner.edition import RECORD, Edition, read_edition, write_edition
from labkit.learner.tracks import DEFAULT_TRACK, TRACKS, exercise_ids, require_track

if TYPE_CHECKING:
    import nbformat

TOOL = "workspace"  # the tool named in the manifest
DEFAULT_FOLDER = Path("workspace")
README_NAME = "README.md"
CREATING = "creating"  # in the manifest while a new workspace is being written: the next run finishes it
#: Where an installed labkit carries the labs: one learner edition per track, written by its build (build_labs).
PACKAGED_LABS = Path(__file__).resolve().parents[1] / "_labs"
_FORMAT = 1

README = """\
# Your labkit workspace

Your own copy of the labkit labs: every exercise is blank and nothing has run
yet. {opens} Work
through the notebooks in order, starting with `00_start_here.ipynb` (*Run >
Run All Cells*: its preflight must say READY):

{notebook_list}

## Exercises

Every lab after `00_start_here.ipynb` ends with exercises. An exercise is two
cells: a code cell with the functions or classes to write (their docstrings
say what to do; their bodies `raise NotImplementedError` until you replace
them), then a checker cell that answers *not yet solved*, *not solved* with a
hint, or *solved*. Run the exercise cell after each change, then the checker
again.

Stuck? `hint("1.2")` (after `from labkit import hint`) gives a first hint,
and each call the next one: three in all, the last one the approach in words.
They never hold the solution.

## Your progress

Each checker's verdict is recorded in `.labkit/progress.jsonl` in this
folder: the exercise, the verdict, a short name of the mistake (such as
`1.2/groups`) and the time; never your code or its outputs. Run
`python -m labkit progress` in a terminal (or the cell under *Your progress,
and hints* in `00_start_here.ipynb`) for your table: each exercise, solved or not, and what
to do next. On a workshop hub the same verdicts also go to the room's board,
which only the instructor sees, so they can help whoever is stuck; nobody
else can read or post them.

## Your work is safe

This folder is brought up to date each time {labs_start}, and your work is
never overwritten:

- a notebook you have not changed is refreshed when the labs change;
- a notebook you changed (running it and saving counts) is kept as it is.
  When the labs change, the new version is written beside it, e.g.
  `02_memory_format.labkit-new.ipynb`{says_so}. Copy over what
  you want, then delete that file: it comes back only if the labs change again;
- files you add are never touched, and nothing here is ever deleted;
- to start a notebook over, delete or rename it and start the labs again;
- `{manifest}` records what labkit wrote here; leave it in place.

## Track
{track_text}
## Solutions

{solutions_text}"""

# The README's parts that differ by its kind: a checkout's self-learner, a workshop room (whose learners have only
# this folder), an installed labkit (the labs its wheel carries: no make, no checkout).
CHECKOUT, ROOM, INSTALLED = range(3)
OPENS = (
    "`make lab` (or `python -m labkit lab`) in the labkit repository opens\n"
    "this folder in JupyterLab; on a workshop hub, logging in opens it.",
    "Logging in to the workshop hub opens this folder in JupyterLab.",
    "`labkit lab` (or `python -m labkit lab`), run where you first ran it,\n"
    "opens this folder in JupyterLab.",
)
LABS_START = (
    "the labs start (`make lab`,\n`python -m labkit lab`, or logging in to a workshop hub)",
    "you log in to the workshop hub",
    "the labs start (`labkit lab`\nor `python -m labkit lab`)",
)
SAYS_SO = (", and `make lab` says so", "", ", and `labkit lab` says so")

SOLUTIONS_TEXT = """\
Stuck? In the labkit repository, `make lab-reference` opens the solved
notebooks (the same labs, every exercise solved and run); in a workshop, your
instructor hands the solutions out when it is time. Each exercise's solution
is a file in
`{solutions}` (exercise 2.1 is `02_1_<name>.py`; on a workshop hub, in
`solutions/` here once handed out): to load one into an exercise cell,
replace the cell's content with `%load {solutions}/<file>.py` and run the
cell twice.
"""

# An installed labkit carries no solutions (a room's learner venv is one): they are in the repository.
INSTALLED_SOLUTIONS_TEXT = """\
Stuck? This labkit was installed with pip, which carries no solutions (a
workshop's learners must not read them before the instructor hands them out).
They are in labkit's repository: {notebooks} holds the
solved notebooks (every exercise solved and run), {solutions}
one file per exercise (exercise 2.1 is `02_1_<name>.py`). To load one into an
exercise cell, save it in `solutions/` in this folder, replace the cell's
content with `%load solutions/<file>.py` and run the cell twice.
"""

# Names no path outside this folder: in a room, learners cannot read the labs' solutions until they are handed out.
ROOM_SOLUTIONS_TEXT = """\
Stuck? Your instructor hands the solutions out when it is time. They then
appear in `solutions/` in this workspace, one file per exercise (exercise 2.1
is `02_1_<name>.py`): to load one into an exercise cell, replace the cell's
content with `%load solutions/<file>.py` and run the cell twice.
"""


@dataclass
class WorkspaceResult:
    """What one run did, in paths relative to the workspace."""

    folder: Path
    created: bool = False  # the folder was new (missing or empty), or an interrupted run had begun creating it
    resumed: bool = False  # this run finished a creation that an interrupted run had begun
    added: list[str] = field(default_factory=list)  # written where nothing was
    refreshed: list[str] = field(default_factory=list)  # unchanged by the learner; the labs' new version replaced it
    beside: list[tuple[str, str]] = field(default_factory=list)  # (the learner's changed file, kept; the new version)
    left_alone: list[tuple[str, str]] = field(default_factory=list)  # (file, why labkit did not deliver it)
    track: str = DEFAULT_TRACK  # the track the workspace now holds
    exercises: tuple[str, ...] = ()  # the exercises its notebooks hold, in order (the learner's progress table counts these)
    notebooks: int = 0  # how many notebooks the labs give
    previous_track: str | None = None  # the track it held before, when this run switched
    language: str = SOURCE_LANGUAGE  # the language labkit speaks in it (the manifest's, read by labkit.i18n.messages)

    def lines(self) -> list[str]:
        """One sentence per change the learner should know about, or one saying that nothing changed."""
        if self.created:
            finished = ", finishing what an interrupted run had begun" if self.resumed else ""
            lines = [f"created {self.folder}{finished}: {self.notebooks} notebooks with blank exercises, and {README_NAME}"]
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
INSTALLED_TRACK_TEXT = {
    "all": """
This workspace holds every section of every lab. A workshop may use its
shorter core track instead: `labkit lab --track core`.
""",
    "core": """
This workspace holds the workshop's core track: the sections planned for the
time you have. Where a section was left out, a one-line note says so. To get
every section, run `labkit lab --track all`; notebooks you edited are kept as
always, and the full version goes beside them.
""",
}
ROOM_TRACK_TEXT = {
    "all": """
This workspace holds every section of every lab.
""",
    "core": """
This workspace holds the workshop's core track: the sections planned for the
time you have. Where a section was left out, a one-line note says so.
""",
}


def learner_edition(
    notebooks_dir: Path, folder: Path | None, track: str = DEFAULT_TRACK, room: bool = False, *, installed: bool = False
) -> dict[str, str]:
    """The files workspace ``folder`` holds (name -> text): each notebook as students get it, and the README.

    ``room``: a workshop room's README, which names no path outside the
    workspace (the solutions appear in its ``solutions/`` once handed out).
    ``installed``: an installed labkit's README (the labs its wheel carries), which
    points at the solutions in labkit's repository. Otherwise the README points at
    ``notebooks_dir/solutions``: relative to ``folder``, or by its absolute path
    when ``folder`` is None (an edition, which does not know where its workspaces will be).
    """
    # Converting needs nbformat and the docs' reader (about a second to import): only here, so a workspace made
    # from a prebuilt edition (each learner's first log-in to a hub) does not wait for them.
    from labkit.authoring.docs import describe_notebook
    from labkit.authoring.nbrun import read_notebook
    from labkit.authoring.student_copy import student_notebook

    sources = find_notebooks(notebooks_dir)
    files = {path.name: _notebook_text(path, student_notebook(path, track=track)) for path in sources}
    titles = [f"- `{path.name}`: {describe_notebook(path, read_notebook(path, write=False)).title}" for path in sources]
    kind = ROOM if room else INSTALLED if installed else CHECKOUT
    if room:
        solutions_text = ROOM_SOLUTIONS_TEXT
    elif installed:
        solutions_text = INSTALLED_SOLUTIONS_TEXT.format(
            notebooks=repository_link("notebooks"), solutions=repository_link("notebooks/solutions")
        )
    else:
        solutions = notebooks_dir / "solutions"
        where = Path(os.path.relpath(solutions, folder)) if folder is not None else solutions.resolve()
        solutions_text = SOLUTIONS_TEXT.format(solutions=where.as_posix())
    track_text = (TRACK_TEXT, ROOM_TRACK_TEXT, INSTALLED_TRACK_TEXT)[kind][track]
    files[README_NAME] = README.format(
        notebook_list="\n".join(titles), manifest=MANIFEST, opens=OPENS[kind], labs_start=LABS_START[kind],
        says_so=SAYS_SO[kind], track_text=track_text, solutions_text=solutions_text,
    )
    return files


def write_learner_edition(
    notebooks_dir: str | Path, out_dir: str | Path, track: str = DEFAULT_TRACK, room: bool = True
) -> Edition:
    """Build the learner edition of ``notebooks_dir`` into ``out_dir``, for workspaces made with ``edition=out_dir``.

    Writes exactly the files :func:`learner_edition` computes, and the record
    (see :mod:`labkit.learner.edition`), replacing an earlier edition in place.
    Every notebook converts before anything is written. Raises
    :class:`LabkitValueError` for an unknown track, a notebook that does not
    convert, or an ``out_dir`` that is neither empty nor an edition.
    """
    track = require_track(track)
    files = learner_edition(Path(notebooks_dir), None, track, room)
    return write_edition(Path(out_dir), files, track, room)


def write_packaged_labs(notebooks_dir: str | Path, out_dir: str | Path) -> list[Edition]:
    """The labs a wheel carries: the learner edition of every track in ``out_dir/<track>``, an installed labkit's README.

    What :func:`prepare_workspace` reads when no ``notebooks/`` is in reach
    (:data:`PACKAGED_LABS`); the build writes it (:mod:`labkit.authoring.build_labs`).
    Every track converts before anything is written.
    """
    files = {track: learner_edition(Path(notebooks_dir), None, track, installed=True) for track in TRACKS}
    return [write_edition(Path(out_dir) / track, files[track], track, room=False) for track in TRACKS]


def labs_in_reach() -> Path | None:
    """The checkout's ``notebooks/`` when this labkit runs from a checkout; None when installed (it carries the labs)."""
    return NOTEBOOKS_DIR if NOTEBOOKS_DIR.is_dir() else None


def packaged_edition(track: str) -> Path:
    """The learner edition of ``track`` this installed labkit carries; an error that says what to do if it carries none."""
    folder = PACKAGED_LABS / track
    if not (folder / RECORD).is_file():
        raise LabkitValueError(
            f"This labkit carries no labs ({folder} is missing) and runs from no checkout: pass --notebooks DIR "
            "(the notebooks/ folder of a labkit checkout), or install labkit from its wheel or repository."
        )
    return folder


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
    import nbformat

    text = nbformat.writes(notebook)
    return text if text.endswith("\n") else text + "\n"


def prepare_workspace(
    folder: str | Path = DEFAULT_FOLDER, notebooks_dir: str | Path | None = None, track: str | None = None, *,
    edition: str | Path | None = None, room: bool = False, language: str | None = None,
) -> WorkspaceResult:
    """Create or bring up to date the learner workspace ``folder`` from the labs in ``notebooks_dir``.

    ``notebooks_dir`` None: the checkout's ``notebooks/`` (:func:`labs_in_reach`),
    else the labs this installed labkit carries (:func:`packaged_edition`).
    ``track`` is ``"all"`` or ``"core"``; ``None`` keeps the track the
    workspace holds (``"all"`` for a new one). ``edition``: take the files from
    that prebuilt learner edition (:func:`write_learner_edition`) instead of
    converting ``notebooks_dir``, which is then not read; the track is the
    edition's. ``room``: a workshop room's README (from an edition: the
    edition must be a room's). ``language`` (``en``, ``zh``, ``ru``): the one labkit's messages speak
    there; ``None`` keeps the workspace's (English for a new one). Raises :class:`LabkitValueError` (before
    writing anything) when ``folder`` is not a folder labkit may use, e.g. a
    non-empty folder that is not a workspace, when a notebook cannot be
    converted, or when the edition is missing, incomplete or of another track.
    """
    folder = Path(folder)
    output = OutputFolder(folder, tool=TOOL, marker=MANIFEST, what="a labkit workspace")  # no pre-manifest workspaces
    state = output.inspect()
    written = output.read_manifest() if state == "ours" else {}
    record = _read_record(folder) if state == "ours" else {}
    previous = str(record.get("track", DEFAULT_TRACK)) if state == "ours" else None  # before tracks: every section
    if language is not None and language not in LANGUAGES:
        raise LabkitValueError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}.")
    language = language or known(record.get("language")) or SOURCE_LANGUAGE  # a workspace from before: English
    if edition is not None:
        files, track = _from_edition(Path(edition), track, room)
    else:
        track = require_track(track) if track is not None else _known_track(folder, previous)
        labs = Path(notebooks_dir) if notebooks_dir is not None else labs_in_reach()
        if labs is not None:
            files = learner_edition(labs, folder, track, room)  # every notebook converts before anything is written
        elif room:
            raise LabkitValueError("--room needs the room's learner edition (--edition DIR) or the labs' notebooks "
                                   "(--notebooks DIR): the labs an installed labkit carries are a self-learner's.")
        else:
            files, track = _from_edition(packaged_edition(track), track, room)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabkitValueError(f"Cannot create {folder}: {exc.strerror}. Choose a folder you can write to.") from None
    creating = state == "new" or record.get(CREATING) is True  # a new folder, or one an interrupted run was creating
    result = WorkspaceResult(
        folder, created=creating, resumed=state == "ours" and creating, track=track,
        notebooks=sum(name.endswith(".ipynb") for name in files), previous_track=None if previous == track else previous,
        exercises=track_exercises(files), language=language,
    )
    update = _Update(folder, written, _delivered(record), result, creating)
    if state == "new":
        update.start()
    for name, text in files.items():
        update.deliver(name, text)
    update.write_manifest(done=True)
    return update.result


def track_exercises(files: dict[str, str]) -> tuple[str, ...]:
    """The exercise ids the notebooks among ``files`` (name -> text) hold, in the notebooks' order.

    Read as plain JSON: a workspace made from a prebuilt edition does not wait for nbformat."""
    sources = []
    for name in sorted(name for name in files if name.endswith(".ipynb")):
        for cell in json.loads(files[name]).get("cells", []):
            source = cell.get("source", "") if cell.get("cell_type") == "code" else ""
            sources.append("".join(source) if isinstance(source, list) else str(source))
    return tuple(exercise_ids(sources))


def _from_edition(edition: Path, track: str | None, room: bool) -> tuple[dict[str, str], str]:
    """The files and track of the prebuilt ``edition``, after checking they are what was asked for."""
    built = read_edition(edition)
    if track is not None and require_track(track) != built.track:
        raise LabkitValueError(
            f"The learner edition in {edition} holds the {built.track} track, not {track}: leave out --track, "
            f"or build an edition of the {track} track (--write-edition DIR --track {track})."
        )
    if room and not built.room:
        raise LabkitValueError(f"The learner edition in {edition} was built without --room; build it again with --room.")
    return built.files, built.track


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
    """One run over the workspace: deliver each file under the module's rules, recording each in the manifest."""

    folder: Path
    written: dict[str, str]  # name -> SHA-256 of the bytes labkit wrote there
    delivered: dict[str, str]  # name -> SHA-256 of the latest version given to the learner
    result: WorkspaceResult
    creating: bool  # the folder is new, or an interrupted run was creating it

    def start(self) -> None:
        """Make a new folder recognizably labkit's before any notebook is in it: an interrupted run is then finished.

        The first manifest is written in a staging folder and moved in, so that a
        run killed even then leaves nothing that makes the folder look foreign.
        """
        try:
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.folder))
        except OSError as exc:
            raise LabkitValueError(f"Cannot write in {self.folder}: {exc.strerror}. Choose a folder you can write to.") from None
        try:
            write_text(staging / MANIFEST, self._manifest_text(done=False))
            os.replace(staging / MANIFEST, self.folder / MANIFEST)
        except OSError as exc:
            raise LabkitValueError(f"Cannot write {self.folder / MANIFEST}: {exc.strerror}.") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def deliver(self, name: str, text: str) -> None:
        digest = _digest(text.encode("utf-8"))
        current = _current(self.folder / name)
        if current == _NOT_A_FILE:
            self.result.left_alone.append((name, "it is a link or not a regular file, so it is yours"))
        elif current is None:
            self._write(name, name, text, digest)
            self.result.added.append(name)
        elif current == digest:  # already this version (e.g. written by a run that was interrupted)
            self._record(name, name, digest)
        elif current == self.written.get(name):
            self._write(name, name, text, digest)
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
        if current == digest:
            self._record(new, name, digest)
        else:
            self._write(new, name, text, digest)
        self.result.beside.append((name, new))

    def _write(self, path: str, name: str, text: str, digest: str) -> None:
        """Write ``path`` (``name`` or its new version) and record it at once: a run stopped after it knows it is labkit's."""
        write_text(self.folder / path, text)
        self._record(path, name, digest)
        self.write_manifest(done=False)

    def _record(self, path: str, name: str, digest: str) -> None:
        self.written[path] = digest
        self.delivered[name] = digest

    def _manifest_text(self, done: bool) -> str:
        still_there = {
            path: digest for path, digest in self.written.items() if _current(self.folder / path) not in (None, _NOT_A_FILE)
        }
        record: dict[str, object] = {
            "tool": TOOL, "format": _FORMAT, "files": still_there, "delivered": self.delivered, "track": self.result.track,
            "language": self.result.language,
            "exercises": list(self.result.exercises),
        }
        if self.creating and not done:
            record[CREATING] = True
        return json.dumps(record, indent=1, sort_keys=True) + "\n"

    def write_manifest(self, done: bool) -> None:
        """Record what labkit wrote that is still there, so the next run tells the learner's changes from its own."""
        write_text(self.folder / MANIFEST, self._manifest_text(done))


NOTEBOOKS_HELP = "the labs' notebooks folder (default: this checkout's notebooks/, or the labs an installed labkit carries)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder", type=Path, nargs="?", default=None,
        help=f"the workspace folder, created on first use (default: {DEFAULT_FOLDER})",
    )
    parser.add_argument("--notebooks", type=Path, default=None, help=NOTEBOOKS_HELP)
    parser.add_argument(
        "--track", choices=TRACKS, default=None,
        help="core: a workshop's shorter path, without the sections tagged 'extra'; all: every section "
        "(default: the track the workspace holds, all for a new one; an edition's own track)",
    )
    parser.add_argument(
        "--edition", type=Path, default=None, metavar="DIR",
        help="make the workspace from this prebuilt learner edition (see --write-edition) instead of --notebooks",
    )
    parser.add_argument(
        "--room", action="store_true",
        help="a workshop room's README: the solutions appear in solutions/ here once the instructor hands them out",
    )
    parser.add_argument(
        "--write-edition", type=Path, default=None, metavar="DIR",
        help="instead of a workspace, build the learner edition of --notebooks into DIR (what a workspace gets, "
        "nothing else), for workspaces made with --edition DIR",
    )


def run(args: argparse.Namespace) -> int:
    options = vars(args)  # labkit.learner.lab calls this with its own arguments, which lack the edition options
    folder = options.get("write_edition") or args.folder or DEFAULT_FOLDER
    try:
        if options.get("write_edition") is not None:
            return _write_edition(args)
        result = prepare_workspace(
            folder, args.notebooks, args.track, edition=options.get("edition"), room=options.get("room", False)
        )
    except LabkitError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. a manifest labkit may not read: one line, never a traceback
        print(f"workspace: cannot use {exc.filename or folder}: {exc.strerror or exc}.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"workspace: interrupted; every file in {folder} is whole. Run again to finish.", file=sys.stderr)
        return 130
    for line in result.lines():
        print(f"workspace: {line}")
    return 0


def _write_edition(args: argparse.Namespace) -> int:
    if args.folder is not None or args.edition is not None:
        raise LabkitValueError("--write-edition builds an edition, not a workspace: give no workspace folder and no --edition.")
    labs = args.notebooks or labs_in_reach()
    if labs is None:
        raise LabkitValueError("--write-edition converts the labs' notebooks: pass --notebooks DIR (a labkit checkout's "
                               "notebooks/); an installed labkit carries only the learner edition.")
    edition = write_learner_edition(labs, args.write_edition, args.track or DEFAULT_TRACK, room=args.room)
    notebooks = sum(name.endswith(".ipynb") for name in edition.files)
    kind = "a workshop room's" if edition.room else "a self-learner's"
    print(f"workspace: wrote the learner edition to {edition.folder}: {notebooks} notebooks of the {edition.track} track "
          f"and {kind} {README_NAME}")
    return 0
