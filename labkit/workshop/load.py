"""Load test of the workshop hub: ``make workshop-loadtest N=8`` (a benchmark, never collected by pytest).

Why: "how big a server for N learners?" needs figures from the real thing, so
this drives ``workshop/jupyterhub_config.py`` as a room would. It starts the
hub on free loopback ports (the dummy authenticator and an API token for a
load-test service, set by this module's own config file, never by the real
one), creates N learners through the Hub's REST API, and, for all N at once,
starts each learner's server and runs every notebook of the solved core track
cell by cell through that learner's own server and kernel websocket behind the
hub's proxy, as JupyterLab in a browser does. Then it stops the hub and checks
that no process it started is left.

What runs: the learner workspace the hub makes holds stubs that raise
``NotImplementedError``, so its exercises (and the cells that use their
results) do no work. A learner who has solved them is the full load, so each
learner uploads the reference notebooks (``notebooks/``) with the core track
applied and outputs cleared, through the contents API, into
``labkit-loadtest/`` of their workspace, and runs those. No cell may fail.

Verdicts under load: every checker cell prints its verdict ("✅ Exercise 4.1: solved. ...").
The stored reference notebooks say what each checker of the solved track gives (solved), and a
busy room must not change it: each learner's verdicts are read from the outputs of the cells they
ran, kept in the JSON, and a verdict that differs from the stored one, or a checker that gave none,
is a failure. A timing checker that found the machine too busy to judge says so
("not judged", :data:`TOO_BUSY_STATUS`); that is reported apart, as an honest "no verdict", not as a flip.
Learners work in each of labkit's languages in turn (learner ``i`` in ``LANGUAGES[i % 3]``: en, zh, ru), each
switching her own kernel as the room's README says (``LABKIT_LANG``, the notebook's first cell): a verdict is read
only in her language (``练习 1.1：已解出。``), so one that came back in another is a verdict she never got.

What it reports (a table, and JSON with ``--json``): per learner, the peak
RSS of each kernel's process tree, its CPU seconds per notebook, the time from
asking for the server to the first executed cell, and the server's own peak
RSS and CPU; the hub's and the proxy's CPU seconds and peak RSS; the total wall
time; every failed cell; and the machine's memory in use (total less available)
at its peak, above what was in use before the hub started. RSS counts torch's
shared library pages in every kernel, so per-kernel RSS summed over a room
overstates what it needs; the machine's figure is what a server must have.
Memory is sampled with psutil every
``SAMPLE_SECONDS``; a kernel's peak also counts its kernel-recorded high-water
mark (``VmHWM``), so a spike between two samples is not missed.

``tests/workshop/test_room.py`` starts the hub and runs notebooks with the same
functions (:func:`workshop_hub`, :func:`run_notebook`).

``--https`` drives the room as it runs: through Caddy in front of the hub's
proxy (``LABKIT_WORKSHOP_CADDY=yes``, :mod:`labkit.workshop.front_proxy`), the
hub at ``https://hub.localhost:PORT`` and learner NAME at
``https://NAME.learners.localhost:PORT``. Every request and websocket (wss)
connects to 127.0.0.1, names the room's host in SNI and ``Host``, and checks
Caddy's certificate against its local root CA only; Caddy's CPU and peak RSS
are reported beside the hub's proxy's.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import psutil  # type: ignore[import-untyped]  # no types published; not in the mypy overrides
import websocket

from labkit.authoring.nbrun import read_notebook
from labkit.core.checks import Status
from labkit.core.errors import LabkitError, require_count
from labkit.core.files import write_text
from labkit.core.tables import Table
from labkit.i18n.messages import ENVIRONMENT, LANGUAGES, SOURCE_LANGUAGE, translation
from labkit.labs import find_notebooks
from labkit.learner.tracks import apply_track
from labkit.workshop.accounts import remove_accounts
from labkit.workshop.front_proxy import local_ca_certificate
from labkit.workshop.hosts import learner_origin, service_origin
from labkit.workshop.install import others_can_run
from labkit.workshop.settings import PREFIX, ROOT, UNSAFE_CHECKOUT, UNSAFE_SHARED_ROOT, HubSettings

WORKSHOP = ROOT / "workshop"
PROXY = WORKSHOP / "node_modules" / ".bin" / "configurable-http-proxy"
START_SECONDS = 180  # hub, proxy and JupyterLab start slowly on two busy cores
CELL_SECONDS = 300  # the longest one cell may take before it counts as failed
REQUEST_SECONDS = 30
SAMPLE_SECONDS = 0.25
UPLOAD_FOLDER = "labkit-loadtest"
TRACK = "core"
#: A checker's verdict line, as :class:`labkit.core.checks.CheckResult` prints it: icon, exercise, status, message.
VERDICT = re.compile(r"^\S+ Exercise (\d+(?:\.\d+)+): (solved|not yet solved|not solved|checker error|not judged)\. ?(.*)$",
                     re.M)
#: How a learner switches her own kernel's language (what the room's README tells her), run before her first cell.
SWITCH_LANGUAGE = "import os\nos.environ[{variable!r}] = {language!r}"
#: How a timing checker says it could not judge (labkit.core.checks.Status.NOT_JUDGED); reported as its own outcome.
TOO_BUSY_STATUS = "not judged"
SOLVED = "solved"
#: The room's names with ``--https`` (every ``*.localhost`` name is loopback): the hub's, and the learners' domain.
HTTPS_HOST, HTTPS_LEARNERS = "hub.localhost", "learners.localhost"

HUB_CONFIG = """\
c = get_config()  # noqa: F821
load_subconfig({workshop_config!r})  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
{authenticator}c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.JupyterHub.services.append({{"name": "labkit-test", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "labkit-test", "services": ["labkit-test"], "scopes": ["admin:users", "admin:servers", "tokens"]}}
)
"""


class HubError(LabkitError):
    """The hub, a learner's server or a kernel did not do what the load test (or the hub test) needs."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loopback(url: str) -> tuple[str, str]:
    """``url`` with a ``NAME.localhost`` host sent to 127.0.0.1 instead, and the Host header it must carry.

    Why: a room on loopback puts learner NAME's server on ``NAME.localhost``
    (its own origin); browsers resolve every ``*.localhost`` name to loopback,
    but the C library here resolves only ``localhost`` itself.
    """
    parts = urllib.parse.urlsplit(url)
    if not (parts.hostname or "").endswith(".localhost"):
        return url, parts.netloc
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}")), parts.netloc


