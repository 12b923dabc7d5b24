"""The plain-text tables stored in the zh and ru notebooks line up as a learner's terminal or notebook shows them.

A Chinese head (状态, 检测项) is two columns a character; a table measured in characters puts its rows a column or
more off its head. labkit's tables are measured in display columns (wcwidth, labkit.core.tables; labkit doctor's own
table, labkit.learner.doctor): this reads every stored output the way the learner sees it. It fails on a notebook
whose outputs were stored before that (zh 00's doctor table: 状态 over a rule two dashes wide).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from wcwidth import wcwidth

from labkit.authoring.nbrun import read_notebook

pytestmark = pytest.mark.torch_free  # reads notebooks only: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[2]
RULE = re.compile(r"-+(?:  -+)+")  # tabulate's "simple" format: one run of dashes per column, two spaces apart


def _display_columns(line: str) -> list[str]:
    """The characters of ``line`` by the display column they occupy (a wide character fills two)."""
    columns: list[str] = []
    for char in line:
        columns.extend([char] * max(wcwidth(char), 0))
    return columns


def _gaps(rule: str) -> list[int]:
    return [index for index, char in enumerate(rule) if char == " "]


def _clear(columns: list[str] | str, gaps: list[int]) -> bool:
    """Whether nothing stands in the gaps between the rule's columns (the line may end before some)."""
    return all(gap >= len(columns) or columns[gap] == " " for gap in gaps)


def _tables(text: str) -> list[list[str]]:
    """Each simple table in ``text``: its head, its rule, then the lines under it that are its rows, measured in
    characters or in display columns (so a table laid out by either measure is read whole, and prose after it is
    not)."""
    lines = text.splitlines()
    tables = []
    for index, line in enumerate(lines[1:], start=1):
        if RULE.fullmatch(line):
            gaps = _gaps(line)
            end = index + 1
            while end < len(lines) and lines[end].strip() and (
                    _clear(lines[end], gaps) or _clear(_display_columns(lines[end]), gaps)):
                end += 1
            tables.append(lines[index - 1:end])
    return tables


def misaligned(table: list[str]) -> list[str]:
    """The lines of ``table`` that put anything into the two-column gap between two of its rule's columns."""
    head, rule, *rows = table
    return [line for line in [head, *rows] if not _clear(_display_columns(line), _gaps(rule))]


def _stored_texts(path: Path) -> list[str]:
    texts = []
    for cell in read_notebook(path, write=False).cells:
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain")
            if text:
                texts.append(text)
    return texts


def test_a_table_measured_in_characters_is_found_misaligned():
    by_characters = ["状态  检测项", "--  ------", "正常  python"]  # what a table that counts 状态 as 2 prints
    by_columns = ["状态  检测项", "----  ------", "正常  python"]
    assert misaligned(by_characters) == ["状态  检测项", "正常  python"]
    assert misaligned(by_columns) == []


@pytest.mark.parametrize("path", sorted([*ROOT.glob("notebooks/zh/0*.ipynb"), *ROOT.glob("notebooks/ru/0*.ipynb")]),
                         ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_stored_table_lines_up_by_display_width(path: Path):
    found = [(table[0], line) for text in _stored_texts(path) for table in _tables(text) for line in misaligned(table)]
    assert found == [], f"{path.name}: rebuild it (labkit i18n build --force --lang {path.parent.name}); {found[:5]}"


def test_the_chinese_notebooks_store_tables_with_wide_characters():
    """The check above reads real wide-character tables, not only ASCII ones that cannot be off."""
    wide = [table for path in ROOT.glob("notebooks/zh/0*.ipynb") for text in _stored_texts(path)
            for table in _tables(text) if any(wcwidth(char) == 2 for char in "".join(table))]
    assert len(wide) >= 10
