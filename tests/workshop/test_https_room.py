"""The room as it runs: HTTPS through Caddy in front of the hub's proxy, the hub on its own host (``hub.localhost``).

One hub (the real config and log-in, the shared account, 127.0.0.1) started
with ``LABKIT_WORKSHOP_CADDY=yes`` as ``make workshop`` starts it: the hub runs
Caddy as a service, with certificates from Caddy's local CA for ``hub.localhost``,
the board's ``labkit-board--service.hub.localhost`` and the learners'
``*.learners.localhost`` (``LABKIT_WORKSHOP_LEARNERS_DOMAIN``). Every request is curl's, which
verifies the certificate against that CA only (``--cacert``) and sends each
name to 127.0.0.1 (``--resolve``); the room, curl and Chromium are ``tests/workshop/https_room.py``'s.
The log-in's attacks a browser makes (``test_log_in_attacks.py`` says why) run here too, in the instructor's
Chromium: a hostile name planted in the authorization table, a link or an image, the page's own buttons.
Every wait is bounded.
"""
from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from labkit.workshop.front_proxy import HSTS, NOT_THE_HUB
from labkit.workshop.load import request
from tests.workshop.https_room import (
    BOARD,
    HOST,
    SECONDS,
    Room,
    board_url,
    chromium,
    https_room,
    insert_sign_up,
    learners_page,
    log_in,
    logged_in,
    open_board,
    sign_up,
    sign_ups,
    xsrf,
)
from tests.workshop.test_log_in_attacks import ADMIN, ADMIN_PASSWORD, LEARNER_PASSWORD, XSS_NAMES, css_string

pytestmark = [pytest.mark.workshop, pytest.mark.slow]

START_S = 60
# Each learner at NAME.LEARNERS, off the hub's domain. Set LEARNERS = HOST for the old layout (learners below the
# hub's host): the test of alice's own tossed cookies then fails, the instructor's approval refused (403).
LEARNERS = "learners.localhost"


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    with https_room(tmp_path_factory.mktemp("https-room"), LEARNERS) as room:
        yield room


def test_the_hub_answers_over_https_with_the_rooms_certificate_and_hsts(room: Room):
    reply = room.get(room.origin() + "/hub/login")
    assert reply.status == 200 and 'name="password"' in reply.body
    assert reply.header("Strict-Transport-Security") == [HSTS]
    for host in (f"ada.{LEARNERS}", f"labkit-board--service.{HOST}"):  # a learner's certificate, the board's
        for path in ("/hub/login", "/hub/api/", "/hub", "/HUB/home"):  # Caddy refuses them before the hub's proxy
            reply = room.get(room.origin(host) + path)
            assert reply.status == 404 and f"{NOT_THE_HUB} {room.origin()}/hub/" in reply.body, (host, path, reply)
            assert reply.header("Strict-Transport-Security") == [HSTS]
    if LEARNERS != HOST:  # no certificate, no site for a learner below the hub's host any more
        below = subprocess.run(["curl", "-sS", "-o", "/dev/null", "--max-time", str(SECONDS), "--cacert", str(room.ca),
                                "--resolve", f"ada.{HOST}:{room.port}:127.0.0.1", room.origin(f"ada.{HOST}") + "/user/ada/"],
                               capture_output=True, text=True, timeout=SECONDS + 5)
        assert below.returncode != 0 and "SSL" in below.stderr.upper(), below.stderr


def test_the_log_in_cookies_are_secure_and_host_only(room: Room, tmp_path: Path):
    jar = tmp_path / "cookies"
    form = room.get(room.origin() + "/hub/login", jar=jar)
    reply = room.get(room.origin() + "/hub/login?next=%2Fhub%2Fhome", jar=jar,
                     data={"_xsrf": xsrf(form), "username": ADMIN, "password": ADMIN_PASSWORD})
    assert reply.status == 302, reply.body[:2000]
    cookies = reply.header("Set-Cookie") + form.header("Set-Cookie")
    # The log-in cookie; JupyterHub's session id (jupyterhub-session-id) is on the parent domain by its design.
    log_in = [cookie for cookie in cookies if "jupyterhub-hub-login" in cookie.split("=")[0]]
    assert log_in, cookies
    for cookie in log_in:
        attributes = [part.strip().lower() for part in cookie.split(";")]
        assert cookie.startswith("__Host-") and "secure" in attributes and "path=/" in attributes, cookie
        assert not any(part.startswith("domain=") for part in attributes), cookie
    for cookie in cookies:
        assert "secure" in [part.strip().lower() for part in cookie.split(";")], f"not Secure: {cookie}"
    home = room.get(room.origin() + "/hub/home", jar=jar)
    assert home.status == 200 and ADMIN in home.body


