"""A learner's own page attacks whoever opens it, in the room as it runs: HTTPS through Caddy, in Chromium (issue 40).

These attacks ran over plain HTTP on ``NAME.localhost`` in ``test_origin_attacks.py``, which is gone: every one
of them runs here, on the names a room has: the hub on ``hub.localhost``, learner NAME on
``NAME.learners.localhost``, Chromium trusting Caddy's CA. Mallory's page
(what her code can serve at her host, ``https_room.learners_page``) is opened by the logged-in instructor and
by grace, a learner whose JupyterLab is open in the same browser. Its script tries:

- cross-site reads of the hub with credentials, and simple (no-cors) POSTs that mint a token, change a password
  and approve a sign-up: the hub's cookies are ``SameSite=Lax`` and never go with them (the hub's log names no
  user for any of its requests), and the hub refuses each (no XSRF token, no JSON body);
- same-site reads and a no-cors POST on grace's server (mallory's host and grace's share the learners' domain,
  so grace's cookies are sent): CORS keeps the reply from the page; her server's origin check and the XSRF check
  each refuse the write (an untitled file, made with both turned off);
- a websocket to grace's running kernel (wss, her cookies sent): refused by the server's origin check;
- framing the hub's approval and token pages, the board and grace's JupyterLab (clickjacking): each refuses to
  render in mallory's frame (``frame-ancestors``);
- the same reads and writes on her own host (``/hub/...``, ``/user/grace/...``, the board's paths): Caddy and
  the hub's proxy answer 404 there.

No host but the hub's serves the hub (through Caddy, and at the hub's proxy on loopback, where a learner's code
reaches it without Caddy); no ``next=`` of the hub's or the board's sends a browser out of the room (open
redirects); and no page of the room tells another origin its address, a token in its query, as the ``Referer``.

One room for the module (``https_room``); the learners are hub users only (the shared account: no Unix account to
remove), in a temporary state folder the hub's stop removes. Every wait is bounded.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin

import pytest

from labkit.workshop.load import request
from tests.workshop.https_room import (
    BOARD,
    HOST,
    SECONDS,
    Room,
    board_url,
    chromium,
    https_room,
    learners_page,
    logged_in,
    open_board,
    requests_seen,
    sign_up,
    sign_ups,
    xsrf,
)
from tests.workshop.test_log_in_attacks import ADMIN, ADMIN_PASSWORD, LEARNER_PASSWORD

pytestmark = [pytest.mark.workshop, pytest.mark.slow, pytest.mark.ui]

ATTACKER, VICTIM, PENDING = "mallory", "grace", "pat"
# Each learner at NAME.LEARNERS, a site apart from the hub's. Set LEARNERS = HOST (the old layout: mallory's page
# same-site with the hub) and the test fails: the hub logs the victim on mallory's requests, her frame of grace's lab
# mints an OAuth token. Without Caddy's frame-ancestors (the servers' CSP dropped) every frame renders.
LEARNERS = "learners.localhost"
# The test's own config: a log-in without a next= of its own lands on /hub/home, not /hub/spawn (so no redirect test
# starts the instructor's server). Every other test names where it goes.
NO_SPAWN = "c.JupyterHub.redirect_to_server = False  # test only: a refused next= lands on /hub/home\n"
START_S = 90  # grace's JupyterLab, first load on two busy cores
MARK = "labkit-attack"  # in every URL the page requests of the hub: its log lines are found by it
FILE = "mallory-was-here.txt"  # what the page's websocket would make grace's kernel write in her workspace
PAGE = """<!doctype html><title>working</title><script>
const HUB = %(hub)s, BOARD = %(board)s, SERVER = %(server)s, KERNEL = %(kernel)s, VICTIMS = %(victims)s,
  PENDING = %(pending)s, MARK = %(mark)s, FILE = %(file)s, FRAMES = %(frames)s;
