"""The attacks on the workshop's log-in, replayed against the real hub on loopback (labkit.workshop.auth says why).

One hub for the module (``workshop/jupyterhub_config.py`` with its own authenticator, the shared account): the
instructor signs up through the form, learners sign up as anyone on the network could. Each attack must change
nothing: hostile names are refused at sign-up; a GET of /hub/authorize/NAME or /hub/discard/NAME changes nothing;
a POST without JupyterHub's XSRF token is refused; only the instructor approves and discards. These are the hub's
own rules, the same whatever is in front of it, so they run over plain HTTP on loopback on purpose (no Caddy to
start). The attacks a browser makes (a hostile name in the authorization table, a link or an image in the
instructor's browser, the page's own buttons) run in Chromium over HTTPS, in the room of ``test_https_room.py``.
All traffic stays on 127.0.0.1; every wait is bounded.
"""
from __future__ import annotations

import contextlib
import html
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from labkit.workshop.room import INSTRUCTOR_CODE
from labkit.workshop.settings import USERNAME_RULE, HubSettings
from tests.workshop.hub import Hub, require_proxy, workshop_hub

pytestmark = [pytest.mark.workshop, pytest.mark.slow]

ADMIN = HubSettings().admin
ADMIN_PASSWORD = "instructor's long passphrase"
LEARNER_PASSWORD = "learner passphrase"
SECONDS = 30  # any one request or browser step
# Hostile names, each with a script that, if it ran, marks the page and mints the instructor a token (test_https_room.py
# plants them in the authorization table).
# (No whitespace: an unquoted attribute would end there. The page's own XSRF token and a JSON body: the API's conditions.)
MINT = ("fetch('/hub/api/users/{admin}/tokens',{{method:'POST',"
        "headers:{{'X-XSRFToken':jhdata.xsrf_token,'Content-Type':'application/json'}},body:'{{}}'}})")
XSS_NAMES = [
    "u\ttabindex=1\tautofocus\tonfocus=window.__pwned='focus';" + MINT.format(admin=ADMIN),  # the reported attack
    "v\tonmouseover=window.__pwned='hover';" + MINT.format(admin=ADMIN),
    'w"><img src=x onerror=window.__pwned=\'quote\'>',
    "<script>window.__pwned='script'</script>",
]
REFUSED_NAMES = ["u\ttabindex=1\tautofocus\tonfocus=window.__pwned=1", "two words", "<script>alert(1)</script>",
                 'quote"name', "quote'name", "a" * 25, "name\n"]


@dataclass
class Room:
    """The running hub, its database, and what the instructor's first sign-ups got back."""

    hub: Hub
    database: Path
    refused_admin: dict[str, str] = field(default_factory=dict)  # password tried -> the sign-up page's message

    def sign_ups(self) -> dict[str, bool]:
        """NativeAuthenticator's table: each name and whether it is approved."""
        with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=SECONDS)) as db:
            return {name: bool(approved) for name, approved in db.execute("SELECT username, is_authorized FROM users_info")}

    def password_hash(self, name: str) -> bytes:
        with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=SECONDS)) as db:
            return bytes(db.execute("SELECT password FROM users_info WHERE username = ?", (name,)).fetchone()[0])


def session() -> requests.Session:
    """A client that ignores proxy settings: every request goes straight to 127.0.0.1."""
    client = requests.Session()
    client.trust_env = False
    return client


def xsrf_of(page: requests.Response) -> str:
    found = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
    assert found, f"no XSRF field on {page.url}:\n{page.text[:2000]}"
    return found.group(1)


