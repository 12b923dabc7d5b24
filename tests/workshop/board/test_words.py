"""The board in the room's language (LABKIT_LANG, set by the hub from LABKIT_WORKSHOP_LANGUAGE): its heads, words
and mistake descriptions translate, every name is still escaped, and the events stay the English data they are."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from tornado import web
from tornado.testing import AsyncHTTPTestCase

from labkit.workshop.board.app import make_app
from labkit.workshop.board.words import page_words
from tests.workshop.board.support import COOKIE_SECRET, PREFIX, T0, FakeDirectory, FakeHubAuth, event, make_board, user

EVIL = "<script>alert('name')</script>"  # a hub user with no events yet: a row of the grid all the same
MISTAKE = "1.1/returns-none"


class ChineseBoardTest(AsyncHTTPTestCase):
    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp())
        self.language = pytest.MonkeyPatch()
        self.language.setenv("LABKIT_LANG", "zh")
        self.hub_auth = FakeHubAuth({"teacher-token": user("teacher")})
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        self.language.undo()
        self.board.store.close()
        shutil.rmtree(self.folder)

    def get_app(self) -> web.Application:
        directory = FakeDirectory(users=[{"name": n, "admin": False} for n in ("ada", EVIL)])
        self.board = make_board(self.folder, directory, now=T0 + 60, stuck_attempts=2)
        return make_app(self.board, self.hub_auth, COOKIE_SECRET)

    def page(self) -> str:
        self.board.store.add([event("ada", status="not solved", mistake=MISTAKE, at=T0 + i) for i in range(2)],
                             received=T0 + 30)
        reply = self.fetch(PREFIX, headers={"Cookie": self.hub_auth.cookie("teacher-token")}, follow_redirects=False)
        assert reply.code == 200
        return reply.body.decode()

    def test_the_grid_s_heads_and_mistakes_read_in_chinese_and_a_hostile_name_is_escaped(self):
        page = self.page()
        assert '<html lang="zh">' in page and "<title>教室看板</title>" in page
        for head in ("学员", "预检", "最近活动", "卡住了？", "练习", "最常见的错误"):
            assert f'<th scope="col">{head}</th>' in page, head
        described = "打印或显示了报告，而不是返回它"  # what 1.1/returns-none means, in Chinese
        assert f"<li>{described}（{MISTAKE}）：1 名学员</li>" in page
        assert "卡住了：1.1 尝试了 2 次仍未解出" in page  # the stuck reason, in Chinese
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in page
        assert "Learner" not in page and "Most frequent mistakes" not in page

    def test_the_script_gets_its_words_as_escaped_json_and_the_events_stay_english(self):
        page = self.page()
        assert 'data-words="{&quot;lang&quot;: &quot;zh&quot;' in page  # JSON inside an escaped attribute
        grid = json.loads(self.fetch(PREFIX + "api/grid", headers={"Authorization": "token teacher-token"}).body)
        (row,) = [row for row in grid["rows"] if row["learner"] == "ada"]
        assert row["cells"][0]["state"] == "attempted" and row["cells"][0]["mistake"] == MISTAKE  # data: English
        assert grid["summaries"][0]["mistakes"][0]["line"] == f"打印或显示了报告，而不是返回它（{MISTAKE}）：1 名学员"
        assert grid["summaries"][0]["solved_text"] == "0 / 2"
        assert [item.event.status for item in self.board.store.events()] == ["not solved", "not solved"]


@pytest.mark.parametrize("language", ["zh", "ru"])
def test_every_page_word_is_translated(language: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LABKIT_LANG", "en")
    english = page_words()
    monkeypatch.setenv("LABKIT_LANG", language)
    translated = page_words()
    same = [key for key in english if key != "lang" and translated[key] == english[key]]
    assert same == [] and translated["lang"] == language
