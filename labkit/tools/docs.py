"""Build the static documentation site from the executed notebooks: ``make docs``.

Why: a docs reader never runs a cell. The committed notebooks already hold
their outputs and their widget state (``make notebooks`` stores both), so the
site is a plain conversion with nbconvert's JupyterLab template: no execution,
and what nbval verified is exactly what the reader sees. Each widget's last
state is rendered in the browser by the ``@jupyter-widgets/html-manager`` embed
bundle, and math by MathJax; both are vendored in ``labkit/_vendor`` (see its
README) and copied into the site, so pages work offline and from ``file://``.

Usage: ``python -m labkit docs OUTDIR [--notebooks DIR]`` (or ``python -m
labkit.tools.docs``). The site is built in a staging folder and moved in only when
complete; a rebuild replaces only the files it wrote and nobody changed, so a
``custom.css`` added to the site stays (see :mod:`labkit.tools.output_folder`).
"""
from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from labkit.core.errors import LabkitError
from labkit.labs import find_notebooks
from labkit.tools.nbrun import read_notebook
from labkit.tools.output_folder import OutputFolder

SITE_TITLE = "labkit labs"
STATIC_DIR = "_static"
TOOL = "docs"  # the tool named in the site folder's manifest
MARKER = ".labkit-site"  # also marks sites built before manifests
VENDOR = Path(__file__).resolve().parents[1] / "_vendor"
TEMPLATES = Path(__file__).resolve().parents[1] / "_templates"
TEMPLATE_NAME = "labkit_site"
_GOALS_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)Learning goals", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*[-*+]\s+|^\s{2,}\S")
_IPYNB_LINK = re.compile(r'href="([\w-]+)\.ipynb(#[^"]*)?"')


@dataclass(frozen=True)
class Page:
    """One notebook of the learning path, as the site shows it."""

    notebook: Path
    title: str
    goals_markdown: str

    @property
    def html_name(self) -> str:
        return self.notebook.with_suffix(".html").name


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


def require_executed(path: Path, notebook: nbformat.NotebookNode) -> None:
    """The site shows stored outputs, so every code cell must have been run."""
    never_run = [
        i for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and cell.source.strip() and cell.execution_count is None
    ]
    if never_run:
        raise LabkitError(
            f"{path.name} has code cells that were never run (cell {never_run[0] + 1} first), "
            "so its page would have no outputs. Run `make notebooks` first, then `make docs`."
        )


def _exporter():
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name=TEMPLATE_NAME, extra_template_basedirs=[str(TEMPLATES)])


def _render(exporter, notebook: nbformat.NotebookNode, *, name: str, nav: dict, site_pages: set[str]) -> str:
    resources = {"metadata": {"name": name}, "labkit": {"static": STATIC_DIR, "site_title": SITE_TITLE, **nav}}
    body, _ = exporter.from_notebook_node(notebook, resources=resources)
    # Links between notebooks (``01_fx_profiling.ipynb``) point to their pages on the site.
    return _IPYNB_LINK.sub(
        lambda m: f'href="{m[1]}.html{m[2] or ""}"' if m[1] in site_pages else m[0], body
    )


def index_notebook(pages: Sequence[Page]) -> nbformat.NotebookNode:
    """The index page, written as a one-notebook learning path so it shares the pages' look."""
    parts = [
        f"# {SITE_TITLE}",
        (
            "Executable labs about PyTorch internals. Each page below is a notebook with its stored "
            "outputs and live widgets shown in their last state; to run them yourself, clone the "
            "repository and use `make lab`."
        ),
        "## Learning path",
    ]
    for number, page in enumerate(pages, start=1):
        parts.append(f"### {number}. [{page.title}]({page.html_name})")
        if page.goals_markdown:
            parts.append(page.goals_markdown)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("\n\n".join(parts))]
    notebook.metadata["title"] = SITE_TITLE
    return notebook


def build_site(notebooks_dir: str | Path, out_dir: str | Path) -> list[Page]:
    """Write ``index.html``, one page per notebook and ``_static/`` into ``out_dir``.

    The site is built completely before anything in ``out_dir`` changes. A
    rebuild replaces only the files this tool wrote and nobody changed (see
    :mod:`labkit.tools.output_folder`): an added ``custom.css`` stays, a hand-edited
    page stays with the new one beside it, and what was kept is printed. A
    folder that is not a labkit site is never written to.
    """
    notebooks_dir, out_dir = Path(notebooks_dir), Path(out_dir)
    output = OutputFolder(out_dir, tool=TOOL, marker=MARKER, what="a labkit site")
    output.inspect()
    paths = find_notebooks(notebooks_dir)
    notebooks = [read_notebook(path, write=False) for path in paths]
    for path, notebook in zip(paths, notebooks):
        require_executed(path, notebook)
    pages = [describe_notebook(path, nb) for path, nb in zip(paths, notebooks)]
    site_pages = {page.notebook.stem for page in pages}

    def build(staging: Path) -> None:
        exporter = _exporter()
        for i, (page, notebook) in enumerate(zip(pages, notebooks)):
            nav = {
                "previous": _link(pages[i - 1]) if i > 0 else None,
                "next": _link(pages[i + 1]) if i + 1 < len(pages) else None,
            }
            body = _render(exporter, notebook, name=page.title, nav=nav, site_pages=site_pages)
            (staging / page.html_name).write_text(body, encoding="utf-8")
        first = {"previous": None, "next": _link(pages[0])}
        index = _render(exporter, index_notebook(pages), name=SITE_TITLE, nav=first, site_pages=site_pages)
        (staging / "index.html").write_text(index, encoding="utf-8")
        shutil.copytree(VENDOR, staging / STATIC_DIR, ignore=shutil.ignore_patterns("README.md"))
        (staging / MARKER).write_text("built by python -m labkit docs\n", encoding="utf-8")

    for line in output.update(build).lines():
        print(f"docs: {line}")
    return pages


def _link(page: Page) -> dict[str, str]:
    return {"href": page.html_name, "title": html.escape(page.title)}


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
    print(f"docs: {len(pages)} notebook pages + index.html in {args.out_dir} (open {args.out_dir / 'index.html'})")
    return 0