async function reply(url, options) {  // the reply's text, or null when the page may not read it
  try {
    const answer = await fetch(url, {credentials: "include", ...options});
    return answer.ok ? await answer.text() : null;
  } catch (error) { return null; }
}
function data(text, key) {  // whether a reply is JSON with that key: data the page got hold of
  try { return text !== null && key in JSON.parse(text); } catch (error) { return false; }
}
function post(url, fields) {  // a simple request: sent without asking (no-cors), its reply never readable
  return fetch(url, {method: "POST", mode: "no-cors", credentials: "include", body: new URLSearchParams(fields)})
    .catch(() => null);
}
function socket(url) {  // whether the kernel's websocket opened or answered an execute_request
  return new Promise(resolve => {
    let opened = false, ws;
    const done = value => { try { ws.close(); } catch (error) {} resolve(value); };
    try { ws = new WebSocket(url); } catch (error) { return resolve(false); }
    ws.onopen = () => {
      opened = true;
      ws.send(JSON.stringify({header: {msg_id: "attack", msg_type: "execute_request", session: "attack", username: "",
        version: "5.3", date: ""}, parent_header: {}, metadata: {}, channel: "shell", buffers: [],
        content: {code: "open(" + JSON.stringify(FILE) + ", 'w').write('ws')", silent: false, store_history: false,
                  user_expressions: {}, allow_stdin: false, stop_on_error: true}}));
    };
    ws.onmessage = () => done(true);
    ws.onerror = ws.onclose = () => done(opened);
    setTimeout(() => done(opened), 10000);
  });
}
function framed(url) {  // an iframe of url, once its load (or error page) came
  return new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.src = url;
    frame.onload = () => resolve();
    setTimeout(resolve, 10000);
    document.body.appendChild(frame);
  });
}
async function attack() {
  const got = {};
  // On her own host (what test_origin_attacks.py tried over HTTP): the hub's pages, grace's files, the board.
  got["the hub's home page on her host"] = await reply(`/hub/home?${MARK}`) !== null;
  for (const name of VICTIMS) {
    got[`a token of ${name} on her host`] = data(await reply(`/hub/api/users/${name}/tokens?${MARK}`, {method: "POST",
      headers: {"Content-Type": "application/json"}, body: "{}"}), "token");
  }
  got[`the files of ${VICTIMS[1]} on her host`] = data(await reply(`/user/${VICTIMS[1]}/api/contents?${MARK}`), "content");
  got["the board's grid on her host"] = data(await reply(`/services/labkit-board/api/grid?${MARK}`), "rows");
  const home = await reply(`${HUB}/hub/home?${MARK}`);
  got["the hub's home page"] = home !== null;
  const xsrf = home && (home.match(/xsrf_token: "([^"]+)"/) || [])[1] || "";
  for (const name of VICTIMS) {
    got[`a token of ${name}`] = data(await reply(`${HUB}/hub/api/users/${name}/tokens?${MARK}`, {method: "POST",
      headers: {"Content-Type": "application/json", "X-XSRFToken": xsrf}, body: "{}"}), "token");
    await post(`${HUB}/hub/api/users/${name}/tokens?${MARK}`, {note: "mallory"});
    await post(`${HUB}/hub/change-password/${name}?${MARK}`, {_xsrf: xsrf, new_password: "mallory's password 1",
      new_password_confirmation: "mallory's password 1"});
  }
  await post(`${HUB}/hub/authorize/${PENDING}?${MARK}`, {_xsrf: xsrf});
  got["the board's grid"] = data(await reply(`${BOARD}/services/labkit-board/api/grid?${MARK}`), "rows");
  got[`the files of ${VICTIMS[1]}`] = data(await reply(`${SERVER}/api/contents`), "content");
  await fetch(`${SERVER}/api/contents`, {method: "POST", mode: "no-cors", credentials: "include",  // a new untitled file
    headers: {"Content-Type": "text/plain"}, body: JSON.stringify({type: "file", ext: ".txt"})}).catch(() => null);
  got[`the kernel of ${VICTIMS[1]}`] = await socket(`${SERVER.replace("https:", "wss:")}/api/kernels/${KERNEL}/channels`);
  await Promise.all(FRAMES.map(framed));
  return got;
}
attack().then(got => { window.__got = got; document.title = "done"; });
</script>
"""


class Victim:
    """Grace's running JupyterLab and a kernel in it (the one mallory's page aims its websocket at)."""

    def __init__(self, room: Room) -> None:
        self.room = room
        self.server = f"{room.learner_origin(VICTIM)}/user/{VICTIM}"
        self.token = room.hub.learner_token(VICTIM)
        self.kernel = str(request(f"{self.server}/api/kernels", "POST", {"name": "python3"}, self.token, room.hub.tls)["id"])

    def files(self) -> list[str]:
        """What her workspace's top folder holds, sorted."""
        listing = request(f"{self.server}/api/contents", token=self.token, tls=self.room.hub.tls)
        return sorted(item["name"] for item in listing["content"])


