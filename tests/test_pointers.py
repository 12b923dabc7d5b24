"""Every pointer a reader follows leads somewhere that exists for that reader.

A newcomer outside a clone was sent to a README section that had moved to the docs ("see *Troubleshooting* in
labkit's README") and to a docs site only a clone can build. These tests resolve what the README, the docs pages,
CONTRIBUTING, INSTRUCTORS and the notebooks point at: a section of the README, a page of the docs site, a `make`
target, a `labkit` command; and they check that the README gives a pip reader a way on that needs no clone.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import COMMANDS

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parent.parent
PROSE = ("README.md", "CONTRIBUTING.md", "INSTRUCTORS.md", "docs/*.md", "workshop/README.md")
NOTEBOOKS = ("notebooks/[0-9][0-9]_*.ipynb", "notebooks/zh/[0-9][0-9]_*.ipynb", "notebooks/ru/[0-9][0-9]_*.ipynb")
MAKE = re.compile(r"`(?:sudo )?make ([a-z][\w-]*)")
LABKIT = re.compile(r"`(?:\.venv/bin/)?(?:python3? -m )?labkit ([a-z][\w-]*)")
# "see *Troubleshooting* in labkit's README", "the troubleshooting section of the repository's README"
README_SECTION = (re.compile(r"\*([^*\n]+)\*\s+(?:section\s+)?in\s+(?:labkit's |the repository's |its )?README\b"),
                  re.compile(r"the ([\w ]+?) section of (?:labkit's |the repository's |its )?README\b"))


def texts() -> dict[str, str]:
    """What a reader reads, by file: the prose files whole, a notebook's markdown cells."""
    found = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
             for pattern in PROSE for path in sorted(ROOT.glob(pattern))}
    for pattern in NOTEBOOKS:
        for path in sorted(ROOT.glob(pattern)):
            cells = nbformat.read(path, as_version=4).cells
            found[path.relative_to(ROOT).as_posix()] = "\n\n".join(c.source for c in cells if c.cell_type == "markdown")
    return found


def readme_headings() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return {line.lstrip("#").strip().lower() for line in readme.splitlines() if line.startswith("#")}


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.MULTILINE))


def readme_section(title: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(f"## {title}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start:end if end > 0 else None]


def test_every_readme_section_a_page_or_notebook_names_is_in_the_readme():
    headings = readme_headings()
    missing = {name: sorted({match for pattern in README_SECTION for match in pattern.findall(text)
                             if match.strip().lower() not in headings})
               for name, text in texts().items()}
    assert not {name: found for name, found in missing.items() if found}, f"README headings: {sorted(headings)}"


@pytest.mark.parametrize("pattern", README_SECTION)
def test_the_section_pointer_patterns_catch_the_old_pointers(pattern):
    old = ("or see *Troubleshooting* in labkit's README (the repository's `README.md`)",
           "or see the troubleshooting section of the repository's README, which says what to install.")
    assert any(pattern.search(text) for text in old)


def test_every_make_target_named_is_in_the_makefile():
    targets = make_targets()
    unknown = {name: sorted(set(MAKE.findall(text)) - targets) for name, text in texts().items()}
    assert not {name: found for name, found in unknown.items() if found}


def test_every_labkit_command_named_is_a_command():
    unknown = {name: sorted(set(LABKIT.findall(text)) - set(COMMANDS)) for name, text in texts().items()}
    assert not {name: found for name, found in unknown.items() if found}


def test_the_docs_pages_the_readme_names_are_pages_of_the_site():
    titles = {path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip() for path in (ROOT / "docs").glob("*.md")}
    named = set(re.findall(r"(?<!\*)\*([A-Z][^*\n]+)\*(?!\*)", readme_section("Where to go next")))  # italic, not bold
    assert named and named <= titles, f"not a page of the site: {sorted(named - titles)}"


def test_where_to_go_next_gives_a_pip_reader_a_way_without_a_clone():
    """The docs site is built in a clone (`make docs`); a pip install has no make and no docs/."""
    paragraphs = readme_section("Where to go next").split("\n\n")
    site = next(p for p in paragraphs if "make docs" in p)
    assert "In a clone" in site
    pip = [p for p in paragraphs if "pip" in p and "make" not in p]
    assert pip, "no paragraph tells a pip reader where to go on"
    assert set(LABKIT.findall(pip[0])) <= set(COMMANDS) and "labkit doctor" in pip[0]


def test_the_pypi_line_is_marked_as_after_publication():
    """`pip install torch-labkit` answers "No matching distribution" until labkit is published."""
    section = readme_section("Or install it with pip")
    before_pypi_line = section[:section.index("pip install torch-labkit")]
    assert "not published on PyPI yet" in before_pypi_line and "make dist" in before_pypi_line
    assert "After publication" in before_pypi_line
