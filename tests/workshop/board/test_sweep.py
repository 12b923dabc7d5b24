"""The sweeper: a learner's share with an instructor that no open request explains is revoked, through a fake hub API.

The hub is a small tornado application that answers the two calls the board makes (list the shares with a user,
paginated; revoke one), checks the board's token, and records what was revoked; the board's client for it is the
real one (:class:`labkit.workshop.board.queue_app.HubShareRevoker`).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from tornado import web
from tornado.testing import AsyncHTTPTestCase, gen_test

from labkit.workshop.board import queue_app
from labkit.workshop.board.queue_app import HubShareRevoker
from labkit.workshop.board.sweep import sweep_shares
from tests.workshop.board.support import T0, FakeDirectory, make_board

TOKEN = "the-board's-own-token"


class FakeHub:
    """Shares as the hub keeps them: (shared with, owner, server name, kind)."""

    def __init__(self) -> None:
        self.shares: list[tuple[str, str, str, str]] = []
        self.revoked: list[tuple[str, str, str]] = []
        self.failing = False


class _HubHandler(web.RequestHandler):
    def initialize(self, hub: FakeHub) -> None:
        self.hub = hub

    def prepare(self) -> None:
        if self.request.headers.get("Authorization") != f"token {TOKEN}":
            raise web.HTTPError(403)
        if self.hub.failing:
            raise web.HTTPError(500)


class SharedList(_HubHandler):
    def get(self, user: str) -> None:
        offset, limit = int(self.get_argument("offset")), int(self.get_argument("limit"))
        mine = [share for share in self.hub.shares if share[0] == user]
        items = [{"server": {"user": {"name": owner}, "name": server, "url": f"/user/{owner}/{server}"},
                  "scopes": [f"access:servers!server={owner}/{server}"],
                  "user": {"name": user} if kind == "user" else None,
                  "group": {"name": user} if kind == "group" else None, "kind": kind}
                 for _, owner, server, kind in mine[offset:offset + limit]]
        following = {"offset": offset + limit, "limit": limit} if offset + limit < len(mine) else None
        self.finish(json.dumps({"items": items, "_pagination": {"offset": offset, "limit": limit, "total": len(mine),
                                                                "next": following}}))


class Shared(_HubHandler):
    def delete(self, user: str, owner: str, server: str) -> None:
        found = [share for share in self.hub.shares if share[:3] == (user, owner, server) and share[3] == "user"]
        if not found:
            raise web.HTTPError(404)
        self.hub.shares.remove(found[0])
        self.hub.revoked.append((user, owner, server))
        self.set_status(204)


class SweepTest(AsyncHTTPTestCase):
    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp())
        self.hub = FakeHub()
        super().setUp()
        directory = FakeDirectory(users=[{"name": n, "admin": n == "root"} for n in ("ada", "bob", "carol", "root")],
                                  groups={"instructors": {"grace"}})
        self.board = make_board(self.folder, directory)
        self.board.revoker = HubShareRevoker(self.get_url("/hub/api"), TOKEN)

    def tearDown(self) -> None:
        super().tearDown()
        self.board.store.close()
        assert self.board.queue is not None
        self.board.queue.close()
        shutil.rmtree(self.folder)

    def get_app(self) -> web.Application:
        return web.Application([(r"/hub/api/users/([^/]+)/shared", SharedList, {"hub": self.hub}),
                                (r"/hub/api/users/([^/]+)/shared/([^/]+)/([^/]*)", Shared, {"hub": self.hub})])

    @gen_test
    async def test_a_share_no_open_request_with_a_look_explains_is_revoked_and_the_rest_stay(self):
        queue = self.board.queue
        queue.ask("ada", "1.1", "", 0, True, T0)  # asked for a look: her share is explained
        queue.ask("carol", "1.1", "", 0, False, T0)  # asked, but without a look
        self.hub.shares = [("teacher", "ada", "", "user"), ("teacher", "bob", "", "user"),
                           ("teacher", "bob", "named", "user"), ("teacher", "carol", "", "user"),
                           ("teacher", "grace", "", "user"), ("teacher", "root", "", "user"),
                           ("grace", "bob", "", "user"), ("grace", "dave", "", "group")]
        revoked = await sweep_shares(self.board)
        assert sorted(revoked) == sorted(self.hub.revoked) == [("grace", "bob", ""), ("teacher", "bob", ""),
                                                               ("teacher", "bob", "named"), ("teacher", "carol", "")]
        assert self.hub.shares == [("teacher", "ada", "", "user"), ("teacher", "grace", "", "user"),
                                   ("teacher", "root", "", "user"), ("grace", "dave", "", "group")]
        assert await sweep_shares(self.board) == []  # nothing left to sweep

    @gen_test
    async def test_a_share_made_for_a_request_stays_while_it_is_open_and_is_swept_once_it_ended(self):
        request, _ = self.board.queue.ask("bob", "2.3", "", 0, True, T0)
        self.hub.shares = [("teacher", "bob", "", "user")]
        assert await sweep_shares(self.board) == []
        self.board.queue.end(request.id, "closed", T0 + 60)
        assert await sweep_shares(self.board) == [("teacher", "bob", "")]

    @gen_test
    async def test_every_page_of_the_hub_s_list_is_read(self):
        queue_app.SHARES_PAGE, page = 2, queue_app.SHARES_PAGE
        try:
            self.hub.shares = [("teacher", f"learner{index}", "", "user") for index in range(5)]
            assert len(await sweep_shares(self.board)) == 5 and self.hub.shares == []
        finally:
            queue_app.SHARES_PAGE = page

    @gen_test
    async def test_a_hub_that_cannot_say_gets_nothing_revoked(self):
        self.hub.shares = [("teacher", "bob", "", "user")]
        self.hub.failing = True
        assert await sweep_shares(self.board) == []
        assert self.hub.revoked == []
