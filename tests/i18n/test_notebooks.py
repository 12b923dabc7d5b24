"""python -m labkit i18n: catalogues from the English notebooks, generated translations, and the check that fails.

Each test works in a scratch copy (tmp_path): a small English notebook with its zh catalogue, or the repository's
own notebooks folder where the test changes an English sentence.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import polib
import pytest

from labkit.__main__ import main
from labkit.i18n import notebooks
from labkit.i18n.notebooks import build, check, update

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

REPO_NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
GLOSSARY = REPO_NOTEBOOKS / "i18n" / "glossary.csv"
INTRO = "# 09 · A tiny lab\n\nA **tensor** has a `stride()`; see [the docs](https://pytorch.org/docs) and $y = Jv$."
STEPS = "## Steps\n\n- make a tensor;\n- read its strides.\n\n```python\nx.stride()\n```"
ZH = {
    "intro": "# 09 · 小实验\n\n**张量（tensor）**有 `stride()`；参见[文档](https://pytorch.org/docs)和 $y = Jv$。",
    "steps": "## 步骤\n\n- 创建一个张量；\n- 读出它的步幅。\n\n```python\nx.stride()\n```",
}


def english(root: Path, intro: str = INTRO, code: str = "x = 1 + 1\nprint(x)") -> Path:
    """Write the English notebook ``root/09_tiny.ipynb``: two markdown cells, one code cell, one empty markdown cell."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell(intro, id="intro"),
        nbformat.v4.new_code_cell(code, id="code"),
        nbformat.v4.new_markdown_cell(STEPS, id="steps"),
        nbformat.v4.new_markdown_cell("", id="empty"),
    ]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "09_tiny.ipynb"
    nbformat.write(notebook, path)
    return path


def catalogue(root: Path) -> polib.POFile:
    return polib.pofile(str(root / "i18n" / "zh" / "09_tiny.po"))