def _password_hashes(room: Room) -> dict[str, bytes]:
    with contextlib.closing(sqlite3.connect(f"file:{room.database()}?mode=ro", uri=True, timeout=SECONDS)) as db:
        return {name: bytes(hashed) for name, hashed in db.execute("SELECT username, password FROM users_info")}


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    with https_room(tmp_path_factory.mktemp("https-origin-attacks"), LEARNERS, extra_config=NO_SPAWN) as room:
        folder = room.hub.folder
        for name in (ATTACKER, VICTIM):
            sign_up(room, name, LEARNER_PASSWORD, folder / f"{name}-cookies")
        sign_up(room, PENDING, LEARNER_PASSWORD, folder / f"{PENDING}-cookies", approve=False)
        yield room


@pytest.fixture(scope="module")
def victim(room: Room) -> Victim:
    """Grace has logged in once (the hub knows her), her server is started and ready, a kernel runs in it."""
    jar = room.hub.folder / "grace-log-in"
    form = room.get(room.origin() + "/hub/login", jar=jar)
    logged = room.get(room.origin() + "/hub/login", jar=jar, data={"_xsrf": xsrf(form), "username": VICTIM,
                                                                   "password": LEARNER_PASSWORD})
    assert logged.status == 302, logged.body[-2000:]
    room.hub.start_server(VICTIM)
    room.hub.wait_until_ready(VICTIM)
    return Victim(room)


def _hub_log_lines(room: Room) -> list[str]:
    """Every line of the hub's log about a request of the attacker's page (the whole log, not its tail)."""
    return [line for line in (room.hub.folder / "hub.log").read_text(errors="replace").splitlines() if MARK in line]


def _frames(room: Room, victim: Victim) -> list[str]:
    return [f"{room.origin()}/hub/authorize?{MARK}", f"{room.origin()}/hub/token?{MARK}", board_url(room),
            f"{victim.server}/lab"]


def _rendered_frames(page: Any) -> list[str]:
    """The frames that rendered inside the attacker's page (each of them a page of the room).

    A frame refused by ``frame-ancestors`` holds Chromium's error page (``chrome-error://``) instead.
    """
    return [frame.url for frame in page.frames[1:] if not frame.url.startswith("chrome-error://")]


@dataclass
class Before:
    """What the room held just before the victim opened mallory's page."""

    tokens: dict[str, list[str]]
    hashes: dict[str, bytes]
    log_lines: int
    files: list[str]  # in grace's workspace

    @classmethod
    def now(cls, room: Room, victim: Victim) -> Before:
        return cls(_tokens(room), _password_hashes(room), len(_hub_log_lines(room)), victim.files())


def _tokens(room: Room) -> dict[str, list[str]]:
    return {name: sorted(token["id"] for token in room.hub.api(f"users/{name}/tokens")["api_tokens"])
            for name in (ADMIN, VICTIM)}


def _open_the_page(room: Room, victim: Victim, who: str, password: str, tmp_path: Path
                   ) -> tuple[Before, dict[str, Any], list[str]]:
    """``who`` logs in in a fresh Chromium (grace also opens her JupyterLab), then opens mallory's page.

    What the room held just before (her lab's log-in minted her a token), what its script got, and which
    frames rendered in it.
    """
    page_body = PAGE % {name: json.dumps(value) for name, value in {
        "hub": room.origin(), "board": room.origin(f"{BOARD}--service.{HOST}"), "server": victim.server,
        "kernel": victim.kernel, "victims": [ADMIN, VICTIM], "pending": PENDING, "mark": MARK, "file": FILE,
        "frames": _frames(room, victim)}.items()}
    with learners_page(room, ATTACKER, page_body) as page_url, chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, who, password)
        if who == VICTIM:  # her lab open: her server's cookies are in this browser, sent to her host
            page.set_default_timeout(START_S * 1000)
            page.goto(f"{victim.server}/lab")
            page.locator(".jp-DirListing-item").first.wait_for()
            assert any(cookie["domain"].startswith(f"{VICTIM}.") for cookie in page.context.cookies()), "no cookie of her server"
        before = Before.now(room, victim)
        page.goto(page_url)
        page.wait_for_function("document.title === 'done'", timeout=START_S * 1000)
        got: dict[str, Any] = page.evaluate("window.__got")
        time.sleep(1)  # the frames' error pages replace their documents
        return before, got, _rendered_frames(page)


