"""``python -m labkit lab`` (labkit.learner.lab): the workspace, then JupyterLab on it, as ``make lab`` does."""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from labkit.__main__ import main

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_lab_makes_the_workspace_and_serves_it(tmp_path: Path):
    port, token, workspace = _free_port(), secrets.token_hex(8), tmp_path / "my workspace"
    lab_args = f"--IdentityProvider.token={token} --LabApp.news_url=None --ServerApp.port_retries=0"
    process = subprocess.Popen(
        [sys.executable, "-m", "labkit", "lab", str(workspace), "--track", "core", f"--port={port}",
         "--notebooks", str(ROOT / "notebooks"), f"--lab-args={lab_args}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")},
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                listing = _get_json(f"http://127.0.0.1:{port}/api/contents?token={token}")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"python -m labkit lab did not serve the workspace:\n{_output(process)}")
                time.sleep(1)
        assert "00_start_here.ipynb" in {item["name"] for item in listing["content"]}
        assert json.loads((workspace / ".labkit-manifest.json").read_text())["track"] == "core"
        command = psutil.Process(process.pid).cmdline()  # exec'd: the same process is now jupyter lab (jupyter-lab)
        assert any(part.endswith("jupyter-lab") for part in command) and f"--ServerApp.root_dir={workspace}" in command
        assert "--no-browser" in command and f"--IdentityProvider.token={token}" in command
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert f"http://127.0.0.1:{port}/lab" in _output(process), "python -m labkit lab must print the URL"


def _output(process: subprocess.Popen) -> str:
    return process.stdout.read() if process.poll() is not None else ""


def test_a_bad_track_is_refused_before_anything_is_written(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["lab", str(tmp_path / "ws"), "--track", "short"])
    assert refused.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()


def test_a_folder_that_is_not_a_workspace_is_refused_and_jupyter_not_started(tmp_path: Path, monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("someone's files")
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail("jupyter lab must not start"))
    assert main(["lab", str(tmp_path), "--notebooks", str(ROOT / "notebooks")]) == 2
    assert "workspace" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


def test_the_jupyter_command_carries_port_ip_and_extra_options(tmp_path: Path, monkeypatch):
    started: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda path, command: started.append(command))
    workspace = tmp_path / "ws"
    assert main(["lab", str(workspace), "--notebooks", str(ROOT / "notebooks"), "--ip=0.0.0.0", "--port=9999",
                 "--lab-args=--ServerApp.token='a b'"]) == 0
    [command] = started
    assert command[:4] == [sys.executable, "-m", "jupyter", "lab"]
    assert {"--ip=0.0.0.0", "--port=9999", f"--ServerApp.root_dir={workspace}", "--ServerApp.token=a b"} <= set(command)
    assert (workspace / "00_start_here.ipynb").is_file()
