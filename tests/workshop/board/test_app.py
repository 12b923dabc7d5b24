"""The board over HTTP, as a learner's kernel, a learner's browser, an instructor and an attacker see it.

A real tornado application and a real ``HubOAuth``, whose hub is a table of test tokens (support.FakeHubAuth).
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import shutil
import tempfile
from pathlib import Path
from unittest.mock import ANY

from tornado import web
from tornado.testing import AsyncHTTPTestCase

from labkit.progress import mistakes
from labkit.workshop.board import app as board_app
from labkit.workshop.board import queue_app
from labkit.workshop.board.app import make_app
from labkit.workshop.board.grid import Rules, build_grid
from labkit.workshop.board.rate import EventRate
from tests.workshop.board.support import (
    COOKIE_SECRET,
    PREFIX,
    T0,
    FakeDirectory,
    FakeHubAuth,
    as_json,
    event,
    hint,
    make_board,
    preflight,
    user,
)

EVIL = "<script>alert('name')</script>"
EVIL_WORDS = "<script>alert('mistake')</script>"
TOKENS = {
    "ada-token": user("ada"),
    "bob-token": user("bob"),
    "evil-token": user(EVIL),
    "teacher-token": user("teacher"),  # LABKIT_BOARD_INSTRUCTORS
    "helper-token": user("helper"),  # in the hub group instructors
    "admin-token": user("root", admin=True),
    "service-token": user("idle-culler", kind="service"),
    "unscoped-token": user("ada", scopes=("read:users!user=ada",)),
    "percent-token": user("50%s%d"),
}


class BoardTest(AsyncHTTPTestCase):
    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp())
        self.directory = FakeDirectory(users=[{"name": n, "admin": n == "root"} for n in ("ada", "bob", EVIL, "root")],
                                       groups={"instructors": {"helper"}})
        self.hub_auth = FakeHubAuth(TOKENS)
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        self.board.store.close()
        self.board.queue.close()
        shutil.rmtree(self.folder)

    def get_app(self) -> web.Application:
        self.board = make_board(self.folder, self.directory, now=T0 + 60)
        return make_app(self.board, self.hub_auth, COOKIE_SECRET)

    # helpers
    def post_events(self, events, token: str | None = "ada-token", **headers):
        if token:
            headers["Authorization"] = f"token {token}"
        body = events if isinstance(events, (bytes, str)) else json.dumps({"events": [as_json(e) for e in events]})
        return self.fetch(PREFIX + "api/events", method="POST", body=body, headers=headers)

    def get(self, path: str, token: str | None = None, cookie: str | None = None, **headers):
        if token:
            headers["Authorization"] = f"token {token}"
        if cookie:
            headers["Cookie"] = self.hub_auth.cookie(cookie)
        return self.fetch(PREFIX + path, headers=headers, follow_redirects=False)

    def stored(self):
        return self.board.store.events()

    # posting events
    def test_a_learner_s_own_events_are_stored_and_a_duplicate_once(self):
        events = [event("ada", status="not solved"), event("ada", "1.2"), preflight("ada")]
        reply = self.post_events(events)
        assert (reply.code, json.loads(reply.body)) == (200, {"stored": 3})
        reply = self.post_events([events[0], event("ada", "1.1")])
        assert json.loads(reply.body) == {"stored": 1}
        assert len(self.stored()) == 4
        assert {item.received for item in self.stored()} == {T0 + 60}  # the board's own clock

    def test_a_learner_posting_for_another_learner_is_refused_and_nothing_stored(self):
        reply = self.post_events([event("ada"), event("bob")])
        assert reply.code == 403
        assert "another learner" in json.loads(reply.body)["error"]
        assert self.stored() == []

    def test_a_cookie_only_post_is_refused(self):
        cookie = self.hub_auth.cookie("ada-token")
        for headers in ({"Cookie": cookie}, {"Cookie": cookie, "Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin"}):
            reply = self.post_events([event("ada")], token=None, **headers)
            assert reply.code == 403
            assert "Authorization header" in json.loads(reply.body)["error"]
        assert self.stored() == []

    def test_unknown_service_and_unscoped_tokens_are_refused(self):
        for token, words in (("nobody-token", "does not know this token"), ("service-token", "service token"),
                             ("unscoped-token", "access:services!service=labkit-board")):
            reply = self.post_events([event("ada")], token=token)
            assert reply.code == 403, token
            assert words in json.loads(reply.body)["error"]
        assert self.stored() == []

    def test_one_bad_event_refuses_the_post_and_nothing_is_stored(self):
        good = as_json(event("ada"))
        bad = {**as_json(event("ada")), "status": "pwned"}
        reply = self.post_events(json.dumps({"events": [good, bad]}))
        assert reply.code == 400
        assert json.loads(reply.body)["error"].startswith("Event 2 is refused")
        for body in ("not json", json.dumps([good]), json.dumps({"events": [good], "more": 1}),
                     json.dumps({"events": [{**good, "extra": 1}]}), json.dumps({"events": [good["id"]]})):
            assert self.post_events(body).code == 400, body
        assert self.stored() == []

    def test_a_post_is_at_most_200_events_and_256_kib(self):
        assert self.post_events([event("ada") for _ in range(201)]).code == 413
        assert self.post_events(json.dumps({"events": [], "pad": "x" * (257 * 1024)})).code == 413
        assert self.stored() == []

    def test_a_learner_cannot_fill_the_board_s_disk(self):
        board_app_limit = board_app.MAX_EVENTS_PER_LEARNER
        try:
            board_app.MAX_EVENTS_PER_LEARNER = 3
            assert self.post_events([event("ada") for _ in range(3)]).code == 200
            assert self.post_events([event("ada")]).code == 429
        finally:
            board_app.MAX_EVENTS_PER_LEARNER = board_app_limit
        assert len(self.stored()) == 3

    def test_the_cap_is_2000_events_per_learner(self):
        assert board_app.MAX_EVENTS_PER_LEARNER == 2000  # 20,000 let one learner cost the grid a second per poll

    def test_a_flood_is_refused_past_one_full_post_and_the_others_still_post(self):
        self.board.rate = EventRate(per_minute=120, burst=200, clock=lambda: 0.0)  # a flood within one instant
        assert self.post_events([event("ada") for _ in range(200)]).code == 200  # a kernel's whole backlog at once
        for _ in range(20):
            reply = self.post_events([event("ada")])
            assert reply.code == 429
            assert "120 events a minute" in json.loads(reply.body)["error"]
            assert reply.headers["Retry-After"] == "1"
        assert self.post_events([event("bob")], token="bob-token").code == 200
        assert len(self.stored()) == 201

    def test_the_rate_refills_at_120_a_minute(self):
        now = [0.0]
        self.board.rate = EventRate(per_minute=120, burst=200, clock=lambda: now[0])
        assert self.post_events([event("ada") for _ in range(200)]).code == 200
        now[0] = 30.0  # 60 events later
        assert self.post_events([event("ada") for _ in range(61)]).code == 429
        assert self.post_events([event("ada") for _ in range(60)]).code == 200
        assert len(self.stored()) == 260

    def test_a_poll_recomputes_only_the_learners_who_posted(self):
        made = []
        real = board_app.learner_part

        def counting(name, events, columns):
            made.append(name)
            return real(name, events, columns)
        self.post_events([event("ada")])
        self.post_events([event("bob", status="not solved")], token="bob-token")
        board_app.learner_part = counting
        try:
            first = json.loads(self.get("api/grid", token="teacher-token").body)
            self.post_events([event("ada", "1.1", "not solved", at=T0 + 5)])
            second = json.loads(self.get("api/grid", token="teacher-token").body)
            third = json.loads(self.get("api/grid", token="teacher-token").body)
        finally:
            board_app.learner_part = real
        assert sorted(made) == sorted(["ada", "bob", EVIL, "ada"])  # everyone once, then ada alone, then nobody
        assert first["summaries"][0]["mistakes"][0]["learners"] == 1
        assert second["summaries"][0]["mistakes"][0]["learners"] == 2  # ada's new mistake, counted from her new part
        assert second == third
        settings = self.board.settings
        fresh = build_grid(self.stored(), settings.exercises, T0 + 60, Rules(settings.stuck_attempts, settings.stuck_minutes),
                           learners=["ada", "bob", EVIL, "root"], instructors={"root", "teacher", "helper"})
        shown = {"server_url": ANY, "server_title": ANY, "version_text": ANY}
        assert second["rows"] == [row.to_json() | shown for row in fresh.rows]

    # no state change on GET, and one POST
    def test_the_only_posts_are_events_and_the_help_queue_s_and_no_get_changes_anything(self):
        posting = {board_app.EventsHandler, queue_app.HelpHandler, queue_app.CancelHandler, queue_app.QueueActionHandler}
        for rule in self._app.wildcard_router.rules:
            handler = rule.target
            if isinstance(handler, type) and issubclass(handler, web.RequestHandler):
                posts = handler.post is not web.RequestHandler.post
                assert posts == (handler in posting), handler
        self.post_events([event("ada")])
        for path in ("", "api/grid", "api/me", "export/grid.csv", "export/mistakes.csv", "api/events"):
            self.get(path, token="teacher-token")
            self.get(path, token="ada-token")
        assert len(self.stored()) == 1
        assert self.get("api/events", token="ada-token").code == 405

    # the page
    def test_not_logged_in_the_page_goes_to_the_hub_s_log_in(self):
        reply = self.get("")
        assert reply.code == 302
        assert reply.headers["Location"].startswith("/hub/api/oauth2/authorize?")
        assert self.get("api/grid").code == 403  # an API never redirects

    def test_a_learner_gets_a_403_page_and_no_grid(self):
        for path in ("", "api/grid", "export/grid.csv", "export/mistakes.csv"):
            reply = self.get(path, cookie="ada-token")
            assert reply.code == 403, path
        page = self.get("", cookie="evil-token")
        assert page.code == 403 and b"<script>" not in page.body and b"&lt;script&gt;" in page.body
        assert b"logged in as 50%s%d." in self.get("", cookie="percent-token").body

    def test_instructors_by_setting_by_group_and_admins_see_the_board(self):
        for token in ("teacher-token", "helper-token", "admin-token"):
            assert self.get("", cookie=token).code == 200, token
            assert self.get("api/grid", token=token).code == 200, token

    def test_the_page_escapes_names_and_mistakes_and_has_no_inline_script(self):
        mistakes.MISTAKES["1.1/evil"] = EVIL_WORDS
        try:
            self.board.store.add([event("ada", status="not solved", mistake="1.1/evil")], received=T0)
            reply = self.get("", cookie="teacher-token")
        finally:
            del mistakes.MISTAKES["1.1/evil"]
        page = reply.body.decode()
        assert reply.code == 200
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in page
        assert "&lt;script&gt;alert(&#x27;mistake&#x27;)&lt;/script&gt;" in page
        scripts = re.findall(r"<script\b[^>]*>", page)
        assert len(scripts) == 2 and all(re.search(r'\bsrc="/services/labkit-board/static/(board|queue)\.js\?v=\w+"', s)
                                         for s in scripts)
        assert not re.search(r"<style|\son\w+=|javascript:", page)
        assert "script-src 'self'" in reply.headers["Content-Security-Policy"]
        assert "unsafe-inline" not in reply.headers["Content-Security-Policy"]
        assert re.search(r'<th scope="row"><span class="name">ada</span>', page)
        assert "<caption>" in page and page.count('<th scope="col">') >= 5
        assert 'title="the hub&#x27;s admin page' in page  # no LABKIT_BOARD_SERVER_URL: the link says where it goes

    def test_the_page_s_script_and_style_are_served_from_the_board(self):
        for name, kind in (("board.js", "javascript"), ("board.css", "text/css")):
            reply = self.fetch(PREFIX + "static/" + name)
            assert reply.code == 200 and kind in reply.headers["Content-Type"]
            assert reply.headers["X-Content-Type-Options"] == "nosniff"

    def test_the_path_without_its_slash_redirects(self):
        reply = self.fetch(PREFIX.rstrip("/"), follow_redirects=False)
        assert (reply.code, reply.headers["Location"]) == (301, PREFIX)

    # the grid
    def test_the_version_column_says_which_push_each_learner_holds_and_who_is_behind(self):
        record = {"version": 3, "note": "", "at": T0, "learners": {"ada": 3, "bob": 2}}
        (self.board.settings.db.parent / "push.json").write_text(json.dumps(record))
        rows = {row["learner"]: row for row in json.loads(self.get("api/grid", token="teacher-token").body)["rows"]}
        assert rows["ada"]["version_text"] == "version 3"
        assert rows["bob"]["version_text"] == "version 2 (the room's: 3)"
        assert rows[EVIL]["version_text"] == "not recorded"
        page = self.get("", token="teacher-token").body.decode()
        assert "<th scope=\"col\">Labs version</th>" in page and "version 2 (the room&#x27;s: 3)" in page

    def test_an_instructor_sees_the_grid_of_the_hub_s_learners(self):
        self.board.store.add([event("ada", status="not solved", at=T0 + i) for i in range(3)] + [
            event("bob", "1.2", at=T0), hint("bob", "1.2", 1), preflight("bob", ("torch",)),
            event("teacher", status="not solved", mistake="1.1/raised-x")], received=T0 + 30)
        data = json.loads(self.get("api/grid", token="teacher-token").body)
        assert data["exercises"] == ["1.1", "1.2"]
        assert [row["learner"] for row in data["rows"]] == [EVIL, "ada", "bob"]  # the hub's users, less root (admin)
        ada, bob = data["rows"][1], data["rows"][2]
        assert ada["cells"][0]["state"] == "attempted" and ada["cells"][0]["attempts"] == 3
        assert ada["stuck"] == ["3 attempts at 1.1 without solving it",  # the floor, and the evidence beside it
                                "the same mistake (1.1/other) 3 times in a row at 1.1"]
        assert bob["cells"][1]["state"] == "solved" and bob["cells"][1]["hints"] == 1
        assert bob["preflight"] == {"state": "not ready", "text": "not ready: torch", "failed_probes": ["torch"], "at": T0}
        assert ada["server_url"] == "/hub/admin"
        assert [m["mistake"] for m in data["summaries"][0]["mistakes"]] == ["1.1/other"]  # the instructor's are not counted
        assert data["summaries"][1]["solved"] == 1 and data["summaries"][1]["learners"] == 3

    def test_the_grid_json_keeps_script_inert(self):
        raw = self.get("api/grid", token="teacher-token")
        assert raw.headers["Content-Type"].startswith("application/json")
        assert b"</script>" not in raw.body and b"<\\/script>" in raw.body
        assert json.loads(raw.body)["rows"][0]["learner"] == EVIL

    def test_with_a_server_url_template_each_row_links_its_own_server(self):
        self.board.settings = dataclasses.replace(self.board.settings, server_url="https://{name}.hub.example.org/")
        rows = json.loads(self.get("api/grid", token="teacher-token").body)["rows"]
        assert rows[1]["server_url"] == "https://ada.hub.example.org/"
        assert rows[0]["server_url"] == "https://%3Cscript%3Ealert%28%27name%27%29%3C%2Fscript%3E.hub.example.org/"

    def test_without_the_hub_s_list_the_grid_shows_the_learners_seen(self):
        self.directory.users_list = None
        self.board.store.add([event("cy"), event("teacher")], received=T0)
        rows = json.loads(self.get("api/grid", token="teacher-token").body)["rows"]
        assert [row["learner"] for row in rows] == ["cy"]

    def test_a_browser_fetch_of_the_grid_needs_the_page_s_xsrf_token(self):
        page = self.get("", cookie="teacher-token")
        xsrf = re.search(r'data-xsrf="([^"]+)"', page.body.decode()).group(1)
        xsrf_cookie = re.search(r"(_xsrf=[^;]+)", page.headers["Set-Cookie"]).group(1)
        fetch_headers = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin"}
        cookie = self.hub_auth.cookie("teacher-token") + "; " + xsrf_cookie
        refused = self.fetch(PREFIX + "api/grid", headers={**fetch_headers, "Cookie": cookie})
        assert refused.code == 403
        allowed = self.fetch(PREFIX + "api/grid", headers={**fetch_headers, "Cookie": cookie, "X-XSRFToken": xsrf})
        assert allowed.code == 200

    # a learner's own rows
    def test_a_learner_sees_only_their_own_rows(self):
        self.board.store.add([event("ada", status="not solved"), hint("ada", "1.1", 2), event("bob", "1.2")],
                             received=T0 + 1)
        for reply in (self.get("api/me", token="ada-token"), self.get("api/me", cookie="ada-token")):
            data = json.loads(reply.body)
            assert data["learner"] == "ada"
            assert [(c["exercise"], c["state"], c["attempts"], c["hints"]) for c in data["cells"]] == [
                ("1.1", "attempted", 1, 1), ("1.2", "not started", 0, 0)]
            assert "stuck" not in data
            assert {(e["learner"], e["exercise"], e["kind"]) for e in data["events"]} == {("ada", "1.1", "check"),
                                                                                          ("ada", "1.1", "hint")}
        assert self.get("api/me").code == 403
        assert self.get("api/me", token="service-token").code == 403

    def test_a_learner_polling_their_own_rows_reads_the_store_only_after_a_change(self):
        reads = []
        real = self.board.store.events
        self.board.store.events = lambda learner=None: reads.append(learner) or real(learner)
        self.post_events([event("ada")])
        for _ in range(5):
            assert self.get("api/me", token="ada-token").code == 200
        self.post_events([event("ada", "1.2")])
        assert len(json.loads(self.get("api/me", token="ada-token").body)["events"]) == 2
        assert reads == ["ada", "ada"]

    # the exports
    def test_the_exports_are_csv_with_formulas_made_inert(self):
        self.directory.users_list = [{"name": "=1+2", "admin": False}, {"name": "ada", "admin": False}]
        self.board.store.add([event("ada", status="not solved", mistake="1.1/raised-x")], received=T0)
        reply = self.get("export/grid.csv", cookie="teacher-token")
        assert reply.code == 200 and reply.headers["Content-Type"].startswith("text/csv")
        assert reply.headers["Content-Disposition"] == 'attachment; filename="grid.csv"'
        lines = list(csv.reader(io.StringIO(reply.body.decode())))
        assert [line[0] for line in lines] == ["learner", "'=1+2", "ada"]
        assert [line[1] for line in lines] == ["labs version", "", ""]  # no push record yet
        mistakes_lines = list(csv.reader(io.StringIO(self.get("export/mistakes.csv", cookie="teacher-token").body.decode())))
        assert mistakes_lines[1] == ["1.1", "1.1/raised-x", "their code raised x", "1", "1"]

    def test_the_exports_name_each_learner_s_labs_version_from_the_push_record(self):
        record = {"version": 3, "note": "", "at": T0, "learners": {"ada": 3, "bob": 2, "=1+2": "=HYPERLINK(\"x\")"}}
        (self.board.settings.db.parent / "push.json").write_text(json.dumps(record))
        self.directory.users_list = [{"name": n, "admin": False} for n in ("=1+2", "ada", "bob", "carol")]
        grid = list(csv.reader(io.StringIO(self.get("export/grid.csv", cookie="teacher-token").body.decode())))
        assert [line[:2] for line in grid] == [["learner", "labs version"], ["'=1+2", "'=HYPERLINK(\"x\")"],
                                               ["ada", "3"], ["bob", "2"], ["carol", ""]]
        self.board.queue.ask("bob", "1.1", "", 0, False, T0)
        self.board.queue.ask("carol", "1.2", "", 0, False, T0 + 1)
        requests = list(csv.reader(io.StringIO(self.get("export/help.csv", cookie="teacher-token").body.decode())))
        assert [line[:3] for line in requests] == [["learner", "labs version", "exercise"], ["bob", "2", "1.1"],
                                                   ["carol", "", "1.2"]]
