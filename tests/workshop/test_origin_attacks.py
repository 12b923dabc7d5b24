"""A learner's own page, served from her server's port, opened by the instructor and by another learner (issue 33).

The attack: a learner's code takes over her server's listening socket (or binds
its port again after killing it), so the hub's proxy hands every request for
her server to a page she wrote. On the hub's origin that page's script acts with
the log-in of whoever opens it: it mints API tokens, changes passwords,
approves sign-ups, reads the board and other learners' files. A room therefore
puts each server on a subdomain of its own (``NAME.localhost`` here, the hub on
``localhost``: Chromium resolves every ``*.localhost`` name to loopback).

The takeover is simulated as it ends: a page server run as the learner's own
Unix account, on a port of its own, and the proxy's route for her server
pointed at it (what the proxy does once her code holds the socket). One room
for the module: root, the real config, its own log-in; every request and
browser step bounded, all on loopback, the accounts removed when the hub stops.
"""
from __future__ import annotations

import contextlib
import json
import pwd
import sqlite3
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from labkit.workshop.load import free_port, loopback, request
from labkit.workshop.room import INSTRUCTOR_CODE
from labkit.workshop.settings import PREFIX
from tests.workshop.hub import Hub, learner_install, logged_in_page, require_proxy, workshop_hub
from tests.workshop.test_log_in_attacks import ADMIN, ADMIN_PASSWORD, LEARNER_PASSWORD, log_in, sign_up

pytestmark = [pytest.mark.workshop, pytest.mark.slow, pytest.mark.ui]

ATTACKER, VICTIM, PENDING = "mallory", "grace", "pat"
SECONDS = 60  # any one request or browser step (two JupyterLab servers start on two busy cores)
# The attacker's page: every request the reported page made, on its own origin ("") and on the hub's, each reply
# recorded if the page could read it. It knows the hub's address and the names, as a learner in the room does.
PAGE = """<!doctype html><title>working</title><script>
const HUB = %(hub)s, BOARD = %(board)s, VICTIMS = %(victims)s, PENDING = %(pending)s;
async function reply(url, options) {  // the reply's text, or null when the page may not read it
  try {
    const answer = await fetch(url, {credentials: "include", ...options});
    return answer.ok ? await answer.text() : null;
  } catch (error) { return null; }
}
function data(text, key) {  // whether a reply is the hub's JSON with that key: data the page got hold of
  try { return text !== null && key in JSON.parse(text); } catch (error) { return false; }
}
async function attack() {
  const got = {};
  for (const base of ["", HUB]) {
    const home = await reply(base + "/hub/home");
    const xsrf = home && (home.match(/xsrf_token: "([^"]+)"/) || [])[1] || "";
    const json = {"Content-Type": "application/json", "X-XSRFToken": xsrf};
    for (const name of VICTIMS) {
      const token = await reply(`${base}/hub/api/users/${name}/tokens`, {method: "POST", headers: json, body: "{}"});
      got[`a token of ${name} at '${base}'`] = data(token, "token");
      await reply(`${base}/hub/change-password/${name}`, {method: "POST", body: new URLSearchParams(
        {_xsrf: xsrf, new_password: "mallory's password 1", new_password_confirmation: "mallory's password 1"})});
    }
    await reply(`${base}/hub/authorize/${PENDING}`, {method: "POST", body: new URLSearchParams({_xsrf: xsrf})});
    got[`the files of ${VICTIMS[1]} at '${base}'`] = data(await reply(`${base}/user/${VICTIMS[1]}/api/contents`), "content");
  }
  for (const base of ["", HUB, BOARD]) {
    got[`the board at '${base}'`] = data(await reply(`${base}/services/labkit-board/api/grid`), "rows");
  }
  return got;
}
attack().then(got => { window.__got = got; document.title = "done"; });
</script>
"""