class _LoopbackHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to the URL's own host, but a ``*.localhost`` host reached at 127.0.0.1 (see :func:`loopback`).

    Why not :func:`loopback`'s rewritten URL: the certificate must be checked for, and SNI must name, the
    room's host (Caddy picks its site by SNI), not the address connected to.
    """

    def __init__(self, host: str, *, context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(host, context=context, timeout=timeout)
        self.tls = context

    def connect(self) -> None:
        address = "127.0.0.1" if self.host.endswith(".localhost") else self.host
        self.sock = self.tls.wrap_socket(socket.create_connection((address, self.port), self.timeout),
                                         server_hostname=self.host)


class _LoopbackHTTPSHandler(urllib.request.HTTPSHandler):
    """urllib's HTTPS through :class:`_LoopbackHTTPSConnection`, the certificate checked with ``context``."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self.tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_LoopbackHTTPSConnection, req, context=self.tls)  # type: ignore[arg-type]


def request(url: str, method: str = "GET", body: object = None, token: str = "", tls: ssl.SSLContext | None = None) -> Any:
    """One REST call with a token; the JSON reply, or None for an empty one.

    An ``https://`` URL is checked against ``tls`` (the room's CA; default: the system's).
    """
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    if url.startswith("https://"):
        opener = urllib.request.build_opener(_LoopbackHTTPSHandler(tls or ssl.create_default_context()))
    else:
        url, headers["Host"] = loopback(url)
        opener = urllib.request.build_opener()
    with opener.open(urllib.request.Request(url, data, headers, method=method), timeout=REQUEST_SECONDS) as reply:
        text = reply.read()
    return json.loads(text) if text else None


