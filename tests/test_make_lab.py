"""`make lab` really starts JupyterLab and serves the first notebook (checked over HTTP)."""
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, json.loads(response.read())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_serves_the_start_here_notebook():
    port, token = _free_port(), secrets.token_hex(8)
    venv = Path(sys.prefix)
    process = subprocess.Popen(
        ["make", "-C", str(ROOT), "lab", f"VENV={venv}", f"LAB_PORT={port}",
         f"LAB_ARGS=--IdentityProvider.token={token} --LabApp.news_url=None "
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(ROOT / "build" / "test-jupyter-config")},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status, body = _get_json(f"http://127.0.0.1:{port}/api/contents/00_start_here.ipynb?token={token}&content=0")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        "make lab did not serve the "
                        f"notebook:\n{process.stdout.read() if process.poll() is not None else ''}"
                    )
                time.sleep(1)
        assert status == 200
        assert body["name"] == "00_start_here.ipynb" and body["type"] == "notebook"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10) as page:
            assert page.status == 200 and b"JupyterLab" in page.read()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
    assert f"http://127.0.0.1:{port}/lab" in output, "make lab must print the URL"