def test_a_log_in_without_the_xsrf_token_gets_the_log_in_page_again(room: Room, tmp_path: Path):
    """JupyterHub 5 renders a refused XSRF check on /hub/login as the log-in page, with ``sync=``: no error 500."""
    jar = tmp_path / "cookies"
    for data in ({"username": ADMIN, "password": ADMIN_PASSWORD},  # no token, and a stale one
                 {"_xsrf": "2|stale|token", "username": ADMIN, "password": ADMIN_PASSWORD}):
        reply = room.get(room.origin() + "/hub/login?next=%2Fhub%2Fhome", jar=jar, data=data)
        assert reply.status == 403, f"{reply.status}: {reply.body[-2000:]}"
        assert 'name="password"' in reply.body and "Login form invalid or expired" in reply.body, reply.body[-2000:]
    assert "unexpected keyword argument" not in room.hub.log()


def test_a_client_cannot_name_another_address_through_the_front_proxy(room: Room):
    """Caddy replaces whatever X-Forwarded-For a client sends: the hub's log names the client's own address."""
    command = ["curl", "-sS", "-o", "/dev/null", "--max-time", str(SECONDS), "--cacert", str(room.ca), "--resolve",
               f"{HOST}:{room.port}:127.0.0.1", "-H", "X-Forwarded-For: 10.9.9.6", "-H", "X-Real-Ip: 10.9.9.6",
               room.origin() + "/hub/login?claimed-address"]
    subprocess.run(command, check=True, timeout=SECONDS + 5)
    line = next(line for line in room.hub.log().splitlines() if "claimed-address" in line)
    assert "10.9.9.6" not in line and "127.0.0.1" in line, line


# A learner's page on her own host: it tosses a log-in cookie for the hub's parent domain (the attack of issue 40).
TOSS = """<!doctype html><title>working</title><script>
document.cookie = "jupyterhub-hub-login=tossed; Domain=%(domain)s; Path=/hub/; Secure";
document.cookie = "__Host-jupyterhub-hub-login=tossed; Path=/; Secure";
document.title = "done";
</script>"""
DONE = "<!doctype html><title>done</title>"
# Her page's script: twelve 3,800-byte cookies for the parent domain (45 KB in every request to any host of the room),
# and oversized copies of the two names the hub reads that any host of the room may set.
BOMB = """<!doctype html><title>working</title><script>
const filler = "x".repeat(3800);
for (let i = 0; i < 12; i++) document.cookie = `bomb${i}=${filler}; Domain=%(domain)s; Path=/; Secure`;
for (const path of ["/", "/hub/", "/services/labkit-board/"]) {
  document.cookie = `_xsrf=${filler}; Domain=%(domain)s; Path=${path}; Secure`;
  document.cookie = `jupyterhub-session-id=${filler}; Domain=%(domain)s; Path=${path}; Secure`;
}
document.title = "done";
</script>"""
ALICE, ALICE_PASSWORD = "alice", "alice's own password"
# Where a tossed cookie is sent before the instructor's own: on a longer path, the instructor's approval form's.
# (Only these, so that every Set-Cookie header of her page fits in the 16 KB of headers the hub's proxy reads.)
FORMS = {"_xsrf": ("/hub/authorize",), "jupyterhub-session-id": ("/hub/authorize",)}


@pytest.fixture(scope="module")
def alice(room: Room) -> str:
    """A learner of the room, signed up through the form and approved (in NativeAuthenticator's table)."""
    sign_up(room, ALICE, ALICE_PASSWORD, room.hub.folder / "alice-cookies")
    return ALICE


def _parent_domain_cookies(page: Any) -> list[dict[str, Any]]:
    """The cookies the browser holds for the learners' parent domain (every learner's host receives them)."""
    return [cookie for cookie in page.context.cookies() if cookie["domain"] == f".{LEARNERS}"]


@pytest.mark.ui
def test_in_chromium_a_learners_page_cannot_toss_the_hubs_log_in_cookie(room: Room, tmp_path: Path):
    with learners_page(room, "ada", TOSS % {"domain": HOST}) as page_url, chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
        page.goto(page_url)
        page.wait_for_function("document.title === 'done'")
        assert "tossed" in " ".join(cookie["value"] for cookie in page.context.cookies()), "the page set no cookie"
        home = page.goto(f"{room.origin()}/hub/home")
        assert home is not None and home.status == 200 and page.url == f"{room.origin()}/hub/home", page.url
        assert ADMIN in page.locator("body").inner_text(), "the instructor is no longer herself"