def sign_up(hub: Hub, name: str, password: str, instructor_code: str = "") -> str:
    """Sign up through the form, as a browser does; the page's message, as its text."""
    with session() as client:
        form = client.get(f"{hub.url}/hub/signup", timeout=SECONDS)
        reply = client.post(f"{hub.url}/hub/signup", timeout=SECONDS, data={
            "_xsrf": xsrf_of(form), "username": name, "signup_password": password,
            "signup_password_confirmation": password, "instructor_code": instructor_code})
    assert reply.status_code in (200, 429), f"sign-up of {name!r}: {reply.status_code}\n{hub.log()}"  # 429: too many
    found = re.search(r'<div class="alert [^"]*" role="alert">(.*?)</div>', reply.text, re.S)
    assert found, reply.text[:3000]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def log_in(hub: Hub, name: str, password: str) -> requests.Session:
    """A client logged in through the log-in form (refused: the test fails)."""
    client = session()
    form = client.get(f"{hub.url}/hub/login", timeout=SECONDS)
    reply = client.post(f"{hub.url}/hub/login?next=%2Fhub%2Fhome", timeout=SECONDS,
                        data={"_xsrf": xsrf_of(form), "username": name, "password": password})
    assert reply.url.endswith("/hub/home"), f"{name} could not log in: {reply.url}\n{reply.text[:2000]}"
    return client


def css_string(text: str) -> str:
    """``text`` as a quoted CSS attribute value."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\9 ").replace("\n", "\\a ") + '"'


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    """The hub; the instructor tried two passwords that are too short, then signed up with a good one."""
    require_proxy()
    folder = tmp_path_factory.mktemp("log-in-attacks")
    # Every client here is 127.0.0.1: the limit per address (tests/workshop/test_log_in_flood.py) is raised.
    settings = {"LABKIT_WORKSHOP_SPAWNER": "shared-account", "LABKIT_WORKSHOP_LOGIN_ATTEMPTS_PER_MINUTE": "1000"}
    with workshop_hub(folder, real_log_in=True, settings=settings) as hub:
        room = Room(hub, folder / "state" / "jupyterhub.sqlite")
        code = (folder / "state" / INSTRUCTOR_CODE).read_text().strip()  # what the hub printed on its console
        for attempt in ("", "a guess"):  # whoever reaches the page first, without the code
            room.refused_admin[f"code {attempt!r}"] = sign_up(hub, ADMIN, ADMIN_PASSWORD, attempt)
        for short in ("x", "11 chars!!!"):
            room.refused_admin[short] = sign_up(hub, ADMIN, short, code)
        assert "successful" in sign_up(hub, ADMIN, ADMIN_PASSWORD, code)
        yield room


@pytest.fixture(scope="module")
def instructor(room: Room) -> Iterator[requests.Session]:
    """The instructor's log-in, outside a browser."""
    with log_in(room.hub, ADMIN, ADMIN_PASSWORD) as client:
        yield client


# --- sign-up: names and passwords -------------------------------------------------------------------------------------


def test_the_instructor_is_approved_at_once_after_refused_short_passwords(room: Room):
    assert room.sign_ups()[ADMIN] is True
    for attempt, message in room.refused_admin.items():
        expected = "needs the instructor's sign-up code" if attempt.startswith("code") else "at least 12 characters"
        assert expected in message, f"{attempt!r}: {message}"


@pytest.mark.parametrize("name", REFUSED_NAMES)
def test_a_hostile_name_is_refused_at_sign_up_naming_the_rule(room: Room, name: str):
    message = sign_up(room.hub, name, LEARNER_PASSWORD)
    assert USERNAME_RULE in message, message
    assert name not in room.sign_ups() and name.lower() not in room.sign_ups()


def test_an_uppercase_name_is_lowered(room: Room):
    assert "sent to the admin" in sign_up(room.hub, "Grace", LEARNER_PASSWORD)
    assert room.sign_ups().get("grace") is False and "Grace" not in room.sign_ups()


def test_a_learner_password_needs_8_characters(room: Room):
    assert "at least 8 characters" in sign_up(room.hub, "shortpass", "7 chars")
    assert "shortpass" not in room.sign_ups()
    assert "sent to the admin" in sign_up(room.hub, "longpass", "8 chars!")
    assert room.sign_ups()["longpass"] is False


