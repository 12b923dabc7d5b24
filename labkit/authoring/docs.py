"""Build the docs site with Sphinx and MyST-NB: ``make docs`` (``python -m labkit docs OUTDIR``).

Why: the site is an ordinary Sphinx project in ``docs/`` (theme, search, sidebar,
solutions behind a toggle, API reference: see ``docs/conf.py``); this module only
runs it. It copies ``docs/`` and the notebooks into a temporary source folder (so
``--notebooks`` can point anywhere), runs ``sphinx-build -W`` there (a warning, such
as a broken link, fails the build), and moves the finished site into OUTDIR through
:mod:`labkit.authoring.output_folder`: a rebuild replaces only the files it wrote and
nobody changed, so a ``custom.css`` added to the site stays, and a failed build leaves
the previous site as it was. No notebook is executed: the pages show the outputs
and widget state the notebooks were committed with, which nbval verifies.

Translated editions: where the notebooks folder has ``zh/`` or ``ru/`` (the generated,
executed translations), the same run builds each into ``OUTDIR/zh/`` and ``OUTDIR/ru/``
with Sphinx's own ``language`` (the theme's words, the search's word splitting), one
Sphinx run per edition since a search index has one language. A translated edition has
the landing page, the translated notebooks and the prose pages (the learners' ones translated
by the gettext catalogues in ``docs/locale``, see ``docs/conf.py``; the instructors' and
maintainers' in English, saying so), but not the API reference: its docstrings are English
and autodoc (it imports torch) is most of a build's time, so the edition's API page links to the English one. Every page gets a
language switcher (``docs/_ext/labkit_languages.py``), which reads the editions from
:data:`EDITION_FILE` in each Sphinx source folder.

It also reads a notebook's title and learning goals (:func:`describe_notebook`), which
the landing page, the student copy's README and the learner workspace show.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from labkit.authoring.nbrun import read_notebook
from labkit.authoring.output_folder import OutputFolder
from labkit.core.errors import LabkitError
from labkit.labs import NOTEBOOK_PATTERN, checkout_needed, find_notebooks

TOOL = "docs"  # the tool named in the site folder's manifest
MARKER = ".labkit-site"  # also marks sites built before manifests
#: The Sphinx project; it exists in a checkout of labkit, not in an installed wheel.
DOCS_SOURCE = Path(__file__).resolve().parents[2] / "docs"
SOURCE_NOTEBOOKS = "notebooks"  # where the notebooks go inside the Sphinx source folder
#: The learning goals' heading in each language, as the glossary (notebooks/i18n/glossary.csv) writes it.
GOALS_HEADINGS = ("Learning goals", "学习目标", "Цели занятия")
_GOALS_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)(?:" + "|".join(GOALS_HEADINGS) + ")", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*[-*+]\s+|^\s{2,}\S")
_ERROR_LINES = 40  # how much of a failed build's output to show


@dataclass(frozen=True)
class Edition:
    """One language of the site: its notebooks are ``notebooks/<code>/`` (English: ``notebooks/``)."""

    code: str  # "en", "zh", "ru": also the edition's folder on the site (English: the site's root)
    label: str  # the switcher's link, in the language itself
    sphinx_language: str  # Sphinx's ``language``: the theme's words and the search's tokenizer
    switcher_name: str  # the switcher's accessible name, in this edition's language

    @property
    def root(self) -> str:
        """The edition's folder inside the site, ``""`` or ``"zh/"``."""
        return "" if self == ENGLISH else f"{self.code}/"


ENGLISH = Edition("en", "English", "en", "Language")
TRANSLATIONS = (Edition("zh", "中文", "zh_CN", "语言"), Edition("ru", "Русский", "ru", "Язык"))
#: What docs/_ext/labkit_languages.py reads: this edition and every edition's label, folder and source.
EDITION_FILE = "_labkit_edition.json"
API_STUB = """# API reference

The API reference is generated from labkit's docstrings, which are in English: it is on the
<a href="../api.html">English site</a>.
"""


