"""The shared-password log-in on the real hub (issue 33): at most LABKIT_WORKSHOP_MAX_LEARNERS names get in.

Before, anyone with the room's password made unlimited accounts, each a Unix
account and a server with its memory (15 made-up names all got servers). One
hub, its own config on loopback; no server is started (each log-in's redirect
is not followed).
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
import requests

from labkit.workshop.settings import PREFIX
from tests.workshop.hub import Hub, require_proxy, workshop_hub
from tests.workshop.test_log_in_attacks import ADMIN, session, xsrf_of

pytestmark = [pytest.mark.workshop, pytest.mark.slow]

SECONDS = 30
ROOM_PASSWORD, ADMIN_PASSWORD = "the room's password", "the instructor's own password, 32+ long"
CAP = 2


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    require_proxy()
    settings = {PREFIX + "SPAWNER": "shared-account", PREFIX + "PASSWORD": ROOM_PASSWORD,
                PREFIX + "ADMIN_PASSWORD": ADMIN_PASSWORD, PREFIX + "MAX_LEARNERS": str(CAP)}
    with workshop_hub(tmp_path_factory.mktemp("shared-password"), real_log_in=True, settings=settings) as hub:
        yield hub


def _log_in(hub: Hub, name: str, password: str = ROOM_PASSWORD) -> requests.Response:
    with session() as client:
        form = client.get(f"{hub.url}/hub/login", timeout=SECONDS)
        return client.post(f"{hub.url}/hub/login", timeout=SECONDS, allow_redirects=False,
                           data={"_xsrf": xsrf_of(form), "username": name, "password": password})


def test_at_most_max_learners_names_log_in_with_the_room_password(hub: Hub):
    for number in range(CAP):
        assert _log_in(hub, f"made-up{number}").status_code == 302
    full = _log_in(hub, "one-too-many")
    assert full.status_code == 403
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", full.text)).split())
    assert f"The room is full: {CAP} learners have logged in" in text, text[:2000]
    assert "one-too-many" not in {user["name"] for user in hub.api("users")}
    assert _log_in(hub, "made-up0").status_code == 302, "a name that logged in before still logs in"
    assert _log_in(hub, ADMIN, ADMIN_PASSWORD).status_code == 302, "the instructor is never refused"
    assert hub.api(f"users/{ADMIN}")["admin"] is True