@pytest.mark.ui
def test_in_chromium_a_learners_own_valid_cookies_tossed_for_every_domain_she_names_change_nobody(
        room: Room, alice: str, tmp_path: Path):
    """Alice's page answers with her own valid log-in, session-id, _xsrf and board cookies for every domain she can name.

    Her own host, the learners' domain, the hub's host and ``localhost``; each at its own path, at ``/`` and (the
    session id and ``_xsrf``) at ``/hub/authorize``; a ``__Host-`` one also under its name without the prefix.
    The instructor who opened her page is still herself on /hub/home and on the board, and still approves a
    sign-up on /hub/authorize: her session id and ``_xsrf`` are on the hub's host, which no learner's page can
    name. With learners below the hub's host (``LEARNERS = HOST``) the tossed ones reach the hub, her ``_xsrf``
    sent before the instructor's own on the longer path, and JupyterHub refuses the approval (403).
    """
    sign_up(room, "carol", "carol's own password", tmp_path / "carol", approve=False)
    assert sign_ups(room).get("carol") is False, "carol's sign-up is not waiting for approval"
    with chromium(room, tmp_path) as browser:
        learner = logged_in(browser, room, alice, ALICE_PASSWORD)
        status, text = open_board(learner, room)
        assert status == 403 and f"logged in as {alice}" in text, (status, text)
        hers = learner.context.cookies()
        names = {cookie["name"] for cookie in hers}
        assert any("hub-login" in name for name in names) and "jupyterhub-session-id" in names, names
        assert "_xsrf" in names and any(BOARD in name for name in names), names
        domains = {f"{alice}.{LEARNERS}", LEARNERS, HOST, "localhost"}
        tossed = [f"{name}={cookie['value']}; Domain={domain}; Path={path}; Secure; HttpOnly; SameSite=Lax"
                  for cookie in hers for name in {cookie["name"], cookie["name"].removeprefix("__Host-")}
                  for path in {cookie["path"], "/", *FORMS.get(cookie["name"], ())} for domain in domains]
        learner.context.close()
        with learners_page(room, alice, DONE, tossed) as page_url:
            victim = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
            assert open_board(victim, room)[0] == 200
            victim.goto(page_url)
            victim.wait_for_function("document.title === 'done'")
            held = {cookie["value"] for cookie in _parent_domain_cookies(victim)}
            assert {cookie["value"] for cookie in hers} <= held, "the browser did not keep every tossed cookie"
            home = victim.goto(f"{room.origin()}/hub/home")
            assert home is not None and home.status == 200 and victim.url == f"{room.origin()}/hub/home", victim.url
            text = victim.locator("body").inner_text()
            assert ADMIN in text and alice not in text, f"the instructor is no longer herself on /hub/home:\n{text}"
            status, text = open_board(victim, room)
            assert status == 200 and f"Logged in as {ADMIN}." in text, f"not herself on the board:\n{text}"
            victim.goto(f"{room.origin()}/hub/authorize")
            # She reads the page before she clicks. (Were the page's _xsrf cookie not hers, JupyterHub would mint a
            # token afresh for each request, equal to the form's only within the same second of its timestamp.)
            time.sleep(1.5)
            with victim.expect_response(re.compile(r".*/hub/authorize/carol$")) as approval:
                victim.locator("form[action$='/authorize/carol'] button").click()
            assert approval.value.status < 400, f"the approval was refused: {approval.value.status}"
            assert sign_ups(room)["carol"] is True, "carol is not approved"


@pytest.fixture(scope="module")
def bobs_server(room: Room) -> str:
    """Learner bob's real JupyterLab (made through the hub's API), started and ready; its URL on his own host."""
    room.hub.api("users/bob", "POST")
    room.hub.start_server("bob")
    room.hub.wait_until_ready("bob")
    return f"{room.origin(f'bob.{LEARNERS}')}/user/bob/lab"


