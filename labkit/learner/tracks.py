"""Workshop tracks: which sections of a lab a copy keeps (``--track core|all``).

Why: a workshop of a few hours cannot cover every section, so an author tags
what can be left out and ``--track core`` leaves it out (``all``, the default,
keeps everything). ``student-copy`` and ``workspace`` apply a track with
:func:`apply_track`; the rules:


- A *section* starts at a markdown cell whose first line is a ``## `` heading
  and runs until the next ``## `` heading (or a ``# `` one); a ``### `` heading
  stays inside its section and starts a *subsection*, which runs until the
  next ``### `` or ``## `` heading. Cells before the first ``## `` heading (the
  title, the learning goals, the setup cell) belong to no section: every track
  keeps them.
- A section is *core* unless its heading cell carries the tag ``extra`` (cell
  metadata ``"tags": ["extra"]``). A ``### `` heading cell tagged ``extra``
  leaves out just that subsection, e.g. one ``### Exercise 1.3`` of a core
  ``## Exercises`` section. The tag belongs on a heading cell only; anywhere
  else it is an error.
- Exercises go with the section they sit in: an exercise in a left-out section
  or subsection is left out with its checker, the others stay. ``## Exercises``
  itself is core unless tagged; tag single ``### Exercise N.M`` subsections to
  shorten it.
- In the core track each ``## `` heading must be the first line of its cell
  (sections are cut at cells): a cell that holds text and then a heading is an
  error naming the cell to split.
- Where something was left out, a one-line note names it, so the learner knows
  why the numbering skips and where the full lab has it.
- The kept notebook must still run top to bottom: a left-out code cell may not
  define a name (variable, function, import) that a later kept cell reads. This
  is checked statically (``ast``) before anything is written, and the error
  names the section and the name, so the author can tag differently.
- Nor may it advertise what it left out. A markdown line that ends with the
  marker ``<!-- extra -->`` (a learning goal, a summary bullet, a sentence
  pointing ahead) is left out of the core track with the sections; the marker
  is an HTML comment, invisible in every edition. A kept markdown cell that
  still names a left-out section (its title up to a colon, a link to its
  anchor, "section N" of a numbered one, or "Exercise N.M" of a left-out
  exercise) is an error naming the cell. So is a short form in a sentence
  that points at a section ("the pitfalls section", "see the pitfalls": the
  title's first clause, up to a comma, colon, question mark or parenthesis,
  without its number and article), and a reference to another lab's left-out section ("lab 02's
  benchmark": a word of that section's heading cell that no kept heading cell
  of that lab uses). So no core copy says "as you will see in the pitfalls
  section".
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.core.errors import LabkitValueError

if TYPE_CHECKING:
    import nbformat

TRACKS = ("all", "core")
DEFAULT_TRACK = "all"
EXTRA_TAG = "extra"
HEADING = re.compile(r"^(#{1,3}) +(\S.*?)\s*$")  # a markdown heading of level 1 to 3
EXTRA_LINE = re.compile(r"\s*<!--\s*extra\s*-->\s*$")  # ends a markdown line the core track leaves out
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Section:
    """A ``## `` section or a ``### `` subsection: its heading and the cells it spans, ``[start, stop)``."""

    title: str  # the heading's text, without the hashes
    level: int  # 2 for a section, 3 for a subsection
    start: int  # index of the heading cell
    stop: int
    extra: bool  # tagged extra: the core track leaves it out


#: An exercise's function starts with its docstring, ``"""Exercise 1.2: ...`` (the stub student_copy makes keeps it).
EXERCISE_DOCSTRING = re.compile(r'"""Exercise (\d{1,2}\.\d{1,2}):')


def exercise_ids(code_sources: Iterable[str]) -> list[str]:
    """The exercise ids the code cells ``code_sources`` hold, in order: what a learner of the track is asked to solve."""
    found: list[str] = []
    for source in code_sources:
        found += [exercise for exercise in EXERCISE_DOCSTRING.findall(source) if exercise not in found]
    return found


