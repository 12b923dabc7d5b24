"""labkit.authoring.docs: the translated editions (zh/, ru/) and the language switcher, built from small notebooks.

One site is built for the module: two English notebooks, both in Chinese, only the first in Russian (so a page
with no Russian translation has to lead to the Russian home).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from labkit.authoring import docs
from labkit.core.errors import LabkitError
from labkit.i18n import glossary
from tests.authoring.test_docs import make_two_notebooks, write_notebook

pytestmark = [pytest.mark.slow, pytest.mark.torch_free]  # torch_free: no torch op; the torch-floor job leaves it out
GLOSSARY = Path(__file__).resolve().parents[2] / "notebooks" / "i18n" / "glossary.csv"


def translate(english: Path, folder: Path, title: str, heading: str, goal: str) -> None:
    """A "translation" of ``english`` into ``folder``: its first cell rewritten, its code cell and output kept."""
    notebook = nbformat.read(english, as_version=4)
    notebook.cells[0].source = f"# {title}\n\n**{heading}**\n- {goal}\n\n步幅 шаги"
    folder.mkdir(exist_ok=True)
    nbformat.write(notebook, folder / english.name)


def make_editions(folder: Path) -> Path:
    notebooks = make_two_notebooks(folder)
    translate(notebooks / "00_intro.ipynb", notebooks / "zh", "00 · 简介", "学习目标", "读懂步幅")
    translate(notebooks / "01_more.ipynb", notebooks / "zh", "01 · 更多", "学习目标", "继续深入")
    translate(notebooks / "00_intro.ipynb", notebooks / "ru", "00 · Введение", "Цели занятия", "читать шаги")
    return notebooks


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("editions")
    out = folder / "site"
    docs.build_site(make_editions(folder / "notebooks"), out)
    return out


def switcher(page: Path) -> dict[str, str]:
    """The switcher's links on a built page: label -> href."""
    nav = re.search(r'<nav class="labkit-languages" aria-label="[^"]+">(.*?)</nav>', page.read_text(), re.S)
    assert nav, f"{page.name} has no language switcher"
    return {label: href for href, label in re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', nav[1])}


def test_each_language_is_an_edition_in_its_own_folder_with_its_language_and_search(site: Path) -> None:
    for code, lang in [("zh", "zh-CN"), ("ru", "ru")]:
        index = (site / code / "index.html").read_text()
        assert f'<html lang="{lang}"' in index
        assert (site / code / "searchindex.js").is_file()
        assert not (site / code / "api").exists(), "the API pages are English only"
        assert 'href="../api.html"' in (site / code / "api.html").read_text()
    assert sorted(p.name for p in (site / "zh" / "notebooks").glob("*.html")) == ["00_intro.html", "01_more.html"]
    assert sorted(p.name for p in (site / "ru" / "notebooks").glob("*.html")) == ["00_intro.html"]
    assert "42" in (site / "zh" / "notebooks" / "00_intro.html").read_text(), "the stored output is shown"
    index = json.loads(re.search(r"Search\.setIndex\((.*)\)", (site / "zh" / "searchindex.js").read_text())[1])
    assert "步幅" in index["terms"], "jieba split the Chinese words for the search index"
    assert "ChineseStemmer" not in (site / "zh" / "_static" / "language_data.js").read_text(), "sphinx-doc/sphinx#14229"


def test_translated_landing_page_takes_titles_and_goals_from_the_translated_notebooks(site: Path) -> None:
    zh = (site / "zh" / "index.html").read_text()
    path = zh[zh.index("labkit-learning-path"):]
    assert path.index("00 · 简介") < path.index("01 · 更多")
    assert "读懂步幅" in path and "继续深入" in path
    assert "Введение" in (site / "ru" / "index.html").read_text()


def test_translated_editions_speak_their_language_in_the_prose_and_the_generated_words(site: Path) -> None:
    zh = (site / "zh" / "index.html").read_text()
    assert "讲解 PyTorch 内部机制的三个主题" in zh and "学习路线" in zh, "index.md's intro and heading, from docs/locale"
    assert "Executable Jupyter labs" not in zh
    assert "<title>labkit 实验 &#8212; labkit 实验</title>" in zh, "the site's title (html_title) too"
    assert "存储输出时在一台 4 核机器上运行了 12 秒" in zh, "the run-time line of 01_more"
    assert "let toggleHintShow = '显示参考答案';" in zh and "let toggleHintHide = '隐藏参考答案';" in zh
    assert "Как запустить лабораторные работы" in (site / "ru" / "running.html").read_text()
    assert "<h1>安装 labkit" in (site / "zh" / "install.html").read_text()
    assert "let toggleHintShow = 'Показать решение';" in (site / "ru" / "index.html").read_text()
    instructors = (site / "zh" / "instructors.html").read_text()
    assert "本页内容为英文。" in instructors, "a page the edition keeps in English says so, in Chinese"
    assert re.search(r'<section [^>]*\blang="en">', instructors), "its English body says lang=en (screen readers)"
    assert '<p class="labkit-english-only" lang="zh-CN">本页内容为英文。</p>' in instructors
    assert re.search(r'<section [^>]*\blang="en">', (site / "ru" / "maintainers.html").read_text())
    assert "本页内容为英文。" in (site / "zh" / "api.html").read_text()
    english = (site / "index.html").read_text()
    assert "let toggleHintShow = 'Show solution';" in english and "ran in 12 s on a 4-core machine" in english
    assert "This page is in English." not in (site / "instructors.html").read_text()
    assert 'lang="en">' not in (site / "instructors.html").read_text(), "the English edition needs no mark"


def test_switcher_leads_to_the_same_page_in_each_edition_or_to_its_home(site: Path) -> None:
    assert switcher(site / "zh" / "notebooks" / "00_intro.html") == {
        "English": "../../notebooks/00_intro.html", "中文": "00_intro.html", "Русский": "../../ru/notebooks/00_intro.html",
    }
    assert switcher(site / "notebooks" / "01_more.html")["Русский"] == "../ru/index.html", "no Russian 01: its home"
    assert switcher(site / "api" / "core.html")["中文"] == "../zh/index.html"
    assert switcher(site / "ru" / "search.html")["English"] == "../search.html"
    current = re.findall(r'<a [^>]*aria-current="page"[^>]*>([^<]+)<', (site / "ru" / "index.html").read_text())
    assert current == ["Русский"]


def test_english_only_notebooks_make_one_edition(tmp_path: Path) -> None:
    assert docs.find_editions(make_two_notebooks(tmp_path / "notebooks")) == [
        (docs.ENGLISH, [tmp_path / "notebooks" / "00_intro.ipynb", tmp_path / "notebooks" / "01_more.ipynb"])
    ]


def test_a_translated_notebook_never_run_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    notebooks = make_two_notebooks(tmp_path / "notebooks")
    (notebooks / "zh").mkdir()
    write_notebook(notebooks / "zh" / "00_intro.ipynb", title="00 · 简介", goals=[], executed=False)
    out = tmp_path / "site"
    with pytest.raises(LabkitError, match=r"zh/00_intro.ipynb has code cells that were never run.*make i18n-build"):
        docs.build_site(notebooks, out)
    assert not out.exists()


def test_goals_headings_are_the_glossarys_learning_goals() -> None:
    row = next(term for term in glossary.load(GLOSSARY) if term.english == "learning goals")
    expected = {"Learning goals".casefold(), *(text.casefold() for text in row.preferred.values())}
    assert {heading.casefold() for heading in docs.GOALS_HEADINGS} == expected


@pytest.mark.parametrize("heading", docs.GOALS_HEADINGS)
def test_describe_notebook_reads_the_goals_in_each_language(tmp_path: Path, heading: str) -> None:
    path = tmp_path / "00_x.ipynb"
    write_notebook(path, title="00 · X", goals=[])
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[0].source = f"# 00 · X\n\n**{heading}**\n- one\n- two\n"
    assert docs.describe_notebook(path, notebook).goals_markdown == "- one\n- two"


#: The theme's words the theme catalogues leave English in zh or ru (docs/locale/<language>/LC_MESSAGES/sphinx.po).
THEME_WORDS = ("Toggle primary sidebar", "Toggle secondary sidebar", "Color mode", "System Settings", "Back to top",
               "Expand Sidebar", "Collapse Sidebar")


def test_a_translated_edition_shows_the_themes_own_words_in_its_language(site: Path) -> None:
    for code in ("zh", "ru"):
        for page in (site / code / "index.html", site / code / "notebooks" / "00_intro.html"):
            text = page.read_text()
            left = [word for word in THEME_WORDS if word in text]
            assert not left, f"{code}/{page.name} shows the theme's English: {left}"
    english = (site / "notebooks" / "00_intro.html").read_text()
    assert "Toggle primary sidebar" in english and "Color mode" in english, "the English edition keeps them"
