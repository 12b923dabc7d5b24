"""The help queue over HTTP, as a learner's kernel, the instructor's page and an attacker use it.

A real tornado application and a real ``HubOAuth`` whose hub is a table of test tokens (support.FakeHubAuth);
the hub's share API is a fake that records which looks the board revoked (the real one: test_https_look.py).
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from tornado import web
from tornado.testing import AsyncHTTPTestCase

from labkit.workshop.board.app import make_app
from labkit.workshop.board.queue import HelpQueue, check_fields, median_wait
from tests.workshop.board.support import COOKIE_SECRET, PREFIX, T0, FakeDirectory, FakeHubAuth, make_board, user

TOKENS = {"ada-token": user("ada"), "bob-token": user("bob"), "teacher-token": user("teacher"),
          "service-token": user("idle-culler", kind="service")}


class QueueTest(AsyncHTTPTestCase):
    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp())
        self.hub_auth = FakeHubAuth(TOKENS)
        self.now = [T0]
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        self.board.store.close()
        self.board.queue.close()
        shutil.rmtree(self.folder)

    def get_app(self) -> web.Application:
        self.board = make_board(self.folder, FakeDirectory(users=[{"name": n} for n in ("ada", "bob")]),
                                look_seconds=600)
        self.board.clock = lambda: self.now[0]
        return make_app(self.board, self.hub_auth, COOKIE_SECRET)

    def ask(self, exercise="2.3", token="ada-token", **fields):
        body = json.dumps({"exercise": exercise, **fields})
        return self.fetch(PREFIX + "api/help", method="POST", body=body, headers={"Authorization": f"token {token}"})

    def cancel(self, exercise="2.3", token="ada-token"):
        return self.fetch(PREFIX + "api/help/cancel", method="POST", body=json.dumps({"exercise": exercise}),
                          headers={"Authorization": f"token {token}"})

    def act(self, ident: str, action: str, token="teacher-token"):
        return self.fetch(PREFIX + f"api/queue/{ident}/{action}", method="POST", body=b"",
                          headers={"Authorization": f"token {token}"})

    def queue(self, token="teacher-token"):
        return self.fetch(PREFIX + "api/queue", headers={"Authorization": f"token {token}"})

    # the learner asks
    def test_requests_wait_in_order_with_their_wait_and_a_second_ask_is_the_same_request(self):
        first = json.loads(self.ask(mistake="2.3/wrong-stride", hint_level=2).body)
        self.now[0] += 30
        second = json.loads(self.ask("1.1", token="bob-token").body)
        again = json.loads(self.ask(mistake="2.3/other", hint_level=3).body)
        assert (first["new"], first["place"], second["place"]) == (True, 1, 2)
        assert (again["new"], again["place"], again["request"]["id"]) == (False, 1, first["request"]["id"])
        self.now[0] += 60
        rows = json.loads(self.queue().body)["requests"]
        assert [(r["learner"], r["exercise"], r["mistake"], r["hint_level"], r["waiting_s"]) for r in rows] == [
            ("ada", "2.3", "2.3/other", 3, 90), ("bob", "1.1", "", 0, 60)]

    def test_the_instructor_claims_and_closes_and_the_export_has_both_waits(self):
        ident = json.loads(self.ask(look=True).body)["request"]["id"]
        self.now[0] += 40
        assert json.loads(self.act(ident, "claim").body)["request"]["claimed_by"] == "teacher"
        self.now[0] += 100
        assert json.loads(self.act(ident, "close").body)["request"]["ending"] == "closed"
        assert self.board.revoker.revoked == ["ada"]
        assert json.loads(self.queue().body)["requests"] == []
        assert self.act(ident, "close").code == 404  # ended once
        lines = list(csv.reader(io.StringIO(self.fetch(PREFIX + "export/help.csv", headers={
            "Authorization": "token teacher-token"}).body.decode())))
        assert lines[0][-2:] == ["wait to claim (s)", "claim to close (s)"]
        assert (lines[1][0], lines[1][2], lines[1][5], lines[1][8], lines[1][9], lines[1][10]) == (
            "ada", "2.3", "yes", "closed", "40", "100")
        assert median_wait(self.board.queue.every()) == 40
        assert json.loads(self.queue().body)["median_wait_s"] == 40

    def test_a_look_ends_with_a_cancel_and_after_the_time_limit(self):
        self.ask(look=True)
        assert self.cancel().code == 200
        assert self.board.revoker.revoked == ["ada"]
        self.ask("1.1", look=True, token="bob-token")
        self.now[0] += 599
        assert len(json.loads(self.queue().body)["requests"]) == 1
        self.now[0] += 1
        assert json.loads(self.queue().body)["requests"] == []
        assert self.board.revoker.revoked == ["ada", "bob"]
        assert [(r.learner, r.ending) for r in self.board.queue.every() if r.learner == "bob"] == [("bob", "expired")]

    def test_a_request_without_a_look_revokes_nothing_and_does_not_expire(self):
        ident = json.loads(self.ask().body)["request"]["id"]
        self.now[0] += 10_000
        assert [r["id"] for r in json.loads(self.queue().body)["requests"]] == [ident]
        self.act(ident, "close")
        assert self.board.revoker.revoked == []

    # attacks
    def test_a_learner_cannot_see_claim_or_close_the_queue(self):
        ident = json.loads(self.ask().body)["request"]["id"]
        assert self.queue(token="ada-token").code == 403
        assert self.act(ident, "claim", token="ada-token").code == 403
        assert self.act(ident, "close", token="bob-token").code == 403
        assert self.fetch(PREFIX + "export/help.csv", headers={"Authorization": "token ada-token"}).code == 403
        assert self.board.queue.waiting()[0].claimed is None

    def test_a_learner_cannot_cancel_another_s_request_nor_ask_for_another(self):
        self.ask(look=True)
        assert self.cancel(token="bob-token").code == 404
        assert len(self.board.queue.waiting()) == 1 and self.board.revoker.revoked == []
        reply = self.fetch(PREFIX + "api/help", method="POST", body=json.dumps({"exercise": "2.3", "learner": "bob"}),
                           headers={"Authorization": "token ada-token"})
        assert reply.code == 400
        assert {r.learner for r in self.board.queue.waiting()} == {"ada"}

    def test_asking_and_cancelling_need_the_learner_s_token_never_a_cookie_or_a_service(self):
        for headers in ({"Cookie": self.hub_auth.cookie("ada-token")}, {"Authorization": "token service-token"},
                        {"Authorization": "token nobody"}):
            reply = self.fetch(PREFIX + "api/help", method="POST", body=json.dumps({"exercise": "2.3"}), headers=headers)
            assert reply.code == 403
        assert self.board.queue.waiting() == []

    def test_a_browser_s_claim_needs_the_page_s_xsrf_token_and_no_get_claims(self):
        ident = json.loads(self.ask().body)["request"]["id"]
        page = self.fetch(PREFIX, headers={"Cookie": self.hub_auth.cookie("teacher-token")}, follow_redirects=False)
        xsrf = re.search(r'data-xsrf="([^"]+)"', page.body.decode()).group(1)
        cookie = self.hub_auth.cookie("teacher-token") + "; " + re.search(r"(_xsrf=[^;]+)", page.headers["Set-Cookie"]).group(1)
        fetch = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin", "Cookie": cookie}
        url = PREFIX + f"api/queue/{ident}/claim"
        assert self.fetch(url, method="POST", body=b"", headers=fetch).code == 403
        assert self.fetch(url, headers={"Cookie": cookie}).code == 405
        assert self.board.queue.waiting()[0].claimed is None
        assert self.fetch(url, method="POST", body=b"", headers={**fetch, "X-XSRFToken": xsrf}).code == 200
        assert self.board.queue.waiting()[0].claimed_by == "teacher"

    def test_a_flood_of_asks_holds_at_most_a_few_open_requests_and_buries_nobody(self):
        for exercise in ("1.1", "1.2", "1.3"):
            assert self.ask(exercise).code == 200
            self.now[0] += 1
        refused = self.ask("1.4")
        assert refused.code == 429 and "cancel one" in json.loads(refused.body)["error"]
        assert self.ask("1.1", hint_level=2).code == 200  # the same request brought up to date is no new one
        assert json.loads(self.ask("2.3", token="bob-token").body)["place"] == 4
        self.cancel("1.2")
        self.now[0] += 1
        assert self.ask("1.4").code == 200
        assert [(r.learner, r.exercise) for r in self.board.queue.waiting()] == [
            ("ada", "1.1"), ("ada", "1.3"), ("bob", "2.3"), ("ada", "1.4")]

    def test_no_field_carries_markup_a_formula_or_code(self):
        for fields in ({"exercise": "<b>2.3</b>"}, {"exercise": "=1+2"}, {"mistake": "2.3/<script>"},
                       {"mistake": "=HYPERLINK(\"x\")"}, {"mistake": "1.1/other"}, {"hint_level": 9},
                       {"hint_level": "1"}, {"look": "yes"}, {"code": "print(secret)"}):
            body = {"exercise": "2.3", **fields}
            reply = self.fetch(PREFIX + "api/help", method="POST", body=json.dumps(body),
                               headers={"Authorization": "token ada-token"})
            assert reply.code == 400, fields
        assert self.board.queue.every() == []


def test_fields_are_checked_where_they_are_stored_too(tmp_path):
    queue = HelpQueue(tmp_path / "help.sqlite")
    try:
        with pytest.raises(ValueError):
            queue.ask("ada", "2.3", "-2+3", 0, False, T0)
        with pytest.raises(ValueError):
            queue.ask("<ada>", "2.3", "", 0, False, T0)
        check_fields("2.3", "2.3/wrong-stride", 3, True)
        assert queue.every() == []
    finally:
        queue.close()