def translate_all(root: Path, texts: dict[str, str] = ZH) -> None:
    """Fill the zh catalogue as a translator would: msgstr set, fuzzy flag removed."""
    po = catalogue(root)
    for entry in po:
        if entry.msgctxt in texts:
            entry.msgstr = texts[entry.msgctxt]
            if "fuzzy" in entry.flags:
                entry.flags.remove("fuzzy")
    po.save()


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A notebooks folder whose one English notebook is translated into zh and built (not executed): check passes."""
    (tmp_path / "i18n").mkdir()
    shutil.copy(GLOSSARY, tmp_path / "i18n" / "glossary.csv")
    english(tmp_path)
    update(tmp_path, ["zh"])
    translate_all(tmp_path)
    assert all(line.startswith("ok") for line in build(tmp_path, ["zh"], execute=False))
    assert check(tmp_path, ["zh"]) == []
    return tmp_path


def reasons(root: Path) -> list[str]:
    return [str(problem) for problem in check(root, ["zh"])]


def test_update_makes_one_entry_per_markdown_cell_keyed_by_cell_id(tmp_path: Path) -> None:
    english(tmp_path)
    update(tmp_path, ["zh"])
    po = catalogue(tmp_path)
    assert [(e.msgctxt, e.msgid, e.msgstr) for e in po] == [("intro", INTRO, ""), ("steps", STEPS, "")]
    assert po.metadata["Language"] == "zh"


def test_an_untranslated_entry_fails_naming_notebook_cell_and_english(tmp_path: Path) -> None:
    (tmp_path / "i18n").mkdir()
    shutil.copy(GLOSSARY, tmp_path / "i18n")
    english(tmp_path)
    update(tmp_path, ["zh"])
    translate_all(tmp_path, {"intro": ZH["intro"]})
    found = reasons(tmp_path)
    assert found == ['09_tiny.ipynb [zh], cell steps ("## Steps - make a tensor; - read its strides. ```python x.s…"): '
                     "no translation",
                     f"{tmp_path / 'zh' / '09_tiny.ipynb'}: not generated; run make i18n-build"]


def test_build_refuses_an_unfinished_catalogue(tmp_path: Path) -> None:
    english(tmp_path)
    update(tmp_path, ["zh"])
    (line,) = build(tmp_path, ["zh"], execute=False)
    assert line.startswith("skipped") and "2 markdown cell(s) have no finished zh translation" in line
    assert not (tmp_path / "zh" / "09_tiny.ipynb").exists()


def test_generated_notebook_keeps_code_cells_byte_identical_and_says_what_it_came_from(lab: Path) -> None:
    source = nbformat.read(lab / "09_tiny.ipynb", as_version=4)
    made = nbformat.read(lab / "zh" / "09_tiny.ipynb", as_version=4)
    assert [(c.id, c.cell_type) for c in made.cells] == [(c.id, c.cell_type) for c in source.cells]
    assert made.cells[1].source == source.cells[1].source
    assert [made.cells[0].source, made.cells[2].source, made.cells[3].source] == [ZH["intro"], ZH["steps"], ""]
    meta = made.metadata["labkit_i18n"]
    assert meta["language"] == "zh" and meta["translated_from"] == "09_tiny.ipynb"
    assert meta["source_sha256"] == notebooks.source_hash(source)
    assert (lab / "zh" / "solutions").is_symlink() is False  # no solutions/ folder here, so no link


def test_build_leaves_an_up_to_date_notebook_alone_unless_forced(lab: Path) -> None:
    assert list(build(lab, ["zh"], execute=False)) == [f"up to date {lab / 'zh' / '09_tiny.ipynb'}"]
    assert list(build(lab, ["zh"], execute=False, force=True)) == [f"ok {lab / 'zh' / '09_tiny.ipynb'} (not executed)"]


def test_a_changed_english_sentence_makes_the_entry_fuzzy_and_the_check_fail(lab: Path) -> None:
    changed = INTRO.replace("A **tensor** has", "Every **tensor** has")
    english(lab, intro=changed)
    found = reasons(lab)
    assert any("cell intro" in r and "the English changed since the catalogue was updated" in r for r in found)
    assert any("zh/09_tiny.ipynb" in r and "out of date with 09_tiny.ipynb" in r for r in found)
    update(lab, ["zh"])
    (entry, _) = catalogue(lab)
    assert "fuzzy" in entry.flags and entry.previous_msgid == INTRO and entry.msgid == changed
    assert any('cell intro ("# 09 · A tiny lab Every **tensor** has' in r and "fuzzy" in r for r in reasons(lab))
    translate_all(lab)  # the translator reviews it and clears the flag
    build(lab, ["zh"], execute=False).__next__()
    assert check(lab, ["zh"]) == []


def test_a_removed_english_cell_becomes_obsolete(lab: Path) -> None:
    notebook = nbformat.read(lab / "09_tiny.ipynb", as_version=4)
    del notebook.cells[2]
    nbformat.write(notebook, lab / "09_tiny.ipynb")
    update(lab, ["zh"])
    assert [(e.msgctxt, e.obsolete) for e in catalogue(lab)] == [("intro", False), ("steps", True)]


def test_a_generated_notebook_older_than_its_english_source_fails(lab: Path) -> None:
    english(lab, code="x = 2 + 2\nprint(x)")  # a code change: no catalogue entry moves, the notebook is stale
    made = lab / "zh" / "09_tiny.ipynb"
    assert reasons(lab) == [f"{made}: out of date with 09_tiny.ipynb (its content hash differs "
                            "from the one this notebook was translated from); run make i18n-update and i18n-build",
                            f'{made}, cell code ("x = 2 + 2 print(x)"): code cell differs from English']


def test_a_generated_notebook_older_than_its_catalogue_fails(lab: Path) -> None:
    translate_all(lab, {"steps": ZH["steps"].replace("创建", "新建")})
    assert reasons(lab) == [f"{lab / 'zh' / '09_tiny.ipynb'}: out of date with its catalogue "
                            f"{lab / 'i18n' / 'zh' / '09_tiny.po'}; run make i18n-build"]


def test_a_code_cell_changed_in_the_translation_fails(lab: Path) -> None:
    path = lab / "zh" / "09_tiny.ipynb"
    made = nbformat.read(path, as_version=4)
    made.cells[1].source = "x = 1 + 1\nprint(x)  # 打印"
    nbformat.write(made, path)
    assert reasons(lab) == [f'{path}, cell code ("x = 1 + 1 print(x)"): code cell differs from English']


@pytest.mark.parametrize(("intro", "expected"), [
    (ZH["intro"].replace("`stride()`", "stride()"), "inline code differs; missing 'stride()'"),
    (ZH["intro"].replace("(https://pytorch.org/docs)", "(https://pytorch.org/cn)"), "link targets differ"),
    (ZH["intro"].replace("$y = Jv$", "$y=J v$"), "math differs"),
    (ZH["intro"].replace("# 09", "## 09"), "headings differ: levels [1] in English, [2] here"),
    (ZH["intro"] + " <!-- extra -->", "HTML differs; not in English '<!-- extra -->'"),
])
def test_a_translation_whose_structure_differs_fails(lab: Path, intro: str, expected: str) -> None:
    translate_all(lab, {"intro": intro})
    (problem,) = [r for r in reasons(lab) if "structure" in r]
    assert 'cell intro ("# 09 · A tiny lab A **tensor** has' in problem and expected in problem


@pytest.mark.parametrize(("steps", "expected"), [
    (ZH["steps"].replace("- 读出它的步幅。", "读出它的步幅。"), "list items differ: 2 in English, 1 here"),
    (ZH["steps"].replace("\n\n```python\nx.stride()\n```", "`x.stride()`"), "code blocks differ: 1 in English, 0 here"),
])
def test_lists_and_code_blocks_are_counted(lab: Path, steps: str, expected: str) -> None:
    translate_all(lab, {"steps": steps})
    assert any("cell steps" in r and expected in r for r in reasons(lab))


def test_a_forbidden_glossary_term_fails_but_not_inside_code(lab: Path) -> None:
    translate_all(lab, {"intro": ZH["intro"].replace("**张量（tensor）**", "**双张量**")})
    found = [r for r in reasons(lab) if "forbidden term" in r]
    assert found == [f'09_tiny.ipynb [zh], cell intro ("{notebooks.excerpt(INTRO)}"): forbidden term \'双张量\' for '
                     f"'dual tensor': write '对偶张量' (dual numbers are 对偶数 / дуальные числа; the seed's 双张量 reads "
                     "as 'two tensors' (issue 36))"]
    english(lab, intro=INTRO + " `双张量`")  # the same characters as code: not prose, not the glossary's business
    update(lab, ["zh"])
    translate_all(lab, {"intro": ZH["intro"] + " `双张量`"})
    assert not any("forbidden term" in r for r in reasons(lab))


def test_the_cli_check_exits_1_and_names_the_cell(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["i18n", "check", "--lang", "zh", "--notebooks-dir", str(lab)]) == 0
    english(lab, intro=INTRO.replace("see", "read"))
    assert main(["i18n", "check", "--lang", "zh", "--notebooks-dir", str(lab)]) == 1
    assert "09_tiny.ipynb [zh], cell intro" in capsys.readouterr().err


def test_the_cli_outside_a_checkout_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["i18n", "check", "--notebooks-dir", str(tmp_path)]) == 2
    assert "holds no English notebooks (0*.ipynb): run this in a checkout" in capsys.readouterr().err


def test_a_changed_sentence_in_a_copy_of_the_repository_fails_the_check(tmp_path: Path) -> None:
    root = tmp_path / "notebooks"
    shutil.copytree(REPO_NOTEBOOKS, root, symlinks=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    path = root / "00_start_here.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and "Welcome to **labkit**" in c.source)
    cell.source = cell.source.replace("Welcome to **labkit**", "Welcome, reader, to **labkit**")
    nbformat.write(notebook, path)
    found = [str(p) for p in check(root, ["zh"])]
    assert f'00_start_here.ipynb [zh], cell {cell.id} ("# 00 · Start here Welcome, reader, to **labkit**, a set of …"): ' \
           "the English changed since the catalogue was updated; run make i18n-update" in found


def test_the_repository_translations_are_finished_and_current() -> None:
    assert [str(p) for p in check(REPO_NOTEBOOKS)] == []


@pytest.mark.slow
def test_build_executes_the_translation_in_its_folder_where_solutions_resolve(lab: Path) -> None:
    (lab / "solutions").mkdir()
    (lab / "solutions" / "09_1_tiny.py").write_text("ANSWER = 42\n")
    english(lab, code="print(open('solutions/09_1_tiny.py').read().strip())")
    update(lab, ["zh"])
    (line,) = build(lab, ["zh"])
    assert line.startswith("ok")
    made = nbformat.read(lab / "zh" / "09_tiny.ipynb", as_version=4)
    assert made.cells[1].outputs[0]["text"] == "ANSWER = 42\n"
    assert check(lab, ["zh"]) == []
