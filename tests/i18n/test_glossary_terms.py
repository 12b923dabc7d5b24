"""One word per thing: the glossary names the verdict words, the probe and step apart from stride, with the variants
that fail ``labkit i18n check`` in notebook prose and labkit's catalogues alike.

On the old main the zh exercise intros promised 已解决/尚未解决/未解决 where the checker prints 已解出/尚未解出/未解出,
ru's promised «ещё не решено» where it prints «пока не решено», zh 00 called a probe 探针, and ru 01 used шаг for a
step of the timer's three as well as for a stride; the glossary had none of these terms.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import polib
import pytest
from babel.messages.pofile import read_po, write_po

from labkit.authoring.nbrun import read_notebook
from labkit.i18n import glossary, markdown, notebooks
from labkit.i18n.message_check import LOCALE_DIR, catalogue_path, problems
from labkit.i18n.messages import translation

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
GLOSSARY = NOTEBOOKS / "i18n" / "glossary.csv"
VERDICTS = ("solved", "not yet solved", "not solved")  # the checker's words, labkit.progress.table
TERMS = {term.english: term for term in glossary.load(GLOSSARY)}


def _term(english: str) -> glossary.Term:
    return next(term for name, term in TERMS.items() if name.split(" (")[0] == english)


@pytest.mark.parametrize(("english", "lang", "variants"), [
    ("solved", "zh", {"已解决"}),
    ("not yet solved", "zh", {"尚未解决"}),
    ("not yet solved", "ru", {"ещё не решено"}),
    ("not solved", "zh", {"未解决"}),
    ("probe", "zh", {"探针"}),
    ("step", "ru", {"шаг за шагом", "третий шаг", "на этом шаге"}),
])
def test_the_glossary_forbids_the_variants_found_in_the_labs(english: str, lang: str, variants: set[str]):
    assert variants <= set(_term(english).forbidden[lang])


@pytest.mark.parametrize("lang", ["zh", "ru"])
def test_the_verdicts_the_exercise_intros_promise_are_the_ones_the_checker_prints(lang: str):
    printed = [translation(lang).gettext(word) for word in VERDICTS]
    assert printed == [_term(word).preferred[lang] for word in VERDICTS]
    intros = 0
    for path in notebooks.english_notebooks(NOTEBOOKS):
        english = {cell.id: cell.source for cell in read_notebook(path, write=False).cells}
        for entry in polib.pofile(str(notebooks.catalogue_path(NOTEBOOKS, lang, path))):
            if not entry.obsolete and "*not yet solved*" in english.get(entry.msgctxt, ""):
                intros += 1
                quoted = [f"*{word}*" for word, source in zip(printed, VERDICTS) if f"*{source}*" in entry.msgid]
                assert all(word in entry.msgstr for word in quoted), (path.name, entry.msgctxt, quoted, entry.msgstr)
    assert intros >= 4  # 00's and each lab's Exercises section


@pytest.mark.parametrize(("lang", "prose", "found"), [
    ("zh", "它会告诉你*已解决*、*尚未解决*，或者*未解决*并附上一条提示。", {"已解决", "尚未解决", "未解决"}),
    ("zh", "所以这里的探针直接在内核里运行", {"探针"}),
    ("ru", "Она сообщает *решено*, *ещё не решено* или *не решено* с подсказкой.", {"ещё не решено"}),
    ("ru", "### Честные числа, шаг за шагом", {"шаг за шагом"}),
    ("ru", "**Шаг 2: дождаться GPU.**", {"шаг 2:"}),
    ("ru", "Теперь самое плотное измерение — C (шаг 1): 3 канала одного пикселя — соседи", set()),  # a stride
    ("ru", "шаг каждого измерения — произведение размеров внутри него", set()),  # a stride
    ("zh", "练习是否已解出，下一步该做什么；检测项（probe）", set()),
])
def test_a_forbidden_variant_is_found_in_prose_and_only_there(lang: str, prose: str, found: set[str]):
    text = "\n".join(markdown.structure(prose).prose)
    named = {v for term in TERMS.values() for v in term.forbidden.get(lang, ()) if f"forbidden term {v!r}" in
             " ".join(glossary.violations([term], lang, text))}
    assert named == found


def test_labkits_catalogues_are_checked_against_the_same_terms(tmp_path: Path):
    locale_dir = tmp_path / "locale"
    shutil.copytree(LOCALE_DIR, locale_dir)
    path = catalogue_path("zh", locale_dir=locale_dir)
    with path.open("rb") as file:
        catalogue = read_po(file, locale="zh")
    catalogue["not yet solved"].string = "尚未解决"
    with path.open("wb") as file:
        write_po(file, catalogue)
    found = problems(langs=("zh",), locale_dir=locale_dir, source_dir=None, glossary_path=GLOSSARY)
    assert any("forbidden term '尚未解决'" in line and line.endswith("'not yet solved'") for line in found)


def test_no_catalogue_of_the_notebooks_or_of_labkit_uses_a_forbidden_variant():
    terms = list(TERMS.values())
    found = [str(problem) for path in notebooks.english_notebooks(NOTEBOOKS) for lang in ("zh", "ru")
             for problem in notebooks.check_catalogue(NOTEBOOKS, lang, path, read_notebook(path, write=False), terms)
             if "forbidden term" in problem.reason]
    found += [line for line in problems(source_dir=None, glossary_path=GLOSSARY) if "forbidden term" in line]
    assert found == []



def test_no_generated_notebook_shows_a_forbidden_variant_in_its_prose_or_stored_outputs():
    """The catalogues are checked above; this reads the notebooks as built (their markdown, and labkit's messages as
    the build printed them), so a notebook built from an older catalogue or run with older messages is found too."""
    terms = list(TERMS.values())
    found = [problem for path in notebooks.english_notebooks(NOTEBOOKS) for lang in ("zh", "ru")
             for problem in notebooks.check_generated(NOTEBOOKS, lang, path, read_notebook(path, write=False), terms)]
    found += [(path.name, cell.get("id"), problem) for lang in ("zh", "ru")
              for path in sorted((NOTEBOOKS / lang).glob("0*.ipynb")) for cell in read_notebook(path, write=False).cells
              if cell.cell_type == "markdown" for problem in glossary.violations(terms, lang, cell.source)]
    assert found == []


def test_i18n_check_finds_a_forbidden_variant_in_a_stored_output(tmp_path: Path):
    """A zh notebook whose stored doctor report still says 探针 (a build before glossary v3) fails the check."""
    root = tmp_path / "notebooks"
    for name in ("00_start_here.ipynb", "i18n/glossary.csv", "i18n/zh/00_start_here.po", "zh/00_start_here.ipynb"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(NOTEBOOKS / name, root / name)
    assert [str(problem) for problem in notebooks.check(root, ("zh",))] == []
    built = read_notebook(root / "zh" / "00_start_here.ipynb", write=False)
    stream = next(output for cell in built.cells for output in cell.get("outputs", [])
                  if output.output_type == "stream")
    stream.text = "所以这里的探针直接在内核里运行\n"
    nbformat.write(built, root / "zh" / "00_start_here.ipynb")
    found = [str(problem) for problem in notebooks.check(root, ("zh",))]
    assert len(found) == 1 and "stored output: forbidden term '探针' for 'probe'" in found[0], found