@pytest.mark.ui
def test_in_chromium_a_45_kb_cookie_bomb_from_a_learners_page_breaks_no_page_of_the_room(
        room: Room, alice: str, bobs_server: str, tmp_path: Path):
    """After alice's page set 45 KB of cookies for the parent domain, every page still answers the instructor.

    The hub's /hub/home and /hub/admin, the board, and another learner's JupyterLab (bob's, opened from its
    URL: the hub's OAuth, then its file browser, which reads the contents API with the _xsrf cookie). The
    instructor holds no standing access to learners' servers, so bob asks for help with a look and shares his
    with her, as ``labkit.help(..., share=True)`` does (the board sweeps a share no open request explains), and
    cancels after. Before, the hub's proxy answered 431 to each.
    """
    bobs = room.hub.api("users/bob/tokens", "POST", {"scopes": ["shares!user=bob", "read:users:name!group=instructors",
                                                                 f"access:services!service={BOARD}"],
                                                      "note": "bob asks for a look and shares his server"})
    help_url = board_url(room) + "api/help"
    request(help_url, "POST", {"exercise": "1.1", "look": True}, bobs["token"], room.hub.tls)
    room.hub.api("shares/bob/", "POST", {"user": ADMIN}, token=bobs["token"])
    try:
        _bomb_every_page(room, alice, bobs_server, tmp_path)
    finally:
        request(help_url + "/cancel", "POST", {"exercise": "1.1"}, bobs["token"], room.hub.tls)  # the board revokes it
        room.hub.api("shares/bob/", "DELETE", token=bobs["token"])
        room.hub.api(f"users/bob/tokens/{bobs['id']}", "DELETE")