@dataclass
class Hub:
    """A running workshop hub: its URL, the service token, its folder and the processes it started."""

    url: str
    token: str  # the load-test service's: creates learners, starts servers, makes their tokens
    folder: Path
    pid: int
    settings: HubSettings  # as the hub read them
    seen: set[int] = field(default_factory=set)  # processes to check are gone once the hub stops
    removed_accounts: list[str] = field(default_factory=list)  # a room's learner accounts, removed once it stopped
    tls: ssl.SSLContext | None = None  # behind Caddy: trusts its local CA; every https:// request of this hub uses it

    def api(self, path: str, method: str = "GET", body: object = None, token: str | None = None) -> Any:
        return request(f"{self.url}/hub/api/{path}", method, body, token or self.token, self.tls)

    def server_url(self, name: str) -> str:
        """Where learner ``name``'s server answers: on a subdomain of its own where the hub has them."""
        if self.settings.subdomain_host:
            return f"{learner_origin(self.settings, name)}/user/{name}"
        return f"{self.url}/user/{name}"

    def service_origin(self, name: str) -> str:
        """Where service ``name`` answers: JupyterHub's own subdomain for it (``NAME--service.HOST``) where the hub has them."""
        if self.settings.subdomain_host:
            return service_origin(self.settings, name)
        return self.url

    def learner_token(self, name: str) -> str:
        reply = self.api(f"users/{name}/tokens", "POST", {"note": "labkit load test", "expires_in": 3600})
        return str(reply["token"])

    def start_server(self, name: str) -> None:
        self.api(f"users/{name}/server", "POST")

    def wait_until_ready(self, name: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            server = self.api(f"users/{name}")["servers"].get("")
            if server and server["ready"]:
                return
            time.sleep(1)
        raise HubError(f"the server of {name} was not ready after {START_SECONDS} s:\n{self.log()}")

    def processes(self) -> list[psutil.Process]:
        """Every live process the hub started (proxy, culler, servers, kernels); each is remembered in ``seen``."""
        try:
            found = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        self.seen |= {process.pid for process in found}
        return found

    def log(self) -> str:
        return (self.folder / "hub.log").read_text(errors="replace")[-4000:]


def require_proxy() -> Path:
    if not PROXY.exists():
        raise HubError(f"{PROXY} is missing: run `make workshop` once (it installs the proxy from npm).")
    return PROXY


@contextlib.contextmanager
def workshop_hub(folder: Path, *, real_log_in: bool = False, settings: dict[str, str] | None = None,
                 subdomains: bool | None = None, extra_config: str = "") -> Iterator[Hub]:
    """Start the hub in ``folder``; on the way out stop it and every process it started, and fail if one had to be killed.

    ``real_log_in`` keeps the workshop's own authenticator (the attack tests);
    otherwise the dummy one lets the load test create learners at will.
    ``settings`` are more ``LABKIT_WORKSHOP_*`` variables for the hub;
    ``extra_config`` is Python the hub's config file runs last (a test's observer).
    ``subdomains`` (default: for a room) puts learner NAME's server on
    ``NAME.localhost``, the hub on ``localhost``: an origin of its own each
    (``SUBDOMAIN_HOST``). A hub run as root is a room (``system-users``): its
    learners get accounts of a prefix of their own (``lt`` and four hex
    digits, unless ``settings`` names one), which are removed with their homes
    when the hub stops, and the hub reads a private copy of the solved
    notebooks in ``folder`` (which must be the hub account's alone, as a
    temporary folder is). Where the checkout itself is readable by every
    account (a test machine), the hub is told so (``UNSAFE_READABLE_CHECKOUT``),
    and a ``shared-account`` hub run as root (the tests' machine) is told so
    (``UNSAFE_SHARED_ACCOUNT_AS_ROOT``): a real room refuses to start with either.
    With ``CADDY=yes`` in ``settings`` the hub is reached through Caddy once it answers: ``url`` is
    ``SUBDOMAIN_HOST``, over HTTPS, and ``tls`` trusts Caddy's local CA.
    """
    require_proxy()
    port, token = free_port(), secrets.token_hex(16)
    config = folder / "loopback_jupyterhub_config.py"
    dummy = 'c.JupyterHub.authenticator_class = "dummy"  # tests and the load test only: the real config never allows it\n'
    config.write_text(HUB_CONFIG.format(
        workshop_config=str(WORKSHOP / "jupyterhub_config.py"), port=port, hub_port=free_port(),
        proxy_api_port=free_port(), token=token, authenticator="" if real_log_in else dummy,
    ) + extra_config)
    env = {**os.environ, "LABKIT_WORKSHOP_STATE": str(folder / "state"), "LABKIT_WORKSHOP_TRACK": TRACK,
           "LABKIT_WORKSHOP_IP": "127.0.0.1", PREFIX + "PORT": str(port), PREFIX + "BOARD_PORT": str(free_port()),
           "JUPYTER_CONFIG_DIR": str(folder / "jupyter-config"),
           "JUPYTER_RUNTIME_DIR": str(folder / "runtime"), "JUPYTER_DATA_DIR": str(folder / "jupyter-data"),
           **(settings or {})}
    room = HubSettings.from_environment(env)
    url = f"http://127.0.0.1:{port}"
    if (room.separated if subdomains is None else subdomains) and PREFIX + "SUBDOMAIN_HOST" not in env:
        url = env[PREFIX + "SUBDOMAIN_HOST"] = f"http://localhost:{port}"
    elif env.get(PREFIX + "SUBDOMAIN_HOST"):  # the hub answers on its own host only: its proxy, with that Host
        url = f"http://{urllib.parse.urlsplit(env[PREFIX + 'SUBDOMAIN_HOST']).hostname}:{port}"
    if room.separated:
        env.setdefault(PREFIX + "ACCOUNT_PREFIX", f"lt{secrets.token_hex(2)}-")
        if others_can_run(ROOT):  # a test machine's checkout: its learners are this harness's, never a room's
            env.setdefault(PREFIX + UNSAFE_CHECKOUT, "yes")
        if PREFIX + "NOTEBOOKS" not in env:
            shutil.copytree(room.notebooks, folder / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
            env[PREFIX + "NOTEBOOKS"] = str(folder / "notebooks")
    else:
        env.setdefault(PREFIX + "HOMES", str(folder / "learners"))
        if os.geteuid() == 0:  # the tests' machine: its learners are this harness's, never a room's
            env.setdefault(PREFIX + UNSAFE_SHARED_ROOT, "yes")
    room = HubSettings.from_environment(env)
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    hub = Hub(url, token, folder, 0, room)
    try:
        with open(folder / "hub.log", "w") as log:
            process = subprocess.Popen([str(jupyterhub), "-f", str(config)], cwd=folder, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        hub.pid = process.pid
        try:
            _wait_for_hub(hub, process)
            if room.caddy:
                _through_front_proxy(hub, process)
            yield hub
            hub.processes()
        finally:
            hub.processes()
            leftovers = _stop(process, hub.seen)
    finally:
        accounts = remove_accounts(room.account_prefix) if room.separated else []
    if leftovers:
        raise HubError(f"processes still running after the hub stopped (killed now): {leftovers}\n{hub.log()}")
    hub.removed_accounts = accounts


def _wait_for_hub(hub: Hub, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            hub.api("")
            return
        except (OSError, urllib.error.HTTPError):
            if process.poll() is not None or time.monotonic() > deadline:
                raise HubError(f"the workshop hub did not answer on {hub.url}/hub/api/:\n{hub.log()}") from None
            time.sleep(1)


def _through_front_proxy(hub: Hub, process: subprocess.Popen[bytes]) -> None:
    """Point ``hub`` at Caddy once it answers over HTTPS: it makes its CA and certificates as it starts."""
    ca = local_ca_certificate(hub.settings)
    direct, hub.url = hub.url, hub.settings.subdomain_host
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            hub.tls = ssl.create_default_context(cafile=None if hub.settings.tls_certificate else str(ca))
            hub.api("")
            return
        except (OSError, urllib.error.HTTPError) as exc:  # ssl.SSLError and FileNotFoundError are OSErrors
            if process.poll() is not None or time.monotonic() > deadline:
                raise HubError(f"Caddy did not answer on {hub.url}/hub/api/ (the hub's proxy: {direct}): {exc}\n"
                               f"{hub.log()}") from None
            time.sleep(1)


def _stop(process: subprocess.Popen[bytes], started: set[int]) -> list[str]:
    """SIGTERM the hub (it stops the learners' servers and the proxy); kill whatever is left, and name it."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    deadline = time.monotonic() + 30
    alive = [p for p in _processes(started) if _running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = [p for p in alive if _running(p)]
    leftovers = []
    for leftover in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            leftovers.append(" ".join(leftover.cmdline())[:200])
            leftover.kill()
    return leftovers


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _processes(pids: set[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(pid))
    return found


def parse_verdicts(text: str, language: str = SOURCE_LANGUAGE) -> dict[str, str]:
    """Each checker verdict in ``text`` (a cell's outputs) printed in ``language``: exercise -> status (English, as
    recorded), or :data:`TOO_BUSY_STATUS`. A verdict in another language is none: the learner asked for hers."""
    pattern, statuses = verdict_pattern(language)
    return {match[1]: statuses[match[2]] for match in pattern.finditer(text)}


@functools.lru_cache(maxsize=None)
def verdict_pattern(language: str) -> tuple[re.Pattern[str], dict[str, str]]:
    """The verdict line of ``language`` (its catalogue's "Exercise {exercise}: {status}."), and each translated status
    back to its English value."""
    if language == SOURCE_LANGUAGE:
        return VERDICT, {status.value: status.value for status in Status}
    catalogue = translation(language)
    statuses = {catalogue.gettext(status.value): status.value for status in Status}
    words = "|".join(re.escape(word) for word in sorted(statuses, key=len, reverse=True))
    line = re.escape(catalogue.gettext("Exercise {exercise}: {status}."))
    line = line.replace(re.escape("{exercise}"), r"(\d+(?:\.\d+)+)").replace(re.escape("{status}"), f"({words})")
    return re.compile(rf"^\S+ {line} ?(.*)$", re.M), statuses


@dataclass
class NotebookRun:
    """One notebook run through a learner's server: its failed cells, its checkers' verdicts, when its first cell replied."""

    path: str
    errors: list[str] = field(default_factory=list)  # "ename: evalue" per failed cell
    cells: int = 0
    first_reply_at: float | None = None  # time.monotonic() of the first execute_reply
    seconds: float = 0.0
    verdicts: dict[str, str] = field(default_factory=dict)  # exercise -> status, from the cells' outputs


KernelWatch = Callable[[str], contextlib.AbstractContextManager[object]]  # entered with the kernel id while it runs


def run_notebook(server_url: str, token: str, path: str, watch: KernelWatch | None = None,
                 language: str = SOURCE_LANGUAGE, tls: ssl.SSLContext | None = None) -> NotebookRun:
    """Run every code cell of the notebook at ``path`` in a new kernel of that server, as JupyterLab does.

    Over the server's REST API (the notebook, a session) and the kernel's
    websocket. ``watch(kernel_id)``, if given, is a context manager held
    while the kernel runs (from its start to just before its shutdown).
    Verdicts count only when printed in ``language``. ``tls``: for an ``https://`` server (:func:`request`).
    """
    started = time.monotonic()
    run = NotebookRun(path)
    notebook = request(f"{server_url}/api/contents/{path}?content=1", token=token, tls=tls)["content"]
    session = request(f"{server_url}/api/sessions", "POST",
                      {"path": path, "type": "notebook", "kernel": {"name": "python3"}}, token, tls)
    kernel_id = session["kernel"]["id"]
    try:
        with watch(kernel_id) if watch else contextlib.nullcontext():
            connection = _kernel_socket(server_url, token, kernel_id, tls)
            try:
                for cell in notebook["cells"]:
                    if cell["cell_type"] == "code" and cell["source"].strip():
                        reply = _execute(connection, cell["source"])
                        run.errors += reply.errors
                        run.verdicts |= parse_verdicts(reply.stdout + reply.results, language)
                        run.cells += 1
                        run.first_reply_at = run.first_reply_at or time.monotonic()
            finally:
                connection.close()
    finally:
        request(f"{server_url}/api/sessions/{session['id']}", "DELETE", token=token, tls=tls)
    run.seconds = time.monotonic() - started
    return run


@dataclass
class CellReply:
    """What one executed cell gave: its stdout, the plain text of its results and displays, "ename: evalue" per error."""

    stdout: str = ""
    errors: list[str] = field(default_factory=list)
    results: str = ""  # text/plain of each execute_result and display_data, one per line


def run_code(server_url: str, token: str, code: str, tls: ssl.SSLContext | None = None) -> CellReply:
    """Run ``code`` in a new kernel of that server, as a learner's cell would, and shut the kernel down."""
    kernel = request(f"{server_url}/api/kernels", "POST", {"name": "python3"}, token, tls)
    try:
        connection = _kernel_socket(server_url, token, kernel["id"], tls)
        try:
            return _execute(connection, code)
        finally:
            connection.close()
    finally:
        request(f"{server_url}/api/kernels/{kernel['id']}", "DELETE", token=token, tls=tls)


def _kernel_socket(server_url: str, token: str, kernel_id: str, tls: ssl.SSLContext | None = None) -> websocket.WebSocket:
    """The kernel's websocket, as JupyterLab opens it (a ``NAME.localhost`` server's through 127.0.0.1: :func:`loopback`).

    Over ``https://``: wss, the certificate checked with ``tls`` for the server's own host, which SNI names.
    """
    url, host = loopback(f"{server_url}/api/kernels/{kernel_id}/channels")
    origin = server_url.split("/user/")[0]
    sslopt = ({"context": tls or ssl.create_default_context(), "server_hostname": urllib.parse.urlsplit(server_url).hostname}
              if url.startswith("https://") else None)
    return websocket.create_connection(url.replace("http", "ws", 1), header=[f"Authorization: token {token}"],
                                       host=host, origin=origin, timeout=CELL_SECONDS, sslopt=sslopt)


def _execute(connection: websocket.WebSocket, code: str) -> CellReply:
    msg_id, reply = uuid.uuid4().hex, CellReply()
    connection.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "labkit", "session": uuid.uuid4().hex,
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
                    "stop_on_error": True},
    }))
    deadline = time.monotonic() + CELL_SECONDS
    # Done when the shell's execute_reply and iopub's "idle" have both come: the two channels share this socket, and
    # a cell's last output (its execute_result, e.g. a checker's verdict) can arrive after the reply.
    replied = idle = False
    while time.monotonic() < deadline:
        frame = connection.recv()
        if isinstance(frame, bytes):  # a message with binary buffers (widget state): never a reply or an error
            continue
        message = json.loads(frame)
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream" and message["content"].get("name") == "stdout":
            reply.stdout += message["content"]["text"]
        if message["msg_type"] in ("execute_result", "display_data"):
            reply.results += message["content"].get("data", {}).get("text/plain", "") + "\n"
        if message["msg_type"] == "error":
            reply.errors.append(f"{message['content']['ename']}: {message['content']['evalue']}")
        if message["msg_type"] == "execute_reply":
            replied = True
        if message["msg_type"] == "status" and message["content"].get("execution_state") == "idle":
            idle = True
        if replied and idle:
            return reply
    reply.errors.append(f"no reply within {CELL_SECONDS} s to:\n{code[:200]}")
    return reply


# --- measuring: process trees sampled in a thread ---------------------------------------------------------------------


def _tree(process: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [process, *process.children(recursive=True)]
    return []


def rss_bytes(process: psutil.Process, tree: bool) -> int:
    """Resident memory of ``process`` (and, with ``tree``, of all its descendants), 0 once gone."""
    total = 0
    for member in _tree(process) if tree else [process]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def peak_rss_bytes(process: psutil.Process) -> int:
    """The kernel-recorded high-water mark of one process's resident memory (Linux ``VmHWM``), 0 where unknown."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(process: psutil.Process, tree: bool) -> float:
    """User + system CPU seconds of ``process`` (with ``tree``: its descendants too, finished ones included)."""
    total = 0.0
    for member in _tree(process) if tree else [process]:
        with contextlib.suppress(psutil.Error):
            times = member.cpu_times()
            total += times.user + times.system + (times.children_user + times.children_system if tree else 0.0)
    return total


def machine_memory_in_use() -> int:
    """Bytes of memory the machine cannot hand out now (total less available: page cache that can be dropped is free)."""
    memory = psutil.virtual_memory()
    return int(memory.total - memory.available)


class PeakSampler:
    """Samples the resident memory of named processes (or process trees), and the machine's, every ``interval`` seconds."""

    def __init__(self, interval: float = SAMPLE_SECONDS) -> None:
        self.interval = interval
        self.peaks: dict[str, int] = {}
        self.machine_peak = machine_memory_in_use()
        self._watched: dict[str, tuple[psutil.Process, bool]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="labkit-peak-sampler", daemon=True)

    def watch(self, name: str, process: psutil.Process, tree: bool = False) -> None:
        with self._lock:
            self._watched[name] = (process, tree)
        self.sample(name)

    def forget(self, name: str) -> int:
        """Stop watching ``name``; its peak, one last sample included."""
        self.sample(name)
        with self._lock:
            self._watched.pop(name, None)
            return self.peaks.get(name, 0)

    def sample(self, name: str) -> None:
        with self._lock:
            watched = self._watched.get(name)
        if watched:
            rss = rss_bytes(*watched)
            with self._lock:
                self.peaks[name] = max(self.peaks.get(name, 0), rss)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            self.machine_peak = max(self.machine_peak, machine_memory_in_use())
            with self._lock:
                names = list(self._watched)
            for name in names:
                self.sample(name)


# --- the report --------------------------------------------------------------------------------------------------------

MIB = 2**20


@dataclass
class NotebookFigures:
    """One learner's run of one notebook."""

    notebook: str
    seconds: float
    kernel_cpu_s: float
    kernel_peak_rss_mib: float
    cells: int
    errors: list[str] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)  # exercise -> status, as the checker cells printed it


@dataclass
class LearnerFigures:
    """One learner: their server, and each notebook they ran."""

    name: str
    language: str = SOURCE_LANGUAGE  # the one she set in her kernel: her checkers' verdicts must come back in it
    server_start_s: float = 0.0  # from asking for the server to the hub reporting it ready
    first_cell_s: float | None = None  # from asking for the server to the first cell's reply
    server_cpu_s: float = 0.0
    server_peak_rss_mib: float = 0.0
    notebooks: list[NotebookFigures] = field(default_factory=list)
    failure: str = ""  # what stopped this learner before every notebook ran (their server, a request)

    @property
    def kernel_peak_rss_mib(self) -> float:
        return max((run.kernel_peak_rss_mib for run in self.notebooks), default=0.0)

    @property
    def kernel_cpu_s(self) -> float:
        return sum(run.kernel_cpu_s for run in self.notebooks)

    @property
    def failures(self) -> list[str]:
        failed = [f"{self.name}: {self.failure}"] if self.failure else []
        return failed + [f"{self.name} {run.notebook}: {error}" for run in self.notebooks for error in run.errors]

    def flips(self, expected: dict[str, dict[str, str]]) -> list[str]:
        """Every verdict of a notebook this learner ran that is not the ``expected`` one (notebook -> exercise -> status).

        A checker that found the machine too busy to judge gave no verdict to compare: see :meth:`too_busy`.
        """
        flipped = []
        for run in self.notebooks:
            for exercise, status in expected.get(run.notebook, {}).items():
                got = run.verdicts.get(exercise)
                if got is None and not run.errors:
                    flipped.append(f"{self.name} {run.notebook}: exercise {exercise} printed no verdict in "
                                   f"{self.language}, expected {status!r}")
                elif got not in (None, status, TOO_BUSY_STATUS):
                    flipped.append(f"{self.name} {run.notebook}: exercise {exercise} said {got!r}, expected {status!r}")
        return flipped

    def too_busy(self) -> list[str]:
        return [f"{self.name} {run.notebook}: exercise {exercise}" for run in self.notebooks
                for exercise, status in run.verdicts.items() if status == TOO_BUSY_STATUS]


@dataclass
class LoadReport:
    """What one load test measured; ``table()`` prints it, ``to_json()`` keeps it."""

    learners: list[LearnerFigures]
    wall_s: float = 0.0
    hub_cpu_s: float = 0.0  # during the load (from creating the learners to the last notebook)
    hub_peak_rss_mib: float = 0.0
    proxy_cpu_s: float = 0.0
    proxy_peak_rss_mib: float = 0.0
    https: bool = False  # driven through Caddy in front of the hub's proxy (--https)
    front_proxy_cpu_s: float = 0.0  # Caddy's, during the load (https only)
    front_proxy_peak_rss_mib: float = 0.0
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)
    memory_mib: float = field(default_factory=lambda: psutil.virtual_memory().total / MIB)
    machine_peak_mib: float = 0.0  # the machine's memory in use at its peak, above its use before the hub started
    leftovers: str = ""  # processes that outlived the hub (killed), or why the hub failed to stop cleanly
    stopped_cleanly: bool = False  # the hub stopped and no process it started was left running
    expected_verdicts: dict[str, dict[str, str]] = field(default_factory=dict)  # notebook -> exercise -> status

    @property
    def flips(self) -> list[str]:
        """Every checker verdict that differs from the stored one (a busy room changed it), or that never came."""
        return [flip for learner in self.learners for flip in learner.flips(self.expected_verdicts)]

    @property
    def too_busy(self) -> list[str]:
        """Every timing check that found the machine too busy to judge (no verdict, said so: not a flip)."""
        return [busy for learner in self.learners for busy in learner.too_busy()]

    @property
    def failures(self) -> list[str]:
        failed = [failure for learner in self.learners for failure in learner.failures]
        return failed + self.flips + ([f"after the hub stopped: {self.leftovers}"] if self.leftovers else [])

    def notebook_names(self) -> list[str]:
        return list(dict.fromkeys(run.notebook for learner in self.learners for run in learner.notebooks))

    def learner_table(self) -> Table:
        names = self.notebook_names()
        headers = ["learner", "language", "first cell (s)", "server start (s)", "kernel peak RSS (MiB)", "server peak RSS (MiB)",
                   "server CPU (s)", *[f"CPU {name.split('_')[0]} (s)" for name in names], "kernel CPU (s)", "failed cells"]
        rows = []
        for learner in self.learners:
            by_name = {run.notebook: run.kernel_cpu_s for run in learner.notebooks}
            rows.append([learner.name, learner.language, learner.first_cell_s, learner.server_start_s,
                         learner.kernel_peak_rss_mib, learner.server_peak_rss_mib, learner.server_cpu_s,
                         *[by_name.get(name) for name in names], learner.kernel_cpu_s, len(learner.failures)])
        return Table(headers, rows, title=f"{len(self.learners)} learners, solved {TRACK} track", floatfmt=".1f")

    def hub_table(self) -> Table:
        rows = [["hub", self.hub_cpu_s, self.hub_peak_rss_mib], ["proxy", self.proxy_cpu_s, self.proxy_peak_rss_mib]]
        if self.https:
            rows.append(["front proxy (Caddy)", self.front_proxy_cpu_s, self.front_proxy_peak_rss_mib])
        route = "HTTPS through Caddy" if self.https else "HTTP to the hub's proxy"
        title = (f"{route}: total wall time {self.wall_s:.0f} s on {self.cpu_count} cores, {self.memory_mib / 1024:.1f} GiB; "
                 f"peak memory in use {self.machine_peak_mib:.0f} MiB above before the hub "
                 f"({self.machine_peak_mib / max(len(self.learners), 1):.0f} MiB per learner)")
        return Table(["process", "CPU during the load (s)", "peak RSS (MiB)"], rows, title=title, floatfmt=".1f")

    def verdict_line(self) -> str:
        """How the checkers' verdicts came out: all as stored, or how many flipped; and any that found the room too busy."""
        expected = sum(len(exercises) for exercises in self.expected_verdicts.values()) * len(self.learners)
        flips, busy = self.flips, self.too_busy
        line = (f"checker verdicts: {len(flips)} of {expected} not as stored (failures below)" if flips else
                f"checker verdicts: all {expected} as stored")
        if busy:
            line += f"; {len(busy)} found the machine too busy to judge ({', '.join(busy)})"
        return line

    def to_text(self) -> str:
        failures = self.failures
        verdict = f"{len(failures)} failures:\n" + "\n".join(failures) if failures else "no failures: every cell ran"
        stopped = "stopped: no process the hub started is left running" if self.stopped_cleanly else "not stopped cleanly"
        return (f"{self.learner_table().to_text()}\n\n{self.hub_table().to_text()}\n\n{self.verdict_line()}\n"
                f"{verdict}\n{stopped}")

    def to_json(self) -> str:
        data = asdict(self)
        for learner, figures in zip(data["learners"], self.learners):
            learner.update(kernel_peak_rss_mib=figures.kernel_peak_rss_mib, kernel_cpu_s=figures.kernel_cpu_s)
        return json.dumps({**data, "flips": self.flips, "too_busy": self.too_busy, "failures": self.failures},
                          indent=2) + "\n"