def test_the_instructor_cannot_change_to_a_short_password(room: Room, instructor: requests.Session):
    before = room.password_hash(ADMIN)
    for url in (f"{room.hub.url}/hub/change-password", f"{room.hub.url}/hub/change-password/{ADMIN}"):
        form = instructor.get(url, timeout=SECONDS)
        reply = instructor.post(url, timeout=SECONDS, data={
            "_xsrf": xsrf_of(form), "old_password": ADMIN_PASSWORD, "new_password": "11 chars!!!",
            "new_password_confirmation": "11 chars!!!"})
        assert "at least 12 characters" in html.unescape(reply.text), url
    assert room.password_hash(ADMIN) == before


# --- approval: only a POST with the XSRF token ------------------------------------------------------------------------


def test_get_and_a_post_without_xsrf_change_nothing(room: Room, instructor: requests.Session):
    assert "sent to the admin" in sign_up(room.hub, "pending-http", LEARNER_PASSWORD)
    for action in ("authorize", "discard"):
        url = f"{room.hub.url}/hub/{action}/pending-http"
        assert instructor.get(url, timeout=SECONDS, allow_redirects=False).status_code == 405
        assert instructor.post(url, timeout=SECONDS, allow_redirects=False).status_code == 403
        wrong = instructor.post(url, data={"_xsrf": "not-the-token"}, timeout=SECONDS, allow_redirects=False)
        assert wrong.status_code == 403
    assert room.sign_ups()["pending-http"] is False
    with session() as stranger:  # nobody logged in: not even the XSRF token lets them in
        form = stranger.get(f"{room.hub.url}/hub/login", timeout=SECONDS)
        reply = stranger.post(f"{room.hub.url}/hub/authorize/pending-http", data={"_xsrf": xsrf_of(form)},
                              timeout=SECONDS, allow_redirects=False)
        assert reply.status_code == 403, reply.status_code
    assert room.sign_ups()["pending-http"] is False


def test_only_the_instructor_approves_and_discards_with_the_xsrf_token(room: Room, instructor: requests.Session):
    for name in ("approved-http", "other-http"):
        assert "sent to the admin" in sign_up(room.hub, name, LEARNER_PASSWORD)
    token = xsrf_of(instructor.get(f"{room.hub.url}/hub/authorize", timeout=SECONDS))
    reply = instructor.post(f"{room.hub.url}/hub/authorize/approved-http", data={"_xsrf": token}, timeout=SECONDS,
                            allow_redirects=False)
    assert reply.status_code == 302 and room.sign_ups()["approved-http"] is True
    with log_in(room.hub, "approved-http", LEARNER_PASSWORD) as learner:  # a learner, with an XSRF token of their own
        token = xsrf_of(learner.get(f"{room.hub.url}/hub/change-password", timeout=SECONDS))
        for action in ("authorize", "discard"):
            reply = learner.post(f"{room.hub.url}/hub/{action}/other-http", data={"_xsrf": token}, timeout=SECONDS,
                                 allow_redirects=False)
            assert reply.status_code == 403, f"a learner's POST to {action}: {reply.status_code}"
    assert room.sign_ups()["other-http"] is False


# --- the instructor's browser never runs a learner's server on the hub's origin --------------------------------------


def test_the_instructor_is_no_jupyterhub_admin_and_cannot_open_a_learners_server(room: Room, instructor: requests.Session):
    model = room.hub.api(f"users/{ADMIN}")
    assert model["admin"] is False and "labkit-instructor" in model["roles"]
    room.hub.api("users", "POST", {"usernames": ["opened"]})
    room.hub.start_server("opened")
    try:
        room.hub.wait_until_ready("opened")
        reply = instructor.get(f"{room.hub.url}/user/opened/lab", timeout=SECONDS)  # through the server's OAuth log-in
        assert reply.status_code == 403, f"{reply.status_code} {reply.url}"
    finally:
        room.hub.api("users/opened/server", "DELETE")
