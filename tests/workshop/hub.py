"""A workshop hub for tests: ``workshop/jupyterhub_config.py`` on free loopback ports, always stopped.

The test config loads the real one and changes only what a test must: free
ports, its own folders, the dummy authenticator (test only: any name, any
password) and an API token for a test service that may create learners and
start their servers. A learner's server is reached as the browser reaches it,
through the hub's proxy, with a token of that learner's own.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import websocket

ROOT = Path(__file__).resolve().parents[2]
WORKSHOP = ROOT / "workshop"
PROXY = WORKSHOP / "node_modules" / ".bin" / "configurable-http-proxy"
START_SECONDS = 180  # hub, proxy and JupyterLab start slowly on two busy cores
CELL_SECONDS = 300

TEST_CONFIG = """\
c = get_config()  # noqa: F821
load_subconfig({workshop_config!r})  # noqa: F821
c.JupyterHub.authenticator_class = "dummy"  # test only: the real config never allows it
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.JupyterHub.services.append({{"name": "labkit-test", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "labkit-test", "services": ["labkit-test"], "scopes": ["admin:users", "admin:servers", "tokens"]}}
)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_proxy() -> Path:
    """configurable-http-proxy in workshop/node_modules, installed as ``make workshop`` does if npm is here."""
    if not PROXY.exists() and shutil.which("npm"):
        subprocess.run(["npm", "ci", "--prefix", str(WORKSHOP), "--no-audit", "--no-fund"], check=True, timeout=600)
    if not PROXY.exists():
        reason = f"{PROXY} is missing and npm is not installed (Debian: apt-get install nodejs npm; then make workshop)"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return PROXY


@dataclass
class Hub:
    url: str
    token: str  # the test service's: creates learners, starts servers, makes their tokens
    folder: Path

    def api(self, path: str, method: str = "GET", body: object = None, token: str | None = None) -> object:
        return request(f"{self.url}/hub/api/{path}", method, body, token or self.token)

    def learner_token(self, name: str) -> str:
        reply = self.api(f"users/{name}/tokens", "POST", {"note": "labkit test", "expires_in": 3600})
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
        pytest.fail(f"the server of {name} was not ready after {START_SECONDS} s:\n{self.log()}")

    def log(self) -> str:
        return (self.folder / "hub.log").read_text(errors="replace")[-4000:]


def request(url: str, method: str = "GET", body: object = None, token: str = "") -> object:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


@contextlib.contextmanager
def workshop_hub(folder: Path) -> Iterator[Hub]:
    """Start the hub; on the way out stop it and every process it started, and fail if one had to be killed."""
    require_proxy()
    port, token = free_port(), secrets.token_hex(16)
    config = folder / "test_jupyterhub_config.py"
    config.write_text(TEST_CONFIG.format(
        workshop_config=str(WORKSHOP / "jupyterhub_config.py"), port=port, hub_port=free_port(),
        proxy_api_port=free_port(), token=token,
    ))
    env = {**os.environ, "LABKIT_WORKSHOP_HOMES": str(folder / "learners"), "LABKIT_WORKSHOP_STATE": str(folder / "state"),
           "LABKIT_WORKSHOP_TRACK": "core", "JUPYTER_CONFIG_DIR": str(folder / "jupyter-config"),
           "JUPYTER_RUNTIME_DIR": str(folder / "runtime"), "JUPYTER_DATA_DIR": str(folder / "jupyter-data")}
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    with open(folder / "hub.log", "w") as log:
        process = subprocess.Popen([str(jupyterhub), "-f", str(config)], cwd=folder, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(f"http://127.0.0.1:{port}", token, folder)
    started: set[int] = set()
    try:
        _wait_for_hub(hub, process)
        yield hub
        started = _descendants(process.pid)
    finally:
        started |= _descendants(process.pid)
        leftovers = _stop(process, started)
    assert not leftovers, f"processes still running after the hub stopped (killed now): {leftovers}\n{hub.log()}"


def _wait_for_hub(hub: Hub, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            hub.api("")
            return
        except (OSError, urllib.error.HTTPError):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the workshop hub did not answer on {hub.url}/hub/api/:\n{hub.log()}")
            time.sleep(1)


def _descendants(pid: int) -> set[int]:
    try:
        return {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _stop(process: subprocess.Popen, started: set[int]) -> list[str]:
    """SIGTERM the hub (it stops the learners' servers and the proxy); kill whatever is left, and name it."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    deadline = time.monotonic() + 30
    alive = [p for p in _processes(started) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    leftovers = []
    for leftover in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            leftovers.append(" ".join(leftover.cmdline())[:200])
            leftover.kill()
    return leftovers


def _processes(pids: set[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(pid))
    return found


def run_notebook(server_url: str, token: str, path: str) -> list[str]:
    """Run every code cell of the notebook at ``path`` in a new kernel of that server, as JupyterLab does.

    Over the server's REST API (the notebook, a session) and the kernel's
    websocket; returns the errors (``ename: evalue`` per failed cell).
    """
    notebook = request(f"{server_url}/api/contents/{path}?content=1", token=token)["content"]
    session = request(f"{server_url}/api/sessions", "POST",
                      {"path": path, "type": "notebook", "kernel": {"name": "python3"}}, token)
    kernel_id = session["kernel"]["id"]
    ws_url = server_url.replace("http://", "ws://") + f"/api/kernels/{kernel_id}/channels"
    connection = websocket.create_connection(ws_url, header=[f"Authorization: token {token}"], timeout=CELL_SECONDS)
    errors: list[str] = []
    try:
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code" and cell["source"].strip():
                errors += _execute(connection, cell["source"])
    finally:
        connection.close()
        request(f"{server_url}/api/sessions/{session['id']}", "DELETE", token=token)
    return errors


def _execute(connection: websocket.WebSocket, code: str) -> list[str]:
    msg_id, errors = uuid.uuid4().hex, []
    connection.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
                    "stop_on_error": True},
    }))
    deadline = time.monotonic() + CELL_SECONDS
    while time.monotonic() < deadline:
        frame = connection.recv()
        if isinstance(frame, bytes):  # a message with binary buffers (widget state): never a reply or an error
            continue
        message = json.loads(frame)
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "error":
            errors.append(f"{message['content']['ename']}: {message['content']['evalue']}")
        if message["msg_type"] == "execute_reply":
            return errors
    return errors + [f"no reply within {CELL_SECONDS} s to:\n{code[:200]}"]