# --- the load test -----------------------------------------------------------------------------------------------------


def _output_text(output: Any) -> str:
    """The plain text of one stored output (a stream's text, a result's or display's text/plain)."""
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    return str(output.get("data", {}).get("text/plain", ""))


def solved_core_track(notebooks: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
    """Each reference notebook in ``notebooks/``, core track applied, outputs cleared: what a learner who solved it runs;
    and the verdict each of its checkers must give (notebook -> exercise -> status): "solved", for every exercise whose
    checker cell printed a verdict when the notebook was stored (whatever that stored run said: this is the solved track)."""
    solved, verdicts = {}, {}
    for path in find_notebooks(notebooks):
        notebook = apply_track(path, read_notebook(path, write=False), TRACK)
        stored: dict[str, str] = {}
        for cell in notebook.cells:
            if cell.cell_type == "code":
                text = "\n".join(_output_text(output) for output in cell.outputs)
                stored |= {exercise: SOLVED for exercise in parse_verdicts(text)}
                cell.outputs, cell.execution_count = [], None
        solved[path.name] = json.loads(nbformat.writes(notebook))
        verdicts[path.name] = stored
    return solved, verdicts


def server_process(hub: Hub, name: str) -> psutil.Process:
    """The learner's ``jupyterhub-singleuser`` process (its environment names the learner)."""
    for process in hub.processes():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("JUPYTERHUB_USER") == name and "jupyterhub-singleuser" in " ".join(process.cmdline()):
                return process
    raise HubError(f"found no jupyterhub-singleuser process of {name} among the hub's processes")


def _proxy_process(hub: Hub, command: str = "configurable-http-proxy") -> psutil.Process:
    """The hub's proxy, or (``command="caddy"``) the front proxy the hub started as a service."""
    for process in hub.processes():
        with contextlib.suppress(psutil.Error):
            if command in " ".join(process.cmdline()):
                return process
    raise HubError(f"found no {command} process among the hub's processes:\n{hub.log()}")


def _kernel_process(server: psutil.Process, kernel_id: str) -> psutil.Process:
    """The kernel's process: a child of the learner's server started with ``kernel-<id>.json``."""
    deadline = time.monotonic() + REQUEST_SECONDS
    while time.monotonic() < deadline:
        for child in server.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if f"kernel-{kernel_id}.json" in " ".join(child.cmdline()):
                    return child
        time.sleep(0.2)
    raise HubError(f"kernel {kernel_id} has no process under its server (pid {server.pid})")


@contextlib.contextmanager
def _measured_kernel(server: psutil.Process, sampler: PeakSampler, into: dict[str, float], kernel_id: str) -> Iterator[None]:
    """While the kernel runs: sample its tree's memory; at the end put its CPU seconds and peak RSS (MiB) ``into``."""
    kernel = _kernel_process(server, kernel_id)
    key = f"kernel {kernel_id}"
    sampler.watch(key, kernel, tree=True)
    try:
        yield
    finally:
        into["cpu_s"] = cpu_seconds(kernel, tree=True)
        into["peak_rss_mib"] = max(sampler.forget(key), peak_rss_bytes(kernel)) / MIB


def in_language(notebook: dict[str, Any], language: str) -> dict[str, Any]:
    """``notebook`` with a first cell that switches its kernel to ``language`` (as a learner may; English: as it is)."""
    if language == SOURCE_LANGUAGE:
        return notebook
    switch = nbformat.v4.new_code_cell(SWITCH_LANGUAGE.format(variable=ENVIRONMENT, language=language))
    return {**notebook, "cells": [switch, *notebook["cells"]]}


def _run_learner(hub: Hub, name: str, notebooks: dict[str, dict[str, Any]], sampler: PeakSampler,
                 language: str = SOURCE_LANGUAGE) -> LearnerFigures:
    """One learner, as in the room: ask for a server, upload the solved notebooks, run each in a fresh kernel, in
    ``language`` (her kernel's, switched by her first cell)."""
    figures = LearnerFigures(name, language)
    asked = time.monotonic()
    server: psutil.Process | None = None
    try:
        hub.start_server(name)
        hub.wait_until_ready(name)
        figures.server_start_s = time.monotonic() - asked
        server = server_process(hub, name)
        sampler.watch(f"server {name}", server)
        url, token = hub.server_url(name), hub.learner_token(name)
        request(f"{url}/api/contents/{UPLOAD_FOLDER}", "PUT", {"type": "directory"}, token, hub.tls)
        for notebook_name, content in notebooks.items():
            request(f"{url}/api/contents/{UPLOAD_FOLDER}/{notebook_name}", "PUT",
                    {"type": "notebook", "format": "json", "content": in_language(content, language)}, token, hub.tls)
        for notebook_name in notebooks:
            kernel: dict[str, float] = {}
            run = run_notebook(url, token, f"{UPLOAD_FOLDER}/{notebook_name}",
                               functools.partial(_measured_kernel, server, sampler, kernel), language, hub.tls)
            if figures.first_cell_s is None and run.first_reply_at is not None:
                figures.first_cell_s = run.first_reply_at - asked
            figures.notebooks.append(NotebookFigures(notebook_name, run.seconds, kernel.get("cpu_s", 0.0),
                                                     kernel.get("peak_rss_mib", 0.0), run.cells, run.errors,
                                                     run.verdicts))
    except (LabkitError, OSError, websocket.WebSocketException, KeyError) as exc:
        figures.failure = f"{type(exc).__name__}: {exc}"
    finally:
        if server is not None:
            figures.server_cpu_s = cpu_seconds(server, tree=False)
            figures.server_peak_rss_mib = sampler.forget(f"server {name}") / MIB
    return figures


def https_settings() -> dict[str, str]:
    """The hub's settings for a room behind Caddy on loopback: its own host, the learners on their own domain."""
    return {PREFIX + "CADDY": "yes", PREFIX + "SUBDOMAIN_HOST": f"https://{HTTPS_HOST}:{free_port()}",
            PREFIX + "LEARNERS_DOMAIN": HTTPS_LEARNERS}


def run_load_test(learners: int, folder: Path, notebooks: Path, *, https: bool = False,
                  settings: dict[str, str] | None = None) -> LoadReport:
    """Start the hub in ``folder``, run the solved core track for ``learners`` learners at once, stop everything.

    Learner ``i`` works in ``LANGUAGES[i % 3]`` (en, zh, ru in turn): her checkers' verdicts must come back in it.
    ``https``: through Caddy over HTTPS (:func:`https_settings`); ``settings``: more for the hub (a test's spawner).
    """
    require_count("learners", learners, 1, "give the number of learners, e.g. N=8")
    solved, expected = solved_core_track(notebooks)
    names = [f"learner{number:02d}" for number in range(1, learners + 1)]
    report = LoadReport([], expected_verdicts=expected, https=https)
    before = machine_memory_in_use()
    started = time.monotonic()
    try:
        with workshop_hub(folder, settings={**(https_settings() if https else {}), **(settings or {})}) as hub, \
                PeakSampler() as sampler:
            main = psutil.Process(hub.pid)
            proxy = _proxy_process(hub)
            front = _proxy_process(hub, "caddy") if https else None
            sampler.watch("hub", main)
            sampler.watch("proxy", proxy)
            if front is not None:
                sampler.watch("front proxy", front)
            hub_cpu, proxy_cpu = cpu_seconds(main, tree=False), cpu_seconds(proxy, tree=False)
            front_cpu = cpu_seconds(front, tree=False) if front is not None else 0.0
            hub.api("users", "POST", {"usernames": names})
            with ThreadPoolExecutor(learners) as pool:
                report.learners = list(pool.map(
                    lambda number: _run_learner(hub, names[number], solved, sampler, LANGUAGES[number % len(LANGUAGES)]),
                    range(learners)))
            report.hub_cpu_s = cpu_seconds(main, tree=False) - hub_cpu
            report.proxy_cpu_s = cpu_seconds(proxy, tree=False) - proxy_cpu
            report.hub_peak_rss_mib = sampler.forget("hub") / MIB
            report.proxy_peak_rss_mib = sampler.forget("proxy") / MIB
            if front is not None:
                report.front_proxy_cpu_s = cpu_seconds(front, tree=False) - front_cpu
                report.front_proxy_peak_rss_mib = sampler.forget("front proxy") / MIB
            report.machine_peak_mib = (sampler.machine_peak - before) / MIB
        report.stopped_cleanly = True
    except HubError as exc:
        if not report.learners:
            raise
        report.leftovers = str(exc)
    report.wall_s = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.workshop.load", description=__doc__.split("\n")[0])
    parser.add_argument("--learners", "-n", type=int, default=8, help="how many learners at once (default 8)")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "workshop-loadtest.json",
                        help="where to write the figures (default build/workshop-loadtest.json)")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="the solved reference notebooks")
    parser.add_argument("--https", action="store_true",
                        help=f"through Caddy over HTTPS, as a room runs: https://{HTTPS_HOST} (needs caddy)")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="labkit-loadtest-") as folder:
            report = run_load_test(args.learners, Path(folder), args.notebooks, https=args.https)
    except LabkitError as exc:
        print(f"workshop-loadtest: {exc}", file=sys.stderr)
        return 2
    print(report.to_text())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    print(f"figures written to {write_text(args.json, report.to_json())}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
