"""Hosted notebooks (Colab and the like): ``python -m labkit hosted [--write] [PATH ...]``.

Why: on Colab a notebook opened from GitHub runs in a machine that has torch but
no labkit. So each notebook's first code cell starts with a few lines that
install labkit where it is missing (``pip install "torch-labkit @ git+URL"``, one
command, or ``pip install torch-labkit`` while no repository is configured), keeping
the torch and torchvision the platform has when labkit runs on them
(:data:`labkit.learner.doctor.TESTED_RANGE`), and say what they did. Where
labkit is importable they only look it up (no network, no output), so strict
nbval and every other run see the cell as it was. Those lines are written by
this tool from one template (:func:`install_block`), never by hand, and every
link to the repository comes from one setting, :data:`labkit.labs.REPOSITORY_URL`:
the install line, the "Open in Colab" and Binder links of the README (a block between two
marker lines, :func:`readme_block`) and the Colab link of the docs site (``docs/_ext/labkit_hosted.py``).
While that setting is None (no public repository yet) no such link is made at all: a link
that cannot work is worse than none, and the README's block says, in a comment, what to set.
Change the setting or the template, then run ``python -m labkit hosted --write``
(and re-execute the notebooks); without ``--write`` the tool checks that every
notebook and the README hold the current version (a test does the same).

Untested here: Colab itself (no Colab in CI). What is tested is everything up to
it: the cell is current in every notebook, does nothing where labkit is installed,
and a notebook alone in an empty folder runs top to bottom with labkit from its wheel.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import write_text
from labkit.labs import DISTRIBUTION, NOTEBOOKS_DIR, REPOSITORY_BRANCH, REPOSITORY_URL, checkout_needed, find_notebooks
from labkit.learner.doctor import TESTED_RANGE

if TYPE_CHECKING:
    import nbformat

SETUP_LINE = "import labkit"  # the install lines go above it, in the notebook's first code cell
README = NOTEBOOKS_DIR.parent / "README.md"
README_START = "<!-- labkit-hosted: written by `python -m labkit hosted --write` from labkit.labs.REPOSITORY_URL -->"
README_END = "<!-- /labkit-hosted -->"
COLAB = "https://colab.research.google.com/github/"
BINDER = "https://mybinder.org/v2/gh/"
#: What the README's block says, as a comment, while no repository is configured.
UNCONFIGURED = ("<!-- No Colab or Binder links: labkit.labs.REPOSITORY_URL is not set. Set it to the public repository's "
                "GitHub address, then run `python -m labkit hosted --write`. -->")
_GITHUB = re.compile(r"^https://github\.com/([\w.-]+/[\w.-]+?)/?$")

# $tested: (dist, oldest, newest) of TESTED_RANGE; $requirement: the pip requirement of labkit from its repository.
_INSTALL_TEMPLATE = Template(r'''
# Where labkit is missing (Colab, another hosted notebook) these lines install it; where it is installed they do nothing.
# (Written by `python -m labkit hosted --write` from labkit/authoring/hosted.py: change it there, not here.)
import importlib.util

if importlib.util.find_spec("labkit") is None:
    import importlib.metadata, re, subprocess, sys

    def release(version):
        return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])

    keep = []  # the platform's own torch and torchvision, kept when labkit runs on them (no download)
    for dist, oldest, newest in $tested:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            print(f"no {dist} here: pip installs one (a large download)")
            continue
        if release(version) < release(oldest):
            print(f"{dist} {version} is older than labkit's tested {oldest} to {newest}: pip installs a newer one")
            continue
        keep.append(f"{dist}=={version}")
        tested = release(version)[:2] <= release(newest)[:2]
        print(f"keeping {dist} {version}" + ("" if tested else f" (newer than labkit's tested {newest}: untested)"))
    requirements = ["$requirement", *keep]
    print("installing labkit: pip install", " ".join(repr(requirement) for requirement in requirements))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *requirements], check=True)
    importlib.invalidate_caches()
    print("labkit installed. If a widget then shows an error, restart the session and run the notebook again.")
''')


def pip_requirement() -> str:
    """labkit as pip takes it: from its repository (``torch-labkit @ git+URL``) when one is configured, else by name."""
    return DISTRIBUTION if REPOSITORY_URL is None else f"{DISTRIBUTION} @ git+{REPOSITORY_URL}"


def repository_page(path: str) -> str | None:
    """The repository's page of ``path`` (a folder or file of the checkout) on the branch the links open; None without one."""
    return None if REPOSITORY_URL is None else f"{REPOSITORY_URL}/tree/{REPOSITORY_BRANCH}/{path}"


def repository_link(path: str) -> str:
    """Markdown naming ``path`` of labkit's repository: a link to its page, or the path alone while none is configured."""
    page = repository_page(path)
    return f"`{path}/`" if page is None else f"<{page}>"


def _github_name() -> str | None:
    """``OWNER/NAME`` of the configured repository; None without one. Raises for a repository not on GitHub."""
    if REPOSITORY_URL is None:
        return None
    match = _GITHUB.match(REPOSITORY_URL)
    if match is None:
        raise LabkitValueError(f"Colab and Binder open notebooks from GitHub, and labkit.labs.REPOSITORY_URL is "
                               f"{REPOSITORY_URL!r}: set it to the repository's https://github.com/OWNER/NAME address.")
    return match[1]


def colab_url(notebook: str) -> str | None:
    """The address that opens ``notebooks/<notebook>`` of the repository in Colab; None while no repository is set."""
    name = _github_name()
    return None if name is None else f"{COLAB}{name}/blob/{REPOSITORY_BRANCH}/notebooks/{Path(notebook).name}"