def test_the_board_revokes_a_share_with_an_instructor_that_no_open_request_explains(room: Room, bobs_server: str):
    """bob shares his server with the instructor by himself: the board's sweeper revokes it within seconds; a share
    made for his open request with a look stays until he cancels it."""
    bobs = room.hub.api("users/bob/tokens", "POST", {"scopes": ["shares!user=bob", "read:users:name!group=instructors",
                                                                 f"access:services!service={BOARD}"],
                                                      "note": "bob shares his server"})
    help_url = board_url(room) + "api/help"

    def shared() -> list[str]:  # whom bob's server is shared with, as his token may read it
        return [share["user"]["name"] for share in room.hub.api("shares/bob", token=bobs["token"])["items"]
                if share["user"]]

    def waited_for(wanted: list[str], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while shared() != wanted and time.monotonic() < deadline:
            time.sleep(0.5)
        return shared() == wanted

    try:
        room.hub.api("shares/bob/", "POST", {"user": ADMIN}, token=bobs["token"])
        assert shared() == [ADMIN]
        assert waited_for([], 20), "the board left a share no request explains"
        request(help_url, "POST", {"exercise": "1.1", "look": True}, bobs["token"], room.hub.tls)
        room.hub.api("shares/bob/", "POST", {"user": ADMIN}, token=bobs["token"])
        time.sleep(12)  # two sweeps and more
        assert shared() == [ADMIN], "the board revoked the share his open request asked for"
        request(help_url + "/cancel", "POST", {"exercise": "1.1"}, bobs["token"], room.hub.tls)
        assert waited_for([], 10)
    finally:
        room.hub.api("shares/bob/", "DELETE", token=bobs["token"])
        room.hub.api(f"users/bob/tokens/{bobs['id']}", "DELETE")


def _bomb_every_page(room: Room, alice: str, bobs_server: str, tmp_path: Path) -> None:
    with learners_page(room, alice, BOMB % {"domain": LEARNERS}) as page_url, chromium(room, tmp_path) as browser:
        victim = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
        assert open_board(victim, room)[0] == 200
        victim.goto(page_url)
        victim.wait_for_function("document.title === 'done'")
        bombed = sum(len(cookie["name"]) + len(cookie["value"]) for cookie in _parent_domain_cookies(victim))
        assert bombed > 45_000, f"the page set {bombed} bytes of cookies"
        for url in (f"{room.origin()}/hub/home", f"{room.origin()}/hub/admin"):
            reply = victim.goto(url)
            assert reply is not None and reply.status == 200, f"{url}: {reply and reply.status}"
        status, text = open_board(victim, room)
        assert status == 200 and f"Logged in as {ADMIN}." in text, f"the board: {status}\n{text}"
        victim.set_default_timeout(START_S * 1000)  # JupyterLab's first load on a busy machine
        failed: list[str] = []
        victim.on("response", lambda reply: failed.append(f"{reply.status} {reply.url}") if reply.status >= 400 else None)
        victim.goto(bobs_server)
        victim.get_by_role("button", name="Authorize").click()  # the hub asks before another's server knows her
        try:
            victim.locator(".jp-DirListing-item").first.wait_for()  # listed through the contents API
        except Exception:
            raise AssertionError(f"{victim.url}\n{failed}\n{victim.locator('body').inner_text()[:1500]}") from None
        assert victim.url.startswith(bobs_server), victim.url


# --- the log-in's attacks a browser makes (moved here from test_log_in_attacks.py, which ran them over plain HTTP) -----


def _instructors_tokens(room: Room) -> list[str]:
    return sorted(token["id"] for token in room.hub.api(f"users/{ADMIN}/tokens")["api_tokens"])


def _pending(room: Room, names: tuple[str, ...], folder: Path) -> None:
    """Each of ``names`` signs up through the form and waits for the instructor's approval."""
    for name in names:
        sign_up(room, name, LEARNER_PASSWORD, folder / f"{name}-cookies", approve=False)
        assert sign_ups(room)[name] is False, f"{name}'s sign-up is not waiting for approval"


@pytest.mark.ui
def test_a_link_or_an_image_in_the_instructors_browser_changes_nothing(room: Room, tmp_path: Path):
    _pending(room, ("pending-link", "pending-image"), tmp_path)
    with chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
        for action in ("authorize", "discard"):  # the instructor follows a link
            assert page.goto(f"{room.origin()}/hub/{action}/pending-link").status == 405
        page.goto(f"{room.origin()}/hub/authorize")
        # What a markdown image in a learner's notebook does in the instructor's browser: same origin, the hub's cookies.
        loaded = page.evaluate("""urls => Promise.all(urls.map(url => new Promise(done => {
            const image = new Image();
            image.onload = image.onerror = () => done(url);
            image.src = url;
            document.body.append(image);
        })))""", ["/hub/authorize/pending-image", "/hub/discard/pending-link"])
        assert len(loaded) == 2
        status = page.evaluate("fetch('/hub/authorize/pending-image', {method: 'POST'}).then(reply => reply.status)")
        assert status == 403, "a script's POST without the XSRF token"
    assert {name: sign_ups(room).get(name) for name in ("pending-link", "pending-image")} == {
        "pending-link": False, "pending-image": False}


@pytest.mark.ui
def test_the_page_buttons_approve_withdraw_and_discard(room: Room, tmp_path: Path):
    _pending(room, ("ida", "hedy"), tmp_path)
    with chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
        page.goto(f"{room.origin()}/hub/authorize")
        page.locator('tr[id="ida"] button', has_text="Authorize").click()
        page.wait_for_url(re.compile(r".*/hub/authorize#ida$"))
        assert sign_ups(room)["ida"] is True
        log_in(room, "ida", LEARNER_PASSWORD, tmp_path / "ida-log-in")
        assert "ida" in {user["name"] for user in room.hub.api("users")}

        page.locator('tr[id="ida"] button', has_text="Unauthorize").click()
        page.wait_for_url(re.compile(r".*/hub/authorize#ida$"))
        assert sign_ups(room)["ida"] is False

        for name in ("hedy", "ida"):  # ida has logged in once: her JupyterHub account goes too, as with NativeAuthenticator's
            page.locator(f'tr[id="{name}"] button', has_text="Discard").click()
            page.wait_for_url(f"{room.origin()}/hub/authorize")
            assert name not in sign_ups(room)
    assert "ida" not in {user["name"] for user in room.hub.api("users")}


@pytest.mark.ui
def test_a_hostile_name_in_the_table_runs_no_script_on_the_authorization_area(room: Room, tmp_path: Path):
    for name in XSS_NAMES:
        insert_sign_up(room, name)
    tokens = _instructors_tokens(room)
    api_calls: list[str] = []
    with chromium(room, tmp_path) as browser:
        page = logged_in(browser, room, ADMIN, ADMIN_PASSWORD)
        page.on("request", lambda asked: api_calls.append(asked.url) if "/hub/api/" in asked.url else None)
        page.goto(f"{room.origin()}/hub/authorize", wait_until="networkidle")
        for row in page.locator("tbody tr").all():  # the instructor points at each row and tabs through the page
            row.hover()
            page.keyboard.press("Tab")
        assert page.evaluate("window.__pwned === undefined"), f"a name ran a script: {page.evaluate('window.__pwned')}"
        assert api_calls == [], "a script on the page called the hub's API"
        assert _instructors_tokens(room) == tokens, "a script on the page minted a token"
        for name in XSS_NAMES:
            assert page.locator(f"tr[id={css_string(name)}]").count() == 1, f"{name!r} broke out of its attribute"
        shown = {" ".join(text.split()) for text in page.locator("tbody td:first-child").all_inner_texts()}
        assert {" ".join(name.split()) for name in XSS_NAMES} <= shown, "each name shows as its text"
        for name in (name for name in XSS_NAMES if name == name.lower()):  # NativeAuthenticator finds lowercase names only
            page.goto(f"{room.origin()}/hub/change-password/{quote(name, safe='')}", wait_until="networkidle")
            assert page.locator("h1").inner_text() == f"Change password for {name}"
        assert page.evaluate("window.__pwned === undefined"), f"a name ran a script: {page.evaluate('window.__pwned')}"
