"""The board's web application: the page and the grid for instructors, each learner's own rows, the events' door.

Why each rule (a room is hostile, DESIGN.md):

- ``POST api/events`` is the only POST and the only change of state. It takes the learner's hub token
  from the ``Authorization`` header and nothing else: a cookie would let any page the learner opens
  post in their name, and a header cannot be set by another site without a CORS preflight the board
  never answers. The learner is the token's owner; an event for anyone else refuses the whole post.
  Every event passes :func:`labkit.progress.events.parse_event`; one bad event refuses the post.
- Every GET only reads. The page, the grid and the exports are the instructors' (the names of
  ``LABKIT_BOARD_INSTRUCTORS``, the hub group ``instructors``, JupyterHub admins); ``api/me`` is any
  learner's own rows. A browser logs in by the hub's OAuth (``HubOAuth``); a cookie-authenticated
  ``fetch`` must carry the XSRF token the page holds (JupyterHub's own rule).
- Every name and word is escaped where it is shown: tornado's templates escape ``{{ }}``; the page's
  script (``static/board.js``) writes text with ``textContent`` only; the page has no inline script,
  so its Content-Security-Policy allows scripts from the board alone.
"""
from __future__ import annotations

import html
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated, UserNotAllowed
from tornado import web

from labkit.i18n.messages import _
from labkit.progress.events import parse_event
from labkit.workshop.board.export import grid_csv, mistakes_csv
from labkit.workshop.board.grid import Grid, LearnerPart, Rules, exercises_seen, grid_of, in_order, learner_part, learner_row
from labkit.workshop.board.hub import Directory
from labkit.workshop.board.queue import HelpQueue, ShareRevoker
from labkit.workshop.board.rate import EventRate
from labkit.workshop.board.settings import BoardSettings
from labkit.workshop.board.store import EventStore, Received
from labkit.workshop.board.versions import RECORD, learner_versions, version_texts
from labkit.workshop.board.words import attempts, minutes, mistake_line, page_words, solved_of

HERE = Path(__file__).resolve().parent
INSTRUCTORS_GROUP = "instructors"
MAX_EVENTS = 200  # per post: what the sender sends at once (labkit.progress.sender.BATCH)
MAX_BODY = 256 * 1024
MAX_EVENTS_PER_LEARNER = 2_000  # a day's workshop is a few hundred; more is a learner filling the board's disk
EVENTS_PER_MINUTE = 120  # an honest learner sends a few a minute; a loop in a cell, thousands a second
POLL_MS = 2000
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@dataclass
class _Cached:
    """One learner's events and grid part, as of their store version (the part made for ``columns``)."""

    version: int
    events: list[Received]
    seen: tuple[str, ...]
    columns: tuple[str, ...] = ()
    part: LearnerPart | None = None


