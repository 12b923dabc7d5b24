"""The room as it runs, for tests: HTTPS through Caddy in front of the hub's proxy, on ``hub.localhost`` names.

Shared by ``test_https_room.py``, ``test_https_origin_attacks.py`` and ``test_board_room.py`` (each starts one
room per module): the hub with its real log-in and the shared account (the board's: as root, ``system-users``),
Caddy with its local CA (``LABKIT_WORKSHOP_CADDY=yes``), curl that trusts that CA only and sends every name to
127.0.0.1 (``--resolve``), a learner's own page served at her host, and Chromium trusting the CA through an NSS
database (as a learner's browser would after importing it). Every wait is bounded.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bcrypt

from labkit.workshop.front_proxy import INSTALL, local_ca_certificate
from labkit.workshop.load import free_port, request
from labkit.workshop.room import INSTRUCTOR_CODE
from labkit.workshop.settings import PREFIX
from tests.ui.support import skip_or_fail
from tests.workshop.hub import Hub, require_proxy, workshop_hub
from tests.workshop.test_log_in_attacks import ADMIN, ADMIN_PASSWORD

SECONDS = 30
HOST = "hub.localhost"
BOARD = "labkit-board"


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: str

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]


@dataclass
class Room:
    hub: Hub
    port: int  # Caddy's HTTPS port
    ca: Path
    learners: str  # the domain each learner's host is under

    def origin(self, host: str = HOST) -> str:
        return f"https://{host}:{self.port}"

    def learner_origin(self, name: str) -> str:
        return self.origin(f"{name}.{self.learners}")

    def get(self, url: str, jar: Path | None = None, data: dict[str, str] | None = None) -> Reply:
        """One request with curl, the certificate checked against the room's CA; redirects not followed."""
        host = re.match(r"https://([^/:]+)", url).group(1)  # type: ignore[union-attr]
        command = ["curl", "-sS", "--max-time", str(SECONDS), "--cacert", str(self.ca), "-D", "-", "-o", "-",
                   "--resolve", f"{host}:{self.port}:127.0.0.1", url]
        if jar is not None:
            command += ["-b", str(jar), "-c", str(jar)]
        for key, value in (data or {}).items():
            command += ["--data-urlencode", f"{key}={value}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS + 5)
        assert done.returncode == 0, f"curl {url}: {done.stderr}"
        head, _, body = done.stdout.partition("\n\n")  # text mode: curl's CRLF read as LF
        lines = head.splitlines()
        status = int(lines[0].split()[1])
        headers = [(key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in lines[1:])]
        return Reply(status, headers, body)

    def database(self) -> Path:
        return self.hub.settings.state / "jupyterhub.sqlite"


@contextlib.contextmanager
def https_room(folder: Path, learners: str, settings: dict[str, str] | None = None, extra_config: str = "") -> Iterator[Room]:
    """The room in ``folder``, learners at ``NAME.learners`` (``HOST``: below the hub's host), the instructor signed up.

    ``settings``: more ``LABKIT_WORKSHOP_*`` variables, over these (``SPAWNER=system-users`` as root: a room's accounts,
    of a prefix of their own, removed with their homes when the hub stops, even after a failure); ``extra_config``:
    Python the hub's config file runs last (the test's own, as :func:`labkit.workshop.load.workshop_hub` says).

    :func:`labkit.workshop.load.workshop_hub` waits for Caddy's HTTPS answer, so the CA exists once it yields.
    """
    require_proxy()
    if shutil.which("caddy") is None:
        skip_or_fail(f"caddy is not installed ({INSTALL})")
    port = free_port()
    env = {PREFIX + "SPAWNER": "shared-account", PREFIX + "CADDY": "yes", PREFIX + "LOGIN_ATTEMPTS_PER_MINUTE": "1000",
           PREFIX + "SUBDOMAIN_HOST": f"https://{HOST}:{port}",
           **({PREFIX + "LEARNERS_DOMAIN": learners} if learners != HOST else {}), **(settings or {})}
    with workshop_hub(folder, real_log_in=True, settings=env, extra_config=extra_config) as hub:
        room = Room(hub, port, local_ca_certificate(hub.settings), learners)
        code = (folder / "state" / INSTRUCTOR_CODE).read_text().strip()
        jar = folder / "sign-up-cookies"
        form = room.get(room.origin() + "/hub/signup", jar=jar)
        signed_up = room.get(room.origin() + "/hub/signup", jar=jar, data={
            "_xsrf": xsrf(form), "username": ADMIN, "signup_password": ADMIN_PASSWORD,
            "signup_password_confirmation": ADMIN_PASSWORD, "instructor_code": code})
        assert "successful" in signed_up.body, signed_up.body[-2000:]
        yield room


def xsrf(form: Reply) -> str:
    found = re.search(r'name="_xsrf" value="([^"]+)"', form.body)
    assert found, f"{form.status} {form.headers} {form.body[:2000]}"
    return found.group(1)


def sign_up(room: Room, name: str, password: str, jar: Path, approve: bool = True) -> None:
    """Learner ``name`` signs up through the form; ``approve``: approved in NativeAuthenticator's table at once."""
    form = room.get(room.origin() + "/hub/signup", jar=jar)
    signed_up = room.get(room.origin() + "/hub/signup", jar=jar, data={
        "_xsrf": xsrf(form), "username": name, "signup_password": password, "signup_password_confirmation": password})
    assert signed_up.status == 200, signed_up.body[-2000:]
    if approve:
        with contextlib.closing(sqlite3.connect(room.database(), timeout=SECONDS)) as db, db:
            assert db.execute("UPDATE users_info SET is_authorized = 1 WHERE username = ?", (name,)).rowcount == 1


def log_in(room: Room, name: str, password: str, jar: Path, next_path: str = "/hub/home") -> Reply:
    """``name`` logs in through the log-in form with curl (cookies in ``jar``); refused: the test fails."""
    form = room.get(room.origin() + "/hub/login", jar=jar)
    logged = room.get(f"{room.origin()}/hub/login?next={quote(next_path, safe='')}", jar=jar,
                      data={"_xsrf": xsrf(form), "username": name, "password": password})
    assert logged.status == 302 and logged.header("Location") == [next_path], f"{name}: {logged.status} {logged.body[-2000:]}"
    return logged


def insert_sign_up(room: Room, name: str) -> None:
    """A sign-up written straight into NativeAuthenticator's table, past every check the sign-up form makes."""
    hashed = bcrypt.hashpw(b"unused password", bcrypt.gensalt(4))
    with contextlib.closing(sqlite3.connect(room.database(), timeout=SECONDS)) as db, db:
        db.execute("INSERT INTO users_info (username, password, is_authorized, login_email_sent, has_2fa, otp_secret) "
                   "VALUES (?, ?, 0, 0, 0, 'AAAAAAAAAAAAAAAA')", (name, hashed))


def sign_ups(room: Room) -> dict[str, bool]:
    """NativeAuthenticator's table: each name that signed up, and whether the instructor approved it."""
    with contextlib.closing(sqlite3.connect(room.database(), timeout=SECONDS)) as db:
        return {name: bool(approved) for name, approved in db.execute("SELECT username, is_authorized FROM users_info")}


# What a learner's code can serve on her host: any page, with any Set-Cookie headers (a file of both, argv[2]); each
# request's path and Referer appended to argv[3] (one JSON line each) where it names a file.
PAGE_SERVER = r"""
import http.server, json, sys
spec = json.load(open(sys.argv[2]))
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if sys.argv[3]:
            with open(sys.argv[3], "a") as log:
                log.write(json.dumps({"path": self.path, "referer": self.headers.get("Referer", "")}) + "\n")
        body = spec["body"].encode()
        self.send_response(200)
        for cookie in spec["cookies"]:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Page).serve_forever()
"""


@contextlib.contextmanager
def learners_page(room: Room, name: str, body: str, cookies: list[str] | None = None,
                  log: Path | None = None) -> Iterator[str]:
    """A page server for learner ``name``'s host, and the hub's proxy routing her host to it (as her code can); its URL.

    ``cookies`` are Set-Cookie headers her page answers with (her server is hers: it may send any); ``log``: a file
    each request's path and ``Referer`` is appended to (:func:`requests_seen`).
    """
    with tempfile.TemporaryDirectory(prefix="labkit-toss-") as pages:
        spec = Path(pages) / "page.json"
        spec.write_text(json.dumps({"body": body, "cookies": cookies or []}))
        port = free_port()
        server = subprocess.Popen([sys.executable, "-c", PAGE_SERVER, str(port), str(spec), str(log or "")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proxy = next(process for process in room.hub.processes()
                         if "configurable-http-proxy" in " ".join(process.cmdline()))
            arguments = proxy.cmdline()
            api = (f"http://127.0.0.1:{arguments[arguments.index('--api-port') + 1]}/api/routes/"
                   f"{name}.{room.learners}/user/{name}")
            request(api, "POST", {"target": f"http://127.0.0.1:{port}"}, token=proxy.environ()["CONFIGPROXY_AUTH_TOKEN"])
            yield f"{room.learner_origin(name)}/user/{name}/"
        finally:
            server.kill()
            server.wait(timeout=SECONDS)


def requests_seen(log: Path) -> list[dict[str, str]]:
    """What a :func:`learners_page` with ``log`` was asked: each request's path and ``Referer`` (``""``: none)."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@contextlib.contextmanager
def chromium(room: Room, tmp_path: Path) -> Iterator[Any]:
    """Chromium trusting the room's CA through an NSS database (as a learner's browser would after importing it)."""
    from playwright.sync_api import sync_playwright

    from tests.ui.support import CHROMIUM, CHROMIUM_FLAGS

    if shutil.which("certutil") is None:
        skip_or_fail("certutil is not installed (Debian: apt-get install libnss3-tools)")
    if not CHROMIUM.is_file():
        skip_or_fail(f"{CHROMIUM} not found; install it with `apt-get update && apt-get install -y chromium`")
    nssdb = tmp_path / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-N", "--empty-password"], check=True, timeout=SECONDS)
    subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-A", "-n", "labkit room", "-t", "C,,", "-i",
                    str(room.ca)], check=True, timeout=SECONDS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
                                             env={**os.environ, "HOME": str(tmp_path)})
        try:
            yield browser
        finally:
            browser.close()


def logged_in(browser: Any, room: Room, name: str, password: str) -> Any:
    """A page of a fresh browser profile, logged in as ``name`` through the hub's log-in page, on /hub/home."""
    page = browser.new_context().new_page()
    page.set_default_timeout(SECONDS * 1000)
    page.goto(f"{room.origin()}/hub/login?next=%2Fhub%2Fhome")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(f"{room.origin()}/hub/home")
    return page


def board_url(room: Room) -> str:
    return f"{room.origin(f'{BOARD}--service.{HOST}')}/services/{BOARD}/"


def open_board(page: Any, room: Room) -> tuple[int, str]:
    """The board's status and text for whoever ``page`` is logged in as (through the hub's OAuth on first use)."""
    reply = page.goto(board_url(room))
    page.wait_for_url(re.compile(re.escape(board_url(room)) + r"(\?.*)?$"))
    assert reply is not None
    return reply.status, page.locator("body").inner_text()
