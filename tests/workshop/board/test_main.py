"""``python -m labkit.workshop.board`` as the hub runs it: serves under its prefix, stops cleanly on SIGTERM."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(("stop", "status", "ignore_sigint"), [
    (signal.SIGTERM, 0, False),
    (signal.SIGINT, 130, False),  # how the hub stops a service first
    (signal.SIGINT, 130, True),  # a hub started in a shell's background job: its children start with SIGINT ignored
])
def test_the_service_serves_its_prefix_and_stops_on_the_hub_s_signal(tmp_path, stop, status, ignore_sigint):
    folder = tmp_path / "board"
    folder.mkdir(mode=0o700)
    port = free_port()
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": "board-token", "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api",
           "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}", "JUPYTERHUB_SERVICE_PREFIX": "/services/labkit-board/",
           "JUPYTERHUB_CLIENT_ID": "service-labkit-board", "JUPYTERHUB_SERVICE_NAME": "labkit-board",
           "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/labkit-board/oauth_callback",
           "JUPYTERHUB_OAUTH_ACCESS_SCOPES": '["access:services!service=labkit-board", "access:services"]',
           "LABKIT_BOARD_DB": str(folder / "board.sqlite")}
    process = subprocess.Popen([sys.executable, "-m", "labkit.workshop.board"], env=env, cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None)
    try:
        base = f"http://127.0.0.1:{port}/services/labkit-board/"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.build_opener(NoRedirect).open(base, timeout=5)
            except urllib.error.HTTPError as reply:
                assert reply.code == 302  # not logged in: the hub's OAuth
                assert reply.headers["Location"].startswith("/hub/api/oauth2/authorize?client_id=service-labkit-board")
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.stdout.read() if process.stdout else ""
                time.sleep(0.2)
        with urllib.request.urlopen(base + "static/board.js", timeout=5) as script:
            assert b"textContent" in script.read()
        process.send_signal(stop)
        assert process.wait(timeout=20) == status
        output = process.stdout.read().strip().splitlines() if process.stdout else []
        if status:
            assert output[-1] == "labkit-board: stopped (SIGINT: Ctrl-C, or the hub stopping it)"
        else:
            assert output[-1].endswith("stopped by SIGTERM")
        assert "Traceback" not in "\n".join(output)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert {path.name for path in folder.iterdir()} >= {"board.sqlite", "cookie_secret"}
    assert all(path.stat().st_mode & 0o077 == 0 for path in folder.iterdir())
