"""English notebooks -> catalogues -> translated notebooks, and the check that fails when any of them lags.

Why: a translation goes stale silently (an English paragraph changes, the translated page does not). Here every
markdown cell of an English notebook is one gettext entry keyed by the cell's id (``update``), the translated
notebook is generated from the English one and its catalogue, code cells untouched (``build``), and ``check``
names each cell whose translation is missing, fuzzy, structurally different, off-glossary, or older than its source.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib  # type: ignore[import-untyped]  # no types published; not in the mypy overrides (pyproject is shared)

from labkit.authoring.nbrun import execute_notebook, read_notebook
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import write_text
from labkit.i18n import LANGS, glossary, markdown
from labkit.i18n.messages import ENVIRONMENT

METADATA_KEY = "labkit_i18n"
LANGUAGE_NAMES = {"zh": "Simplified Chinese", "ru": "Russian"}


@dataclass(frozen=True)
class Problem:
    """One reason the check fails, naming where and the start of the English text."""

    notebook: str
    cell: str
    english: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.notebook}, cell {self.cell}" if self.cell else self.notebook
        start = f' ("{self.english}")' if self.english else ""
        return f"{where}{start}: {self.reason}"


def english_notebooks(root: Path) -> list[Path]:
    """The English source notebooks: ``root/0*.ipynb``."""
    return sorted(root.glob("0*.ipynb"))


def catalogue_path(root: Path, lang: str, notebook: Path) -> Path:
    return root / "i18n" / lang / f"{notebook.stem}.po"


def translated_path(root: Path, lang: str, notebook: Path) -> Path:
    return root / lang / notebook.name


def source_hash(notebook: nbformat.NotebookNode) -> str:
    """The English notebook's content hash: every cell's id, type and source (outputs left out: a re-run changes no text)."""
    cells = [[cell.get("id"), cell.cell_type, cell.source] for cell in notebook.cells]
    return _sha256(cells)


def translatable(cell: nbformat.NotebookNode) -> bool:
    """A markdown cell with text (an empty msgid is gettext's header, so empty cells are copied as they are)."""
    return cell.cell_type == "markdown" and bool(cell.source.strip())


def excerpt(text: str, width: int = 60) -> str:
    """The start of ``text`` on one line: enough to find the cell."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


# --- update -------------------------------------------------------------------------------------------------


def update(root: Path, langs: Iterable[str] = LANGS) -> list[str]:
    """Extract or merge every catalogue from the English notebooks; what changed, one line per catalogue."""
    report = []
    for path in english_notebooks(root):
        notebook = read_notebook(path, write=False)
        for lang in langs:
            target = catalogue_path(root, lang, path)
            old = polib.pofile(str(target)) if target.exists() else None
            before = _entries(old) if old is not None else None
            merged, counts = merge(notebook, old, lang, path.name)
            if before != _entries(merged):  # rewrite only what changed, never just reformat
                target.parent.mkdir(parents=True, exist_ok=True)
                write_text(target, merged.__unicode__())
                report.append(f"{target}: {counts}")
    return report


def merge(notebook: nbformat.NotebookNode, old: polib.POFile | None, lang: str, name: str) -> tuple[polib.POFile, str]:
    """The catalogue for ``notebook``: one entry per markdown cell in notebook order, ``old``'s translations kept.

    A cell whose English changed keeps its translation marked fuzzy, with the old English as ``#| msgid``;
    an entry whose cell is gone becomes obsolete.
    """
    po = polib.POFile()
    po.header = old.header if old is not None else f"{LANGUAGE_NAMES.get(lang, lang)} translation of notebooks/{name} (labkit)."
    po.metadata = dict(old.metadata) if old is not None else {
        "Project-Id-Version": "labkit notebooks",
        "Language": lang,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
        "X-Source-Notebook": name,
    }
    previous = {entry.msgctxt: entry for entry in old} if old is not None else {}
    new = changed = 0
    for cell in notebook.cells:
        if not translatable(cell):
            continue
        entry = previous.pop(cell.id, None)
        if entry is None:
            entry = polib.POEntry(msgctxt=cell.id, msgid=cell.source, msgstr="")
            new += 1
        elif entry.msgid != cell.source:
            if entry.msgstr:
                entry.previous_msgid = entry.msgid
                if "fuzzy" not in entry.flags:
                    entry.flags.append("fuzzy")
            entry.msgid = cell.source
            changed += 1
        entry.obsolete = False
        po.append(entry)
    for entry in previous.values():
        entry.obsolete = True
        po.append(entry)
    return po, f"{new} new, {changed} changed (fuzzy), {len(previous)} obsolete"


# --- build --------------------------------------------------------------------------------------------------


def translations(po: polib.POFile) -> dict[str, str]:
    """Cell id -> translated markdown, for finished entries only (translated, not fuzzy, not obsolete)."""
    return {e.msgctxt: e.msgstr for e in po if e.msgstr and not e.obsolete and "fuzzy" not in e.flags}


def catalogue_hash(notebook: nbformat.NotebookNode, po: polib.POFile) -> str:
    """What the generated notebook took from the catalogue: each cell id's translation, in notebook order."""
    done = translations(po)
    return _sha256([[cell.id, done.get(cell.id)] for cell in notebook.cells if translatable(cell)])


def translate(notebook: nbformat.NotebookNode, po: polib.POFile, lang: str, name: str) -> nbformat.NotebookNode:
    """``notebook`` with each markdown cell from ``po``; code cells (and their outputs) exactly as in English."""
    done = translations(po)
    missing = [cell.id for cell in notebook.cells if translatable(cell) and done.get(cell.id) is None]
    if missing:
        raise LabkitError(f"{name}: {len(missing)} markdown cell(s) have no finished {lang} translation "
                          f"(first: {missing[0]}); run python -m labkit i18n check to see them.")
    result = copy.deepcopy(notebook)
    for cell in result.cells:
        if translatable(cell):
            cell.source = done[cell.id]
    result.metadata[METADATA_KEY] = {
        "language": lang,
        "language_name": LANGUAGE_NAMES.get(lang, lang),
        "translated_from": name,
        "source_sha256": source_hash(notebook),
        "catalogue_sha256": catalogue_hash(notebook, po),
    }
    return result


def build(root: Path, langs: Iterable[str] = LANGS, *, execute: bool = True, timeout: int = 600,
          force: bool = False) -> Iterator[str]:
    """Write ``root/<lang>/<name>.ipynb`` for each English notebook whose catalogue is finished; yield one line each.

    Without ``execute`` the English outputs stay (the code is the same); with it each notebook is run as
    ``make notebooks`` runs the English ones, in its own folder, where ``solutions`` links to ``../solutions``, with
    ``LABKIT_LANG=<lang>``: labkit's verdicts, hints and tables in the stored outputs read in that language.
    A notebook already built from today's English and catalogue is left alone unless ``force`` (after
    ``make notebooks``, whose new outputs no hash here sees, build with ``force``).
    """
    for lang in langs:
        folder = root / lang
        for path in english_notebooks(root):
            po_path = catalogue_path(root, lang, path)
            if not po_path.exists():
                yield f"skipped {translated_path(root, lang, path)}: no catalogue {po_path}"
                continue
            english = read_notebook(path, write=False)
            try:
                translated = translate(english, polib.pofile(str(po_path)), lang, path.name)
            except LabkitError as exc:
                yield f"skipped {translated_path(root, lang, path)}: {exc}"
                continue
            target = translated_path(root, lang, path)
            if not force and target.exists() and _made_from(target) == translated.metadata[METADATA_KEY]:
                yield f"up to date {target}"
                continue
            folder.mkdir(exist_ok=True)
            _link_solutions(root, folder)
            write_text(target, nbformat.writes(translated) + "\n")  # as nbformat.write ends a file
            seconds = _execute_in(lang, target, timeout) if execute else None
            yield f"ok {target}" + (f" {seconds:.1f} s" if seconds is not None else " (not executed)")


def _execute_in(lang: str, path: Path, timeout: int) -> float:
    """Execute ``path`` with labkit speaking ``lang`` (``LABKIT_LANG`` for its kernel): its verdicts read in ``lang``.

    The kernel copies the environment when it starts; the variable is restored after, so English runs stay English.
    """
    before = os.environ.get(ENVIRONMENT)
    os.environ[ENVIRONMENT] = lang
    try:
        return execute_notebook(path, timeout=timeout)
    finally:
        if before is None:
            os.environ.pop(ENVIRONMENT, None)
        else:
            os.environ[ENVIRONMENT] = before


def _made_from(path: Path) -> object:
    try:
        return read_notebook(path, write=False).metadata.get(METADATA_KEY)
    except LabkitValueError:
        return None


def _link_solutions(root: Path, folder: Path) -> None:
    """``folder/solutions`` -> ``../solutions``: the ``%load solutions/...`` lines work in a translated notebook too."""
    link = folder / "solutions"
    if (root / "solutions").is_dir() and not link.exists() and not link.is_symlink():
        os.symlink(Path("..") / "solutions", link, target_is_directory=True)


# --- check --------------------------------------------------------------------------------------------------


def check(root: Path, langs: Iterable[str] = LANGS) -> list[Problem]:
    """Every reason a translation is not finished and current; empty when all are."""
    terms = glossary.load(root / "i18n" / "glossary.csv")
    problems: list[Problem] = []
    for path in english_notebooks(root):
        english = read_notebook(path, write=False)
        for lang in langs:
            problems += check_catalogue(root, lang, path, english, terms)
            problems += check_generated(root, lang, path, english, terms)
    return problems


def check_catalogue(root: Path, lang: str, path: Path, english: nbformat.NotebookNode,
                    terms: list[glossary.Term]) -> list[Problem]:
    """Each markdown cell of ``english`` has a finished, structurally faithful, on-glossary ``lang`` translation."""
    po_path = catalogue_path(root, lang, path)
    name = f"{path.name} [{lang}]"
    if not po_path.exists():
        return [Problem(name, "", "", f"no catalogue {po_path}; run make i18n-update, then translate it")]
    entries = {e.msgctxt: e for e in polib.pofile(str(po_path)) if not e.obsolete}
    problems = []
    for cell in english.cells:
        if not translatable(cell):
            continue
        entry = entries.get(cell.id)
        start = excerpt(cell.source)
        if entry is None or entry.msgid != cell.source:
            reasons = ["not in the catalogue (new English cell)", "the English changed since the catalogue was updated"]
            problems.append(Problem(name, cell.id, start, reasons[entry is not None] + "; run make i18n-update"))
        elif "fuzzy" in entry.flags:
            problems.append(Problem(name, cell.id, start, "fuzzy: the English changed; update the translation, "
                                                          "then remove the fuzzy flag"))
        elif not entry.msgstr.strip():
            problems.append(Problem(name, cell.id, start, "no translation"))
        else:
            for reason in markdown.differences(cell.source, entry.msgstr):
                problems.append(Problem(name, cell.id, start, f"structure: {reason}"))
            prose = "\n".join(markdown.structure(entry.msgstr).prose)
            for reason in glossary.violations(terms, lang, prose):
                problems.append(Problem(name, cell.id, start, reason))
    return problems


def check_generated(root: Path, lang: str, path: Path, english: nbformat.NotebookNode,
                    terms: list[glossary.Term]) -> list[Problem]:
    """The generated notebook exists, was built from today's English and catalogue, keeps every code cell, and its
    stored outputs (labkit's messages as the build printed them) use no word the glossary forbids."""
    target = translated_path(root, lang, path)
    po_path = catalogue_path(root, lang, path)
    name = str(target)
    if not target.exists():
        return [Problem(name, "", "", "not generated; run make i18n-build")]
    try:
        translated = read_notebook(target, write=False)
    except LabkitValueError as exc:
        return [Problem(name, "", "", str(exc))]
    problems = []
    made_from = translated.metadata.get(METADATA_KEY, {})
    if made_from.get("source_sha256") != source_hash(english):
        problems.append(Problem(name, "", "", f"out of date with {path.name} (its content hash differs from the one "
                                              "this notebook was translated from); run make i18n-update and i18n-build"))
    if po_path.exists() and made_from.get("catalogue_sha256") != catalogue_hash(english, polib.pofile(str(po_path))):
        problems.append(Problem(name, "", "", f"out of date with its catalogue {po_path}; run make i18n-build"))
    ids = [(c.get("id"), c.cell_type) for c in english.cells]
    if [(c.get("id"), c.cell_type) for c in translated.cells] != ids:
        problems.append(Problem(name, "", "", f"its cells are not {path.name}'s cells (ids and types); run make i18n-build"))
        return problems
    for source, cell in zip(english.cells, translated.cells):
        if source.cell_type == "code" and cell.source != source.source:
            problems.append(Problem(name, cell.id, excerpt(source.source), "code cell differs from English"))
        for text in _stored_texts(cell):
            for reason in glossary.violations(terms, lang, text):
                problems.append(Problem(name, cell.id, excerpt(source.source), f"stored output: {reason}; run make "
                                                                               "i18n-build"))
    return problems


def _stored_texts(cell: nbformat.NotebookNode) -> list[str]:
    """What a learner reads of a cell's stored outputs: streams, and plain text and HTML results."""
    texts = []
    for output in cell.get("outputs", []):
        texts += [output.get("text", ""), *(output.get("data", {}).get(kind, "") for kind in ("text/plain", "text/html"))]
    return [text for text in texts if text]


def _entries(po: polib.POFile) -> list[tuple[object, ...]]:
    return [(e.msgctxt, e.msgid, e.msgstr, sorted(e.flags), e.obsolete, e.previous_msgid) for e in po]


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()
