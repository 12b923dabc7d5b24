"""labkit's own messages in the learner's language (labkit.i18n.messages) and the check of their catalogues.

The verdicts are read from real checker calls; the check's faults are made in a scratch copy of labkit/locale.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pytest
import tomllib
from babel.messages.pofile import read_po, write_po

import labkit
from labkit.__main__ import main
from labkit.core.checks import fixed_draws
from labkit.core.errors import LabkitValueError
from labkit.i18n import message_check, messages, notebooks
from labkit.i18n.message_check import catalogue_path, fields, problems
from labkit.i18n.messages import LOCALE_DIR, language
from labkit.learner.workspace import prepare_workspace
from labkit.memory_format.checks import check_predict_strides
from labkit.progress.table import progress_table

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "notebooks" / "i18n" / "glossary.csv"
TRANSLATED = ("zh", "ru")


class _Value:
    """A value for any placeholder: every format spec and conversion of a template accepts it."""

    def __format__(self, spec: str) -> str:
        return "X"

    def __repr__(self) -> str:
        return "X"


def ones(shape: tuple[int, ...], memory_format: str) -> tuple[int, ...]:
    """A wrong answer to exercise 2.1: every stride 1."""
    return (1,) * len(shape)


@pytest.fixture(autouse=True)
def no_language_but_the_tests(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No language from the machine running the tests, and no journal written."""
    for variable in ("LABKIT_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(messages.locale, "getlocale", lambda *args: (None, None))
    monkeypatch.setenv("LABKIT_PROGRESS", "off")
    monkeypatch.chdir(tmp_path)


def test_a_wrong_answer_reads_in_the_learners_language_and_follows_a_change_in_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with fixed_draws(7):  # the same shapes both times
        english = str(check_predict_strides(ones))
    assert english.startswith("❌ Exercise 2.1: not solved. For shape ")
    assert 'Stuck? labkit.hint("2.1") gives the next hint.' in english

    monkeypatch.setenv("LABKIT_LANG", "zh")
    chinese = check_predict_strides(ones)
    assert str(chinese).startswith("❌ 练习 2.1：未解出。 对 ")  # the checker's own hint too, its values as they are
    assert "，torch 给出的是 (" in str(chinese) and "For shape" not in str(chinese)
    assert '卡住了？labkit.hint("2.1") 会给出下一条提示。' in str(chinese)
    assert chinese.status.value == "not solved"  # what the journal and the board record stays English

    monkeypatch.setenv("LABKIT_LANG", "ru")
    assert "2.1" in str(check_predict_strides(ones)) and "Exercise" not in str(check_predict_strides(ones))
    monkeypatch.setenv("LABKIT_LANG", "en")
    with fixed_draws(7):
        again = str(check_predict_strides(ones))
    assert again == english


def test_a_stub_the_hints_and_the_progress_table_in_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    def stub(shape: tuple[int, ...], memory_format: str) -> tuple[int, ...]:
        raise NotImplementedError("Exercise 2.1: predict the strides")

    monkeypatch.setenv("LABKIT_LANG", "zh")
    assert (
        str(check_predict_strides(stub))
        == "⏳ 练习 2.1：尚未解出。 把抛出 NotImplementedError 的占位代码换成你的代码，然后再运行这个单元格。"
    )
    first = labkit.hint("2.1", level=1)
    assert str(first).startswith("练习 2.1 的提示：点拨: 在每种格式里")
    assert '还是卡住了？再运行一次 hint("2.1")：下一条提示给出看哪里。' in str(first)
    table = str(progress_table("ada", [], "journal.jsonl", exercises=("2.1",)))
    assert "ada 的进度（journal.jsonl）" in table and "未开始" in table and "已解出 0/1。" in table


@pytest.mark.parametrize(
    "value, expected", [("zh", "zh"), ("zh_CN.UTF-8", "zh"), ("ru-RU", "ru"), ("EN", "en"), ("fr", "en"), ("klingon", "en")]
)
def test_labkit_lang_is_read_as_a_language_and_anything_unknown_is_english(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("LABKIT_LANG", value)
    assert language() == expected


def test_the_language_comes_from_the_environment_then_the_workspace_then_the_system(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert language() == "en"  # nothing set anywhere
    monkeypatch.setattr(messages.locale, "getlocale", lambda *args: ("ru_RU", "UTF-8"))
    assert language() == "ru"
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")  # the variables before getlocale, as gettext reads them
    assert language() == "zh"
    monkeypatch.setenv("LC_ALL", "C")  # the first one set decides: C is no language of labkit's
    assert language() == "en"

    notebooks = tmp_path / "workspace" / "notebooks"
    notebooks.mkdir(parents=True)
    manifest = tmp_path / "workspace" / ".labkit-manifest.json"
    manifest.write_text(json.dumps({"tool": "workspace", "language": "ru"}), encoding="utf-8")
    monkeypatch.chdir(notebooks)  # a kernel runs in the notebook's folder, inside the workspace
    assert language() == "ru"
    manifest.write_text(json.dumps({"tool": "workspace"}), encoding="utf-8")  # a workspace from before the field
    assert language() == "en"
    manifest.write_text("{not json", encoding="utf-8")
    assert language() == "en"
    manifest.write_text(json.dumps({"language": "zh"}), encoding="utf-8")
    monkeypatch.setenv("LABKIT_LANG", "ru")
    assert language() == "ru"


def test_the_catalogues_are_complete_compiled_and_on_the_glossary() -> None:
    assert problems(glossary_path=GLOSSARY) == []


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_translation_formats_with_the_english_placeholders(lang: str) -> None:
    with catalogue_path(lang).open("rb") as file:
        catalogue = read_po(file, locale=lang)
    assert len([message for message in catalogue if message.id]) >= 300
    for message in catalogue:
        if not message.id:
            continue
        english = message.id if isinstance(message.id, str) else message.id[-1]
        values = {name: _Value() for name in fields(english)}
        for form in [message.string] if isinstance(message.string, str) else message.string or ():
            assert form.format(**values), message.id  # a dropped or renamed {name} raises here


def test_the_check_names_the_file_the_language_and_the_message_of_each_fault(tmp_path: Path) -> None:
    locale_dir = tmp_path / "locale"
    shutil.copytree(LOCALE_DIR, locale_dir)
    path = catalogue_path("zh", locale_dir=locale_dir)
    with path.open("rb") as file:
        catalogue = read_po(file, locale="zh")
    catalogue["Exercise {exercise}: {status}."].string = "练习：{status}。"  # a placeholder dropped
    catalogue["The answer does not match yet."].string = ""
    catalogue["Your code"].flags.add("fuzzy")
    catalogue[
        'That was the last hint. Once you have tried, labkit.solution("{exercise}") shows the reference '
        "solution (your progress records that you looked)."
    ].string = "这是最后一条提示。"
    key = (
        "Does your `__torch_function__` call `func` with all its arguments and return its result? Did you convert "
        "both the model and the input to channels_last, and run the model inside your mode?"
    )
    catalogue[key].string = "你的 __torch_function__ 调用 `func` 了吗？模型是否通道最后？"  # code span and a forbidden term
    with path.open("wb") as file:
        write_po(file, catalogue)  # and not compiled: the .mo is stale
    found = problems(langs=("zh",), locale_dir=locale_dir, source_dir=None, glossary_path=GLOSSARY)
    where = f"{path} (zh): "
    assert (
        where + "placeholders differ: ['exercise', 'status'] in English, ['status'] here: 'Exercise {exercise}: {status}.'"
        in found
    )
    assert where + "no translation: 'The answer does not match yet.'" in found
    assert any(line.startswith(where + "fuzzy") and line.endswith("'Your code'") for line in found)
    assert any(line.startswith(where + "placeholders differ") and "That was the last hint" in line for line in found)
    assert any(line.startswith(where + "inline code differs; missing '__torch_function__'") for line in found)
    assert any(line.startswith(where + "forbidden term '通道最后'") for line in found)
    assert f"{path.with_suffix('.mo')} (zh): older than labkit.po (compiled content differs); run make i18n-update." in found
    assert len(found) == 7


def test_the_check_finds_a_marked_message_missing_from_the_template(tmp_path: Path) -> None:
    source = tmp_path / "labkit"
    source.mkdir()
    (source / "new.py").write_text('from labkit.i18n.messages import _\n\nSAID = _("A new sentence.")\n')
    found = problems(langs=(), source_dir=source)
    assert any(line.endswith("lacks 'A new sentence.', marked in labkit's code; run make i18n-update.") for line in found)
    assert any("holds 'Your code', which labkit's code no longer marks" in line for line in found)


def test_the_catalogues_are_package_data_of_the_wheel() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["labkit"]
    shipped = sorted(path.relative_to(LOCALE_DIR.parent).as_posix() for path in LOCALE_DIR.rglob("*") if path.is_file())
    assert {"locale/labkit.pot", "locale/zh/LC_MESSAGES/labkit.mo", "locale/ru/LC_MESSAGES/labkit.mo"} <= set(shipped)
    assert [name for name in shipped if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns)] == []
    assert message_check.TEMPLATE.is_file()


def test_a_workspace_made_in_a_language_speaks_it_and_keeps_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "labs"
    assert prepare_workspace(folder, ROOT / "notebooks", language="zh").language == "zh"
    monkeypatch.chdir(folder)
    assert language() == "zh"
    assert prepare_workspace(folder, ROOT / "notebooks").language == "zh"  # a later run without --lang keeps it
    assert json.loads((folder / ".labkit-manifest.json").read_text(encoding="utf-8"))["language"] == "zh"
    monkeypatch.setenv("LABKIT_LANG", "ru")  # the environment still comes first
    assert language() == "ru"
    with pytest.raises(LabkitValueError, match="язык должен быть одним из en, zh, ru, получено 'fr'"):  # said in ru
        prepare_workspace(folder, ROOT / "notebooks", language="fr")


@pytest.mark.torch_free  # the message catalogues only: the torch-floor job leaves it out (Makefile)
def test_python_m_labkit_i18n_check_fails_on_a_message_catalogue_fault(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locale_dir = tmp_path / "locale"
    shutil.copytree(LOCALE_DIR, locale_dir)
    monkeypatch.setattr(message_check, "LOCALE_DIR", locale_dir)
    monkeypatch.setattr(notebooks, "check", lambda root, langs: [])  # the notebooks' half has tests of its own
    assert main(["i18n", "check", "--notebooks-dir", str(ROOT / "notebooks")]) == 0
    assert "and labkit's messages in zh, ru, every translation finished and current" in capsys.readouterr().out

    path = catalogue_path("ru", locale_dir=locale_dir)
    with path.open("rb") as file:
        catalogue = read_po(file, locale="ru")
    catalogue["Your code"].string = ""
    with path.open("wb") as file:
        write_po(file, catalogue)
    assert main(["i18n", "check", "--notebooks-dir", str(ROOT / "notebooks")]) == 1
    err = capsys.readouterr().err
    assert f"{path} (ru): no translation: 'Your code'" in err
    assert f"{path.with_suffix('.mo')} (ru): older than labkit.po" in err