@dataclass
class Board:
    """What every handler shares: the settings, the events, the hub's directory, the clock, the posting rate.

    The grid is kept per learner (:class:`_Cached`): a poll recomputes only the learners whose events
    changed since, so one learner posting a lot costs the instructor's grid their own part, not everyone's.
    """

    settings: BoardSettings
    store: EventStore
    directory: Directory
    clock: Callable[[], float] = field(default=time.time)
    rate: EventRate = field(default_factory=lambda: EventRate(EVENTS_PER_MINUTE, MAX_EVENTS))
    _cache: dict[str, _Cached] = field(default_factory=dict)
    queue: HelpQueue | None = None  # the help queue (board/queue.py); None: a board without one
    revoker: ShareRevoker | None = None  # ends a look when its request ends (board/queue_app.py)

    async def is_instructor(self, model: dict[str, Any]) -> bool:
        """Whether the hub user ``model`` may see the board."""
        name = model["name"]
        if model.get("admin") or name in self.settings.instructors or INSTRUCTORS_GROUP in (model.get("groups") or ()):
            return True
        return name in await self.directory.group_members(INSTRUCTORS_GROUP)

    async def grid(self) -> tuple[Grid, list[Received]]:
        """The grid now, of the hub's users (or, when the hub cannot say, of everyone with an event) less instructors."""
        users = await self.directory.users()
        instructors = set(self.settings.instructors) | await self.directory.group_members(INSTRUCTORS_GROUP)
        instructors |= {user["name"] for user in users or () if user.get("admin")}
        stored = self.store.learners()
        names = (stored if users is None else {user["name"] for user in users}) - instructors
        cached = {name: self._learner(name) for name in stored | names}
        columns = self.settings.exercises or in_order({exercise for item in cached.values() for exercise in item.seen})
        parts = {}
        for name in names:
            item = cached[name]
            if item.part is None or item.columns != columns:
                item.part, item.columns = learner_part(name, item.events, columns), columns
            parts[name] = item.part
        rules = Rules(self.settings.stuck_attempts, self.settings.stuck_minutes, self.settings.stuck_repeats,
                      self.settings.stuck_slower)
        events = [event for item in cached.values() for event in item.events]
        return grid_of(parts, columns, self.clock(), rules), events

    def events_of(self, name: str) -> list[Received]:
        """``name``'s events, oldest first, from the cache (read again only when they changed)."""
        return self._learner(name).events

    def _learner(self, name: str) -> _Cached:
        """``name``'s cached events, read again only when the store says they changed."""
        version = self.store.version(name)
        item = self._cache.get(name)
        if item is None or item.version != version:
            events = self.store.events(name) if name in self.store.learners() else []
            item = self._cache[name] = _Cached(version, events, exercises_seen(events))
        return item

    def server_link(self, learner: str) -> tuple[str, str]:
        """Where "open this learner's server" goes, and the link's title."""
        if self.settings.server_url:
            return (self.settings.server_url.format(name=quote(learner, safe="")),
                    _("open {name}'s server").format(name=learner))
        return self.settings.admin_url, _("the hub's admin page, which lists every learner's server (set "
                                          "LABKIT_BOARD_SERVER_URL to link each learner's own server)")

    def version_texts(self, grid: Grid) -> dict[str, str]:
        """Each row's version cell (:mod:`labkit.workshop.board.versions`), from the push record beside the database."""
        return version_texts(self.settings.db.parent / RECORD, [row.learner for row in grid.rows])

    def learner_versions(self) -> dict[str, str]:
        """Each recorded learner's labs version, for the exports."""
        return learner_versions(self.settings.db.parent / RECORD)

    def grid_json(self, grid: Grid) -> dict[str, Any]:
        """The grid's data, with what the page shows of it in the room's language (the data itself stays English)."""
        data = grid.to_json()
        versions = self.version_texts(grid)
        for row in data["rows"]:
            row["server_url"], row["server_title"] = self.server_link(row["learner"])
            row["version_text"] = versions[row["learner"]]
        for summary in data["summaries"]:
            summary["solved_text"] = solved_of(summary["solved"], summary["learners"])
            for count in summary["mistakes"]:
                count["line"] = mistake_line(count["words"], count["mistake"], count["learners"])
        return data


class _Handler(HubOAuthenticated, web.RequestHandler):
    """Who is asking (hub token or OAuth cookie), the board's headers, and errors as JSON or an escaped page."""

    api = False  # JSON errors, 403 instead of a log-in redirect

    def initialize(self, board: Board, hub_auth: HubOAuth) -> None:
        self.board = board
        self.hub_auth = hub_auth
        self.refusal = ""

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.set_header("Cache-Control", "no-store")

    async def prepare(self) -> None:
        model = await self.hub_auth.get_user(self, sync=False)
        if model and model.get("kind", "user") != "user":
            model, self.refusal = None, "A service has no place on the board."
        elif model:
            try:
                model = self.check_hub_user(model)
            except UserNotAllowed:
                model, self.refusal = None, "This hub token may not use the board."
        self.current_user = model

    def who(self) -> dict[str, Any]:
        """The hub user asking; 403 (or, for a page, the hub's log-in) when nobody is."""
        if self.current_user:
            return dict(self.current_user)
        if self.refusal or self.api:
            raise web.HTTPError(403, self.refusal or "Log in to the hub first (or send your hub token).")
        self.redirect(self.get_login_url())
        raise web.Finish()

    async def instructor(self) -> dict[str, Any]:
        """The instructor asking; 403 for anyone else."""
        model = self.who()
        if not await self.board.is_instructor(model):
            raise web.HTTPError(403, "The board is for the room's instructors; you are logged in as %s.", model["name"])
        return model

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        message = _message(kwargs, self._reason, status_code)
        if self.api:
            self.finish({"error": message})
            return
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{status_code} · room board"
                    f"</title></head><body><h1>{status_code}: {html.escape(self._reason)}</h1>"
                    f"<p>{html.escape(message)}</p></body></html>")