@dataclass(frozen=True)
class Page:
    """One notebook of the learning path: its title and the Markdown list of its learning goals."""

    notebook: Path
    title: str
    goals_markdown: str


def describe_notebook(path: Path, notebook: nbformat.NotebookNode) -> Page:
    """Title (first ``#`` heading) and learning goals (the list under "Learning goals")."""
    title, goals = path.stem, []
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        heading = next((line[2:].strip() for line in lines if line.startswith("# ")), None)
        if heading and title == path.stem:
            title = heading
        for index, line in enumerate(lines):
            if _GOALS_HEADING.match(line):
                goals = _list_after(lines[index + 1 :])
                break
        if goals:
            break
    return Page(path, title, "\n".join(goals))


def _list_after(lines: list[str]) -> list[str]:
    items: list[str] = []
    for line in lines:
        if _LIST_ITEM.match(line):
            items.append(line)
        elif items or line.strip():
            break
    return items


def require_executed(path: Path, notebook: nbformat.NotebookNode, *, name: str = "", run_with: str = "make notebooks") -> None:
    """The site shows stored outputs, so every code cell must have been run (by ``run_with``)."""
    never_run = [
        i for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and cell.source.strip() and cell.execution_count is None
    ]
    if never_run:
        raise LabkitError(
            f"{name or path.name} has code cells that were never run (cell {never_run[0] + 1} first), "
            f"so its page would have no outputs. Run `{run_with}` first, then `make docs`."
        )


def require_sphinx() -> None:
    """The site's Sphinx project is in a checkout (an installed wheel has none); Sphinx and MyST-NB come with the
    ``docs`` extra, which ``make docs`` installs there."""
    if not (DOCS_SOURCE / "conf.py").is_file():
        raise checkout_needed("docs", "the site's Sphinx project, docs/, and the executed notebooks")
    missing = [name for name in ("sphinx", "myst_nb", "sphinx_book_theme", "sphinx_togglebutton")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise LabkitError(
            f"The docs site needs {', '.join(missing)}, which this environment lacks: in the checkout, "
            "run `python -m pip install -e '.[docs]'` (make docs does it for you)."
        )


def sphinx_source(notebooks: list[Path], folder: Path, edition: Edition = ENGLISH) -> Path:
    """``docs/`` plus the notebooks in ``folder/source``: the folder Sphinx reads.

    A translated edition leaves the API pages out; its ``api.md`` links to the English reference.
    """
    source = folder / "source"
    shutil.copytree(DOCS_SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "_build"))
    if edition != ENGLISH:
        shutil.rmtree(source / "api")
        (source / "api.md").write_text(API_STUB, encoding="utf-8")
    (source / SOURCE_NOTEBOOKS).mkdir(exist_ok=True)
    for path in notebooks:
        (source / SOURCE_NOTEBOOKS / path.name).write_text(reader_notebook(path), encoding="utf-8")
    return source


#: nbval's markers: a cell's first line that tells the test what to compare, nothing a reader of the page needs.
NBVAL_MARKER = re.compile(r"\A#\s*NBVAL_[A-Z_]+[ \t]*(?:\n|\Z)")


