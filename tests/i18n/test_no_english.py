"""No English a zh or ru learner reads outside code: the scan of every translated notebook (labkit.i18n.english_scan).

``english_left.txt`` lists what the scan still finds today, one finding a line (each is a labkit string still to
wrap in ``_()`` and translate, or a notebook not yet rebuilt): the test fails on any English phrase not listed
(new English reached a learner), naming notebook, cell and phrase, and on any listed line the scan no longer finds
(a string was translated: remove the line), so the list only shrinks.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.i18n import LANGS
from labkit.i18n.english_scan import Finding, is_python_source, phrases, scan

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[2]
LEFT = Path(__file__).with_name("english_left.txt")


def left() -> set[str]:
    return {line for line in LEFT.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")}


def found(lang: str) -> set[str]:
    return {str(finding) for path in sorted((ROOT / "notebooks" / lang).glob("0*.ipynb")) for finding in scan(path)}


@pytest.mark.parametrize("lang", LANGS)
def test_no_english_outside_code_in_the_translated_notebooks(lang: str) -> None:
    new = sorted(found(lang) - left())
    assert not new, f"{len(new)} English phrase(s) a {lang} learner reads:\n" + "\n".join(new)


@pytest.mark.parametrize("lang", LANGS)
def test_the_list_of_english_left_holds_only_what_is_still_there(lang: str) -> None:
    gone = sorted(line for line in left() - found(lang) if line.startswith(f"{lang}/"))
    assert not gone, "translated now; remove from tests/i18n/english_left.txt:\n" + "\n".join(gone)


@pytest.mark.parametrize(("text", "english"), [
    ("结果：too close to call（在误差范围内）", ["too close to call"]),
    ("<th>Time by op type</th><td>3 ms</td>", ["Time by op type"]),
    ("用 `torch.fx.symbolic_trace(model)` 追踪，见 $O(n h w)$ 与 [链接](https://x.org/a b)", []),
    ("device=cpu True False 12 ms", []),
    ("Проверка: clean model", ["clean model"]),
    ("选择 Run All Cells，然后 TraceError: Proxy object cannot be iterated", []),
])
def test_the_scan_finds_english_prose_and_passes_code(text: str, english: list[str]) -> None:
    assert list(phrases(text)) == english


def test_a_finding_names_notebook_cell_and_phrase() -> None:
    assert str(Finding("zh/02_memory_format.ipynb", "4c47a404", "text/html", "permute back")) == \
        "zh/02_memory_format.ipynb cell 4c47a404 (text/html): 'permute back'"


def test_an_output_echoing_the_cells_own_string_literals_is_code_but_labkits_words_are_not(tmp_path: Path) -> None:
    def code(source: str, printed: str) -> dict:
        return {"cell_type": "code", "id": source[:6], "source": source, "metadata": {}, "execution_count": 1,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": printed}]}
    notebook = {"cells": [code('print(n, "calls with a channels_last input")', "67 calls with a channels_last input"),
                          code("print(report)", "67 calls with a channels_last input")],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "zh" / "01.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert [(finding.cell, finding.phrase) for finding in scan(path)] == [("print(", "calls with a")]


def test_printed_python_source_is_code_but_a_printed_sentence_is_not() -> None:
    assert is_python_source('class Exp:\n    """exp with its own rules."""\n    def jvp(ctx, t):\n        return t\n')
    assert not is_python_source("the shares agree within 5 points")


def test_a_gloss_may_be_the_plural_of_a_glossary_term(tmp_path: Path) -> None:
    cell = {"cell_type": "markdown", "id": "a1", "metadata": {},
            "source": "прямые проходы (forward passes), хуки (forward hooks), пулинг (average pooling)"}
    path = tmp_path / "ru" / "01.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    assert [finding.phrase for finding in scan(path, frozenset({"forward pass", "forward hook"}))] == ["average pooling"]
