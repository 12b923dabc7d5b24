"""What the board asks the hub, with its own token: the hub's users, and the members of a group.

Why asked, not configured: learners sign up during the workshop and a co-instructor may be added
to the hub group ``instructors`` at any time; the grid lists every hub user (a learner with no
event yet is the one who most needs help) less the instructors. Replies are kept for
:data:`TTL_S` seconds, so a board polled every two seconds by a few instructors costs the hub
little. When the hub cannot be asked, the last reply stands (or none: the grid then lists the
learners seen in events), and the board says so in its log.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Protocol
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

TTL_S = 10.0
TIMEOUT_S = 5.0
PAGE = 200
PAGINATION = "application/jupyterhub-pagination+json"
log = logging.getLogger("labkit.workshop.board")


class Directory(Protocol):
    """Who is on the hub (the tests give a fake)."""

    async def users(self) -> list[dict[str, Any]] | None:
        """The hub's user models (``name``, ``admin``, ...), or None when the hub cannot say."""

    async def group_members(self, group: str) -> set[str]:
        """The names in hub group ``group`` (a missing group has none)."""


class HubDirectory:
    """:class:`Directory` from the hub's REST API at ``api_url`` (``.../hub/api``), with the board's ``token``."""

    def __init__(self, api_url: str, token: str, ttl: float = TTL_S) -> None:
        self.api_url, self.token, self.ttl = api_url.rstrip("/"), token, ttl
        self._cache: dict[str, tuple[float, Any]] = {}

    async def users(self) -> list[dict[str, Any]] | None:
        cached = self._fresh("users")
        if cached is not None:
            return list(cached)
        found: list[dict[str, Any]] = []
        offset = 0
        try:
            while True:
                reply = await self._get(f"/users?offset={offset}&limit={PAGE}", accept=PAGINATION)
                if isinstance(reply, list):  # a hub without pagination answers with the whole list
                    found = reply
                    break
                found += reply.get("items", [])
                following = (reply.get("_pagination") or {}).get("next")
                if not following:
                    break
                offset = int(following["offset"])
        except (OSError, HTTPClientError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("could not list the hub's users (%s): the grid lists learners seen in events", exc)
            return self._stale("users")
        models = [model for model in found if isinstance(model, dict) and isinstance(model.get("name"), str)]
        self._keep("users", models)
        return models

    async def group_members(self, group: str) -> set[str]:
        key = "group:" + group
        cached = self._fresh(key)
        if cached is not None:
            return set(cached)
        try:
            reply = await self._get("/groups/" + quote(group, safe=""))
            members = {name for name in reply.get("users", []) if isinstance(name, str)}
        except HTTPClientError as exc:
            if exc.code != 404:
                log.warning("could not read hub group %s (%s)", group, exc)
                return set(self._stale(key) or ())
            members = set()  # no such group: nobody in it
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("could not read hub group %s (%s)", group, exc)
            return set(self._stale(key) or ())
        self._keep(key, members)
        return members

    async def _get(self, path: str, accept: str = "application/json") -> Any:
        request = HTTPRequest(self.api_url + path, headers={"Authorization": f"token {self.token}", "Accept": accept},
                              request_timeout=TIMEOUT_S)
        reply = await AsyncHTTPClient().fetch(request)
        return json.loads(reply.body)

    def _fresh(self, key: str) -> Any:
        if key in self._cache and time.monotonic() - self._cache[key][0] < self.ttl:
            return self._cache[key][1]
        return None

    def _stale(self, key: str) -> Any:
        return self._cache[key][1] if key in self._cache else None

    def _keep(self, key: str, value: Any) -> None:
        self._cache[key] = (time.monotonic(), value)