@pytest.mark.parametrize("who, password", [(ADMIN, ADMIN_PASSWORD), (VICTIM, LEARNER_PASSWORD)])
def test_in_chromium_over_https_a_learners_page_reaches_nothing_of_whoever_opens_it(
        room: Room, victim: Victim, who: str, password: str, tmp_path: Path):
    before, got, rendered = _open_the_page(room, victim, who, password, tmp_path)
    assert not any(got.values()), f"mallory's page read or changed something: {got}"
    assert rendered == [], f"framed in mallory's page (clickjacking): {rendered}"
    lines = _hub_log_lines(room)[before.log_lines:]
    assert lines, "the hub logged none of the page's requests"
    assert not [line for line in lines if f"({who}@" in line], f"the hub's cookies reached it from mallory's page: {lines}"
    assert _tokens(room) == before.tokens, "a token was minted"
    assert _password_hashes(room) == before.hashes, "a password was changed"
    assert sign_ups(room)[PENDING] is False, "the pending sign-up was approved"
    assert victim.files() == before.files, "the page wrote in grace's workspace (no-cors POST or her kernel's websocket)"


def test_in_chromium_over_https_every_cookie_of_the_room_is_secure(room: Room, victim: Victim, tmp_path: Path):
    """Every cookie the hub, the board and a learner's JupyterLab set is ``Secure``: never sent over plain HTTP."""
    with chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, VICTIM, LEARNER_PASSWORD)
        page.set_default_timeout(START_S * 1000)
        page.goto(f"{victim.server}/lab")
        page.locator(".jp-DirListing-item").first.wait_for()
        cookies = page.context.cookies()
    assert {cookie["domain"].lstrip(".") for cookie in cookies} >= {HOST, f"{VICTIM}.{LEARNERS}"}, cookies
    assert [(cookie["domain"], cookie["path"], cookie["name"]) for cookie in cookies if not cookie["secure"]] == []


# --- the hub on its own host only (moved here from test_origin_attacks.py, which ran them over plain HTTP) -------------

# Every page of the hub a learner's host must not serve: the log-in and sign-up forms, its pages, its API.
HUB_PATHS = ["/hub/login", "/hub/signup", "/hub/home", "/hub/authorize", "/hub/admin", "/hub/api/", "/hub/api/users",
             "/hub/change-password", "/hub/token"]
HOST_KINDS = {"a learner's host": f"{VICTIM}.{LEARNERS}", "the attacker's host": f"{ATTACKER}.{LEARNERS}",
              "the board's host": f"{BOARD}--service.{HOST}", "a made-up host": f"nobody.{LEARNERS}"}


def _at_the_hubs_proxy(room: Room, host: str, path: str, token: str = "") -> tuple[int, str]:
    """A GET of ``path`` at the hub's proxy on loopback, ``Host: host`` and Caddy's port: what Caddy forwards, and what
    a learner's code reaching the proxy's port directly (plain HTTP, Caddy bypassed) can send. Redirects not followed."""
    connection = http.client.HTTPConnection("127.0.0.1", room.hub.settings.port, timeout=SECONDS)
    try:
        headers = {"Host": f"{host}:{room.port}", **({"Authorization": f"token {token}"} if token else {})}
        connection.request("GET", path, headers=headers)
        reply = connection.getresponse()
        return reply.status, reply.read().decode(errors="replace")
    finally:
        connection.close()


def test_each_server_is_on_an_origin_of_its_own(room: Room):
    """Over HTTPS: each server at ``https://NAME.learners.localhost:PORT``, off the hub's domain (over plain HTTP
    this test asserted ``http://NAME.localhost:PORT``, below the hub's host)."""
    assert room.hub.settings.subdomain_host == room.origin() == f"https://{HOST}:{room.port}"
    assert room.hub.server_url(VICTIM) == f"https://{VICTIM}.{LEARNERS}:{room.port}/user/{VICTIM}"
    assert room.hub.service_origin(BOARD) == f"https://{BOARD}--service.{HOST}:{room.port}"