class PageHandler(_Handler):
    """``GET {prefix}``: the board page (instructors)."""

    async def get(self) -> None:
        model = await self.instructor()
        grid, _ = await self.board.grid()
        prefix = self.board.settings.prefix
        token = self.xsrf_token  # also sets the XSRF cookie the page's fetch of api/grid needs
        self.render("board.html", grid=grid, viewer=model["name"], prefix=prefix, grid_url=prefix + "api/grid",
                    xsrf=token.decode("ascii") if isinstance(token, bytes) else token, poll_ms=POLL_MS,
                    link=self.board.server_link, clock=_local_clock, slug=_slug, words=page_words(), attempts=attempts,
                    minutes=minutes, solved_of=solved_of, mistake_line=mistake_line,
                    versions=self.board.version_texts(grid))


class GridHandler(_Handler):
    """``GET {prefix}api/grid``: the grid as JSON (instructors)."""

    api = True

    async def get(self) -> None:
        await self.instructor()
        grid, _ = await self.board.grid()
        self.write(self.board.grid_json(grid))


class MeHandler(_Handler):
    """``GET {prefix}api/me``: the asking learner's own row (per exercise the state, attempts, last time, hints)
    and the events the board holds of theirs: what a learner may check the board knows of them."""

    api = True

    async def get(self) -> None:
        name = self.who()["name"]
        events = self.board.events_of(name)
        row = learner_row(name, events, self.board.settings.exercises or exercises_seen(events))
        data = row.to_json()
        del data["stuck"]
        data["events"] = [json.loads(item.event.to_json()) for item in events]
        self.write(data)


class ExportHandler(_Handler):
    """``GET {prefix}export/grid.csv`` and ``export/mistakes.csv`` (instructors)."""

    async def get(self, what: str) -> None:
        await self.instructor()
        grid, events = await self.board.grid()
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", f'attachment; filename="{what}.csv"')
        self.finish(grid_csv(grid, self.board.learner_versions()) if what == "grid" else mistakes_csv(grid, events))


class EventsHandler(web.RequestHandler):
    """``POST {prefix}api/events``: a learner's verdicts, with their hub token in the header (never a cookie)."""

    def initialize(self, board: Board, hub_auth: HubOAuth) -> None:
        self.board = board
        self.hub_auth = hub_auth
        self.retry_after = 0  # seconds, on a 429 for posting too fast

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")

    async def post(self) -> None:
        learner = await self._learner()
        if self.board.rate.left(learner) < 1:  # refused before its body is even read: a flood costs little
            self._too_fast(60 / EVENTS_PER_MINUTE)
        if len(self.request.body) > MAX_BODY:
            raise web.HTTPError(413, f"A post holds at most {MAX_BODY // 1024} KiB of events.")
        try:
            payload = json.loads(self.request.body)
        except (ValueError, UnicodeDecodeError):
            raise web.HTTPError(400, "The body is JSON: {\"events\": [...]}.") from None
        if not isinstance(payload, dict) or set(payload) != {"events"} or not isinstance(payload["events"], list):
            raise web.HTTPError(400, "The body is {\"events\": [...]}, a list of events and nothing else.")
        if len(payload["events"]) > MAX_EVENTS:
            raise web.HTTPError(413, f"A post holds at most {MAX_EVENTS} events.")
        events = []
        for number, record in enumerate(payload["events"], 1):
            try:
                events.append(parse_event(record))
            except (ValueError, TypeError) as exc:
                raise web.HTTPError(400, f"Event {number} is refused ({exc}); nothing was stored.") from None
        if any(event.learner != learner for event in events):
            raise web.HTTPError(403, "A learner posting for another learner is refused; nothing was stored.")
        if self.board.store.count(learner) + len(events) > MAX_EVENTS_PER_LEARNER:
            raise web.HTTPError(429, f"The board keeps at most {MAX_EVENTS_PER_LEARNER} events per learner.")
        wait = self.board.rate.take(learner, len(events))
        if wait:
            self._too_fast(wait)
        self.write({"stored": self.board.store.add(events, received=self.board.clock())})

    async def _learner(self) -> str:
        """The name of the learner whose token is in the ``Authorization`` header; 403 for anything else."""
        match = self.hub_auth.auth_header_pat.match(self.request.headers.get("Authorization", ""))
        if not match:
            raise web.HTTPError(403, "Send events with your hub token in the Authorization header (never a cookie).")
        model = await self.hub_auth.user_for_token(match.group(1), sync=False)
        if not model:
            raise web.HTTPError(403, "The hub does not know this token.")
        if model.get("kind", "user") != "user":
            raise web.HTTPError(403, "A service token posts no events: a learner's own token does.")
        if not self.hub_auth.access_scopes or not self.hub_auth.check_scopes(self.hub_auth.access_scopes, model):
            raise web.HTTPError(403, "This token may not use the board (it needs access:services!service=labkit-board).")
        return str(model["name"])

    def _too_fast(self, wait: float) -> None:
        self.retry_after = math.ceil(wait)
        raise web.HTTPError(429, f"At most {EVENTS_PER_MINUTE} events a minute per learner: your kernel sends these "
                                 f"again later.")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        if self.retry_after:
            self.set_header("Retry-After", str(self.retry_after))
        self.finish({"error": _message(kwargs, self._reason, status_code)})