def require_track(track: str) -> str:
    """``track`` if labkit knows it; a typo must not silently give the full edition."""
    if track not in TRACKS:
        raise LabkitValueError(f"Unknown track {track!r}: choose one of {', '.join(TRACKS)}.")
    return track


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _heading(cell: nbformat.NotebookNode) -> tuple[int, str] | None:
    """(level, text) when the cell is a markdown cell whose first line is a heading."""
    if cell.cell_type != "markdown" or not cell.source:
        return None
    match = HEADING.match(cell.source.splitlines()[0])
    return (len(match[1]), match[2]) if match else None


def _later_section_headings(cell: nbformat.NotebookNode) -> list[str]:
    """``## `` headings below a markdown cell's first line (outside code fences): each one should start its own cell."""
    found, in_fence = [], False
    for line in cell.source.splitlines()[1:]:
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("## "):
            found.append(line.strip())
    return found


def check_extra_tags(path: Path, notebook: nbformat.NotebookNode) -> None:
    """Raise :class:`LabkitValueError` for an ``extra`` tag on any cell but a ``## `` or ``### `` heading cell.

    Every track checks this, so a misplaced tag shows up in the first copy made, not on the day of a workshop.
    """
    for index, cell in enumerate(notebook.cells):
        heading = _heading(cell)
        if EXTRA_TAG in _tags(cell) and (heading is None or heading[0] == 1):
            first = cell.source.splitlines()[0] if cell.source else ""
            raise LabkitValueError(
                f"{path.name}, cell {index + 1} ({cell.cell_type}: {first[:60]!r}) is tagged '{EXTRA_TAG}', but that tag marks "
                "a section: put it on the markdown cell whose first line is the section's '## ' heading (or a '### ' "
                "heading, to leave out just that subsection)."
            )


def sections_in(path: Path, notebook: nbformat.NotebookNode) -> list[Section]:
    """Every section and subsection of ``notebook``, in order.

    Raises :class:`LabkitValueError` for a misplaced ``extra`` tag (see
    :func:`check_extra_tags`) and for a ``## `` heading that is not the first
    line of its cell (a section would then start in the middle of a cell).
    """
    check_extra_tags(path, notebook)
    headings: list[tuple[int, int, str, bool]] = []  # (cell index, level, text, extra)
    for index, cell in enumerate(notebook.cells):
        buried = _later_section_headings(cell) if cell.cell_type == "markdown" else []
        if buried:
            raise LabkitValueError(
                f"{path.name}, cell {index + 1}: the heading {buried[0]!r} is not the first line of its cell, so its section "
                "would start in the middle of a cell. Split the cell just above that heading (JupyterLab: Edit > Split Cell)."
            )
        heading = _heading(cell)
        if heading is not None:
            headings.append((index, heading[0], heading[1], EXTRA_TAG in _tags(cell)))
    sections = []
    for position, (index, level, text, extra) in enumerate(headings):
        if level == 1:
            continue
        stop = next((i for i, other, _, _ in headings[position + 1 :] if other <= level), len(notebook.cells))
        sections.append(Section(text, level, index, stop, extra))
    return sections


def left_out(path: Path, notebook: nbformat.NotebookNode, track: str) -> list[Section]:
    """The sections and subsections ``track`` leaves out of ``notebook`` (not those inside another left-out one)."""
    if require_track(track) == "all":
        check_extra_tags(path, notebook)  # sections do not matter here, but a misplaced tag is found early
        return []
    dropped: list[Section] = []
    for section in sections_in(path, notebook):
        if section.extra and not any(outer.start <= section.start < outer.stop for outer in dropped):
            dropped.append(section)
    return dropped


def apply_track(path: Path, notebook: nbformat.NotebookNode, track: str) -> nbformat.NotebookNode:
    """Leave the sections ``track`` does not keep out of ``notebook`` (in place), each replaced by a one-line note.

    Raises :class:`LabkitValueError`, before changing anything, when a kept
    cell would read a name that only a left-out cell defines.
    """
    dropped = left_out(path, notebook, track)
    if track != "all":
        check_other_labs_references(path, notebook, dropped)
    if not dropped:
        return notebook
    check_kept_names(path, notebook, dropped)
    check_kept_references(path, notebook, dropped)
    cells = []
    for index, cell in enumerate(notebook.cells):
        section = next((s for s in dropped if s.start <= index < s.stop), None)
        if section is None:
            if cell.cell_type == "markdown":
                cell.source = without_extra_lines(cell.source)
            cells.append(cell)
        elif index == section.start:
            cells.append(_left_out_note(cell, section))
    notebook.cells = cells
    return notebook