@pytest.mark.parametrize("kind", list(HOST_KINDS))
def test_no_host_but_the_hubs_serves_a_page_or_the_api_of_the_hub(room: Room, kind: str):
    """Through Caddy (HTTPS, which refuses ``/hub/`` there itself), and at the hub's proxy on loopback over plain HTTP
    on purpose: that is what a learner's code reaches without Caddy, and its routes alone must refuse it too."""
    host = HOST_KINDS[kind]
    for path in HUB_PATHS:
        for where, (status, body) in {"through Caddy": (lambda reply: (reply.status, reply.body))(
                                          room.get(room.origin(host) + path)),
                                      "at the hub's proxy": _at_the_hubs_proxy(room, host, path, room.hub.token)}.items():
            assert status >= 400, f"{host}{path} {where} answered {status}"
            assert 'name="password"' not in body and "_xsrf" not in body and '"version"' not in body, (
                f"{host}{path} {where}: {body[:500]}")
    status, _ = _at_the_hubs_proxy(room, f"nobody.{HOST}", "/hub/login")  # no site of Caddy's, no route of the proxy's
    assert status == 404, status


def test_the_hubs_host_serves_the_hub_and_a_learners_host_only_her_server(room: Room, victim: Victim):
    reply = room.get(room.origin() + "/hub/login")
    assert reply.status == 200 and 'name="password"' in reply.body, "the hub's own log-in page"
    assert room.get(room.origin() + "/hub/api/").status == 200
    host = f"{VICTIM}.{LEARNERS}"
    assert room.get(f"{room.origin(host)}/user/{VICTIM}/api/status").status in (200, 302, 403), "her own server"
    for other in (ATTACKER, ADMIN):  # another learner's server, or the instructor's, is not reached on her host
        assert room.get(f"{room.origin(host)}/user/{other}/api/status").status == 404, f"{other}'s path on {host}"
        assert _at_the_hubs_proxy(room, host, f"/user/{other}/api/status")[0] == 404, f"{other}'s path, at the proxy"


# --- open redirects: no redirect of the hub's or the board's leaves the room --------------------------------------------

EVIL = "evil.example"
# What an attacker writes after ``next=`` in a link (each as it stands in the URL's query): every form a browser
# reads as another host, a script or a document of its own.
REDIRECTS = [f"//{EVIL}", f"https://{EVIL}/", f"/\\{EVIL}", f"%2F%2F{EVIL}", f"%252F%252F{EVIL}", f"/%5C{EVIL}",
             f"%5C%5C{EVIL}", f"///{EVIL}", f"https:{EVIL}", f"/%09/{EVIL}", "javascript:alert(document.domain)",
             "data:text/html,%3Cscript%3Ealert(1)%3C/script%3E", f"https://{HOST}@{EVIL}/", f"https://{HOST}.{EVIL}/",
             f"https://{ATTACKER}.{LEARNERS}/user/{ATTACKER}/"]


class Hops:
    """Every request a browser context made and every redirect it was sent: none may leave the room's own hosts."""

    def __init__(self, context: Any, room: Room) -> None:
        self.room = room
        self.urls: list[str] = []
        self.locations: list[str] = []
        context.on("request", lambda asked: self.urls.append(asked.url))
        context.on("response", self._response)

    def _response(self, response: Any) -> None:
        location = response.headers.get("location")
        if location is not None:
            self.locations.append(urljoin(response.url, location))

    def outside(self) -> list[str]:
        """Each URL asked for or redirected to that is no page of the hub or the board, over HTTPS."""
        inside = (f"{self.room.origin()}/", f"{board_url(self.room)}")
        return [url for url in self.urls + self.locations if not url.startswith(inside)]


def _follow(page: Any, room: Room, form: str) -> None:
    """Each link with ``next=form``: log-out, log-in, logged in already, the board, the board's OAuth ``redirect_uri``."""
    page.goto(f"{room.origin()}/hub/logout?next={form}")
    assert page.url.startswith(f"{room.origin()}/hub/login"), f"log-out, next={form}: {page.url}"
    page.goto(f"{room.origin()}/hub/login?next={form}")
    page.fill("#username_input", ADMIN)
    page.fill("#password_input", ADMIN_PASSWORD)
    with page.expect_navigation():
        page.click("#login_submit")
    assert page.url.startswith(f"{room.origin()}/hub/"), f"log-in, next={form}: {page.url}"
    page.goto(f"{room.origin()}/hub/login?next={form}")  # logged in already: the hub redirects at once
    assert page.url.startswith(f"{room.origin()}/hub/"), f"logged in, next={form}: {page.url}"
    page.goto(f"{board_url(room)}?next={form}")
    assert page.url.startswith(board_url(room)), f"the board, next={form}: {page.url}"
    page.goto(f"{room.origin()}/hub/api/oauth2/authorize?client_id=service-{BOARD}&response_type=code"
              f"&state=x&redirect_uri={form}")
    assert page.url.startswith(f"{room.origin()}/hub/"), f"the board's OAuth, redirect_uri={form}: {page.url}"