class CallbackHandler(HubOAuthCallbackHandler):
    """The end of the hub's OAuth log-in (sets the board's cookie), with the board's ``HubOAuth``."""

    def initialize(self, hub_auth: HubOAuth) -> None:
        self.hub_auth = hub_auth


class StaticHandler(web.StaticFileHandler):
    """The page's script and style sheet, never sniffed as another type."""

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")


def make_app(board: Board, hub_auth: HubOAuth, cookie_secret: bytes) -> web.Application:
    """The board's tornado application, under ``board.settings.prefix``."""
    from labkit.workshop.board.queue_app import queue_routes  # it builds on this module's handlers
    if not hub_auth.access_scopes:
        raise ValueError("HubOAuth.access_scopes is empty: set JUPYTERHUB_OAUTH_ACCESS_SCOPES (the hub does for a service)")
    prefix = board.settings.prefix
    base = re.escape(prefix)
    shared = {"board": board, "hub_auth": hub_auth}
    routes: list[Any] = [
        (base, PageHandler, shared),
        (base + r"api/events", EventsHandler, shared),
        (base + r"api/grid", GridHandler, shared),
        (base + r"api/me", MeHandler, shared),
        (base + r"export/(grid|mistakes)\.csv", ExportHandler, shared),
        *queue_routes(base, shared),  # the help queue: board/queue_app.py
        (re.escape(urlsplit(hub_auth.oauth_redirect_uri).path), CallbackHandler, {"hub_auth": hub_auth}),
    ]
    if prefix != "/":
        routes.append((re.escape(prefix.rstrip("/")), web.RedirectHandler, {"url": prefix}))
    return web.Application(routes, cookie_secret=cookie_secret, template_path=str(HERE / "templates"),
                           static_path=str(HERE / "static"), static_url_prefix=prefix + "static/",
                           static_handler_class=StaticHandler, xsrf_cookies=False)


def _message(error_info: dict[str, Any], reason: str, status_code: int) -> str:
    """What an error page says: the refusal's own words, or for a failure of the board only its status's reason."""
    error = error_info.get("exc_info", (None, None, None))[1]
    if status_code >= 500 or not isinstance(error, web.HTTPError) or not error.log_message:
        return reason  # never a traceback or an internal detail
    return str(error.log_message % error.args if error.args else error.log_message)


def _local_clock(seconds: float) -> str:
    return time.strftime("%H:%M", time.localtime(seconds))


def _slug(state: str) -> str:
    return re.sub(r"[^a-z]+", "-", state)
