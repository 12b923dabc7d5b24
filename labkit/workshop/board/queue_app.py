"""The help queue's doors on the board: a learner asks and cancels; an instructor sees, claims and closes.

Why each rule (a room is hostile, DESIGN.md), the same as the events' door and the grid's:

- ``POST api/help`` and ``POST api/help/cancel`` take the learner's hub token from the ``Authorization``
  header only (what her kernel sends, :mod:`labkit.progress.help`), never a cookie: another page cannot ask
  or cancel in her name. She is the token's owner; she can cancel only her own request.
- ``GET api/queue`` (the queue, with each wait) is the instructors' alone. ``POST api/queue/<id>/claim`` and
  ``.../close`` change state, so they are POSTs, and a browser's (cookie) POST counts only with the page's
  XSRF token (JupyterHub's ``HubOAuth`` rule): no GET changes anything.
- A learner holds at most ``MAX_OPEN_PER_LEARNER`` open requests (429 beyond): a flood of asks, each on another
  exercise, cannot bury the room's requests under hers (``make workshop-board-loadtest HOSTILE=2`` floods it).
- A request that ends (closed, cancelled, or its look past ``LABKIT_BOARD_LOOK_SECONDS``) with a look gets its
  share revoked at once: the instructors' access to her server lasts the life of the request and no longer.
"""
from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from labkit.workshop.board.app import Board, EventsHandler, _Handler
from labkit.workshop.board.export import help_csv
from labkit.workshop.board.queue import (
    INSTRUCTORS_SHARE_GROUP,
    MAX_OPEN_PER_LEARNER,
    HelpQueue,
    HelpRequest,
    TooManyOpen,
    median_wait,
)
from labkit.workshop.board.queue_words import queue_words

log = logging.getLogger("labkit.workshop.board")
MAX_HELP_BODY = 1024
SHARES_PAGE = 200
ID = r"([0-9a-f]{32})"


class HubShareRevoker:
    """Lists and revokes the shares of learners' servers with the instructors, through the hub's API, with the
    board's own token.

    The board's role holds ``users:shares!group=instructors`` only: it can read and revoke what was shared with
    the instructors, and cannot open, nor share, anyone's server.
    """

    def __init__(self, api_url: str, token: str) -> None:
        self.api_url, self.token = api_url.rstrip("/"), token

    async def revoke(self, learner: str, instructors: set[str]) -> bool:
        done = True
        for instructor in sorted(instructors):
            done = await self.revoke_share(instructor, learner, "") and done
        return done

    async def revoke_share(self, instructor: str, owner: str, server: str) -> bool:
        """Revoke ``instructor``'s share of ``owner``'s server ``server`` ("" the default one); whether it is gone."""
        url = f"{self.api_url}/users/{quote(instructor, safe='')}/shared/{quote(owner, safe='')}/{quote(server, safe='')}"
        try:
            await AsyncHTTPClient().fetch(HTTPRequest(url, method="DELETE", request_timeout=5,
                                                      headers={"Authorization": f"token {self.token}"}))
        except HTTPClientError as exc:
            if exc.code != 404:  # 404: nothing shared (any more), nobody can look
                log.warning("could not revoke %s's share with %s (%s)", owner, instructor, exc)
                return False
        except OSError as exc:
            log.warning("could not revoke %s's share with %s (%s)", owner, instructor, exc)
            return False
        return True

    async def shared_with(self, instructor: str) -> list[tuple[str, str]] | None:
        """The servers shared with ``instructor`` by name, as (owner, server name); None when the hub cannot say."""
        found: list[tuple[str, str]] = []
        offset = 0
        while True:
            url = f"{self.api_url}/users/{quote(instructor, safe='')}/shared?offset={offset}&limit={SHARES_PAGE}"
            request = HTTPRequest(url, request_timeout=5, headers={"Authorization": f"token {self.token}",
                                                                   "Accept": "application/jupyterhub-pagination+json"})
            try:
                reply = json.loads((await AsyncHTTPClient().fetch(request)).body)
                items, following = reply["items"], (reply.get("_pagination") or {}).get("next")
                found += [(item["server"]["user"]["name"], item["server"].get("name") or "") for item in items
                          if item.get("kind") == "user"]  # a share with a group is no instructor's by name
            except HTTPClientError as exc:
                if exc.code == 404:  # no such user on the hub: nothing is shared with them
                    return []
                log.warning("could not list the shares with %s (%s)", instructor, exc)
                return None
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("could not list the shares with %s (%s)", instructor, exc)
                return None
            if not following:
                return found
            offset = int(following["offset"])


async def instructors_of(board: Board) -> set[str]:
    """Whom a learner's look is shared with: the board's instructors by setting and the hub group ``instructors``."""
    return set(board.settings.instructors) | await board.directory.group_members(INSTRUCTORS_SHARE_GROUP)


def queue_of(board: Board) -> HelpQueue:
    if board.queue is None:
        raise web.HTTPError(404, "This board keeps no help queue.")
    return board.queue


