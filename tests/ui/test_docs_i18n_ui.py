"""The docs site's Chinese and Russian editions in a real Chromium: translated prose, stored widgets, the switcher, search.

The site is the one :func:`tests.ui.support.docs_site` builds once per session (English at
the root, ``zh/`` and ``ru/`` from notebooks/zh and notebooks/ru), served from loopback with
every request that leaves the site aborted, as in :mod:`tests.ui.test_docs_ui` (whose axe-core
test also checks every page of the translated editions).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import polib
import pytest

from labkit.labs import find_notebooks
from tests.ui import test_docs_ui
from tests.ui.support import NOTEBOOKS, docs_site, static_server
from tests.ui.test_docs_ui import FROZEN_NOTE, RENDER_TIMEOUT_MS, check_stored_widgets, open_page

pytestmark = pytest.mark.ui
page = test_docs_ui.page  # the fixture: a page that may load only the site, its console errors recorded
LANGUAGES = {"zh": ("zh-CN", re.compile(r"[\u4e00-\u9fff]")), "ru": ("ru", re.compile(r"[А-Яа-яЁё]"))}
STEMS = [path.stem for path in find_notebooks(NOTEBOOKS)]
TRANSLATED_PAGES = [f"{code}/{name}" for code in LANGUAGES for name in ["index", *(f"notebooks/{stem}" for stem in STEMS)]]
SWITCHER = "nav.labkit-languages"
MEMORY_FORMAT = "notebooks/02_memory_format"
DOCS_LOCALE = Path(__file__).resolve().parents[2] / "docs" / "locale"
CHINESE_TERM = "步幅"  # "stride", as the glossary writes it: notebook 02's subject
RUSSIAN_TERM = "шаги"  # "strides"


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return docs_site(tmp_path_factory)


@pytest.fixture(scope="module")
def site_url(site_dir: Path) -> Iterator[str]:
    with static_server(site_dir) as url:
        yield url


def frozen_note(code: str) -> str:
    """The frozen-widget note as the edition's catalogue translates it (docs/locale), so a translator's rewording holds."""
    folder = {"zh": "zh_CN", "ru": "ru"}[code]
    catalogue = polib.pofile(str(DOCS_LOCALE / folder / "LC_MESSAGES" / "labkit_docs.po"))
    translation = catalogue.find(FROZEN_NOTE).msgstr
    assert translation, f"{code}: the frozen-widget note is not translated"
    return translation


def language_of(page) -> str:
    return page.evaluate("() => document.documentElement.lang")


def switcher_link(page, label: str):
    return page.locator(f"{SWITCHER} a", has_text=label)


@pytest.mark.parametrize("name", TRANSLATED_PAGES)
def test_translated_page_opens_offline_in_its_language_with_its_widgets(page, site_url: str, screenshot_dir: Path,
                                                                          name: str) -> None:
    code, _, rest = name.partition("/")
    lang, script = LANGUAGES[code]
    open_page(page, site_url, name)
    assert language_of(page) == lang, f"{name}: <html lang> is {language_of(page)!r}"
    prose = page.locator("article.bd-article").inner_text()
    assert len(script.findall(prose)) > 100, f"{name}: hardly any {code} text on the page"
    if rest.startswith("notebooks/"):
        check_stored_widgets(page, rest.removeprefix("notebooks/"), frozen_note(code))
        assert script.search(page.locator("h1").first.inner_text()), f"{name}: the title is not translated"
    page.screenshot(path=str(screenshot_dir / f"docs_{name.replace('/', '_')}.png"), full_page=True)
    assert page.errors == [], f"{name}: console errors {page.errors}"
    assert page.blocked == [], f"{name}: fetched from the network"


def test_zh_landing_page_lists_the_translated_notebooks(page, site_url: str) -> None:
    open_page(page, site_url, "zh/index")
    path = page.locator(".labkit-learning-path")
    hrefs = [link.get_attribute("href") for link in path.locator("strong a").all()]
    assert hrefs == [f"notebooks/{stem}.html" for stem in STEMS]
    titles = [link.inner_text() for link in path.locator("strong a").all()]
    assert all(LANGUAGES["zh"][1].search(title) for title in titles), f"titles not from the zh notebooks: {titles}"
    assert path.locator("li").count() >= len(STEMS), "each notebook's learning goals, from the zh notebook"


def test_zh_page_chrome_that_labkit_writes_is_chinese(page, site_url: str) -> None:
    """Sidebar captions (index.md), the solution toggle and the frozen-widget note: docs/locale, not English."""
    open_page(page, site_url, f"zh/{MEMORY_FORMAT}")
    captions = page.locator(".bd-sidebar .caption-text").all_inner_texts()
    assert "学习路线" in captions, f"the sidebar's sections: {captions}"
    toggle = page.locator(".tag_solution .toggle-details__summary-text").first
    assert toggle.inner_text().strip() == "显示参考答案"
    toggle.click()
    assert toggle.inner_text().strip() == "隐藏参考答案"
    assert "交互控件静态快照" in page.locator(".labkit-frozen-widget").first.inner_text()
    assert page.errors == [] and page.blocked == []


def test_switcher_leads_from_a_zh_page_to_the_same_page_in_russian_and_english(page, site_url: str) -> None:
    open_page(page, site_url, f"zh/{MEMORY_FORMAT}")
    switcher = page.locator(SWITCHER)
    assert switcher.get_attribute("aria-label"), "the switcher's <nav> has a name"
    assert [label.strip() for label in switcher.locator("a").all_inner_texts()] == ["English", "中文", "Русский"]
    assert switcher_link(page, "中文").get_attribute("aria-current") == "page"
    switcher_link(page, "Русский").click()
    page.wait_for_url(f"**/ru/{MEMORY_FORMAT}.html")
    assert language_of(page) == "ru" and "channels_last" in page.locator("h1").first.inner_text()
    english = switcher_link(page, "English")
    english.focus()  # a plain link: the keyboard reaches it and Enter follows it
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"{re.escape(site_url)}/{MEMORY_FORMAT}\.html$"))
    assert language_of(page) == "en" and page.locator(SWITCHER).is_visible()
    assert page.errors == [] and page.blocked == []


def test_a_page_with_no_translation_leads_to_the_other_editions_home(page, site_url: str) -> None:
    open_page(page, site_url, "api/fx")
    switcher_link(page, "中文").click()
    page.wait_for_url("**/zh/index.html")
    assert language_of(page) == "zh-CN"


@pytest.mark.parametrize(("code", "term"), [("zh", CHINESE_TERM), ("ru", RUSSIAN_TERM)])
def test_search_in_an_edition_finds_its_memory_format_page(page, site_url: str, code: str, term: str) -> None:
    """Each edition searches its own index, with its language's word splitting (jieba for zh) and stemming."""
    open_page(page, site_url, f"{code}/index")
    page.locator("button.search-button__button:visible").first.click()
    query = page.locator("input[name='q']:visible").first
    query.fill(term)
    query.press("Enter")
    result = page.locator(f"#search-results a[href*='{MEMORY_FORMAT.split('/')[1]}']").first
    result.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    result.click()
    page.wait_for_url(f"**/{code}/{MEMORY_FORMAT}.html*")
    assert term in page.locator("article.bd-article").inner_text()
    assert page.errors == [] and page.blocked == []
