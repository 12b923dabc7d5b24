"""What the board asks the hub: its users (page by page), a group's members; a missing group or a hub away."""
from __future__ import annotations

from tornado import web
from tornado.testing import AsyncHTTPTestCase, gen_test

from labkit.workshop.board.hub import HubDirectory

USERS = [{"kind": "user", "name": f"u{i:03}", "admin": i == 0} for i in range(5)]


class FakeHubAPI(web.RequestHandler):
    asked: list[str] = []

    def get(self, what: str) -> None:
        FakeHubAPI.asked.append(self.request.uri)
        if self.request.headers.get("Authorization") != "token board-token":
            raise web.HTTPError(403)
        if what == "users":
            offset, limit = int(self.get_argument("offset")), 2  # the hub's page is smaller than asked
            following = {"offset": offset + limit, "limit": limit} if offset + limit < len(USERS) else None
            self.write({"items": USERS[offset:offset + limit],
                        "_pagination": {"offset": offset, "limit": limit, "total": len(USERS), "next": following}})
        elif what == "groups/instructors":
            self.write({"kind": "group", "name": "instructors", "users": ["helper"]})
        else:
            raise web.HTTPError(404)


class DirectoryTest(AsyncHTTPTestCase):
    def get_app(self) -> web.Application:
        return web.Application([(r"/hub/api/(.*)", FakeHubAPI)])

    def directory(self, token: str = "board-token") -> HubDirectory:
        FakeHubAPI.asked = []
        return HubDirectory(self.get_url("/hub/api"), token)

    @gen_test
    async def test_every_page_of_users_and_one_ask_per_ttl(self):
        directory = self.directory()
        assert [user["name"] for user in await directory.users()] == [user["name"] for user in USERS]
        assert len(FakeHubAPI.asked) == 3
        await directory.users()
        assert len(FakeHubAPI.asked) == 3  # kept for TTL_S

    @gen_test
    async def test_group_members_and_a_missing_group_is_empty(self):
        directory = self.directory()
        assert await directory.group_members("instructors") == {"helper"}
        assert await directory.group_members("nobody") == set()

    @gen_test
    async def test_a_hub_that_refuses_or_is_away_gives_no_list(self):
        assert await self.directory("wrong").users() is None
        assert await self.directory("wrong").group_members("instructors") == set()
        away = HubDirectory("http://127.0.0.1:9/hub/api", "board-token")
        assert await away.users() is None and await away.group_members("instructors") == set()

    @gen_test
    async def test_when_the_hub_stops_answering_the_last_reply_stands(self):
        directory = HubDirectory(self.get_url("/hub/api"), "board-token", ttl=0)
        first = await directory.users()
        directory.token = "revoked"
        assert await directory.users() == first