@dataclass
class Room:
    hub: Hub
    database: Path
    page_server: str  # where the attacker's page server answers

    def password_hashes(self) -> dict[str, bytes]:
        with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=SECONDS)) as db:
            return {name: bytes(hashed) for name, hashed in db.execute("SELECT username, password FROM users_info")}

    def approved(self) -> dict[str, bool]:
        with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=SECONDS)) as db:
            return {name: bool(approved) for name, approved in db.execute("SELECT username, is_authorized FROM users_info")}

    def tokens(self, name: str) -> list[str]:
        return sorted(token["id"] for token in self.hub.api(f"users/{name}/tokens")["api_tokens"])


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    """The room: the instructor, two approved learners with running servers, one sign-up waiting for approval."""
    require_proxy()
    install = learner_install()
    folder = tmp_path_factory.mktemp("origin-attacks")
    with workshop_hub(folder, real_log_in=True, settings={PREFIX + "INSTALL": str(install)}) as hub:
        code = (folder / "state" / INSTRUCTOR_CODE).read_text().strip()
        assert "successful" in sign_up(hub, ADMIN, ADMIN_PASSWORD, code)
        for name in (ATTACKER, VICTIM, PENDING):
            assert "sent to the admin" in sign_up(hub, name, LEARNER_PASSWORD)
        database = folder / "state" / "jupyterhub.sqlite"
        with contextlib.closing(sqlite3.connect(database, timeout=SECONDS)) as db, db:  # approved (test_log_in_attacks: how)
            db.executemany("UPDATE users_info SET is_authorized = 1 WHERE username = ?", [(ATTACKER,), (VICTIM,)])
        for name in (ATTACKER, VICTIM):
            log_in(hub, name, LEARNER_PASSWORD).close()  # the hub knows them once they logged in
            hub.start_server(name)
        for name in (ATTACKER, VICTIM):
            hub.wait_until_ready(name)
        with _attackers_page_server(hub, ATTACKER) as page_server:
            yield Room(hub, database, page_server)


@contextlib.contextmanager
def _attackers_page_server(hub: Hub, name: str) -> Iterator[str]:
    """A page server run as learner ``name``'s own account, serving her page at her server's path; its URL."""
    account = pwd.getpwnam(hub.settings.account(name)) if hub.settings.separated else None
    with tempfile.TemporaryDirectory(prefix="labkit-attack-") as pages:
        page = Path(pages) / "user" / name / "index.html"
        page.parent.mkdir(parents=True)
        hub_origin = hub.url if hub.settings.subdomain_host else ""
        board = hub.service_origin("labkit-board") if hub.settings.subdomain_host else ""
        page.write_text(PAGE % {"hub": json.dumps(hub_origin), "board": json.dumps(board), "victims": json.dumps([ADMIN, VICTIM]),
                                "pending": json.dumps(PENDING)})
        for path in [Path(pages), *Path(pages).rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        port = free_port()
        python = hub.settings.learner_python if hub.settings.separated else Path("/usr/bin/python3")
        as_learner: dict[str, Any] = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []} if account else {}
        server = subprocess.Popen([str(python), "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", pages],
                                  cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                  **as_learner)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.kill()
            server.wait(timeout=SECONDS)


def _point_route(hub: Hub, name: str, target: str) -> None:
    """Point the proxy's route for ``name``'s server at ``target``, as the proxy's own API does (root reads its token)."""
    proxy = next(process for process in hub.processes() if "configurable-http-proxy" in " ".join(process.cmdline()))
    arguments = proxy.cmdline()
    api = f"http://127.0.0.1:{arguments[arguments.index('--api-port') + 1]}/api/routes"
    token = proxy.environ()["CONFIGPROXY_AUTH_TOKEN"]
    routes = request(api, token=token)
    spec = next(spec for spec in routes if spec.rstrip("/").endswith(f"/user/{name}"))
    request(f"{api}{spec}", "POST", {**routes[spec], "target": target}, token=token)
    url, host = loopback(hub.server_url(name) + "/")
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Host": host}), timeout=SECONDS) as reply:
        assert b"attack()" in reply.read(), "the proxy does not serve the attacker's page"


