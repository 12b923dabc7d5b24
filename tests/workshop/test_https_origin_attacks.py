"""A learner's own page attacks whoever opens it, in the room as it runs: HTTPS through Caddy, in Chromium (issue 40).

``test_origin_attacks.py`` runs these attacks over plain HTTP on ``NAME.localhost``. Over HTTPS the browser's
protections are other ones, so they are tried again here, on the names a room has: the hub on
``hub.localhost``, learner NAME on ``NAME.learners.localhost``, Chromium trusting Caddy's CA. Mallory's page
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
  render in mallory's frame (``frame-ancestors``).

One room for the module (``https_room``); the learners are hub users only (the shared account: no Unix account to
remove), in a temporary state folder the hub's stop removes. Every wait is bounded.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    with https_room(tmp_path_factory.mktemp("https-origin-attacks"), LEARNERS) as room:
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