def test_in_chromium_over_https_no_redirect_of_the_hub_or_the_board_leaves_the_room(room: Room, tmp_path: Path):
    """The instructor follows a link with each ``next=`` of :data:`REDIRECTS`: at log-out, at log-in, logged in
    already, to the board, and as the board's OAuth ``redirect_uri``.

    The hub refuses each (``/hub/login``, or ``/hub/home`` after a log-in: :data:`NO_SPAWN`),
    the board ignores it, and the hub's OAuth refuses a ``redirect_uri`` not the board's: Chromium asks for nothing
    outside the hub and the board, and is sent nowhere else. One browser for every form, logged out before each.
    """
    left: dict[str, list[str]] = {}
    with chromium(room, tmp_path) as browser:
        from playwright.sync_api import Error as PlaywrightError

        context = browser.new_context()
        hops = Hops(context, room)
        page = context.new_page()
        page.set_default_timeout(SECONDS * 1000)
        for form in REDIRECTS:
            hops.urls.clear()
            hops.locations.clear()
            try:
                _follow(page, room, form)
            except PlaywrightError as error:  # a redirect out of the room: evil.example resolves nowhere
                left[form] = [f"{error.message.splitlines()[0]}", *hops.outside()]
                continue
            if hops.outside():
                left[form] = hops.outside()
        context.close()
    assert left == {}, f"left the room: {left}"


# --- Referer: no page of the room sends its address, or a secret in it, to another origin ------------------------------

REFERRER_POLICY = "same-origin"  # what every page of the room sends (workshop/jupyterhub_config.py; the board's own)


@pytest.mark.ui
def test_in_chromium_over_https_no_page_of_the_room_leaks_its_address_to_another_origin(
        room: Room, victim: Victim, tmp_path: Path):
    """The instructor opens the hub, the board and grace's server with a secret in the URL's query (grace's: her token),
    then follows a link from each to mallory's host (another origin: same-site for grace's), which records its Referer.

    Each page sends ``Referrer-Policy: same-origin``, and Chromium sends mallory no Referer and ``document.referrer``
    is empty there. (Chromium's own default would send the origin alone; the full URL goes with ``unsafe-url``.)
    """
    secret = "labkit-referer-secret"
    sources = {"the hub": f"{room.origin()}/hub/home?{secret}=1",
               "the board": f"{board_url(room)}?{secret}=1",
               "grace's server": f"{victim.server}/api/status?token={victim.token}&{secret}=1"}
    log = tmp_path / "mallory-saw.jsonl"
    landing = "<!doctype html><title>landed</title>"
    with learners_page(room, ATTACKER, landing, log=log) as page_url, chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
        assert open_board(page, room)[0] == 200
        policies, referrers = {}, {}
        for name, url in sources.items():
            reply = page.goto(url)
            # (Her server refuses a token in the URL, 403: the page is hers all the same, the secret in its address.)
            assert reply is not None and reply.status in (200, 403) and secret in page.url, f"{name}: {page.url}"
            policies[name] = reply.headers.get("referrer-policy")
            target = f"{page_url}?from={quote(name)}"
            page.evaluate("""target => {
                const link = Object.assign(document.createElement("a"), {href: target, id: "labkit-leak", textContent: "x"});
                document.body.append(link);
            }""", target)
            with page.expect_navigation():
                page.click("#labkit-leak")
            page.wait_for_function("document.title === 'landed'")
            referrers[name] = page.evaluate("document.referrer")
    seen = {entry["path"]: entry["referer"] for entry in requests_seen(log)}
    for name in sources:
        sent = seen.get(f"/user/{ATTACKER}/?from={quote(name)}")
        assert sent is not None, f"mallory's page was not asked from {name}: {seen}"
        assert sent == "" and referrers[name] == "", (
            f"{name} told mallory where the instructor was: Referer {sent!r}, document.referrer {referrers[name]!r}")
    assert policies == dict.fromkeys(sources, REFERRER_POLICY), f"Referrer-Policy: {policies}"
