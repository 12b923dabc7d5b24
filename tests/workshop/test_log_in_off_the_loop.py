"""Every bcrypt the hub runs, on every log-in path, runs off its event loop; an unknown name costs one like a real one.

Clock-free: the hub's config (this test's only) wraps ``bcrypt.hashpw`` and
``bcrypt.checkpw`` in the hub's own process, and each call writes one line: which
function, its cost factor, and whether it ran on a thread with a running event
loop (the hub's; asyncio's executor threads have none). Each path is driven
through the real pages, on one hub (the real config and log-in, the shared
account, 127.0.0.1); the lines it added must be there, none of them on the loop.
Before this, a refused log-in hashed the password again on the loop
(NativeAuthenticator's ``is_valid_password``), as did both password changes,
and a name nobody signed up with cost no bcrypt at all (so timing told which
names exist).
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from labkit.workshop.room import INSTRUCTOR_CODE
from labkit.workshop.settings import PREFIX
from tests.workshop.hub import Hub, require_proxy, workshop_hub
from tests.workshop.test_log_in_attacks import ADMIN, ADMIN_PASSWORD, LEARNER_PASSWORD, log_in, session, sign_up, xsrf_of

pytestmark = [pytest.mark.workshop, pytest.mark.slow]

SECONDS = 30
APPROVED, PENDING = "ada", "pat"
CALLS = "bcrypt-calls.jsonl"
# Run last by the hub's config: every bcrypt call, with where it ran, one JSON line each.
WATCH_BCRYPT = '''
import asyncio as _asyncio, functools as _functools, json as _json
import bcrypt as _bcrypt
_calls = open({path!r}, "a", buffering=1)
def _watched(function):
    @_functools.wraps(function)
    def watched(password, salt_or_hash):
        try:
            on_loop = _asyncio.get_running_loop() is not None
        except RuntimeError:
            on_loop = False
        _calls.write(_json.dumps({{"call": function.__name__, "cost": salt_or_hash[4:6].decode(), "on_loop": on_loop}}) + "\\n")
        return function(password, salt_or_hash)
    return watched
_bcrypt.hashpw, _bcrypt.checkpw = _watched(_bcrypt.hashpw), _watched(_bcrypt.checkpw)
'''


@dataclass
class Watched:
    hub: Hub
    calls: Path

    def during(self, action: Callable[[], Any]) -> list[dict[str, Any]]:
        """The bcrypt calls the hub made while ``action`` ran (its requests answered: nothing is still hashing)."""
        before = len(self.calls.read_text().splitlines()) if self.calls.exists() else 0
        action()
        return [json.loads(line) for line in self.calls.read_text().splitlines()[before:]]


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    """The hub, the instructor, an approved learner and one waiting for approval."""
    require_proxy()
    folder = tmp_path_factory.mktemp("log-in-off-the-loop")
    env = {PREFIX + "SPAWNER": "shared-account", PREFIX + "LOGIN_ATTEMPTS_PER_MINUTE": "1000"}
    with workshop_hub(folder, real_log_in=True, settings=env,
                      extra_config=WATCH_BCRYPT.format(path=str(folder / CALLS))) as hub:
        code = (folder / "state" / INSTRUCTOR_CODE).read_text().strip()
        assert "successful" in sign_up(hub, ADMIN, ADMIN_PASSWORD, code)
        for name in (APPROVED, PENDING):
            assert "sent to the admin" in sign_up(hub, name, LEARNER_PASSWORD)
        database = folder / "state" / "jupyterhub.sqlite"
        with contextlib.closing(sqlite3.connect(database, timeout=SECONDS)) as db, db:
            db.execute("UPDATE users_info SET is_authorized = 1 WHERE username = ?", (APPROVED,))
        yield Watched(hub, folder / CALLS)


def _log_in_page(hub: Hub, name: str, password: str) -> str:
    """The log-in form posted; the page's text (a refused log-in stays on it)."""
    with session() as client:
        form = client.get(f"{hub.url}/hub/login", timeout=SECONDS)
        reply = client.post(f"{hub.url}/hub/login", timeout=SECONDS, allow_redirects=False,
                            data={"_xsrf": xsrf_of(form), "username": name, "password": password})
    assert reply.status_code in (200, 302), reply.status_code
    return reply.text


def _change_password(hub: Hub, who: str, password: str, url_path: str, data: dict[str, str]) -> None:
    with log_in(hub, who, password) as client:
        url = f"{hub.url}/hub/{url_path}"
        reply = client.post(url, timeout=SECONDS, data={"_xsrf": xsrf_of(client.get(url, timeout=SECONDS)), **data})
    assert "changed successfully" in reply.text, reply.text[-2000:]


NEW_PASSWORD = "ada's second passphrase"
PATHS: dict[str, Callable[[Hub], Any]] = {
    "log-in, right password": lambda hub: log_in(hub, ADMIN, ADMIN_PASSWORD).close(),
    "log-in, wrong password": lambda hub: _log_in_page(hub, ADMIN, "a wrong guess"),
    "log-in, unknown name": lambda hub: _log_in_page(hub, "nobody-here", "a wrong guess"),
    "log-in, not approved yet": lambda hub: _log_in_page(hub, PENDING, LEARNER_PASSWORD),
    "sign-up": lambda hub: sign_up(hub, "newcomer", LEARNER_PASSWORD),
    "password change, her own": lambda hub: _change_password(hub, APPROVED, LEARNER_PASSWORD, "change-password", {
        "old_password": LEARNER_PASSWORD, "new_password": NEW_PASSWORD, "new_password_confirmation": NEW_PASSWORD}),
    "password change, by the instructor": lambda hub: _change_password(hub, ADMIN, ADMIN_PASSWORD,
        f"change-password/{APPROVED}", {"new_password": LEARNER_PASSWORD, "new_password_confirmation": LEARNER_PASSWORD}),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_bcrypt_of_a_log_in_path_runs_off_the_event_loop(watched: Watched, path: str):
    calls = watched.during(lambda: PATHS[path](watched.hub))
    assert calls, f"{path}: the hub ran no bcrypt at all"
    on_loop = [call for call in calls if call["on_loop"]]
    assert not on_loop, f"{path}: bcrypt on the hub's event loop: {on_loop} (of {calls})"


def test_a_sign_up_not_approved_yet_is_told_so(watched: Watched):
    assert f"User {PENDING} has not been authorized by an administrator yet." in _log_in_page(
        watched.hub, PENDING, LEARNER_PASSWORD)
    assert "Invalid username or password." in _log_in_page(watched.hub, PENDING, "a wrong guess")


def test_an_unknown_name_costs_what_an_existing_one_costs(watched: Watched):
    existing = watched.during(lambda: _log_in_page(watched.hub, ADMIN, "a wrong guess"))
    unknown = watched.during(lambda: _log_in_page(watched.hub, "nobody-here", "a wrong guess"))
    signed_up = watched.during(lambda: sign_up(watched.hub, "costly", LEARNER_PASSWORD))
    assert [(call["call"], call["cost"]) for call in unknown] == [(call["call"], call["cost"]) for call in existing]
    assert {call["cost"] for call in unknown} == {call["cost"] for call in signed_up}, "the dummy hash's cost is a real one's"
