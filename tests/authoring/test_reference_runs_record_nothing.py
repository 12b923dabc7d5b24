"""Building or checking the reference material writes nothing into the author's own progress journal.

An author's ``~/.local/share/labkit/progress.jsonl`` once held 765 checker verdicts: ``make bench`` executes the solved
notebooks through :func:`labkit.authoring.nbrun.execute_notebook` without ``LABKIT_PROGRESS=off`` (only ``labkit
notebooks`` and ``labkit i18n build`` set it, in their own process), and ``python -m tests.mistakes.instructors`` runs
every catalogue entry outside pytest. Outside a workspace a verdict goes to the platform's user data folder, under
HOME: here HOME is a folder of the test's, and nothing may appear in it. Each test first shows that the same code,
run as a learner runs it, does write there, so that it cannot pass for a setup that records nowhere.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.authoring.nbrun import execute_notebook
from labkit.progress import journal
from tests.mistakes import instructors

#: A checker cell, as the labs have them: it judges an answer and records the verdict.
CHECKER_CELL = "from labkit.core.checks import run_check\nprint(run_check('1.1', lambda: 'judged'))"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


@pytest.fixture
def author_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An author's machine: HOME in tmp_path, no LABKIT_PROGRESS (pytest turns it off), outside any workspace."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", journal.ENVIRONMENT):
        monkeypatch.delenv(name, raising=False)
    for name in ("IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR"):  # the kernel's own files, kept out of HOME
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    work = tmp_path / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def _journals(home: Path) -> list[str]:
    return sorted(str(path.relative_to(home)) for path in home.rglob(journal.FILE))


@pytest.mark.slow
def test_executing_a_reference_notebook_records_no_verdict(author_home: Path):
    learner = subprocess.run([sys.executable, "-c", CHECKER_CELL], capture_output=True, text=True, timeout=300)
    assert "Exercise 1.1: solved" in learner.stdout, learner.stderr
    assert _journals(author_home) == [".local/share/labkit/progress.jsonl"], "a learner's run records its verdict"
    (author_home / ".local/share/labkit/progress.jsonl").unlink()
    notebook = Path.cwd() / "lab.ipynb"
    cell = nbformat.v4.new_code_cell(CHECKER_CELL)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": KERNELSPEC}), notebook)
    execute_notebook(notebook)
    assert "Exercise 1.1: solved" in nbformat.read(notebook, as_version=4).cells[0].outputs[0].text
    assert _journals(author_home) == []


def test_writing_the_instructors_tables_records_no_verdict(author_home: Path, monkeypatch: pytest.MonkeyPatch):
    entry = next(mistake for mistake in instructors.all_mistakes() if mistake.exercise == "2.1")
    entry.answer()  # as a learner's kernel would: recorded
    assert _journals(author_home) == [".local/share/labkit/progress.jsonl"]
    (author_home / ".local/share/labkit/progress.jsonl").unlink()
    monkeypatch.setattr(instructors, "all_mistakes", lambda: [entry])  # one entry is enough to record
    assert instructors.main(["--check"]) == 1  # its table alone is not the guide's: nothing written, only compared
    assert _journals(author_home) == []
