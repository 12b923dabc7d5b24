"""What the board's tests share: events made in one line, a fake hub (HubAuth and directory), a board on disk.

Why a fake HubAuth and not a hub: the board trusts the hub for one thing, who owns a token
(``HubAuth.user_for_token``); a real ``HubOAuth`` whose ``user_for_token`` reads a table of test
tokens keeps everything else real (the OAuth cookie, the XSRF rule, the scope check).
"""
from __future__ import annotations

import copy
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from jupyterhub.services.auth import HubOAuth
from tornado.web import create_signed_value

from labkit.progress.events import Event
from labkit.workshop.board.app import Board
from labkit.workshop.board.queue import HelpQueue
from labkit.workshop.board.settings import BoardSettings
from labkit.workshop.board.store import EventStore, Received

PREFIX = "/services/labkit-board/"
SCOPE = "access:services!service=labkit-board"
CLIENT_ID = "service-labkit-board"
COOKIE_SECRET = b"s" * 32
T0 = 1_700_000_000.0


def event(learner: str = "ada", exercise: str = "1.1", status: str = "solved", mistake: str = "", *,
          kind: str = "check", at: float = T0, failed_probes: tuple[str, ...] = (), hint_level: int = 0) -> Event:
    """One event; a "not solved" check without a mistake gets ``<exercise>/other``."""
    if kind == "check" and status in ("not solved", "checker error") and not mistake:
        mistake = f"{exercise}/{'other' if status == 'not solved' else 'checker-error'}"
    return Event(learner=learner, kind=kind, exercise=exercise, status=status, mistake=mistake,  # type: ignore[arg-type]
                 failed_probes=failed_probes, hint_level=hint_level, time=at, id=uuid.uuid4().hex)


def hint(learner: str, exercise: str, level: int, at: float = T0) -> Event:
    return event(learner, exercise, "hint", kind="hint", hint_level=level, at=at)


def preflight(learner: str, failed: tuple[str, ...] = (), at: float = T0) -> Event:
    return event(learner, "preflight", "not ready" if failed else "ready", kind="preflight", failed_probes=failed, at=at)


def received(*events: Event, delay: float = 1.0) -> list[Received]:
    """``events`` as the board keeps them, each received ``delay`` seconds after it happened."""
    return [Received(item, item.time + delay) for item in events]


def as_json(item: Event) -> dict[str, Any]:
    return {**item.__dict__, "failed_probes": list(item.failed_probes)}


def user(name: str, *, admin: bool = False, groups: tuple[str, ...] = (), scopes: tuple[str, ...] = (SCOPE,),
         kind: str = "user") -> dict[str, Any]:
    """A hub user model as ``GET /hub/api/user`` gives it for a token."""
    return {"kind": kind, "name": name, "admin": admin, "groups": list(groups), "scopes": list(scopes)}


class FakeHubAuth(HubOAuth):
    """A real ``HubOAuth`` whose hub is a table: token -> user model (None: the hub does not know it)."""

    def __init__(self, tokens: dict[str, dict[str, Any]]) -> None:
        super().__init__(api_token="the-board's-own-token", oauth_client_id=CLIENT_ID, base_url=PREFIX,
                         api_url="http://127.0.0.1:9/hub/api", access_scopes={SCOPE}, allow_token_in_url=False,
                         oauth_redirect_uri=PREFIX + "oauth_callback")
        self.tokens = tokens

    def user_for_token(self, token: str, use_cache: bool = True, session_id: str = "", *,
                       sync: bool = True) -> dict[str, Any] | None | Awaitable[dict[str, Any] | None]:
        model = copy.deepcopy(self.tokens.get(token))
        if sync:
            return model

        async def reply() -> dict[str, Any] | None:
            return model
        return reply()

    def cookie(self, token: str) -> str:
        """The ``Cookie`` header of a browser that logged in to the board by OAuth with ``token``."""
        return f"{self.cookie_name}={create_signed_value(COOKIE_SECRET, self.cookie_name, token).decode()}"


class FakeDirectory:
    """The hub's users and groups, as the board would be told them (``users=None``: the hub cannot say)."""

    def __init__(self, users: list[dict[str, Any]] | None = None, groups: dict[str, set[str]] | None = None) -> None:
        self.users_list, self.groups = users, groups or {}

    async def users(self) -> list[dict[str, Any]] | None:
        return copy.deepcopy(self.users_list)

    async def group_members(self, group: str) -> set[str]:
        return set(self.groups.get(group, set()))


def board_settings(folder: Path, **changes: Any) -> BoardSettings:
    values: dict[str, Any] = {"db": folder / "board.sqlite", "cookie_secret_file": folder / "cookie_secret",
                              "api_url": "http://127.0.0.1:9/hub/api", "api_token": "the-board's-own-token",
                              "instructors": frozenset({"teacher"}), "exercises": ("1.1", "1.2")}
    return BoardSettings(**{**values, **changes})


class FakeRevoker:
    """The hub's share API as the board would call it: the learners whose look was revoked, in order."""

    def __init__(self) -> None:
        self.revoked: list[str] = []

    async def revoke(self, learner: str, instructors: set[str]) -> bool:
        self.revoked.append(learner)
        return True

    async def revoke_share(self, instructor: str, owner: str, server: str) -> bool:
        self.revoked.append(owner)
        return True

    async def shared_with(self, instructor: str) -> list[tuple[str, str]] | None:
        return []  # what the sweeper finds: test_sweep.py, with the real client and a fake hub


def make_board(folder: Path, directory: FakeDirectory, now: float = T0 + 60, **changes: Any) -> Board:
    settings = board_settings(folder, **changes)
    return Board(settings, EventStore(settings.db), directory, clock=lambda: now,
                 queue=HelpQueue(folder / "help.sqlite"), revoker=FakeRevoker())