def binder_url() -> str | None:
    """The address that opens the learner workspace (made by ``postBuild``) on Binder; None while no repository is set."""
    name = _github_name()
    return None if name is None else f"{BINDER}{name}/HEAD?urlpath=lab/tree/workspace/00_start_here.ipynb"


def install_block() -> str:
    """The lines each notebook's first code cell starts with (see the module's docstring)."""
    tested = [(dist, oldest, newest) for dist, (oldest, newest) in TESTED_RANGE.items()]
    return _INSTALL_TEMPLATE.substitute(tested=repr(tested), requirement=pip_requirement()).removeprefix("\n")


def with_install_block(source: str) -> str:
    """``source`` (a first code cell) with the current install lines above its ``import labkit`` line.

    Earlier install lines (everything above that line) are replaced. Raises
    :class:`LabkitValueError` when the cell has no ``import labkit`` line.
    """
    lines = source.splitlines(keepends=True)
    setup = next((index for index, line in enumerate(lines) if line.rstrip() == SETUP_LINE), None)
    if setup is None:
        raise LabkitValueError(f"its first code cell has no line '{SETUP_LINE}' (CONTRIBUTING.md: it sets up the notebook), "
                               "so there is nowhere to put the install lines.")
    return install_block() + "".join(lines[setup:])


def _first_code_cell(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cell = next((cell for cell in notebook.cells if cell.cell_type == "code"), None)
    if cell is None:
        raise LabkitValueError("it has no code cell, so there is nowhere to put the install lines.")
    return cell


def notebook_is_current(notebook: nbformat.NotebookNode) -> bool:
    """Whether the notebook's first code cell starts with the current install lines, right above ``import labkit``."""
    source = _first_code_cell(notebook).source
    return source.startswith(install_block()) and source[len(install_block()):].startswith(SETUP_LINE + "\n")


def readme_block(notebooks: Sequence[str]) -> str:
    """The README's block (markers included): how a pip user installs labkit, and where a repository is configured,
    each notebook's "Open in Colab" link and the Binder link."""
    requirement = pip_requirement()
    pip_line = f'pip install "{requirement}"' if " " in requirement else f"pip install {requirement}"
    install = [README_START, "", "```bash", pip_line,
               "labkit lab      # creates workspace/ here (blank exercises) and starts JupyterLab on it", "```", ""]
    binder = binder_url()
    if binder is None:
        return "\n".join([*install, UNCONFIGURED, README_END])
    rows = [f"| `{Path(name).stem}` | [Open in Colab]({colab_url(name)}) |" for name in notebooks]
    return "\n".join([*install, "| notebook | Colab |", "| --- | --- |", *rows, "",
                      f"Or the whole learner workspace on Binder: [Open on Binder]({binder})", README_END])


def _readme_text(path: Path, notebooks: Sequence[str]) -> str:
    """``path``'s text with its block replaced by the current one."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise LabkitValueError(f"it has no block from '{README_START}' to '{README_END}': "
                               "put those two lines where the install lines and the Colab links belong.")
    return text[:start] + readme_block(notebooks) + text[end + len(README_END):]


def planned_text(path: Path, notebooks: Sequence[str]) -> str | None:
    """The text ``path`` (a notebook, or a README with the block) should hold, or None when it is current.

    ``notebooks``: the names the README links (the labs, in the registry's order). Raises
    :class:`LabkitValueError` naming ``path`` when it has no place for the install lines or the links.
    """
    try:
        if path.suffix == ".md":
            text = _readme_text(path, notebooks)
            return None if text == path.read_text(encoding="utf-8") else text
        from labkit.authoring.nbrun import read_notebook  # nbclient: only for a notebook to read

        notebook = read_notebook(path, write=False)  # its own errors name the path
        cell = _first_code_cell(notebook)
        if notebook_is_current(notebook):
            return None
        cell.source = with_install_block(cell.source)
        import nbformat

        text = nbformat.writes(notebook)
        return text if text.endswith("\n") else text + "\n"  # as nbformat.write (make notebooks) writes it
    except LabkitValueError as exc:
        if str(path) in str(exc):
            raise
        raise LabkitValueError(f"{path}: {exc}") from None
    except OSError as exc:
        raise LabkitValueError(f"{path}: cannot read it ({exc.strerror or exc}).") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", type=Path, nargs="*", metavar="PATH",
        help="notebooks (.ipynb) and READMEs (.md) to check or write (default: every notebook in notebooks/, and README.md)",
    )
    parser.add_argument("--write", action="store_true",
                        help="write the current install lines and Colab links (else only check, exit 1 if one is old)")


def run(args: argparse.Namespace) -> int:
    try:
        labs = find_notebooks(NOTEBOOKS_DIR) if NOTEBOOKS_DIR.is_dir() else []
        paths = args.paths or [*labs, README]
        if not labs and not args.paths:
            raise checkout_needed("hosted", "it checks the install lines of notebooks/ and README.md there; or give it "
                                            "the notebooks and README to check")
        names = [path.name for path in labs]
        planned = {path: planned_text(path, names) for path in paths}  # every file checked before one is written
        changes = {path: text for path, text in planned.items() if text is not None}
        for path, text in changes.items() if args.write else ():
            write_text(path, text)
    except LabkitError as exc:
        print(f"hosted: {exc}", file=sys.stderr)
        return 2
    for path in changes:
        print(f"hosted: {'wrote' if args.write else 'out of date:'} {path}")
    if changes and not args.write:
        print("hosted: run `python -m labkit hosted --write`, then re-execute the notebooks it names", file=sys.stderr)
        return 1
    if not changes:
        print(f"hosted: {len(paths)} files hold the current install lines and links")
    return 0
