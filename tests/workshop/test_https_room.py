"""The room as it runs: HTTPS through Caddy in front of the hub's proxy, the hub on its own host (``hub.localhost``).

One hub (the real config and log-in, the shared account, 127.0.0.1) started
with ``LABKIT_WORKSHOP_CADDY=yes`` as ``make workshop`` starts it: the hub runs
Caddy as a service, with a certificate for ``hub.localhost`` and
``*.hub.localhost`` from Caddy's local CA. Every request is curl's, which
verifies the certificate against that CA only (``--cacert``) and sends each
name to 127.0.0.1 (``--resolve``). Every wait is bounded.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from labkit.workshop.front_proxy import HSTS, INSTALL, local_ca_certificate
from labkit.workshop.load import free_port, request
from labkit.workshop.room import INSTRUCTOR_CODE
from labkit.workshop.settings import PREFIX
from tests.ui.support import skip_or_fail
from tests.workshop.hub import Hub, require_proxy, workshop_hub
from tests.workshop.test_log_in_attacks import ADMIN, ADMIN_PASSWORD

pytestmark = [pytest.mark.workshop, pytest.mark.slow]

SECONDS = 30
HOST = "hub.localhost"


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

    def origin(self, host: str = HOST) -> str:
        return f"https://{host}:{self.port}"

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


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    require_proxy()
    if shutil.which("caddy") is None:
        skip_or_fail(f"caddy is not installed ({INSTALL})")
    folder = tmp_path_factory.mktemp("https-room")
    port = free_port()
    env = {PREFIX + "SPAWNER": "shared-account", PREFIX + "CADDY": "yes", PREFIX + "LOGIN_ATTEMPTS_PER_MINUTE": "1000",
           PREFIX + "SUBDOMAIN_HOST": f"https://{HOST}:{port}"}
    with workshop_hub(folder, real_log_in=True, settings=env) as hub:
        room = Room(hub, port, local_ca_certificate(hub.settings))
        deadline = time.monotonic() + 60  # Caddy makes its CA and both certificates as it starts
        while not room.ca.exists() or subprocess.run(
                ["curl", "-s", "-o", "/dev/null", "--max-time", "5", "--cacert", str(room.ca), "--resolve",
                 f"{HOST}:{port}:127.0.0.1", room.origin() + "/hub/api/"], timeout=10).returncode != 0:
            assert time.monotonic() < deadline, f"Caddy did not answer over HTTPS:\n{hub.log()}"
            time.sleep(1)
        code = (folder / "state" / INSTRUCTOR_CODE).read_text().strip()
        jar = folder / "sign-up-cookies"
        form = room.get(room.origin() + "/hub/signup", jar=jar)
        signed_up = room.get(room.origin() + "/hub/signup", jar=jar, data={
            "_xsrf": _xsrf(form), "username": ADMIN, "signup_password": ADMIN_PASSWORD,
            "signup_password_confirmation": ADMIN_PASSWORD, "instructor_code": code})
        assert "successful" in signed_up.body, signed_up.body[-2000:]
        yield room


def _xsrf(form: Reply) -> str:
    found = re.search(r'name="_xsrf" value="([^"]+)"', form.body)
    assert found, f"{form.status} {form.headers} {form.body[:2000]}"
    return found.group(1)


def test_the_hub_answers_over_https_with_the_rooms_certificate_and_hsts(room: Room):
    reply = room.get(room.origin() + "/hub/login")
    assert reply.status == 200 and 'name="password"' in reply.body
    assert reply.header("Strict-Transport-Security") == [HSTS]
    for host in (f"ada.{HOST}", f"labkit-board--service.{HOST}"):  # the wildcard certificate: a learner's, the board's
        assert room.get(room.origin(host) + "/hub/login").status == 404


def test_the_log_in_cookies_are_secure_and_host_only(room: Room, tmp_path: Path):
    jar = tmp_path / "cookies"
    form = room.get(room.origin() + "/hub/login", jar=jar)
    reply = room.get(room.origin() + "/hub/login?next=%2Fhub%2Fhome", jar=jar,
                     data={"_xsrf": _xsrf(form), "username": ADMIN, "password": ADMIN_PASSWORD})
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


@contextlib.contextmanager
def _learners_page(room: Room, name: str) -> Iterator[str]:
    """A page server for learner ``name``'s host, and the hub's proxy routing her host to it (as her code can); its URL."""
    with tempfile.TemporaryDirectory(prefix="labkit-toss-") as pages:
        page = Path(pages) / "user" / name / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text(TOSS % {"domain": HOST})
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                                   pages], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proxy = next(process for process in room.hub.processes()
                         if "configurable-http-proxy" in " ".join(process.cmdline()))
            arguments = proxy.cmdline()
            api = f"http://127.0.0.1:{arguments[arguments.index('--api-port') + 1]}/api/routes/{name}.{HOST}/user/{name}"
            request(api, "POST", {"target": f"http://127.0.0.1:{port}"}, token=proxy.environ()["CONFIGPROXY_AUTH_TOKEN"])
            yield f"{room.origin(f'{name}.{HOST}')}/user/{name}/"
        finally:
            server.kill()
            server.wait(timeout=SECONDS)


@pytest.mark.ui
def test_in_chromium_a_learners_page_cannot_toss_the_hubs_log_in_cookie(room: Room, tmp_path: Path):
    """Chromium trusts the room's CA through an NSS database (as a learner's browser would after importing it)."""
    from playwright.sync_api import sync_playwright

    from tests.ui.support import CHROMIUM, CHROMIUM_FLAGS

    if shutil.which("certutil") is None:
        skip_or_fail("certutil is not installed (Debian: apt-get install libnss3-tools)")
    nssdb = tmp_path / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-N", "--empty-password"], check=True, timeout=SECONDS)
    subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-A", "-n", "labkit room", "-t", "C,,", "-i", str(room.ca)],
                   check=True, timeout=SECONDS)
    with _learners_page(room, "ada") as learners_page, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
                                             env={**os.environ, "HOME": str(tmp_path)})
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(SECONDS * 1000)
            page.goto(f"{room.origin()}/hub/login?next=%2Fhub%2Fhome")
            page.fill("#username_input", ADMIN)
            page.fill("#password_input", ADMIN_PASSWORD)
            page.click("#login_submit")
            page.wait_for_url(f"{room.origin()}/hub/home")
            page.goto(learners_page)
            page.wait_for_function("document.title === 'done'")
            assert "tossed" in " ".join(cookie["value"] for cookie in page.context.cookies()), "the page set no cookie"
            home = page.goto(f"{room.origin()}/hub/home")
            assert home is not None and home.status == 200 and page.url == f"{room.origin()}/hub/home", page.url
            assert ADMIN in page.locator("body").inner_text(), "the instructor is no longer herself"
        finally:
            browser.close()
