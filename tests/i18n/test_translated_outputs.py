"""A translated notebook's stored outputs speak its language, and strict nbval compares them in that language.

``labkit i18n build`` executes ``notebooks/<lang>/`` with ``LABKIT_LANG=<lang>``; the repository's conftest starts
nbval's kernel for a notebook there with the same setting, and leaves English notebooks in English.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

import conftest
from labkit.i18n import LANGS
from labkit.i18n.notebooks import build, update
from tests.i18n.test_notebooks import REPO_NOTEBOOKS, english, translate_all

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

# The checkers' verdict line ("Exercise 2.1: solved."), as each catalogue words it: its start is what a reader sees.
VERDICT_START = {"zh": "练习 ", "ru": "Упражнение "}


def stored_text(path: Path) -> str:
    """Every stream and text/plain output stored in the notebook at ``path``, joined."""
    texts = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("text", "") or output.get("data", {}).get("text/plain", "")
            texts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(texts)


@pytest.mark.parametrize("lang", LANGS)
def test_the_translated_notebooks_store_the_checkers_verdicts_in_their_language(lang: str) -> None:
    text = stored_text(REPO_NOTEBOOKS / lang / "02_memory_format.ipynb")
    assert f"{VERDICT_START[lang]}2.1" in text, f"notebooks/{lang}/02_memory_format.ipynb stores English verdicts"
    assert "Exercise 2.1" not in text


@pytest.mark.parametrize("lang", LANGS)
def test_nbval_starts_a_translated_notebooks_kernel_in_its_language_and_restores_the_setting_after(
    lang: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABKIT_LANG", "en")

    class Item:  # what the hook reads of an nbval cell
        path = REPO_NOTEBOOKS / lang / "01_fx_profiling.ipynb"

    setup = conftest.pytest_runtest_setup(Item())  # a hook wrapper: runs to its yield, where nbval's setup runs
    next(setup)
    assert os.environ["LABKIT_LANG"] == lang
    with pytest.raises(StopIteration):
        next(setup)
    assert os.environ["LABKIT_LANG"] == "en"


@pytest.mark.parametrize("path", ["notebooks/01_fx_profiling.ipynb", "tests/i18n/test_notebooks.py",
                                  "notebooks/zh/solutions/01_1_x.py"])
def test_english_notebooks_and_tests_keep_english(path: str) -> None:
    assert conftest.notebook_language(conftest.ROOT / path) == "en"


@pytest.mark.slow
def test_build_executes_a_translation_with_labkit_speaking_its_language(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_LANG", "en")
    (tmp_path / "i18n").mkdir()
    (tmp_path / "i18n" / "glossary.csv").write_bytes((REPO_NOTEBOOKS / "i18n" / "glossary.csv").read_bytes())
    english(tmp_path, code="from labkit.i18n.messages import _, language\nprint(language(), _('Exercise {exercise}: {status}.'))")
    update(tmp_path, ["zh"])
    translate_all(tmp_path)
    (line,) = build(tmp_path, ["zh"])
    assert line.startswith("ok"), line
    made = nbformat.read(tmp_path / "zh" / "09_tiny.ipynb", as_version=4)
    assert made.cells[1].outputs[0]["text"] == "zh 练习 {exercise}：{status}。\n"
    assert os.environ["LABKIT_LANG"] == "en"