LIST_ITEM = re.compile(r"^\s*[-*] ")


def without_extra_lines(source: str) -> str:
    """``source`` without its lines marked ``<!-- extra -->`` (see the module docstring).

    When the marked lines ended a list ("- measure it; / - the extra goal."), the last kept item takes the list's
    final punctuation, so a core copy's goals do not end with a semicolon.
    """
    lines = source.split("\n")
    kept: list[str] = []
    for position, line in enumerate(lines):
        if not EXTRA_LINE.search(line):
            kept.append(line)
            continue
        rest = [other for other in lines[position + 1 :] if not EXTRA_LINE.search(other)]
        ends_list = LIST_ITEM.match(line) and not (rest and LIST_ITEM.match(rest[0]))
        if ends_list and kept and LIST_ITEM.match(kept[-1]) and kept[-1].endswith(";"):
            final = EXTRA_LINE.sub("", line).rstrip()
            kept[-1] = kept[-1][:-1] + (final[-1] if final[-1:] in ".:" else ".")
    return "\n".join(kept)


def _anchor(title: str) -> str:
    """The anchor JupyterLab and the docs give a heading: lowercase, markup and punctuation gone, spaces as '-'."""
    plain = re.sub(r"[`*_]", "", title).strip().lower()
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", plain))


MARKUP = re.compile(r"[`*_]")
ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)


def _plain(text: str) -> str:
    return MARKUP.sub("", text).strip()


def _names_of(section: Section) -> list[str]:
    """How a kept cell could name ``section`` anywhere in a sentence: "Exercise N.M" for an exercise, else its title
    up to a colon or parenthesis and without its number (e.g. 'The overhead lesson'), without markup; a link to its
    anchor; and "section N" when the title is numbered ("9. Pitfalls")."""
    plain = _plain(section.title)
    exercise = re.match(r"Exercise \d+\.\d+", plain)
    lead = exercise[0] if exercise else re.sub(r"^\d+\.\s*", "", re.split(r"[:(]", plain)[0]).strip()
    names = [lead, f"#{_anchor(section.title)}"]
    number = re.match(r"(\d+)\.\s", plain)
    if number and section.level == 2:
        names.append(f"section {number[1]}")
    return names


def _short_name(section: Section) -> str | None:
    """The short form a sentence may use for ``section``: its title's first clause (up to a comma, colon, question
    mark or parenthesis), without its number and article, e.g. 'pitfalls' for '9. Pitfalls, each one running'."""
    if re.match(r"Exercise \d+\.\d+", _plain(section.title)):
        return None
    first = re.split(r"[,:?(]", re.sub(r"^\d+\.\s*", "", _plain(section.title)))[0]
    short = ARTICLE.sub("", first.strip()).strip()
    return short or None


def _pointing_at(short: str) -> re.Pattern[str]:
    """A sentence that points at a section by its short form: "the pitfalls section", "see the pitfalls",
    "the section on pitfalls"."""
    name = re.escape(short.lower())
    return re.compile(
        rf"(?<![\w.])(?:(?:the\s+)?{name}\s+(?:section|part)s?|see\s+(?:the\s+)?{name}|(?:section|part)\s+(?:on|about)\s+"
        rf"(?:the\s+)?{name})(?!\w)"
    )


def _mentions(section: Section, text: str) -> str | None:
    """The words of ``text`` (plain, lowercase) that name ``section``, or None."""
    for name in _names_of(section):
        if re.search(rf"(?<![\w.]){re.escape(name.lower())}(?!\w)", text):
            return name
    short = _short_name(section)
    found = _pointing_at(short).search(text) if short else None
    return found[0] if found else None