def _open_the_page(room: Room, who: str, password: str) -> dict[str, Any]:
    """``who`` logs in through the hub's page in a fresh Chromium, then opens the attacker's server; what its script got.

    The proxy's route is pointed at the attacker's page server just before (the hub puts it back every 5 minutes).
    """
    with logged_in_page(room.hub, who, password, "/hub/home", SECONDS) as page:
        page.wait_for_url(f"{room.hub.url}/hub/home")
        _point_route(room.hub, ATTACKER, room.page_server)
        page.goto(room.hub.server_url(ATTACKER) + "/")
        page.wait_for_function("document.title === 'done'", timeout=SECONDS * 1000)
        got: dict[str, Any] = page.evaluate("window.__got")
    return got


@pytest.mark.parametrize("victim, password", [(ADMIN, ADMIN_PASSWORD), (VICTIM, LEARNER_PASSWORD)])
def test_a_learners_own_page_reaches_nothing_of_whoever_opens_it(room: Room, victim: str, password: str):
    tokens = {name: room.tokens(name) for name in (ADMIN, VICTIM)}
    hashes = room.password_hashes()
    got = _open_the_page(room, victim, password)
    assert not any(got.values()), f"the attacker's page read or changed something: {got}"
    assert {name: room.tokens(name) for name in (ADMIN, VICTIM)} == tokens, "a token was minted"
    assert room.password_hashes() == hashes, "a password was changed"
    assert room.approved()[PENDING] is False, "the pending sign-up was approved"
    log_in(room.hub, victim, password).close()  # and the victim's own password still works


def test_each_server_is_on_an_origin_of_its_own(room: Room):
    assert room.hub.settings.subdomain_host == room.hub.url
    assert room.hub.server_url(VICTIM).startswith(f"http://{VICTIM}.localhost:")


# Every page of the hub a learner's host must not serve: the log-in and sign-up forms, its pages, its API.
HUB_PATHS = ["/hub/login", "/hub/signup", "/hub/home", "/hub/authorize", "/hub/admin", "/hub/api/", "/hub/api/users",
             "/hub/change-password", "/hub/token"]


def _answer(url: str, token: str = "") -> tuple[int, str]:
    """The status and body of a GET of ``url`` (a ``*.localhost`` host through 127.0.0.1), redirects not followed."""
    import http.client
    import urllib.parse

    address, host = loopback(url)
    parts = urllib.parse.urlsplit(address)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=SECONDS)
    try:
        headers = {"Host": host, **({"Authorization": f"token {token}"} if token else {})}
        connection.request("GET", parts.path or "/", headers=headers)
        reply = connection.getresponse()
        return reply.status, reply.read().decode(errors="replace")
    finally:
        connection.close()


def _host_kinds(room: Room) -> dict[str, str]:
    scheme, _, host = room.hub.url.partition("://")
    return {"a learner's host": f"{scheme}://{VICTIM}.{host}", "the attacker's host": f"{scheme}://{ATTACKER}.{host}",
            "the board's host": room.hub.service_origin("labkit-board"), "a made-up host": f"{scheme}://nobody.{host}"}


@pytest.mark.parametrize("kind", ["a learner's host", "the attacker's host", "the board's host", "a made-up host"])
def test_no_host_but_the_hubs_serves_a_page_or_the_api_of_the_hub(room: Room, kind: str):
    origin = _host_kinds(room)[kind]
    for path in HUB_PATHS:
        status, body = _answer(origin + path, token=room.hub.token)
        assert status >= 400, f"{origin}{path} answered {status}"
        assert 'name="password"' not in body and "_xsrf" not in body and '"version"' not in body, f"{origin}{path}: {body[:500]}"


def test_the_hubs_host_serves_the_hub_and_a_learners_host_only_her_server(room: Room):
    status, body = _answer(room.hub.url + "/hub/login")
    assert status == 200 and 'name="password"' in body, "the hub's own log-in page"
    assert _answer(room.hub.url + "/hub/api/")[0] == 200
    scheme, _, host = room.hub.url.partition("://")
    status, _ = _answer(f"{scheme}://{VICTIM}.{host}/user/{VICTIM}/api/status")
    assert status in (200, 302, 403), f"her own server did not answer: {status}"
    for other in (ATTACKER, ADMIN):  # another learner's server, or the instructor's, is not reached on her host
        status, _ = _answer(f"{scheme}://{VICTIM}.{host}/user/{other}/api/status")
        assert status == 404, f"{other}'s server path on {VICTIM}'s host: {status}"
