"""Fixtures for the browser tests: one JupyterLab server and one Chromium per session.

Why session-wide: starting JupyterLab and Chromium costs seconds of CPU each,
and the notebooks themselves take up to ~45 s on two cores. The server runs on
a temporary copy of ``notebooks/`` (the repository's notebooks are never
modified), started as ``labkit lab`` starts it (:func:`labkit.learner.lab.jupyter_lab_command`:
labkit's settings, widget state saved, no news), with its own user settings,
workspaces and config folders so that no popup or restored layout gets in the way.

Where Chromium or Playwright is missing these tests skip with the install
command; with ``LABKIT_REQUIRE_UI=1`` (set by ``.ci/run``) they fail instead.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from labkit.learner.lab import jupyter_lab_command

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
NODE_PACKAGES = Path(__file__).resolve().parent  # package.json, package-lock.json; node_modules/ once installed
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERVER_START_SECONDS = 120
# JupyterLab front-end plugins that would pop up or phone home during a test.
DISABLED_LAB_PLUGINS = [
    "@jupyterlab/apputils-extension:announcements",
    "@jupyterlab/extensionmanager-extension",
]
LAB_SETTINGS = {
    # Keep every cell in the DOM, so the tests see all outputs without scrolling; start the
    # notebook's own kernel without asking (JupyterLab may show "Select Kernel" otherwise).
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none", "autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


def require_ui() -> bool:
    """True in CI (``LABKIT_REQUIRE_UI=1``): a missing browser or notebook is a failure."""
    return os.environ.get("LABKIT_REQUIRE_UI") == "1"


def skip_or_fail(reason: str) -> None:
    if require_ui():
        pytest.fail(f"{reason} (LABKIT_REQUIRE_UI=1: the browser tests must run here)", pytrace=False)
    pytest.skip(reason)


def require_npm_file(path: Path) -> Path:
    """``path`` inside tests/ui/node_modules (axe-core's script, speedscope's page), installed with
    ``npm ci --prefix tests/ui`` (package-lock.json) when it is missing and npm is here; skips (fails in CI) if not."""
    if not path.exists() and shutil.which("npm"):
        subprocess.run(["npm", "ci", "--prefix", str(NODE_PACKAGES), "--no-audit", "--no-fund"], check=True, timeout=600,
                       env={**os.environ, "npm_config_update_notifier": "false"})
    if not path.exists():
        skip_or_fail(f"{path} is missing and npm is not installed (Debian: apt-get install nodejs npm)")
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """A headless Debian Chromium driven by Playwright, with a fresh profile."""
    if not CHROMIUM.is_file():
        skip_or_fail(f"{CHROMIUM} not found; install it with `apt-get update && apt-get install -y chromium`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Python playwright is missing; install it with `python -m pip install -e '.[dev]'`")
    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"labkit-chromium-{secrets.token_hex(4)}"
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@dataclass(frozen=True)
class LabServer:
    """A running ``jupyter lab`` and where its notebooks live."""

    base_url: str
    token: str
    root_dir: Path

    def url(self, path: str) -> str:
        separator = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{separator}token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Stop every kernel, so the next notebook gets the CPU to itself."""
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _lab_environment(home: Path, quiet: bool) -> dict[str, str]:
    """The server's own config, user settings, workspaces and runtime folders under ``home``, written on first use.

    ``quiet``: also the tests' own guards against popups (:data:`DISABLED_LAB_PLUGINS`, no news in the user
    settings); without them only what ``labkit lab`` itself passes keeps the news toast away.
    """
    config, settings = home / "config", home / "settings"
    if not config.is_dir():
        (config / "labconfig").mkdir(parents=True)
        settings.mkdir(parents=True)
        # exposeAppInBrowser: window.jupyterapp, so a test runs a command (the theme) without the menus
        disabled = {name: True for name in DISABLED_LAB_PLUGINS} if quiet else {}
        (config / "labconfig" / "page_config.json").write_text(
            json.dumps({"disabledExtensions": disabled, "exposeAppInBrowser": "true"})
        )
        for name, values in LAB_SETTINGS.items():
            if not quiet and name.startswith("@jupyterlab/apputils-extension/notification"):
                continue
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
    return {
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
    }


@contextlib.contextmanager
def jupyter_lab(root_dir: Path, home: Path, *, quiet: bool = True,
                env: dict[str, str] | None = None) -> Iterator[tuple[LabServer, subprocess.Popen]]:
    """``jupyter lab`` on ``root_dir`` as ``labkit lab`` starts it (a free loopback port, token auth, its own user
    settings and config under ``home``, made on the first start and kept for the next); always stopped.

    ``env``: more variables for the server and its kernels (``LABKIT_LANG``).
    """
    port, token = _free_port(), secrets.token_hex(16)
    log_path = home / "server.log"
    lab_args = shlex.join(["--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"])
    command = jupyter_lab_command(argparse.Namespace(folder=root_dir, ip="127.0.0.1", port=port, lab_args=lab_args))
    env = {**os.environ, **_lab_environment(home, quiet), **(env or {})}
    with open(log_path, "a") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = LabServer(f"http://127.0.0.1:{port}", token, root_dir)
    try:
        _wait_for_status(server, process, log_path)
        yield server, process
    finally:
        _stop(server, process)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """``jupyter lab`` on a free loopback port, serving a copy of notebooks/; always shut down."""
    home = tmp_path_factory.mktemp("jupyterlab")
    root_dir = home / "notebooks"
    shutil.copytree(NOTEBOOKS, root_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    with jupyter_lab(root_dir, home) as (server, _):
        yield server


def _wait_for_status(server: LabServer, process: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while True:
        try:
            server.api("status")
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer /api/status:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)


def _stop(server: LabServer, process: subprocess.Popen) -> None:
    """Ask the server to shut down (it stops its kernels); kill it if it does not."""
    try:
        server.api("shutdown", method="POST")
    except OSError:
        pass
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


_DOCS_SITE: list[Path] = []  # the site of notebooks/ once built in this session


def docs_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site of notebooks/, every edition (English, zh/, ru/), built once per session: a build takes a minute
    or more on two cores, and the English and the translated pages' tests share it."""
    if not _DOCS_SITE:
        from labkit.authoring import docs

        out = tmp_path_factory.mktemp("docs") / "site"
        docs.build_site(NOTEBOOKS, out)
        _DOCS_SITE.append(out)
    return _DOCS_SITE[0]


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class names it so
        pass


@contextlib.contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on a free loopback port, as a reader's web server would; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