def _kept_markdown(notebook: nbformat.NotebookNode, dropped: list[Section]) -> Iterator[tuple[int, str]]:
    """``(index, text)`` of each markdown cell the track keeps: its kept lines, without markup, lowercase."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown" and not any(s.start <= index < s.stop for s in dropped):
            yield index, MARKUP.sub("", without_extra_lines(cell.source)).lower()


def check_kept_references(path: Path, notebook: nbformat.NotebookNode, dropped: list[Section]) -> None:
    """Refuse a track whose kept markdown names a left-out section, unless that line is marked ``<!-- extra -->``."""
    problems = []
    for index, text in _kept_markdown(notebook, dropped):
        for section in dropped:
            named = _mentions(section, text)
            if named:
                problems.append(f"{path.name}, cell {index + 1} names the left-out {'section' if section.level == 2 else 'part'} "
                                f"'{section.title}' ({named!r})")
    if problems:
        raise LabkitValueError(
            "The core track would point at what it leaves out: " + "; ".join(problems) + ". End that line with "
            "<!-- extra --> so the core track leaves it out too, or reword it."
        )


OTHER_LAB = re.compile(r"(?<!\w)lab (\d{2})['\u2019]s\s+([a-z][\w-]*)")  # "lab 02's benchmark"
WORD = re.compile(r"[a-z][\w-]*")


def _heading_words(notebook: nbformat.NotebookNode, sections: list[Section]) -> set[str]:
    words: set[str] = set()
    for section in sections:
        words |= set(WORD.findall(MARKUP.sub("", notebook.cells[section.start].source).lower()))
    return words


def check_other_labs_references(path: Path, notebook: nbformat.NotebookNode, dropped: list[Section]) -> None:
    """Refuse a core copy whose kept markdown points at another lab's left-out section ("as lab 02's benchmark
    does"), unless that line is marked ``<!-- extra -->``.

    The other lab is the notebook ``NN_*.ipynb`` next to ``path``; its core track decides. The word after
    "lab NN's" names a left-out section when that section's heading cell uses it and no kept heading cell of
    that lab does. A lab that is not there is not checked.
    """
    import nbformat

    own = path.name[:2]
    problems = []
    others: dict[str, tuple[str, set[str], list[tuple[Section, set[str]]]] | None] = {}
    for index, text in _kept_markdown(notebook, dropped):
        for lab, word in OTHER_LAB.findall(text):
            if lab == own:
                continue
            if lab not in others:
                found = sorted(path.parent.glob(f"{lab}_*.ipynb"))
                if not found:
                    others[lab] = None
                else:
                    other = nbformat.read(found[0], as_version=4)
                    theirs = left_out(found[0], other, "core")
                    kept = [s for s in sections_in(found[0], other) if not any(d.start <= s.start < d.stop for d in theirs)]
                    others[lab] = (found[0].name, _heading_words(other, kept),
                                   [(s, _heading_words(other, [s])) for s in theirs])
            entry = others[lab]
            if entry is None:
                continue
            name, kept_words, dropped_words = entry
            for section, words in dropped_words:
                if word in words and word not in kept_words:
                    problems.append(f"{path.name}, cell {index + 1} points at the {'section' if section.level == 2 else 'part'} "
                                    f"'{section.title}' of {name} (\"lab {lab}'s {word}\"), which its core track leaves out")
    if problems:
        raise LabkitValueError(
            "The core track would point at what another lab leaves out: " + "; ".join(problems) + ". End that line "
            "with <!-- extra --> so the core track leaves it out too, or reword it."
        )


def _left_out_note(heading_cell: nbformat.NotebookNode, section: Section) -> nbformat.NotebookNode:
    """The note that stands where ``section`` was; its id derives from the heading's, so a copy is the same every time."""
    what = "section" if section.level == 2 else "part"
    import nbformat

    note = nbformat.v4.new_markdown_cell(
        f"> **Left out of this workshop's core track:** the {what} *{section.title}*. The full edition of this lab has it."
    )
    if "id" in heading_cell:
        note.id = f"left-out-{heading_cell.id}"[:64]
    else:  # a notebook from before cell ids (nbformat 4.4) must not get one
        del note["id"]
    return note


# --- the static name check: a kept cell must not need a left-out cell -------------------


@dataclass
class _CellNames:
    """The module-level names one code cell reads and binds, in the order it runs them."""

    events: list[tuple[str, str]] = field(default_factory=list)  # ("read" | "bind", name)
    deferred: set[str] = field(default_factory=set)  # read by function bodies: when they are called, not now

    @property
    def reads(self) -> set[str]:
        """Names the cell reads before binding them itself: what it needs from earlier cells."""
        bound: set[str] = set()
        needed: set[str] = set()
        for kind, name in self.events:
            if kind == "bind":
                bound.add(name)
            elif name not in bound:
                needed.add(name)
        return needed

    @property
    def binds(self) -> set[str]:
        return {name for kind, name in self.events if kind == "bind"}