def reader_notebook(path: Path) -> str:
    """The notebook as the site shows it (and its download button offers): each code cell without the nbval marker
    it starts with (``# NBVAL_IGNORE_OUTPUT``), which says what a test compares; the comment under it, which says
    why, stays."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.source = NBVAL_MARKER.sub("", cell.source, count=1)
    return nbformat.writes(notebook) + "\n"


def find_editions(notebooks_dir: Path) -> list[tuple[Edition, list[Path]]]:
    """English from ``notebooks_dir``, then each translation that ``notebooks_dir/<code>/`` holds notebooks of."""
    editions = [(ENGLISH, find_notebooks(notebooks_dir))]
    for edition in TRANSLATIONS:
        folder = notebooks_dir / edition.code
        if folder.is_dir() and any(NOTEBOOK_PATTERN.match(path.name) for path in folder.iterdir()):
            editions.append((edition, find_notebooks(folder)))
    return editions


def write_edition_files(sources: dict[Edition, Path]) -> None:
    """Each source folder learns its own edition and every edition's label, folder and source (for the switcher)."""
    editions = [{"code": e.code, "label": e.label, "root": e.root, "source": str(source), "lang": e.sphinx_language}
                for e, source in sources.items()]
    for edition, source in sources.items():
        record = {"current": edition.code, "switcher_name": edition.switcher_name, "editions": editions}
        (source / EDITION_FILE).write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")


def run_sphinx(source: Path, out_dir: Path, doctrees: Path, language: str = ENGLISH.sphinx_language) -> None:
    """``sphinx-build -W`` in a child process; its warnings, if any, become the error's message."""
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-j", "auto",
               "-D", f"language={language}", "-d", str(doctrees), str(source), str(out_dir)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).replace(str(source) + os.sep, "").strip().splitlines()
        raise LabkitError(
            "sphinx-build failed (warnings are errors: fix each one):\n" + "\n".join(lines[-_ERROR_LINES:])
        )


def build_site(notebooks_dir: str | Path, out_dir: str | Path) -> list[Page]:
    """Build the site from the notebooks in ``notebooks_dir`` into ``out_dir``; return its notebook pages.

    The site is built completely before anything in ``out_dir`` changes. A
    rebuild replaces only the files this tool wrote and nobody changed (see
    :mod:`labkit.authoring.output_folder`): an added ``custom.css`` stays, a hand-edited
    page stays with the new one beside it, and what was kept is printed. A
    folder that is not a labkit site is never written to.
    """
    notebooks_dir, out_dir = Path(notebooks_dir), Path(out_dir)
    output = OutputFolder(out_dir, tool=TOOL, marker=MARKER, what="a labkit site")
    output.inspect()
    require_sphinx()
    editions = find_editions(notebooks_dir)
    paths = editions[0][1]
    notebooks = [read_notebook(path, write=False) for path in paths]
    for path, notebook in zip(paths, notebooks):
        require_executed(path, notebook)
    for edition, translated in editions[1:]:
        for path in translated:
            require_executed(path, read_notebook(path, write=False), name=f"{edition.code}/{path.name}",
                             run_with="make i18n-build")

    def build(staging: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="labkit-docs-") as scratch:
            sources = {edition: sphinx_source(pages, Path(scratch) / edition.code, edition) for edition, pages in editions}
            write_edition_files(sources)
            for edition, source in sources.items():
                built = source.parent / "site"
                run_sphinx(source, built, source.parent / "doctrees", edition.sphinx_language)
                shutil.copytree(built, staging / edition.root, dirs_exist_ok=True)
        (staging / MARKER).write_text("built by python -m labkit docs\n", encoding="utf-8")

    for line in output.update(build).lines():
        print(f"docs: {line}")
    return [describe_notebook(path, notebook) for path, notebook in zip(paths, notebooks)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", type=Path, help="where to write the site, e.g. build/site")
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="folder of executed notebooks")


def run(args: argparse.Namespace) -> int:
    try:
        pages = build_site(args.notebooks, args.out_dir)
    except LabkitError as exc:
        print(f"docs: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"docs: interrupted; nothing half-written was left in {args.out_dir}.", file=sys.stderr)
        return 130
    languages = [edition.code for edition in TRANSLATIONS if (args.out_dir / edition.code / "index.html").is_file()]
    translated = f"; translated editions in {', '.join(f'{code}/' for code in languages)}" if languages else ""
    print(f"docs: {len(pages)} notebook pages, index.html and the API reference in {args.out_dir}{translated} "
          f"(open {args.out_dir / 'index.html'})")
    return 0