async def ended(board: Board, request: HelpRequest | None) -> None:
    """What follows a request's end: its look, if any, is revoked (unless another open request of hers keeps one)."""
    if request is None or not request.look or board.revoker is None:
        return
    if any(other.look for other in queue_of(board).of(request.learner)):
        return
    await board.revoker.revoke(request.learner, await instructors_of(board))


async def expire_looks(board: Board) -> None:
    """End every request whose look is older than the board's limit, revoking its share (run every few seconds)."""
    if board.queue is None:
        return
    for request in board.queue.expire(board.settings.look_seconds, board.clock()):
        await ended(board, request)


class HelpHandler(EventsHandler):
    """``POST {prefix}api/help``: ``{"exercise", "mistake", "hint_level", "look"}`` with the learner's hub token."""

    async def post(self) -> None:
        learner = await self._learner()
        if len(self.request.body) > MAX_HELP_BODY:
            raise web.HTTPError(413, f"A help request is at most {MAX_HELP_BODY} bytes.")
        try:
            body = json.loads(self.request.body)
        except (ValueError, UnicodeDecodeError):
            raise web.HTTPError(400, "The body is JSON.") from None
        if not isinstance(body, dict) or set(body) - {"exercise", "mistake", "hint_level", "look"}:
            raise web.HTTPError(400, "The body holds exercise, mistake, hint_level and look, and nothing else.")
        await expire_looks(self.board)
        try:
            request, new = queue_of(self.board).ask(learner, body.get("exercise"), body.get("mistake", ""),
                                                    body.get("hint_level", 0), body.get("look", False), self.board.clock())
        except ValueError as exc:
            raise web.HTTPError(400, f"Refused: {exc}.") from None
        except TooManyOpen:
            raise web.HTTPError(429, f"You have {MAX_OPEN_PER_LEARNER} open help requests: cancel one, or wait for "
                                     f"the instructor, before asking about another exercise.") from None
        waiting = queue_of(self.board).waiting()
        self.write({"request": request.to_json(self.board.clock()), "new": new,
                    "place": [item.id for item in waiting].index(request.id) + 1,
                    "instructors": sorted(await instructors_of(self.board)) if request.look else []})


class CancelHandler(EventsHandler):
    """``POST {prefix}api/help/cancel`` ``{"exercise": "2.3"}``: the learner ends her own open request (hub token)."""

    async def post(self) -> None:
        learner = await self._learner()
        try:
            exercise = json.loads(self.request.body[:MAX_HELP_BODY]).get("exercise")
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise web.HTTPError(400, "The body is {\"exercise\": \"2.3\"}.") from None
        queue = queue_of(self.board)
        mine = [request for request in queue.of(learner) if request.exercise == exercise]
        request = queue.end(mine[0].id, "cancelled", self.board.clock(), learner=learner) if mine else None
        if request is None:
            raise web.HTTPError(404, "You have no open help request on this exercise.")
        await ended(self.board, request)
        self.write({"request": request.to_json(self.board.clock())})


class QueueHandler(_Handler):
    """``GET {prefix}api/queue``: the open requests in order, with each wait (instructors)."""

    api = True

    async def get(self) -> None:
        await self.instructor()
        await expire_looks(self.board)
        now = self.board.clock()
        requests = []
        for request in queue_of(self.board).waiting():
            row = request.to_json(now)
            row["server_url"] = self.board.server_link(request.learner)[0] if request.look else ""
            requests.append(row)
        wait = median_wait(queue_of(self.board).every())
        self.write({"now": now, "requests": requests, "median_wait_s": None if wait is None else round(wait),
                    "words": queue_words()})


class QueueActionHandler(_Handler):
    """``POST {prefix}api/queue/<id>/claim`` and ``.../close`` (instructors; a browser's POST carries the XSRF token)."""

    api = True

    async def post(self, ident: str, action: str) -> None:
        model = await self.instructor()
        queue, now = queue_of(self.board), self.board.clock()
        request = queue.claim(ident, model["name"], now) if action == "claim" else queue.end(ident, "closed", now)
        if request is None:
            raise web.HTTPError(404, "No open help request has this id.")
        if action == "close":
            await ended(self.board, request)
        self.write({"request": request.to_json(now)})


class HelpExportHandler(_Handler):
    """``GET {prefix}export/help.csv``: every request of the day with its wait-to-claim and claim-to-close."""

    async def get(self) -> None:
        await self.instructor()
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", 'attachment; filename="help.csv"')
        self.finish(help_csv(queue_of(self.board).every(), self.board.learner_versions()))


def queue_routes(base: str, shared: dict[str, Any]) -> list[Any]:
    """The queue's routes under the board's escaped prefix ``base``."""
    return [
        (base + r"api/help", HelpHandler, shared),
        (base + r"api/help/cancel", CancelHandler, shared),
        (base + r"api/queue", QueueHandler, shared),
        (base + rf"api/queue/{ID}/(claim|close)", QueueActionHandler, shared),
        (base + r"export/help\.csv", HelpExportHandler, shared),
    ]