def _free_names(node: ast.AST) -> set[str]:
    """Names a function, lambda, class or comprehension reads but does not bind inside itself (a safe approximation)."""
    loads: set[str] = set()
    bound: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (loads if isinstance(sub.ctx, ast.Load) else bound).add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, ast.alias):
            bound.add((sub.asname or sub.name).split(".")[0])
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            bound.add(sub.name)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            bound.add(sub.name)
    return loads - bound


class _NameVisitor(ast.NodeVisitor):
    """Records a cell's module-level reads and bindings in evaluation order (right side before targets)."""

    def __init__(self) -> None:
        self.names = _CellNames()

    def _read(self, names: set[str]) -> None:
        self.names.events += [("read", name) for name in sorted(names)]

    def _bind(self, name: str) -> None:
        self.names.events.append(("bind", name))

    def visit_Name(self, node: ast.Name) -> None:
        self.names.events.append(("bind" if isinstance(node.ctx, ast.Store) else "read", node.id))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.names.events.append(("read", node.target.id))
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self._bind((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.names.deferred |= _free_names(node)
        self._bind(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.names.deferred |= _free_names(node)

    def visit_ListComp(self, node: ast.expr) -> None:
        self._read(_free_names(node))  # a comprehension runs at once, in its own scope

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._bind(node.name)
        for statement in node.body:
            self.visit(statement)


def cell_names(source: str, where: str) -> _CellNames:
    """What a code cell reads and binds at module level; IPython syntax (``%magic``, ``!cmd``) is allowed."""
    from IPython.core.inputtransformer2 import TransformerManager  # ipykernel's dependency; a tool-only import

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError as exc:
        raise LabkitValueError(f"{where} is not valid Python ({exc.msg}, line {exc.lineno}); fix it first.") from None
    visitor = _NameVisitor()
    visitor.visit(tree)
    return visitor.names


def check_kept_names(path: Path, notebook: nbformat.NotebookNode, dropped: list[Section]) -> None:
    """Refuse a track whose kept cells read a name that a left-out cell defines, listing every such name.

    A kept cell that reads ``x`` before binding it needs the value the last
    earlier cell to bind ``x`` left there; if that cell is left out, the kept
    notebook breaks (or computes with another value). A function defined in a
    kept cell reads its names when called, so those count only when no kept
    cell binds them at all.
    """
    def section_of(index: int) -> Section | None:
        return next((s for s in dropped if s.start <= index < s.stop), None)

    last_binder: dict[str, int] = {}  # name -> index of the last cell so far that bound it
    kept_binds: set[str] = set()
    problems: list[str] = []
    deferred: list[tuple[int, set[str]]] = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        names = cell_names(cell.source, f"{path.name}, cell {index + 1}")
        if section_of(index) is None:
            for name in sorted(names.reads):
                binder = last_binder.get(name)
                section = section_of(binder) if binder is not None else None
                if binder is not None and section is not None:
                    problems.append(_needs(path, index, name, section, binder))
            kept_binds |= names.binds
            deferred.append((index, names.deferred))
        for name in names.binds:
            last_binder[name] = index
    for index, free in deferred:  # no kept cell binds these: only a left-out one can have
        for name in sorted(free - kept_binds):
            binder = last_binder.get(name)
            section = section_of(binder) if binder is not None else None
            if binder is not None and section is not None:
                problems.append(_needs(path, index, name, section, binder))
    if problems:
        raise LabkitValueError(
            "The core track would break: " + "; ".join(problems) + ". Keep that section in the core track (remove its "
            f"'{EXTRA_TAG}' tag), leave out the cells that read the name as well, or define the name in a kept cell."
        )


def _needs(path: Path, reader: int, name: str, section: Section, binder: int) -> str:
    return (
        f"{path.name}, cell {reader + 1} reads `{name}`, which cell {binder + 1} defines in the left-out "
        f"{'section' if section.level == 2 else 'part'} '{section.title}'"
    )
